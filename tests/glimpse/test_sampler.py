"""Grid generator and bilinear sampler (seed 004) against the equation and against torch."""

import math

import pytest
import torch
import torch.nn.functional as F

from foveal.glimpse import BilinearSampler, affine_grid, bilinear_sample, projective_grid


def ref_sample(U: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Seed 004: V_i^c = sum_n sum_m U_nm^c max(0, 1 - |x_i - m|) max(0, 1 - |y_i - n|), literally."""
    C, H, W = U.shape
    V = torch.zeros(C, x.numel(), dtype=U.dtype)
    for i in range(x.numel()):
        for n in range(H):
            for m in range(W):
                k = max(0.0, 1 - abs(x[i].item() - m)) * max(0.0, 1 - abs(y[i].item() - n))
                V[:, i] += U[:, n, m] * k
    return V


def random_points(B, P, H, W, generator, margin=1.5):
    x = torch.rand(B, P, generator=generator, dtype=torch.float64) * (W - 1 + 2 * margin) - margin
    y = torch.rand(B, P, generator=generator, dtype=torch.float64) * (H - 1 + 2 * margin) - margin
    return x, y


def test_sampler_matches_seed_004_sum_including_off_image_points():
    g = torch.Generator().manual_seed(0)
    U = torch.randn(2, 3, 5, 6, dtype=torch.float64, generator=g)
    x, y = random_points(2, 17, 5, 6, g)
    x[0, :3] = torch.tensor([0.0, 2.0, 5.0], dtype=torch.float64)  # integer points, the last on the edge
    y[0, :3] = torch.tensor([0.0, 3.0, 4.0], dtype=torch.float64)
    V = BilinearSampler.apply(U, x, y)
    for b in range(2):
        torch.testing.assert_close(V[b], ref_sample(U[b], x[b], y[b]))


def test_sampler_gradcheck_float64():
    g = torch.Generator().manual_seed(1)
    U = torch.randn(2, 2, 4, 5, dtype=torch.float64, generator=g, requires_grad=True)
    x, y = random_points(2, 9, 4, 5, g, margin=0.8)  # some points straddle the edge
    assert torch.autograd.gradcheck(BilinearSampler.apply, (U, x.requires_grad_(), y.requires_grad_()))


def test_gradient_at_integer_points_is_the_right_derivative_not_the_seeds_literal_case():
    # x = m exactly (the identity transform samples there): the seed's cases read literally give dV/dx = U_m;
    # we return U_{m+1} - U_m, as F.grid_sample does.
    U = torch.tensor([[[[1.0, 4.0, 9.0]]]], dtype=torch.float64)
    x = torch.tensor([[1.0]], dtype=torch.float64, requires_grad=True)
    y = torch.zeros(1, 1, dtype=torch.float64, requires_grad=True)
    BilinearSampler.apply(U, x, y).sum().backward()
    assert x.grad.item() == 9.0 - 4.0


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding", ["zeros", "border"])
def test_custom_sampler_equals_grid_sample_values_and_gradients(align_corners, padding):
    g = torch.Generator().manual_seed(2)
    images = torch.randn(2, 3, 6, 7, dtype=torch.float64, generator=g)
    grid = torch.rand(2, 4, 5, 2, dtype=torch.float64, generator=g) * 2.6 - 1.3  # partly off the image
    identity = affine_grid(torch.eye(2, 3, dtype=torch.float64).expand(2, 2, 3), (6, 7), align_corners=align_corners)
    for points in (grid, identity):  # random points, and exactly the pixel centres
        results = []
        for fast in (True, False):
            U = images.clone().requires_grad_()
            G = points.clone().requires_grad_()
            out = bilinear_sample(U, G, align_corners=align_corners, padding=padding, fast=fast)
            (out * torch.linspace(-1, 1, out.numel(), dtype=torch.float64).view_as(out)).sum().backward()
            results.append((out, U.grad, G.grad))
        for a, b in zip(*results, strict=True):
            torch.testing.assert_close(a, b)


def test_bilinear_sample_gradcheck_through_normalised_coordinates_and_border():
    g = torch.Generator().manual_seed(3)
    U = torch.randn(1, 2, 4, 5, dtype=torch.float64, generator=g, requires_grad=True)
    grid = (torch.rand(1, 3, 3, 2, dtype=torch.float64, generator=g) * 2.4 - 1.2).requires_grad_()
    for padding in ("zeros", "border"):
        assert torch.autograd.gradcheck(
            lambda u, p, pad=padding: bilinear_sample(u, p, padding=pad, fast=False), (U, grid)
        )


@pytest.mark.parametrize("fast", [True, False])
def test_fill_is_what_off_image_points_read(fast):
    images = torch.randn(2, 3, 5, 5)
    fill = torch.tensor([-0.4, 0.0, 2.0])  # e.g. the normalised value of black, per channel
    far = torch.full((2, 1, 2, 2), 5.0)
    out = bilinear_sample(images, far, fill=fill, fast=fast)
    torch.testing.assert_close(out, fill.view(1, 3, 1, 1).expand(2, 3, 1, 2))
    inside = torch.zeros(2, 1, 1, 2)
    torch.testing.assert_close(bilinear_sample(images, inside, fill=fill, fast=fast), bilinear_sample(images, inside))
    half_off = torch.tensor([[[[1.0, 0.0]]]]).expand(2, 1, 1, 2)  # x = +1 is the right edge: half the kernel off
    expect = 0.5 * (images[:, :, 2, 4] + fill)
    torch.testing.assert_close(bilinear_sample(images, half_off, fill=fill, fast=fast)[:, :, 0, 0], expect)


def test_affine_grid_is_seed_004_grid_generator():
    # (x^s, y^s) = theta (x^t, y^t, 1) for every output pixel, target points on the normalised grid.
    theta = torch.randn(2, 2, 3, dtype=torch.float64)
    h, w = 3, 4
    grid = affine_grid(theta, (h, w), align_corners=False)
    for b in range(2):
        for i in range(h):
            for j in range(w):
                target = torch.tensor([(2 * j + 1) / w - 1, (2 * i + 1) / h - 1, 1.0], dtype=torch.float64)
                torch.testing.assert_close(grid[b, i, j], theta[b] @ target)


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_equals_torch_and_projective_reduces_to_it(align_corners):
    theta = torch.randn(3, 2, 3, dtype=torch.float64)
    ours = affine_grid(theta, (4, 6), align_corners=align_corners)
    torch.testing.assert_close(ours, F.affine_grid(theta, [3, 1, 4, 6], align_corners=align_corners))
    square = torch.cat([theta, torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64).expand(3, 1, 3)], dim=1)
    torch.testing.assert_close(projective_grid(square, (4, 6), align_corners=align_corners), ours)


def test_projective_grid_at_the_horizon_is_finite():
    theta = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]], requires_grad=True)  # z = x
    grid = projective_grid(theta, (3, 3), align_corners=True)  # the middle column has z = 0
    assert torch.isfinite(grid).all()
    out = bilinear_sample(torch.rand(1, 1, 5, 5), grid, align_corners=True)
    out.sum().backward()
    assert torch.isfinite(theta.grad).all()


def test_sampler_shape_errors():
    images = torch.zeros(2, 1, 5, 5)
    with pytest.raises(ValueError):
        bilinear_sample(images, torch.zeros(2, 3, 3, 3))
    with pytest.raises(ValueError):
        bilinear_sample(images, torch.zeros(1, 3, 3, 2))
    with pytest.raises(ValueError):
        bilinear_sample(images, torch.zeros(2, 3, 3, 2), padding="reflection")
    with pytest.raises(ValueError):
        bilinear_sample(images, torch.zeros(2, 3, 3, 2), fill=torch.zeros(3))
    with pytest.raises(ValueError):
        affine_grid(torch.zeros(2, 3, 2), (3, 3))
    with pytest.raises(ValueError):
        projective_grid(torch.zeros(2, 2, 3), (3, 3))


@pytest.mark.parametrize("padding", ["zeros", "border"])
@pytest.mark.parametrize("shape", [(0, 3, 4, 5), (2, 0, 4, 5)])
def test_the_reference_sampler_returns_the_empty_result_as_the_fast_path_does(shape, padding):
    images = torch.randn(*shape, requires_grad=True)
    grid = (torch.rand(shape[0], 3, 2, 2) * 2 - 1).requires_grad_()
    fast = bilinear_sample(images, grid, padding=padding)
    reference = bilinear_sample(images, grid, padding=padding, fast=False)
    assert reference.shape == fast.shape == F.grid_sample(images, grid, padding_mode=padding, align_corners=False).shape
    reference.sum().backward()
    assert images.grad.shape == images.shape and grid.grad.shape == grid.shape


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_a_point_that_is_not_finite_leaves_the_image_gradient_of_the_others_alone(bad, fast):
    # The image gradient from the finite points must be what it is without the bad point, even where the
    # bad point is clamped onto the same pixels (an infinite x lands on the last column).
    g = torch.Generator().manual_seed(3)
    images = torch.randn(1, 2, 4, 5, dtype=torch.float64, generator=g, requires_grad=True)
    grid = torch.tensor([[[[0.7, 0.1], [bad, 0.1]], [[0.9, -0.2], [0.2, bad]]]], dtype=torch.float64)
    finite = torch.isfinite(grid).all(-1)  # (1, 2, 2)
    out = bilinear_sample(images, grid, fast=fast)
    assert out.isnan().all(1).eq(~finite).all()  # the bad points read NaN, the others do not
    (grad,) = torch.autograd.grad(out.masked_fill(~finite[:, None], 0).sum(), images)
    clean = grid.masked_fill(~finite[..., None], 5.0)  # the bad points moved off the image
    (expected,) = torch.autograd.grad(
        bilinear_sample(images, clean, fast=fast).masked_fill(~finite[:, None], 0).sum(), images
    )
    torch.testing.assert_close(grad, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_images_of_hundreds_of_pixels_read_the_right_pixels(dtype):
    # bfloat16 holds integers exactly only to 256 (float16 to 2048): flat pixel indices n * W + m computed in
    # it fall between integers, on the wrong pixel or past the image's end.
    g = torch.Generator().manual_seed(4)
    images = torch.randn(2, 2, 300, 300, generator=g).to(dtype)
    grid = (torch.rand(2, 16, 16, 2, generator=g) * 2 - 1).to(dtype)
    out = bilinear_sample(images, grid, fast=False)
    expected = bilinear_sample(images.double(), grid.double(), fast=False)  # the same points, exactly
    torch.testing.assert_close(out.double(), expected, rtol=1e-2, atol=1e-2)
