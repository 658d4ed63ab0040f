"""Attention as a transformer layer: fused qkv, output projection, dropout, factory arguments, and
the weights of timm's ViT attention and of nn.MultiheadAttention loaded so that outputs match."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from foveal import Attention, record_maps
from foveal.attention import (
    Additive,
    Bilinear,
    Concatenation,
    HopCoAttention,
    MapAttention,
    NonLocalBlock,
    StackedAttention,
)
from foveal.errors import FovealError


def timm_attention(state: dict, x: torch.Tensor, heads: int) -> torch.Tensor:
    """timm's ``Attention.forward`` written out (qk_norm off, no dropout): the layout its weights assume.

    ``qkv`` maps ``C -> 3C``, read as ``(3, heads, head size)``; scale ``head_size ** -0.5``; the heads are
    concatenated back in order and mixed by ``proj``.
    """
    B, N, C = x.shape
    qkv = F.linear(x, state["qkv.weight"], state.get("qkv.bias"))
    q, k, v = qkv.reshape(B, N, 3, heads, C // heads).permute(2, 0, 3, 1, 4).unbind(0)
    attn = ((q * (C // heads) ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
    out = (attn @ v).transpose(1, 2).reshape(B, N, C)
    return F.linear(out, state["proj.weight"], state.get("proj.bias"))


def _timm_state(dim: int, bias: bool, generator: torch.Generator) -> dict:
    state = {
        "qkv.weight": torch.randn(3 * dim, dim, generator=generator, dtype=torch.float64) / dim**0.5,
        "proj.weight": torch.randn(dim, dim, generator=generator, dtype=torch.float64) / dim**0.5,
        "proj.bias": torch.randn(dim, generator=generator, dtype=torch.float64),
    }
    if bias:
        state["qkv.bias"] = torch.randn(3 * dim, generator=generator, dtype=torch.float64)
    return state


@pytest.mark.parametrize("bias", [True, False])
def test_timm_attention_weights_give_timms_outputs(bias):
    g = torch.Generator().manual_seed(0)
    state = _timm_state(12, bias, g)
    layer = Attention.from_timm(state, heads=3)
    assert set(layer.state_dict()) == set(state)
    x = torch.randn(2, 7, 12, generator=g, dtype=torch.float64)
    expected = timm_attention(state, x, heads=3)
    assert_close(layer(x), expected)
    with record_maps(layer) as maps:
        assert_close(layer(x), expected)
    assert maps[""].shape == (2, 3, 7, 7)


def test_timm_state_dict_with_other_keys_is_refused():
    state = _timm_state(8, True, torch.Generator().manual_seed(0))
    with pytest.raises(FovealError, match="q_norm"):
        Attention.from_timm({**state, "q_norm.weight": torch.ones(4)}, heads=2)
    with pytest.raises(FovealError, match=r"qkv\.weight"):
        Attention.from_timm({"proj.weight": state["proj.weight"]}, heads=2)


class _Block(nn.Module):
    """A pre-norm residual block that calls its attention as nn.MultiheadAttention is called."""

    def __init__(self, attn: nn.Module, dim: int) -> None:
        super().__init__()
        self.norm, self.attn = nn.LayerNorm(dim), attn

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None) -> torch.Tensor:
        y = self.norm(x)
        kv = y if memory is None else memory
        out, _ = self.attn(y, kv, kv, need_weights=False)
        return x + out


@pytest.mark.parametrize("bias", [True, False])
def test_multihead_attention_swapped_for_the_converted_layer_gives_the_same_outputs(bias):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, bias=bias, batch_first=True).double()
    block = _Block(mha, 16).double()
    x = torch.randn(3, 9, 16, dtype=torch.float64)
    expected = block(x)
    block.attn = Attention.from_multihead(mha)
    assert_close(block(x), expected)
    memory = torch.randn(3, 5, 16, dtype=torch.float64)  # cross-attention reads the qkv slices
    block.attn = mha
    expected = block(x, memory)
    block.attn = Attention.from_multihead(mha.state_dict(), heads=4, batch_first=True)  # a state dict does not say
    assert_close(block(x, memory), expected)


def test_multihead_attention_with_other_key_and_value_sizes_and_a_padding_mask():
    torch.manual_seed(1)
    mha = nn.MultiheadAttention(8, 2, kdim=5, vdim=3, batch_first=True).double().eval()
    layer = Attention.from_multihead(mha)
    q = torch.randn(2, 4, 8, dtype=torch.float64)
    k, v = torch.randn(2, 6, 5, dtype=torch.float64), torch.randn(2, 6, 3, dtype=torch.float64)
    real = torch.ones(2, 6, dtype=torch.bool)
    real[1, 4:] = False
    expected, expected_w = mha(q, k, v, key_padding_mask=~real, average_attn_weights=False)
    out, w = layer(q, k, v, key_padding_mask=~real, average_attn_weights=False)
    assert_close(out, expected)
    assert_close(w, expected_w)


def test_multihead_attention_with_bias_kv_is_refused():
    mha = nn.MultiheadAttention(8, 2, add_bias_kv=True)
    with pytest.raises(FovealError, match="add_bias_kv"):
        Attention.from_multihead(mha.state_dict(), heads=2)


def test_qkv_layer_equals_the_three_projections():
    torch.manual_seed(0)
    fused = Attention(12, heads=3, qkv=True, bias=True).double()
    split = Attention(12, heads=3, bias=True).double()
    w, b = fused.qkv.weight.chunk(3), fused.qkv.bias.chunk(3)
    with torch.no_grad():
        for linear, wi, bi in zip((split.W_q, split.W_k, split.W_v), w, b, strict=True):
            linear.weight.copy_(wi)
            linear.bias.copy_(bi)
    x, y = torch.randn(2, 5, 12, dtype=torch.float64), torch.randn(2, 6, 12, dtype=torch.float64)
    for args in ((x,), (x, y), (x, y, y.flip(1))):
        assert_close(fused(*args, need_weights=True), split(*args, need_weights=True))


def test_dropout_factory_arguments_and_repr():
    layer = Attention(8, heads=2, qkv=True, proj=True, attn_drop=0.5, proj_drop=0.1, dtype=torch.float64)
    assert all(p.dtype == torch.float64 for p in layer.parameters())
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    layer.eval()
    assert_close(layer(x).output, layer(x).output)  # no dropout in evaluation
    layer.train()
    torch.manual_seed(0)
    assert not torch.allclose(layer(x).output, layer.eval()(x).output)
    text = repr(layer)
    assert "heads=2" in text and "qkv" in text and "proj" in text and "p=0.5" in text
    assert Attention(8, device="meta").W_q.weight.device.type == "meta"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Attention(8, qkv=True, key_dim=4), "qkv"),
        (lambda: Attention(8, qkv=True, embed=False), "qkv"),
        (lambda: Attention(8, proj_drop=0.1), "proj=True"),
        (lambda: Attention(8, attn_drop=1.0), "attn_drop"),
        (lambda: Attention(8, bias="yes"), "bias"),
        (lambda: Attention(8, embed="no"), "embed"),
        (lambda: Attention(8, heads=2, score=Additive(3, 3, 4)), "Additive"),
        (lambda: Attention(8, heads=2, score=Bilinear(4, 5)), "Bilinear"),
        (lambda: Attention(8, heads=2, score=Concatenation(8, 8), normalize="count"), "Concatenation"),
        (lambda: MapAttention(8, heads=2, score=Bilinear(8, 8)), "Bilinear"),
        (lambda: HopCoAttention(8, joint="yes"), "joint"),
        (lambda: StackedAttention(8, relate=1), "relate"),
        (lambda: NonLocalBlock(8, heads=3), "divisible"),
    ],
)
def test_options_that_cannot_work_are_refused_at_construction(build, message):
    with pytest.raises(FovealError, match=message):
        build()


def test_matching_score_modules_are_accepted():
    Attention(8, heads=2, score=Additive(4, 4, 3))
    Attention(8, heads=2, score=Concatenation(4, 4), normalize="count")
    NonLocalBlock(8, f="concatenation", heads=2)
