"""Expectations ported from PyTorch's multi-head attention tests, held to :class:`foveal.attention.Attention`.

Source: pytorch/pytorch ``test/nn/test_multihead_attention.py`` (``test_multihead_attention`` and its helper's
cases, ``test_multihead_attn_3d_attn_mask``, ``test_multihead_attn_no_bias``, ``test_multihead_attn_invalid_shape``,
``test_multihead_self_attn_two_masks_fast_path``). Their inputs and properties are ported, not their code. torch's
reference there is a NumPy implementation; here it is ``nn.MultiheadAttention`` itself, given foveal's projections
and an identity output projection (seed 001's module has none). What differs on purpose (one boolean mask, True =
may be attended, shared by the heads; zeros, not NaN, for a query with nothing to attend; no output projection or
biases unless asked for) is listed in docs/attention.md.
"""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

from foveal.attention import Attention


def torch_twin(attention: Attention, heads: int) -> nn.MultiheadAttention:
    """``nn.MultiheadAttention`` with foveal's W_q, W_k, W_v and an identity output projection, no biases."""
    d_model, kv_dim = attention.dim, attention.key_dim
    twin = nn.MultiheadAttention(d_model, heads, bias=False, kdim=kv_dim, vdim=kv_dim, batch_first=True).eval()
    with torch.no_grad():
        if twin._qkv_same_embed_dim:
            twin.in_proj_weight.copy_(torch.cat([attention.W_q.weight, attention.W_k.weight, attention.W_v.weight]))
        else:
            twin.q_proj_weight.copy_(attention.W_q.weight)
            twin.k_proj_weight.copy_(attention.W_k.weight)
            twin.v_proj_weight.copy_(attention.W_v.weight)
        twin.out_proj.weight.copy_(torch.eye(d_model))
    return twin


def assert_same_or_zero(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    """Equal where torch's row is a number; zero where torch's is NaN (a query with nothing to attend)."""
    nothing = theirs.isnan().all(-1, keepdim=True)
    assert (ours.masked_select(nothing) == 0).all()
    torch.testing.assert_close(ours.masked_fill(nothing, 0), theirs.masked_fill(nothing, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("average_attn_weights", [True, False])
@pytest.mark.parametrize("key_padding", [False, True])
@pytest.mark.parametrize("same_embed_dim", [False, True])
def test_outputs_and_weights_are_torchs_for_the_same_projections(same_embed_dim, key_padding, average_attn_weights):
    """``test_multihead_attention``: 20 draws (torch's test makes 100) of batch and length 2-10, heads an even 2-10,
    3-10 per head, keys and values of 5-20 features (or the model's), one query per sample (a decoder state), a
    random key mask shared by the batch and, optionally, random padding."""
    rng = random.Random(0)
    torch.manual_seed(0)
    for _ in range(20):
        batch, length = rng.randint(2, 10), rng.randint(2, 10)
        d_head, heads = rng.randint(3, 10), rng.randint(1, 5) * 2
        d_model = d_head * heads
        kv_dim = d_model if same_embed_dim else rng.randint(5, 20)
        attention = Attention(d_model, key_dim=kv_dim, value_dim=kv_dim, out_dim=d_model, heads=heads)
        twin = torch_twin(attention, heads)
        query, key = torch.rand(batch, 1, d_model), torch.rand(batch, length, kv_dim)
        hidden = torch.rand(1, length) < 0.5  # torch's attn_mask: True = may not attend
        padding = (torch.rand(1, length) < 0.5).expand(batch, length) if key_padding else None
        with torch.no_grad():
            out_torch, w_torch = twin(
                query, key, key, attn_mask=hidden, key_padding_mask=padding, average_attn_weights=average_attn_weights
            )
            allowed = ~hidden.expand(batch, 1, length)
            if padding is not None:
                allowed = allowed & ~padding[:, None, :]
            out, w = attention(query, key, key, mask=allowed, need_weights=True)
        assert_same_or_zero(out, out_torch)
        assert_same_or_zero(w.mean(1) if average_attn_weights else w, w_torch)


def test_a_per_sample_mask_gives_each_samples_own_result():
    """``test_multihead_attn_3d_attn_mask``: a ``(batch, n, m)`` mask on the batch gives what each sample gives
    alone with its own mask. (torch's 3-D mask is per head, ``(batch * heads, n, m)``; foveal's is shared by the
    heads, so the same mask is repeated for torch.)"""
    torch.manual_seed(1)
    attention = Attention(8, heads=4)
    query, key = torch.rand(8, 2, 8), torch.rand(8, 3, 8)
    mask = torch.rand(8, 2, 3) < 0.6
    together = attention(query, key, key, mask=mask).output
    for i in range(8):
        alone = attention(query[i : i + 1], key[i : i + 1], key[i : i + 1], mask=mask[i]).output
        torch.testing.assert_close(together[i : i + 1], alone)
    twin = torch_twin(attention, 4)
    with torch.no_grad():
        out_torch = twin(query, key, key, attn_mask=~mask.repeat_interleave(4, dim=0))[0]
    assert_same_or_zero(together.detach(), out_torch)


def test_no_bias_means_no_bias_anywhere():
    """``test_multihead_attn_no_bias``: ``bias=False`` (foveal's default: seed 001's projections are linear) leaves
    every projection without one."""
    attention = Attention(8, heads=4, bias=False)
    assert all(projection.bias is None for projection in (attention.W_q, attention.W_k, attention.W_v))
    assert Attention(8, heads=4, bias=True).W_q.bias is not None


def test_inputs_of_the_wrong_rank_or_mask_shape_are_refused_by_name():
    """``test_multihead_attn_invalid_shape``: a 2-D key or value with a 3-D query, or a mask that does not fit, is
    refused naming the argument. (torch also takes unbatched 2-D inputs and refuses a 1-D mask; foveal needs the
    batch dim and broadcasts a mask, so a ``(m,)`` mask means the same keys for every query.)"""
    attention = Attention(4, heads=4)
    query = torch.randn(4, 4, 4)
    with pytest.raises(ValueError, match="key"):
        attention(query, torch.randn(4, 4), query)
    with pytest.raises(ValueError, match="value"):
        attention(query, query, torch.randn(4, 4))
    with pytest.raises(ValueError, match="mask"):
        attention(query, query, query, mask=torch.rand(5, 4, 4) < 0.5)
    keys = torch.tensor([True, True, False, True])
    torch.testing.assert_close(
        attention(query, mask=keys).output, attention(query, mask=keys.expand(4, 4, 4)).output, rtol=0, atol=0
    )


def test_self_attention_with_a_key_mask_and_padding_is_torchs():
    """``test_multihead_self_attn_two_masks_fast_path``: self-attention of 8 sets of 5 tokens of 14 features,
    7 heads, a random ``(5, 5)`` attention mask and random padding: foveal takes their union as one mask."""
    torch.manual_seed(2)
    attention = Attention(14, heads=7)
    twin = torch_twin(attention, 7)
    x = torch.rand(8, 5, 14)
    hidden = torch.randint(0, 2, (5, 5)).bool()
    padding = torch.randint(0, 2, (8, 5)).bool()
    with torch.no_grad():
        out_torch = twin(x, x, x, attn_mask=hidden, key_padding_mask=padding, need_weights=False)[0]
        out = attention(x, mask=~(hidden[None] | padding[:, None, :]), need_weights=False).output
    assert_same_or_zero(out, out_torch)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16_bit_attention_is_close_to_float32(dtype):
    """The dtype cases of torch's MHA tests (``test_multihead_attention_dtype``): 16-bit parameters and inputs give
    the float32 result to within their precision."""
    torch.manual_seed(3)
    attention = Attention(16, heads=4)
    x = torch.rand(2, 6, 16)
    expected = attention(x).output
    out = attention.to(dtype)(x.to(dtype)).output
    torch.testing.assert_close(out.float(), expected, rtol=3e-2, atol=3e-2)
