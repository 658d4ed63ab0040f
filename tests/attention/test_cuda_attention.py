"""attend's promises through the CUDA kernels SDPA picks: rows with nothing to attend, padding that
holds NaN, 16-bit inputs, empty sets, and the modules' maps.

Marked ``cuda``; skipped where torch sees no CUDA device (``pytest -m cuda`` runs them on a GPU).
Each kernel is forced in turn with ``torch.nn.attention.sdpa_kernel``; a kernel that cannot take
the inputs (flash attention takes no mask) is skipped for that case.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.testing import assert_close

from foveal import Attention, attend
from foveal.attention import NonLocalBlock, record_maps

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
]

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
BACKENDS = [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.MATH, SDPBackend.CUDNN_ATTENTION]
TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 5e-2}


def _inputs(dtype: torch.dtype, n: int = 16, d: int = 64, grad: bool = False) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, 4, n, d, generator=g).cuda().to(dtype).requires_grad_(grad) for _ in range(3))


def _fused(backend: SDPBackend, **kwargs) -> torch.Tensor:
    try:
        with sdpa_kernel(backend):
            return attend(**kwargs, need_weights=False, fused=True).output
    except RuntimeError as error:
        if "kernel" in str(error).lower():
            pytest.skip(f"{backend.name} does not take these inputs")
        raise


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rows_with_nothing_to_attend_are_zero_on_every_kernel(backend, dtype):
    q, k, v = _inputs(dtype, grad=True)
    mask = torch.rand(2, 1, 16, 16, device="cuda") < 0.7
    mask[0, 0, 3] = False  # query 3 of batch 0 attends nothing
    out = _fused(backend, query=q, key=k, value=v, mask=mask)
    assert torch.equal(out[0, :, 3], torch.zeros_like(out[0, :, 3]))
    plain = attend(q.float(), k.float(), v.float(), mask=mask, need_weights=True).output
    assert_close(out.float(), plain, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])
    out.float().sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("poison", [float("nan"), float("inf")])
def test_padding_that_holds_nan_or_inf_reaches_nothing(backend, dtype, poison):
    q, k, v = _inputs(dtype)
    mask = torch.ones(2, 1, 1, 16, dtype=torch.bool, device="cuda")
    mask[1, ..., 10:] = False
    clean = _fused(backend, query=q, key=k, value=v, mask=mask)
    dirty_k, dirty_v = k.clone(), v.clone()
    dirty_k[1, :, 10:], dirty_v[1, :, 10:] = poison, poison
    dirty_k.requires_grad_(), dirty_v.requires_grad_()
    q = q.clone().requires_grad_()
    out = _fused(backend, query=q, key=dirty_k, value=dirty_v, mask=mask)
    assert_close(out, clean)
    out.float().sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, dirty_k, dirty_v))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16_bit_scores_that_pass_65504_before_the_scale(dtype):
    g = torch.Generator().manual_seed(0)
    direction = torch.randn(64, generator=g).sign()
    q = (40 * direction + torch.randn(2, 4, 8, 64, generator=g)).cuda().to(dtype)
    k = (40 * direction + torch.randn(2, 4, 8, 64, generator=g)).cuda().to(dtype)
    v = torch.randn(2, 4, 8, 16, generator=g).cuda().to(dtype)
    expected = attend(q.float(), k.float(), v.float(), need_weights=True).output
    plain = attend(q, k, v, need_weights=True).output
    fused = attend(q, k, v, fused=True).output
    for out in (plain, fused):
        assert torch.isfinite(out).all()
        assert_close(out.float(), expected, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_empty_sets_give_empty_or_zero_outputs(dtype):
    q = torch.randn(2, 4, 5, 8, device="cuda", dtype=dtype)
    none = torch.randn(2, 4, 0, 8, device="cuda", dtype=dtype)
    assert torch.equal(attend(q, none, none).output, torch.zeros(2, 4, 5, 8, device="cuda", dtype=dtype))
    assert attend(none, q, q).output.shape == (2, 4, 0, 8)


def test_maps_are_recorded_on_the_gpu_whatever_kernel_runs():
    torch.manual_seed(0)
    model = torch.nn.Sequential(Attention(64, heads=4, qkv=True, proj=True), NonLocalBlock(64)).cuda()
    layer = model[0]
    x = torch.randn(2, 16, 64, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        fused = layer(x).output
        with record_maps(model) as maps:
            recorded = layer(x).output
            model[1](x.transpose(1, 2).reshape(2, 64, 4, 4))
    assert_close(recorded.float(), fused.float(), atol=5e-2, rtol=5e-2)
    assert maps["0"].shape == (2, 4, 16, 16) and maps["1"].shape == (2, 1, 16, 16)
    assert_close(maps["0"].float().sum(-1), torch.ones(2, 4, 16, device="cuda"), atol=2e-2, rtol=0)
