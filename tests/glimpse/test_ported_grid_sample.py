"""Expectations ported from PyTorch's ``grid_sample`` and ``affine_grid`` tests, held to foveal's grid generator
and both paths of its bilinear sampler (``fast=True``, which calls ``F.grid_sample``, and ``fast=False``, seed 004's
formula with its own backward).

Source: pytorch/pytorch ``test/test_nn.py`` (``test_affine_grid``, ``test_affine_grid_error_checking``,
``test_grid_sample``, ``test_grid_sample_error_checking``, ``test_grid_sample_nan_inf``,
``test_grid_sample_half_precision``, ``test_grid_sample_bfloat16_precision``, ``test_grid_sample_large_index_2d``)
and the OpInfo samples of ``grid_sample`` (``sample_inputs_grid_sample``). Inputs and properties are ported, not
code. foveal's sampler is bilinear only, in 2-D, with zero (or ``fill``) or border padding; what differs on purpose
(a point that is not finite reads NaN; ``size`` is the output's ``(h, w)``) is listed in docs/glimpses.md.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from foveal.errors import FovealError
from foveal.glimpse import affine_grid, bilinear_sample

PATHS = pytest.mark.parametrize("fast", [True, False], ids=["fast", "reference"])
ALIGN = pytest.mark.parametrize("align_corners", [False, True])


@ALIGN
@pytest.mark.parametrize("size", [(1, 1), (1, 5), (4, 1), (3, 5)])
@pytest.mark.filterwarnings("ignore:Since version 1.3.0, affine_grid")
def test_affine_grid_is_torchs(size, align_corners):
    """``test_affine_grid``: random ``theta`` for batches of 1-3 and output sizes with a side of one pixel; the grid
    is ``F.affine_grid``'s, and so is its gradient with respect to ``theta``."""
    g = torch.Generator().manual_seed(size[0] * 10 + size[1])
    for batch in (1, 3):
        theta = torch.randn(batch, 2, 3, dtype=torch.float64, generator=g, requires_grad=True)
        ours = affine_grid(theta, size, align_corners=align_corners)
        theirs = F.affine_grid(theta, (batch, 1, *size), align_corners=align_corners)
        torch.testing.assert_close(ours, theirs)
        weights = torch.randn(theirs.shape, dtype=torch.float64, generator=g)
        (grad_ours,) = torch.autograd.grad((ours * weights).sum(), theta)
        (grad_theirs,) = torch.autograd.grad((theirs * weights).sum(), theta)
        torch.testing.assert_close(grad_ours, grad_theirs)


def test_affine_grid_refuses_what_cannot_be_a_grid():
    """``test_affine_grid_error_checking``: a ``theta`` that is not ``(B, 2, 3)`` or not floating point, and a size
    that is not two positive sides. (torch's size is ``(N, C, H, W)`` and must repeat theta's batch; foveal's is the
    output's ``(h, w)``.)"""
    with pytest.raises(ValueError, match="theta"):
        affine_grid(torch.zeros(1, 3, 3), (2, 2))
    with pytest.raises(ValueError, match="theta"):
        affine_grid(torch.zeros(2, 3), (2, 2))
    with pytest.raises(FovealError, match="theta"):
        affine_grid(torch.zeros(1, 2, 3, dtype=torch.int64), (2, 2))
    with pytest.raises(FovealError, match="size"):
        affine_grid(torch.zeros(1, 2, 3), (0, 2))


@PATHS
@ALIGN
@pytest.mark.parametrize("padding", ["zeros", "border"])
@pytest.mark.parametrize(("H", "W"), [(1, 1), (1, 6), (5, 1), (5, 7)])
def test_sampling_is_grid_samples_values_and_gradients(H, W, padding, align_corners, fast):
    """``test_grid_sample`` and the OpInfo samples: batch 2, 3 channels, images with a side of one pixel, points up
    to half the image beyond its edges; values and both gradients are ``F.grid_sample``'s (bilinear)."""
    g = torch.Generator().manual_seed(H * 10 + W)
    images = torch.randn(2, 3, H, W, dtype=torch.float64, generator=g, requires_grad=True)
    grid = (torch.rand(2, 4, 5, 2, dtype=torch.float64, generator=g) * 3 - 1.5).requires_grad_()
    ours = bilinear_sample(images, grid, padding=padding, align_corners=align_corners, fast=fast)
    theirs = F.grid_sample(images, grid, mode="bilinear", padding_mode=padding, align_corners=align_corners)
    torch.testing.assert_close(ours, theirs)
    weights = torch.randn(theirs.shape, dtype=torch.float64, generator=g)
    for a, b in zip(
        torch.autograd.grad((ours * weights).sum(), (images, grid)),
        torch.autograd.grad((theirs * weights).sum(), (images, grid)),
        strict=True,
    ):
        torch.testing.assert_close(a, b)


@PATHS
@pytest.mark.parametrize("shape", [(0, 3, 5, 5), (2, 0, 5, 5)])
def test_an_empty_batch_or_no_channels_give_the_empty_result(shape, fast):
    """The empty cases torch's ``grid_sample`` takes: no images, or images of no channels."""
    grid = torch.rand(shape[0], 2, 3, 2) * 2 - 1
    out = bilinear_sample(torch.randn(*shape), grid, fast=fast)
    assert out.shape == F.grid_sample(torch.randn(*shape), grid, align_corners=False).shape


@PATHS
def test_grid_sample_refuses_what_does_not_fit(fast):
    """``test_grid_sample_error_checking``: a grid whose last dim is not 2, batches that differ, images that are not
    4-D, integer images. torch raises a RuntimeError; foveal a ValueError naming the argument."""
    images = torch.randn(2, 3, 4, 4)
    with pytest.raises(ValueError, match="grid"):
        bilinear_sample(images, torch.zeros(2, 3, 3, 3), fast=fast)
    with pytest.raises(ValueError, match="grid"):
        bilinear_sample(images, torch.zeros(1, 3, 3, 2), fast=fast)
    with pytest.raises(ValueError, match="images"):
        bilinear_sample(torch.randn(3, 4, 4), torch.zeros(2, 3, 3, 2), fast=fast)
    with pytest.raises(FovealError, match="images"):
        bilinear_sample(images.long(), torch.zeros(2, 3, 3, 2), fast=fast)


@PATHS
def test_a_point_that_is_not_finite_reads_nan_and_leaves_the_others(fast):
    """``test_grid_sample_nan_inf``: a zero 3 x 3 image read at ``(nan, 0)`` and ``(0, inf)``. torch (mode
    "nearest") returns zeros there; foveal's bilinear sampler returns NaN for such a point with zero padding (a
    point nowhere reads nothing defined), and with border padding NaN for the NaN point and the edge pixel for the
    infinite one (clamped, as torch clamps it). No other point is touched."""
    images = torch.zeros(1, 1, 3, 3)
    grid = torch.tensor([[[[math.nan, 0.0], [0.0, math.inf], [0.0, 0.0]]]])
    zeros = bilinear_sample(images, grid, fast=fast).flatten()
    assert zeros[:2].isnan().all() and zeros[2] == 0
    border = bilinear_sample(images, grid, padding="border", fast=fast).flatten()
    assert border[0].isnan() and (border[1:] == 0).all()


@PATHS
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16_bit_sampling_is_the_float64_result_to_its_precision(dtype, fast):
    """``test_grid_sample_half_precision`` and ``test_grid_sample_bfloat16_precision``: 200 x 200 images and random
    grids in ``[-1, 1]``, both in 16 bits, against the same values sampled in float64 (a 64 x 64 output grid here,
    torch's is the image's size). torch's own CPU kernel gives NaN for some of these points in 16 bits, so foveal's
    fast path samples 16-bit images in float32 on the CPU."""
    g = torch.Generator().manual_seed(5)
    images = torch.randn(2, 3, 200, 200, generator=g).to(dtype)
    grid = (torch.rand(2, 64, 64, 2, generator=g) * 2 - 1).to(dtype)
    out = bilinear_sample(images, grid, fast=fast)
    assert out.dtype == dtype
    expected = F.grid_sample(images.double(), grid.double(), align_corners=False)
    torch.testing.assert_close(out.double(), expected, rtol=0, atol=0.05)


@PATHS
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_the_corners_of_a_wide_image_read_its_corner_pixels(dtype, fast):
    """``test_grid_sample_large_index_2d`` reads the four corners of a 32769 x 65536 image (64-bit indexing). Here the
    image is 3 x 601, beyond the integers bfloat16 holds: with ``align_corners=True`` the corners ``(+-1, +-1)``
    read exactly the corner pixels."""
    images = torch.arange(3 * 601, dtype=torch.float32).view(1, 1, 3, 601).to(dtype)
    corners = torch.tensor([[[[-1.0, -1.0], [1.0, -1.0]], [[-1.0, 1.0], [1.0, 1.0]]]], dtype=dtype)
    out = bilinear_sample(images, corners, align_corners=True, fast=fast)
    expected = images[0, 0, [[0, 0], [-1, -1]], [[0, -1], [0, -1]]]
    torch.testing.assert_close(out[0, 0], expected, rtol=0, atol=0)
