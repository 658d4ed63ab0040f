"""Property tests of every public boundary of ``foveal.glimpse``: what it refuses, and where a poison stays.

Drawn by hypothesis over batch and image sizes, ranks, dtypes, options and poisoned samples:

- a valid call returns finite values of the documented shape;
- an invalid input (a wrong rank or batch size, an integer or mixed dtype, a list for a tensor, a size
  below 1, an option out of range, a bad constructor argument) raises ``ValueError`` from foveal's own
  code, with a message that names the argument, never an error from inside torch;
- a NaN or infinity in one sample (its parameters, its image, its state) raises nothing and stays in
  that sample: every other sample's outputs and input gradients are finite and exactly what they are
  without it (the batch without that sample when the poison is in what sizes the Gaussian window, the
  same batch unpoisoned otherwise);
- float16 gives finite filters and glimpses wherever float32 does.

Every test counts its cases per boundary in ``CASES`` (``FOVEAL_CASE_COUNTS``: see tests/_boundaries.py, which
holds what this suite shares with the attention and memory ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import Tensor, nn

from _boundaries import DTYPES, POISONS, Boundary, assert_refused, batch_leaves, counted_cases, examples
from foveal.glimpse import (
    BilinearSampler,
    GaussianRead,
    GaussianWrite,
    SpatialTransformer,
    affine_grid,
    base_grid,
    bilinear_sample,
    crop,
    draw_window,
    filterbank,
    gaussian_attention,
    gaussian_attention_mask,
    gaussian_glimpse,
    gaussian_mask,
    gaussian_params,
    gaussian_read,
    gaussian_write,
    init_identity_regressor,
    projective_grid,
    stn_glimpse,
    transform_matrix,
    warp,
)
from foveal.glimpse.transformer import IDENTITY

CASES, _report_case_counts = counted_cases("glimpse")
MANY, SOME, FEW = examples(40), examples(25), examples(12)


# --- cases and boundaries -------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """Sizes, dtype and a seed from which each boundary builds one valid call."""

    B: int
    C: int
    H: int
    W: int
    h: int
    w: int
    N: int
    dtype: torch.dtype
    seed: int

    def generator(self) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed)


@st.composite
def cases(draw, min_batch: int = 1, dtypes=DTYPES) -> Case:
    return Case(
        B=draw(st.integers(min_batch, 3)),
        C=draw(st.integers(1, 2)),
        H=draw(st.integers(1, 12)),
        W=draw(st.integers(1, 12)),
        h=draw(st.integers(1, 5)),
        w=draw(st.integers(1, 5)),
        N=draw(st.integers(1, 5)),
        dtype=draw(dtypes),
        seed=draw(st.integers(0, 2**16)),
    )


BAD_SIZES = ((0, 3), (3, -1), (2.5, 3), (True, 3), (3,), (3, 3, 3), None, "33")
BAD_COUNTS = (0, -1, 2.5, True, "3", None)
BAD_EPS = (-1e-3, math.nan, math.inf, "tiny")
BAD_POSITIVE = (0.0, -1.0, math.nan, math.inf, None)
BAD_TRUNCATE = ("yes", None, 2.0)
BAD_PADDING = ("reflect", None, 0)


def _rand(case: Case, g: torch.Generator, *shape: int, low: float = 0.0, high: float = 1.0) -> Tensor:
    return low + (high - low) * torch.rand(*shape, generator=g, dtype=torch.float64).to(case.dtype)


def _randn(case: Case, g: torch.Generator, *shape: int, scale: float = 1.0) -> Tensor:
    return (scale * torch.randn(*shape, generator=g, dtype=torch.float64)).to(case.dtype)


def _pick(g: torch.Generator, options: tuple) -> object:
    return options[int(torch.randint(len(options), (), generator=g))]


def _images(case: Case, g: torch.Generator) -> Tensor:
    return _rand(case, g, case.B, case.C, case.H, case.W)


def _seed003_params(case: Case, g: torch.Generator) -> Tensor:
    """``(mean_y, std_y, d_y, mean_x, std_x, d_x)``: Gaussians on, near and off the image, narrow to wide."""
    B = case.B
    mean_y, mean_x = _rand(case, g, B, low=-4, high=case.H + 4), _rand(case, g, B, low=-4, high=case.W + 4)
    std = _rand(case, g, B, 2, low=0.05, high=3.0)
    stride = _rand(case, g, B, 2, low=-1.5, high=2.5)
    return torch.stack([mean_y, std[:, 0], stride[:, 0], mean_x, std[:, 1], stride[:, 1]], dim=-1)


def _draw_params(case: Case, g: torch.Generator) -> Tensor:
    """DRAW's five unconstrained numbers, with log gamma kept small (an output of exp(50) is no test)."""
    params = _randn(case, g, case.B, 5, scale=1.5)
    params[:, 4] = params[:, 4].clamp(-2, 2)
    return params


def _theta(case: Case, g: torch.Generator, rows: int = 2) -> Tensor:
    eye = torch.eye(3, dtype=case.dtype)[:rows]
    theta = eye + _randn(case, g, case.B, rows, 3, scale=0.3)
    if rows == 3:
        theta[:, 2] = torch.tensor([0.0, 0.0, 1.0], dtype=case.dtype) + _randn(case, g, case.B, 3, scale=0.05)
    return theta


def _make_crop(case: Case) -> dict:
    g = case.generator()
    corners = torch.stack(
        [torch.randint(-3, case.W + 3, (case.B,), generator=g), torch.randint(-3, case.H + 3, (case.B,), generator=g)],
        -1,
    )
    boxes = corners.to(case.dtype) + _rand(case, g, case.B, 2) if bool(torch.rand((), generator=g) < 0.5) else corners
    return dict(images=_images(case, g), boxes=boxes, size=(case.h, case.w), fill=float(_pick(g, (0.0, -1.5))))


def _make_mask(case: Case) -> dict:
    g = case.generator()
    params = _seed003_params(case, g)
    return dict(center=params[:, 0], sigma=params[:, 1], stride=params[:, 2], rows=case.h, cols=case.H, eps=1e-8)


def _make_glimpse(case: Case) -> dict:
    g = case.generator()
    return dict(
        images=_images(case, g),
        params=_seed003_params(case, g),
        size=(case.h, case.w),
        truncate=_pick(g, ("auto", True, False)),
        support=float(_pick(g, (5.0, 2.0))),
        eps=1e-8,
    )


def _mask_params(case: Case, g: torch.Generator) -> Tensor:
    """``(mean_y, std_y, mean_x, std_x)``: a centre on, near or off the image, narrow to wide."""
    return _seed003_params(case, g)[:, [0, 1, 3, 4]]


def _make_attention_mask(case: Case) -> dict:
    g = case.generator()
    return dict(params=_mask_params(case, g), size=(case.H, case.W))


def _make_attention(case: Case) -> dict:
    g = case.generator()
    return dict(images=_images(case, g), params=_mask_params(case, g))


def _make_draw_window(case: Case) -> dict:
    g = case.generator()
    return dict(params=_draw_params(case, g), image_size=(case.H, case.W), N=case.N)


def _make_filterbank(case: Case) -> dict:
    return dict(_make_draw_window(case), eps=1e-8)


def _make_read(case: Case) -> dict:
    g = case.generator()
    return dict(
        images=_images(case, g),
        params=_draw_params(case, g),
        N=case.N,
        error_images=_images(case, g) - 0.5 if bool(torch.rand((), generator=g) < 0.5) else None,
        truncate=_pick(g, ("auto", True, False)),
        support=5.0,
        eps=1e-8,
    )


def _make_write(case: Case) -> dict:
    g = case.generator()
    return dict(
        patch=_rand(case, g, case.B, case.C, case.N, case.N),
        params=_draw_params(case, g),
        image_size=(case.H, case.W),
        eps=1e-8,
    )


def _randomised(module: nn.Module, case: Case, scale: float = 0.5) -> nn.Module:
    g = torch.Generator().manual_seed(case.seed + 1)
    module = module.to(case.dtype)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype) * scale)
    return module


def _make_read_module(case: Case) -> dict:
    g = case.generator()
    truncate = _pick(g, ("auto", True, False))
    module = _randomised(GaussianRead(4, case.N, truncate=truncate), case)
    error = _images(case, g) - 0.5 if bool(torch.rand((), generator=g) < 0.5) else None
    return dict(module=module, images=_images(case, g), h=_randn(case, g, case.B, 4), error_images=error)


def _make_write_module(case: Case) -> dict:
    g = case.generator()
    module = _randomised(GaussianWrite(4, case.N, channels=case.C), case, scale=0.3)
    return dict(module=module, h=_randn(case, g, case.B, 4), image_size=(case.H, case.W))


def _make_base_grid(case: Case) -> dict:
    g = case.generator()
    return dict(size=(case.h, case.w), align_corners=bool(_pick(g, (False, True))), dtype=case.dtype)


def _make_affine(case: Case) -> dict:
    g = case.generator()
    return dict(theta=_theta(case, g), size=(case.h, case.w), align_corners=bool(_pick(g, (False, True))))


def _make_projective(case: Case) -> dict:
    g = case.generator()
    return dict(theta=_theta(case, g, 3), size=(case.h, case.w), align_corners=bool(_pick(g, (False, True))))


def _sampling_options(g: torch.Generator) -> dict:
    return dict(
        align_corners=bool(_pick(g, (False, True))),
        padding=_pick(g, ("zeros", "border")),
        fill=float(_pick(g, (0.0, 0.25))),
        fast=bool(_pick(g, (True, False))),
    )


def _make_sample(case: Case) -> dict:
    g = case.generator()
    grid = _rand(case, g, case.B, case.h, case.w, 2, low=-1.4, high=1.4)
    return dict(images=_images(case, g), grid=grid, **_sampling_options(g))


def _make_sampler(case: Case) -> dict:
    g = case.generator()
    P = case.h * case.w
    x, y = (
        _rand(case, g, case.B, P, low=-1.5, high=case.W + 0.5),
        _rand(case, g, case.B, P, low=-1.5, high=case.H + 0.5),
    )
    return dict(U=_images(case, g), x=x, y=y)


def _make_transform_matrix(case: Case) -> dict:
    g = case.generator()
    transform = _pick(g, tuple(IDENTITY))
    return dict(params=_randn(case, g, case.B, len(IDENTITY[transform])), transform=transform)


def _make_warp(case: Case) -> dict:
    g = case.generator()
    theta = _theta(case, g, _pick(g, (2, 3)))
    return dict(images=_images(case, g), theta=theta, size=(case.h, case.w), **_sampling_options(g))


def _make_gaussian_params(case: Case) -> dict:
    g = case.generator()
    return dict(
        theta=_theta(case, g),
        in_size=(case.H, case.W),
        out_size=(case.h, case.w),
        std=0.5,
        align_corners=bool(_pick(g, (False, True))),
    )


def _make_stn(case: Case) -> dict:
    g = case.generator()
    params = torch.tensor([0.5, 0.0, 0.5, 0.0], dtype=case.dtype) + _randn(case, g, case.B, 4, scale=0.3)
    return dict(images=_images(case, g), params=params, size=(case.h, case.w), **_sampling_options(g))


def _localization(case: Case, transform: str) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(case.C * case.H * case.W, len(IDENTITY[transform])))


def _make_transformer(case: Case, read: str = "bilinear") -> dict:
    g = case.generator()
    transform = _pick(g, ("attention", "no_shear") if read == "gaussian" else tuple(IDENTITY))
    options = _sampling_options(g) if read == "bilinear" else {}
    module = SpatialTransformer(
        _localization(case, transform), (case.h, case.w), transform=transform, read=read, **options
    )
    module = module.to(case.dtype)
    with torch.no_grad():  # away from the identity, differently for each image
        module.localization[1].weight.copy_(_randn(case, g, *module.localization[1].weight.shape, scale=0.1))
    return dict(module=module, images=_images(case, g))


def _make_init_identity(case: Case) -> dict:
    g = case.generator()
    transform = _pick(g, tuple(IDENTITY))
    return dict(localization=_localization(case, transform), transform=transform)


BOUNDARIES = [
    Boundary("crop", _make_crop, crop, ("images", "boxes"), (), {"size": BAD_SIZES, "fill": ("x", None, [0.0])}),
    Boundary(
        "gaussian_mask",
        _make_mask,
        gaussian_mask,
        ("center", "sigma", "stride"),
        ("center", "sigma", "stride"),
        {"rows": BAD_COUNTS, "cols": BAD_COUNTS, "eps": BAD_EPS},
    ),
    Boundary(
        "gaussian_glimpse",
        _make_glimpse,
        gaussian_glimpse,
        ("images", "params"),
        ("images", "params"),
        {"size": BAD_SIZES, "truncate": BAD_TRUNCATE, "support": BAD_POSITIVE, "eps": BAD_EPS},
        window=("params",),
    ),
    Boundary(
        "gaussian_attention_mask",
        _make_attention_mask,
        gaussian_attention_mask,
        ("params",),
        ("params",),
        {"size": BAD_SIZES},
    ),
    Boundary("gaussian_attention", _make_attention, gaussian_attention, ("images", "params"), ("images", "params")),
    Boundary(
        "draw_window",
        _make_draw_window,
        draw_window,
        ("params",),
        ("params",),
        {"image_size": BAD_SIZES, "N": BAD_COUNTS},
    ),
    Boundary(
        "filterbank",
        _make_filterbank,
        filterbank,
        ("params",),
        ("params",),
        {"image_size": BAD_SIZES, "N": BAD_COUNTS, "eps": BAD_EPS},
    ),
    Boundary(
        "gaussian_read",
        _make_read,
        gaussian_read,
        ("images", "params", "error_images"),
        ("images", "params", "error_images"),
        {"N": BAD_COUNTS, "truncate": BAD_TRUNCATE, "support": BAD_POSITIVE, "eps": BAD_EPS},
        window=("params",),
    ),
    Boundary(
        "gaussian_write",
        _make_write,
        gaussian_write,
        ("patch", "params"),
        ("patch", "params"),
        {"image_size": BAD_SIZES, "eps": BAD_EPS},
    ),
    Boundary(
        "GaussianRead",
        _make_read_module,
        lambda module, **kw: module(**kw),
        ("images", "h", "error_images"),
        ("images", "h", "error_images"),
        window=("h",),
    ),
    Boundary(
        "GaussianWrite",
        _make_write_module,
        lambda module, **kw: module(**kw),
        ("h",),
        ("h",),
        {"image_size": BAD_SIZES},
    ),
    Boundary(
        "base_grid",
        _make_base_grid,
        base_grid,
        bad={"size": BAD_SIZES, "dtype": (torch.int64, torch.bool, "float32")},
    ),
    Boundary("affine_grid", _make_affine, affine_grid, ("theta",), ("theta",), {"size": BAD_SIZES}),
    Boundary("projective_grid", _make_projective, projective_grid, ("theta",), ("theta",), {"size": BAD_SIZES}),
    Boundary(
        "bilinear_sample",
        _make_sample,
        bilinear_sample,
        ("images", "grid"),
        ("images", "grid"),
        {"padding": BAD_PADDING, "fill": ("x", None, torch.zeros(7))},
    ),
    Boundary(
        "BilinearSampler",
        _make_sampler,
        lambda U, x, y: BilinearSampler.apply(U, x, y),
        ("U", "x", "y"),
        ("U", "x", "y"),
    ),
    Boundary(
        "transform_matrix",
        _make_transform_matrix,
        transform_matrix,
        ("params",),
        ("params",),
        {"transform": ("shear", None, 3)},
    ),
    Boundary(
        "warp",
        _make_warp,
        warp,
        ("images", "theta"),
        ("images", "theta"),
        {"size": BAD_SIZES, "padding": BAD_PADDING, "fill": ("x", None)},
    ),
    Boundary(
        "gaussian_params",
        _make_gaussian_params,
        gaussian_params,
        ("theta",),
        ("theta",),
        {"in_size": BAD_SIZES, "out_size": BAD_SIZES, "std": BAD_POSITIVE},
    ),
    Boundary(
        "stn_glimpse",
        _make_stn,
        stn_glimpse,
        ("images", "params"),
        ("images", "params"),
        {"size": BAD_SIZES, "padding": BAD_PADDING, "fill": ("x", None)},
    ),
    Boundary("SpatialTransformer", _make_transformer, lambda module, images: module(images), ("images",), ("images",)),
    Boundary(
        "SpatialTransformer[gaussian]",
        lambda case: _make_transformer(case, "gaussian"),
        lambda module, images: module(images),
        ("images",),
        ("images",),
        window=("images",),
    ),
    Boundary(
        "init_identity_regressor",
        _make_init_identity,
        init_identity_regressor,
        bad={"transform": ("shear", None), "localization": (None, "linear", torch.zeros(3))},
    ),
]
BY_NAME = {b.name: b for b in BOUNDARIES}
WITH_BATCH = [b for b in BOUNDARIES if b.batch]
WITH_TENSORS = [b for b in BOUNDARIES if b.batch or b.floats]


def _batch_size(kwargs: dict, boundary: Boundary) -> int:
    return next(kwargs[name].shape[0] for name in boundary.batch if kwargs[name] is not None)


# --- valid calls ----------------------------------------------------------------------------------


@pytest.mark.parametrize("boundary", BOUNDARIES, ids=repr)
@MANY
@given(case=cases())
def test_valid_calls_give_finite_values(boundary, case):
    CASES[f"{boundary.name} (valid)"] += 1
    kwargs = boundary.make(case)
    result = boundary.call(**kwargs)
    if isinstance(result, nn.Module):  # init_identity_regressor returns the layer it set
        assert result.bias.tolist() == pytest.approx(list(IDENTITY[kwargs["transform"]]))
        return
    leaves = batch_leaves(result, case.B) if boundary.batch else [result]
    assert leaves
    for leaf in leaves:
        assert torch.isfinite(leaf).all() if leaf.is_floating_point() else True
        if boundary.floats:
            assert leaf.dtype == case.dtype or not leaf.is_floating_point()


# --- invalid calls --------------------------------------------------------------------------------


@pytest.mark.parametrize("boundary", WITH_TENSORS, ids=repr)
@MANY
@given(case=cases(), data=st.data())
def test_a_wrong_rank_is_refused_by_name(boundary, case, data):
    CASES[f"{boundary.name} (rank)"] += 1
    boundary.refuses_a_wrong_rank(boundary.make(case), data)


@pytest.mark.parametrize("boundary", [b for b in WITH_BATCH if len(b.batch) > 1], ids=repr)
@MANY
@given(case=cases(), data=st.data())
def test_batch_sizes_that_differ_are_refused_by_name(boundary, case, data):
    CASES[f"{boundary.name} (batch)"] += 1
    kwargs = boundary.make(case)
    present = [n for n in boundary.batch[1:] if kwargs[n] is not None]
    if not present:
        return
    name = data.draw(st.sampled_from(present), label="tensor")
    tensor = kwargs[name]
    kwargs[name] = (
        torch.cat([tensor, tensor[:1]]) if data.draw(st.booleans(), label="grow") or case.B == 1 else tensor[1:]
    )
    assert_refused(lambda: boundary.call(**kwargs), name)


@pytest.mark.parametrize("boundary", [b for b in WITH_TENSORS if b.floats], ids=repr)
@MANY
@given(case=cases(), data=st.data())
def test_integer_or_mixed_dtypes_are_refused_by_name(boundary, case, data):
    CASES[f"{boundary.name} (dtype)"] += 1
    boundary.refuses_a_wrong_dtype(boundary.make(case), data, boundary.floats)


@pytest.mark.parametrize("boundary", [b for b in BOUNDARIES if b.bad], ids=repr)
@MANY
@given(case=cases(), data=st.data())
def test_bad_sizes_and_options_are_refused_by_name(boundary, case, data):
    CASES[f"{boundary.name} (sizes, options)"] += 1
    boundary.refuses_a_bad_value(boundary.make(case), data)


def test_crop_refuses_bool_and_complex_boxes():
    images = torch.rand(2, 1, 5, 5)
    for boxes in (torch.ones(2, 2, dtype=torch.bool), torch.ones(2, 2, dtype=torch.complex64)):
        assert_refused(lambda boxes=boxes: crop(images, boxes, (2, 2)), "boxes")
    assert_refused(lambda: crop(torch.rand(2, 1, 0, 5), torch.zeros(2, 2), (2, 2)), "images")


BAD_MODULES = [
    ("GaussianRead in_features", lambda v: GaussianRead(v, 5), "in_features", BAD_COUNTS),
    ("GaussianRead N", lambda v: GaussianRead(4, v), "N", BAD_COUNTS),
    ("GaussianRead truncate", lambda v: GaussianRead(4, 5, truncate=v), "truncate", BAD_TRUNCATE),
    ("GaussianWrite in_features", lambda v: GaussianWrite(v, 5), "in_features", BAD_COUNTS),
    ("GaussianWrite N", lambda v: GaussianWrite(4, v), "N", BAD_COUNTS),
    ("GaussianWrite channels", lambda v: GaussianWrite(4, 5, channels=v), "channels", BAD_COUNTS),
    ("SpatialTransformer out_size", lambda v: SpatialTransformer(nn.Linear(4, 6), v), "out_size", BAD_SIZES),
    (
        "SpatialTransformer gaussian_std",
        lambda v: SpatialTransformer(nn.Linear(4, 4), (3, 3), transform="no_shear", read="gaussian", gaussian_std=v),
        "gaussian_std",
        BAD_POSITIVE,
    ),
    (
        "SpatialTransformer padding",
        lambda v: SpatialTransformer(nn.Linear(4, 6), (3, 3), padding=v),
        "padding",
        BAD_PADDING,
    ),
    ("SpatialTransformer fill", lambda v: SpatialTransformer(nn.Linear(4, 6), (3, 3), fill=v), "fill", ("x", None)),
    (
        "SpatialTransformer transform",
        lambda v: SpatialTransformer(nn.Linear(4, 6), (3, 3), transform=v),
        "transform",
        ("shear", None, 6),
    ),
    (
        "SpatialTransformer read",
        lambda v: SpatialTransformer(nn.Linear(4, 6), (3, 3), read=v),
        "read",
        ("nearest", None),
    ),
    (
        "SpatialTransformer localization",
        lambda v: SpatialTransformer(v, (3, 3)),
        "localization",
        (None, "conv", torch.zeros(6)),
    ),
]


@pytest.mark.parametrize("name, build, argument, bad", BAD_MODULES, ids=[m[0] for m in BAD_MODULES])
@FEW
@given(data=st.data())
def test_bad_constructor_arguments_are_refused_by_name(name, build, argument, bad, data):
    CASES[f"{name.split()[0]} (constructor)"] += 1
    value = data.draw(st.sampled_from(bad), label="value")
    assert_refused(lambda: build(value), argument)


# --- poisoned samples -----------------------------------------------------------------------------


@pytest.mark.parametrize("boundary", WITH_BATCH, ids=repr)
@MANY
@given(case=cases(min_batch=2), data=st.data(), poison=POISONS)
def test_a_poisoned_sample_stays_in_its_sample(boundary, case, data, poison):
    CASES[f"{boundary.name} (poisoned sample)"] += 1
    boundary.keeps_a_poison_in_its_sample(boundary.make(case), case.B, data, poison)


# --- float16 --------------------------------------------------------------------------------------

HALF = [
    "gaussian_mask",
    "gaussian_attention_mask",
    "gaussian_attention",
    "gaussian_glimpse",
    "draw_window",
    "filterbank",
    "gaussian_read",
    "gaussian_write",
]


def _to(kwargs: dict, dtype: torch.dtype) -> dict:
    return {k: v.to(dtype) if isinstance(v, Tensor) and v.is_floating_point() else v for k, v in kwargs.items()}


@pytest.mark.parametrize("name", HALF)
@MANY
@given(case=cases(dtypes=st.just(torch.float32)), far=st.booleans())
def test_float16_filters_are_finite_where_float32_are(name, case, far):
    CASES[f"{name} (float16)"] += 1
    boundary = BY_NAME[name]
    kwargs = boundary.make(case)
    if far:  # narrow Gaussians far off the image: every filter weight underflows, the sums are 0 + eps
        for key in ("params",):
            if key in kwargs and kwargs[key].shape[-1] in (4, 6):  # seed 003's pixels
                kwargs[key][:, 0] += 300.0
                kwargs[key][:, 1] = 0.02
            elif key in kwargs:  # DRAW's
                kwargs[key][:, 0] = 40.0
                kwargs[key][:, 2] = -12.0
        if "center" in kwargs:
            kwargs["center"] = kwargs["center"] + 300.0
    half = _to(kwargs, torch.float16)
    reference = batch_leaves(boundary.call(**_to(half, torch.float32)), case.B)
    result = batch_leaves(boundary.call(**half), case.B)
    for ref, out in zip(reference, result, strict=True):
        assert out.dtype == torch.float16
        finite = torch.isfinite(ref) & (ref.abs() < 6e4)  # beyond 65504 float16 has only inf
        assert torch.isfinite(out[finite]).all()
        torch.testing.assert_close(out[finite].float(), ref[finite].float(), rtol=2e-2, atol=2e-2)


def test_integer_theta_is_refused_not_rounded():
    theta = torch.tensor([[[1, 0, 0], [0, 1, 0]]])
    message = assert_refused(lambda: affine_grid(theta, (2, 2)), "theta")
    assert "floating" in message
    assert_refused(lambda: projective_grid(torch.eye(3, dtype=torch.long)[None], (2, 2)), "theta")
    torch.testing.assert_close(affine_grid(theta.float(), (2, 2))[0, :, :, 0], torch.tensor([[-0.5, 0.5], [-0.5, 0.5]]))
