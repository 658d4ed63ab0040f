"""Spatial transformer (seed 004) and seed 003's STN glimpse."""

import pytest
import torch
from torch import nn

from foveal.glimpse import (
    SpatialTransformer,
    affine_grid,
    crop,
    gaussian_glimpse,
    gaussian_params,
    stn_glimpse,
    transform_matrix,
    warp,
)
from foveal.glimpse.transformer import IDENTITY


def localization(n_params: int, channels: int = 2, side: int = 8) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(channels * side * side, 16), nn.Tanh(), nn.Linear(16, n_params))


@pytest.mark.parametrize("transform", list(IDENTITY))
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("fast", [True, False])
def test_identity_at_initialisation_returns_the_input(transform, align_corners, fast):
    st = SpatialTransformer(
        localization(len(IDENTITY[transform])), (8, 8), transform=transform, align_corners=align_corners, fast=fast
    )
    images = torch.randn(3, 2, 8, 8)
    out, theta, grid = st(images)
    torch.testing.assert_close(out, images, atol=1e-5, rtol=0)
    assert grid.shape == (3, 8, 8, 2) and theta.shape == ((3, 3, 3) if transform == "projective" else (3, 2, 3))


def test_localization_gets_gradients_at_the_identity():
    st = SpatialTransformer(localization(6), (6, 6))
    images = torch.randn(4, 2, 8, 8)
    out, _, _ = st(images)
    (out * torch.randn_like(out)).sum().backward()
    assert all(p.grad is not None for p in st.parameters())
    assert st.localization[-1].weight.grad.abs().sum() > 0 and st.localization[-1].bias.grad.abs().sum() > 0


def test_theta_maps_output_into_input():
    # align_corners=False, shift t_x = 2k / W moves the sampling k pixels right: out[..., j] = in[..., j + k].
    images = torch.randn(1, 1, 6, 8)
    theta = torch.tensor([[[1.0, 0.0, 2 * 3 / 8], [0.0, 1.0, 0.0]]])
    out = warp(images, theta, (6, 8)).output
    torch.testing.assert_close(out[..., :5], images[..., 3:])
    assert (out[..., 5:] == 0).all()  # zero padding


def test_transform_matrices():
    p = torch.tensor([[0.5, 0.1, 0.25, -0.2]])  # (scale_y, shift_y, scale_x, shift_x)
    torch.testing.assert_close(transform_matrix(p, "no_shear"), torch.tensor([[[0.25, 0.0, -0.2], [0.0, 0.5, 0.1]]]))
    a = torch.tensor([[0.5, 0.3, -0.4]])  # (s, t_x, t_y)
    torch.testing.assert_close(transform_matrix(a, "attention"), torch.tensor([[[0.5, 0.0, 0.3], [0.0, 0.5, -0.4]]]))
    h = torch.arange(8.0)[None]
    torch.testing.assert_close(transform_matrix(h, "projective"), torch.tensor([[[0.0, 1, 2], [3, 4, 5], [6, 7, 1]]]))


def test_stn_glimpse_seed_003_example_contains_the_square():
    x = torch.zeros(1, 1, 10, 10)
    x[0, 0, 3:6, 3:6] = 1
    g = stn_glimpse(x, torch.tensor([[0.4, -0.1, 0.4, -0.1]]), (5, 5))
    assert (g[0, 0, 1:4, 1:4] == 1).all() and (g[0, 0, 0] < 1).all()


def test_stn_glimpse_on_pixel_centres_equals_the_crop():
    # align_corners=True: pixel p of W is at 2p/(W-1) - 1. Crop rows 2..6 and columns 4..8 of an 11 x 11 image.
    images = torch.randn(2, 3, 11, 11)
    scale, shift_y, shift_x = 4 / 10, 2 * 4 / 10 - 1, 2 * 6 / 10 - 1
    params = torch.tensor([[scale, shift_y, scale, shift_x]]).expand(2, 4)
    out = stn_glimpse(images, params, (5, 5), align_corners=True)
    torch.testing.assert_close(out, crop(images, torch.tensor([[4, 2]] * 2), (5, 5)))


def test_gradients_reach_stn_parameters_and_are_finite_off_the_image():
    images = torch.rand(2, 1, 10, 10)
    params = torch.tensor(
        [[0.4, -0.1, 0.4, -0.1], [0.0, 5.0, 0.0, 5.0]], requires_grad=True
    )  # 2nd: zero scale, far off
    for fast in (True, False):
        params.grad = None
        out = stn_glimpse(images, params, (5, 5), fast=fast)
        assert torch.isfinite(out).all() and (out[1] == 0).all()
        (out * torch.randn_like(out)).sum().backward()
        assert torch.isfinite(params.grad).all() and (params.grad[0].abs() > 0).all()


def test_transformer_errors():
    with pytest.raises(ValueError, match=r"nn\.Linear"):
        SpatialTransformer(nn.Flatten(), (4, 4))
    with pytest.raises(ValueError, match="6 parameters"):
        SpatialTransformer(localization(4), (4, 4), transform="affine")
    with pytest.raises(ValueError):
        SpatialTransformer(localization(6), (4, 4), transform="similarity")
    with pytest.raises(ValueError):
        stn_glimpse(torch.zeros(2, 1, 8, 8), torch.zeros(2, 6), (4, 4))
    with pytest.raises(ValueError):
        transform_matrix(torch.zeros(2, 5), "affine")
    st = SpatialTransformer(localization(6), (4, 4))
    with pytest.raises(ValueError):
        st(torch.zeros(2, 128))


@pytest.mark.parametrize("align_corners", [False, True])
def test_gaussian_params_put_the_gaussians_on_the_sampling_points(align_corners):
    # Zoom 0.5 and a shift chosen so the sampling points fall on pixel centres (stride 1 px): there a
    # narrow Gaussian reads exactly what bilinear sampling reads.
    side, out = (40, 20) if not align_corners else (41, 21)
    theta = torch.tensor([[[0.5, 0.0, 0.2], [0.0, 0.5, -0.1]]]).expand(3, 2, 3)
    params = gaussian_params(theta, (side, side), (out, out), 1e-4, align_corners=align_corners)
    torch.testing.assert_close(params[:, 2], torch.ones(3))  # stride 1 px
    grid_px = (affine_grid(theta, (out, out), align_corners=align_corners) + 1) / 2
    grid_px = grid_px * (side - 1) if align_corners else grid_px * side - 0.5
    torch.testing.assert_close(params[:, 3], grid_px[:, 0, 0, 0])  # first x centre = first sampling point
    torch.testing.assert_close(params[:, 0], grid_px[:, 0, 0, 1])
    images = torch.rand(3, 2, side, side)
    glimpse = gaussian_glimpse(images, params, (out, out))
    sampled = warp(images, theta, (out, out), align_corners=align_corners).output
    torch.testing.assert_close(glimpse, sampled, atol=1e-5, rtol=0)


def test_gaussian_read_transformer_identity_and_gradients():
    st = SpatialTransformer(localization(3), (8, 8), transform="attention", read="gaussian", gaussian_std=0.01)
    images = torch.randn(3, 2, 8, 8)
    out, _, grid = st(images)
    torch.testing.assert_close(out, images, atol=1e-5, rtol=0)
    assert grid.shape == (3, 8, 8, 2)
    st = SpatialTransformer(localization(4), (5, 5), transform="no_shear", read="gaussian")  # 8 -> 5: blurred
    out, _, _ = st(images)
    (out * torch.randn_like(out)).sum().backward()
    assert st.localization[-1].weight.grad.abs().sum() > 0 and (st.localization[-1].bias.grad != 0).all()
    with pytest.raises(ValueError, match="axis-aligned"):
        SpatialTransformer(localization(6), (4, 4), transform="affine", read="gaussian")
    with pytest.raises(ValueError, match="read"):
        SpatialTransformer(localization(3), (4, 4), transform="attention", read="nearest")
