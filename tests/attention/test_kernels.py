"""attend's paths against each other: 16-bit inputs, rows with nothing to attend, the O(N) count form,
masks passed to the fused kernel, and the cached argument checks."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from foveal import attend
from foveal.attention import Attention, _kernels

SCORES = ("dot", "scaled_dot", "cosine")


def _big_fp16(seed: int = 0, d: int = 64) -> tuple[torch.Tensor, ...]:
    # |q . k| reaches about 8 * 8 * 64 = 4096 per unit of correlation; scaled by 1/8 it is small, but the
    # unscaled product of these aligned vectors passes float16's 65504.
    g = torch.Generator().manual_seed(seed)
    direction = torch.randn(d, generator=g).sign()
    q = (40 * direction + torch.randn(2, 3, 5, d, generator=g)).half()
    k = (40 * direction + torch.randn(2, 3, 7, d, generator=g)).half()
    v = torch.randn(2, 3, 7, 4, generator=g).half()
    return q, k, v


@pytest.mark.parametrize("normalize", ["softmax", "sparsemax"])
def test_float16_scores_do_not_overflow_before_the_scale(normalize):
    q, k, v = _big_fp16()
    assert torch.isinf(q @ k.mT).any()  # the unscaled product overflows in float16
    expected = attend(q.float(), k.float(), v.float(), need_weights=True, normalize=normalize)
    out, w = attend(q, k, v, need_weights=True, normalize=normalize)
    assert out.dtype == torch.float16 and w.dtype == torch.float16
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert_close(out.float(), expected.output, atol=2e-2, rtol=2e-2)
    assert_close(w.float(), expected.weights, atol=2e-2, rtol=2e-2)


def test_float16_plain_and_fused_paths_agree():
    q, k, v = _big_fp16(1)
    plain = attend(q, k, v, need_weights=True).output
    fused = attend(q, k, v, fused=True).output
    assert_close(plain.float(), fused.float(), atol=2e-2, rtol=2e-2)


def _mean_for_empty_rows(real):
    """SDPA as the default CUDA kernel behaves in 16 bits: a row with no key gets the mean of the values."""

    def sdpa(query, key, value, attn_mask=None, **kwargs):
        out = real(query, key, value, attn_mask=attn_mask, **kwargs)
        if attn_mask is None:
            return out
        empty = ~attn_mask.any(dim=-1, keepdim=True)
        return torch.where(empty, value.mean(dim=-2, keepdim=True), out)

    return sdpa


@pytest.mark.parametrize("score", SCORES)
def test_fused_rows_with_nothing_to_attend_are_zero_whatever_the_kernel_gives(monkeypatch, score):
    monkeypatch.setattr(F, "scaled_dot_product_attention", _mean_for_empty_rows(F.scaled_dot_product_attention))
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 4, 8, generator=g, requires_grad=True) for _ in range(3))
    mask = torch.rand(2, 1, 4, 4, generator=g) < 0.7
    mask[0, 0, 1] = False  # query 1 of batch 0 may attend nothing
    mask[1, 0, :, 2] = True
    out = attend(q, k, v, score=score, mask=mask, need_weights=False, fused=True).output
    assert torch.equal(out[0, :, 1], torch.zeros(2, 8))
    assert_close(out, attend(q, k, v, score=score, mask=mask, fused=False).output)
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("shape", [(3, 6, 5), (2, 3, 6, 5)])
def test_count_form_without_weights_is_the_reassociated_product(score, shape):
    # f = score (no exponential) is linear in the query's vector, so sum_i f(q, k_i) v_i = s(q) (s(K)^T V):
    # O(N) time and memory, equal to the N x N form.
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(*shape, generator=g, dtype=torch.float64) for _ in range(3))
    fast = attend(q, k, v, score=score, normalize="count", need_weights=False).output
    full = attend(q, k, v, score=score, normalize="count", need_weights=True).output
    assert_close(fast, full)


def test_count_form_without_weights_builds_no_n_by_n_matrix():
    q = torch.randn(1, 2048, 8)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        attend(q, q, q, score="dot", normalize="count", need_weights=False)
    biggest = max((e.cpu_memory_usage for e in prof.key_averages()), default=0)
    assert biggest < 2048 * 2048 * 4 // 8


def test_key_padding_mask_reaches_sdpa_without_copies_of_keys_or_values(monkeypatch):
    seen = {}
    real = F.scaled_dot_product_attention

    def sdpa(query, key, value, attn_mask=None, **kwargs):
        seen.setdefault("key", key)
        seen.setdefault("mask", attn_mask)
        return real(query, key, value, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", sdpa)
    q, k, v = (torch.randn(2, 3, 6, 8) for _ in range(3))
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 4:] = False
    attend(q, k, v, mask=mask, need_weights=False)
    assert seen["key"] is k and seen["mask"] is mask


@pytest.mark.parametrize("target", ["key", "value"])
def test_padded_nan_is_inert_on_the_uncopied_fused_path(target):
    q, k, v = (torch.randn(2, 3, 6, 8, requires_grad=True) for _ in range(3))
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 4:] = False
    clean = attend(q, k, v, mask=mask, need_weights=False).output
    dirty = {"key": k, "value": v}
    dirty[target] = dirty[target].detach().clone()
    dirty[target][1, :, 4:] = float("nan")
    dirty[target].requires_grad_()
    out = attend(q, dirty["key"], dirty["value"], mask=mask, need_weights=False).output
    assert_close(out, clean)
    out.sum().backward()
    assert torch.isfinite(q.grad).all() and torch.isfinite(dirty[target].grad).all()


def test_checks_run_again_for_a_new_signature_and_still_refuse():
    q = torch.randn(2, 4, 8)
    attend(q, q, q)
    with pytest.raises(ValueError, match="key"):
        attend(q, torch.randn(2, 4, 7), q)
    with pytest.raises(ValueError, match="dtype"):
        attend(q, q.double(), q)
    attend(q, q, q)  # the validated signature still runs


def test_dropout_on_the_weights_only_in_training_calls():
    q = torch.randn(1, 16, 8)
    assert_close(attend(q, q, q, dropout=0.0).output, attend(q, q, q).output)
    torch.manual_seed(0)
    dropped = attend(q, q, q, dropout=0.5, need_weights=True, fused=False)
    assert not torch.allclose(dropped.output, attend(q, q, q).output)


def test_masked_fused_path_reads_no_value_off_the_cpu():
    # Meta tensors hold no values: any host read (item, bool, a finiteness test) raises. So this is the
    # path an accelerator takes: no call waits for the device, forward or backward.
    q, k, v = (torch.randn(2, 3, 6, 8, device="meta", requires_grad=True) for _ in range(3))
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool, device="meta")
    out = attend(q, k, v, mask=mask, need_weights=False).output
    out.sum().backward()
    assert out.shape == (2, 3, 6, 8) and q.grad is not None and k.grad is not None
    layer = Attention(24, heads=3, device="meta")
    x = torch.randn(2, 6, 24, device="meta")
    assert layer(x, mask=torch.ones(2, 1, 6, dtype=torch.bool, device="meta")).output.shape == (2, 6, 24)


@pytest.mark.parametrize("target", ["key", "value"])
def test_padding_zeroed_on_the_device_is_inert_and_rows_without_keys_are_zero(monkeypatch, target):
    # The accelerator's (and the traced) path zeroes the padding without reading it; held here on the CPU.
    monkeypatch.setattr(_kernels, "tracing", lambda: True)
    q, k, v = (torch.randn(2, 3, 6, 8, requires_grad=True) for _ in range(3))
    mask = torch.ones(2, 1, 6, 6, dtype=torch.bool)
    mask[1, ..., 4:] = False
    mask[0, :, 2] = False  # query 2 of the first sequence attends nothing
    reference = attend(q, k, v, mask=mask, need_weights=True, fused=False).output
    dirty = {"key": k.detach().clone(), "value": v.detach().clone()}
    dirty[target][1, :, 4:] = float("nan")
    dirty = {name: x.requires_grad_() for name, x in dirty.items()}
    out = attend(q, dirty["key"], dirty["value"], mask=mask, need_weights=False).output
    assert_close(out, reference.detach())
    assert (out[0, :, 2] == 0).all()
    out.sum().backward()
    assert torch.isfinite(q.grad).all() and torch.isfinite(dirty[target].grad).all()
