"""Expectations ported from PyTorch's scaled-dot-product-attention tests, held to :func:`foveal.attend`.

Source: pytorch/pytorch ``test/test_transformers.py`` (classes ``TestSDPA`` and ``TestSDPAFailureModes``). Their
inputs and the properties they check are ported, not their code; each test names the one it comes from. Both of
foveal's paths are held to each property: the plain path (which returns the weights) and the fused one (which calls
``F.scaled_dot_product_attention``). Where foveal answers differently on purpose (an empty set of keys gives zeros,
not an error; a bad input is a ``FovealError`` naming the argument), the test says so, and docs/attention.md lists
the difference.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck

from foveal import attend
from foveal.errors import FovealError

PATHS = pytest.mark.parametrize("fused", [False, True], ids=["plain", "fused"])


def run(q, k, v, fused, mask=None):
    return attend(q, k, v, mask=mask, need_weights=not fused, fused=fused).output


@PATHS
@pytest.mark.parametrize("contiguous", [True, False])
def test_gradcheck_in_float64(fused, contiguous):
    """``test_sdp_math_gradcheck``: batch 4, 2 heads, 4 tokens of 16, split from one packed q|k|v tensor."""
    g = torch.Generator().manual_seed(0)
    packed = torch.randn(4, 4, 3 * 2 * 16, dtype=torch.float64, generator=g)
    q, k, v = (t.view(4, 4, 2, 16).transpose(1, 2) for t in packed.chunk(3, dim=-1))
    if contiguous:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    assert gradcheck(lambda q, k, v: run(q, k, v, fused), (q, k, v), fast_mode=True)


def masked_rows_inputs(seq_len: int, head_dim: int, dtype: torch.dtype):
    """The inputs of ``test_fully_masked_out_rows``: every 4th query row masked out, and key i of row j kept
    only where ``i % 5 == j % 5``."""
    g = torch.Generator().manual_seed(seq_len)
    q, k, v = (torch.rand(1, 1, seq_len, head_dim, generator=g).to(dtype).requires_grad_() for _ in range(3))
    mask = torch.ones(1, 1, seq_len, seq_len, dtype=torch.bool)
    mask[0, 0, ::4, :] = False
    rows = torch.arange(seq_len)
    mask &= rows[:, None] % 5 == rows % 5
    return q, k, v, mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize(("seq_len", "head_dim"), [(4, 8), (17, 16), (64, 32)])
def test_fully_masked_rows_give_zeros_and_no_gradient(seq_len, head_dim, dtype):
    """``test_fully_masked_out_rows``: the fused path equals the plain one, nothing is NaN, a row with nothing to
    attend is exactly zero and gives its query no gradient."""
    q, k, v, mask = masked_rows_inputs(seq_len, head_dim, dtype)
    results = []
    for fused in (False, True):
        out = run(q, k, v, fused, mask)
        grads = torch.autograd.grad(out.sum(), (q, k, v))
        assert not out.isnan().any() and not any(grad.isnan().any() for grad in grads)
        empty = ~mask.any(-1, keepdim=True)  # (1, 1, L, 1)
        assert empty.any()
        assert (out.masked_select(empty) == 0).all() and (grads[0].masked_select(empty) == 0).all()
        results.append((out, grads))
    tol = 5e-3 if dtype in (torch.float32, torch.float64) else 3e-2
    (plain, plain_grads), (fused_out, fused_grads) = results
    torch.testing.assert_close(fused_out, plain, atol=tol, rtol=0)
    for a, b in zip(fused_grads, plain_grads, strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=0)


@PATHS
def test_large_bfloat16_values_are_not_nan(fused):
    """``test_flash_atteention_large_bf16_nan_values``: q = k = v = 133120 in bfloat16, one key: no NaN; the one key
    takes all the weight, so the output is the value."""
    q = k = v = torch.full((1, 1, 1, 64), 133120.0, dtype=torch.bfloat16)
    out = run(q, k, v, fused)
    assert not out.isnan().any()
    assert (out == v).all()


@pytest.mark.parametrize("fused", [pytest.param(False, id="plain"), True], ids=str)
def test_float16_products_past_its_range_give_the_value(fused):
    """The float16 counterpart of ``test_flash_atteention_large_bf16_nan_values``: q = k = v = 40, so the unscaled
    ``q . k`` is 102400 (float16 ends at 65504) and the scaled one 12800. Every key is the same, so every weight is
    equal and the output is the value."""
    q = k = v = torch.full((1, 1, 4, 64), 40.0, dtype=torch.float16)
    out = run(q, k, v, fused)
    assert not out.isnan().any()
    torch.testing.assert_close(out, v, rtol=0, atol=0)


@PATHS
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_zero_queries_and_keys_attend_uniformly(fused, dtype):
    """``test_mem_eff_attention_large_seq_len_uniform_attention`` (999 tokens, not 49999): zero queries and keys,
    values of one, an all-True mask: the output is one; query and key get zero gradient, every value gets one."""
    q = torch.zeros(1, 2, 999, 16, dtype=dtype, requires_grad=True)
    k = torch.zeros(1, 2, 999, 16, dtype=dtype, requires_grad=True)
    v = torch.ones(1, 2, 999, 16, dtype=dtype, requires_grad=True)
    mask = torch.ones(999, 999, dtype=torch.bool)
    out = run(q, k, v, fused, mask)
    out.backward(torch.ones_like(out))
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out, torch.ones_like(out), rtol=tol, atol=tol)
    assert (q.grad.abs() <= tol).all() and (k.grad.abs() <= tol).all()
    torch.testing.assert_close(v.grad, torch.ones_like(v), rtol=tol, atol=tol)


@PATHS
def test_a_query_batch_of_one_broadcasts(fused):
    """``test_invalid_fused_inputs_broadcast`` has torch's fused kernels refuse a query of batch 1 against keys of
    batch 2 (its math kernel broadcasts). foveal broadcasts leading dims on both paths: the result is that of the
    query repeated."""
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 4, 3, 8, generator=g)
    k, v = torch.randn(2, 4, 3, 8, generator=g), torch.randn(2, 4, 3, 8, generator=g)
    torch.testing.assert_close(run(q, k, v, fused), run(q.expand(2, -1, -1, -1), k, v, fused))


@PATHS
@pytest.mark.parametrize(("n", "m"), [(0, 8), (8, 0), (0, 0)])
def test_zero_length_sequences_give_empty_or_zero_outputs(fused, n, m):
    """``test_invalid_sequence_lengths`` has torch's fused kernels refuse sequences of length 0. foveal gives an
    empty output for no queries, and zeros for a set of no keys (nothing to attend), on either path."""
    q, k, v = torch.rand(2, 2, n, 8), torch.rand(2, 2, m, 8), torch.rand(2, 2, m, 8)
    out = run(q, k, v, fused)
    assert out.shape == (2, 2, n, 8) and (out == 0).all()


@PATHS
def test_mixed_dtypes_and_one_dimensional_inputs_are_refused_by_name(fused):
    """``test_invalid_inputs_different_datatypes`` and ``test_invalid_inputs_1_dimensional_inputs``: torch raises a
    RuntimeError; foveal a ValueError (a FovealError for the dtypes) naming what it expected."""
    q = torch.randn(1, 4, 8, 16)
    with pytest.raises(FovealError, match="dtype"):
        run(q, q.half(), q.half(), fused)
    with pytest.raises(ValueError, match="query"):  # foveal's shape check, a ValueError
        run(torch.randn(4), torch.randn(1, 4), torch.randn(1, 4), fused)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_the_fused_path_is_as_close_to_float64_as_the_plain_one(dtype):
    """The golden-reference rule of the fused-kernel tests (``test_mem_efficient_attention_vs_math_ref_grads`` and
    its kin): a low-precision kernel is compared with a float64 reference, allowed the error that the unfused
    computation in the same precision makes (here: three times it, and at least a rounding step)."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 4, 33, 16, generator=g) for _ in range(3))
    mask = torch.rand(2, 1, 33, 33, generator=g) > 0.2
    golden = run(q.double(), k.double(), v.double(), False, mask)
    low = [t.to(dtype) for t in (q, k, v)]
    plain_error = (run(*low, False, mask).double() - golden).abs().max()
    fused_error = (run(*low, True, mask).double() - golden).abs().max()
    assert fused_error <= 3 * plain_error + torch.finfo(dtype).eps
