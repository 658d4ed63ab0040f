"""Seed 003's image-sized Gaussian attention, ``a = a_y a_x^T`` and ``g = a * x``, against the equation."""

import math

import pytest
import torch

import foveal
from foveal.glimpse import gaussian_attention, gaussian_attention_mask, gaussian_mask


def seed_mask(params: torch.Tensor, H: int, W: int) -> torch.Tensor:
    """The seed's equation, pixel by pixel: ``a[r, c] = a_y[r] a_x[c]``, ``a_y[r] = exp(-((r - u_y) / s_y)^2 / 2)``."""
    out = torch.empty(params.shape[0], H, W, dtype=params.dtype)
    for b, (u_y, s_y, u_x, s_x) in enumerate(params.tolist()):
        for r in range(H):
            for c in range(W):
                a_y = math.exp(-0.5 * ((r - u_y) / s_y) ** 2)
                a_x = math.exp(-0.5 * ((c - u_x) / s_x) ** 2)
                out[b, r, c] = a_y * a_x
    return out


PARAMS = torch.tensor(
    [
        [3.0, 1.0, 5.0, 2.0],  # on the image, wider along x
        [0.0, 0.5, 0.0, 0.5],  # the top-left pixel, narrow
        [6.5, 3.0, 2.25, 0.8],  # between pixels
        [-4.0, 1.5, 20.0, 1.0],  # off the image: dark everywhere
    ],
    dtype=torch.float64,
)


def test_mask_is_the_seed_equation_pixel_by_pixel():
    mask = gaussian_attention_mask(PARAMS, (7, 11))
    torch.testing.assert_close(mask, seed_mask(PARAMS, 7, 11), rtol=1e-12, atol=1e-15)


def test_gate_multiplies_every_channel_by_the_mask():
    images = torch.rand(4, 3, 7, 11, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    g, a = gaussian_attention(images, PARAMS)
    reference = seed_mask(PARAMS, 7, 11)
    torch.testing.assert_close(a, reference, rtol=1e-12, atol=1e-15)
    for b in range(4):
        for channel in range(3):
            for r in range(7):
                for c in range(11):
                    expected = reference[b, r, c] * images[b, channel, r, c]
                    assert g[b, channel, r, c].item() == pytest.approx(expected.item(), rel=1e-12, abs=1e-15)


def test_the_attended_place_keeps_its_brightness_and_the_rest_goes_dark():
    a = gaussian_attention_mask(PARAMS[:2].float(), (7, 11))
    assert a[0, 3, 5] == 1 and a[1, 0, 0] == 1  # the peak, on a pixel centre
    assert a[0].argmax() == 3 * 11 + 5
    assert a[0, 0, 10] < 1e-3 and (a >= 0).all() and (a <= 1).all()
    assert gaussian_attention_mask(PARAMS[3:].float(), (7, 11)).max() < 1e-3  # attended off the image


def test_normalised_rows_are_gaussian_mask_with_one_gaussian():
    mask = gaussian_attention_mask(PARAMS[:3], (7, 11))
    column = mask[:, :, 2]  # a_y times the constant a_x[2]: the same vector once normalised
    one = torch.ones(3, dtype=torch.float64)
    rows = gaussian_mask(PARAMS[:3, 0], PARAMS[:3, 1], one, 1, 7)[:, 0]  # seed 003's gaussian_mask, R = 1
    torch.testing.assert_close(column / column.sum(-1, keepdim=True), rows, rtol=1e-6, atol=1e-9)


def test_gradcheck_float64():
    params = PARAMS[:3].clone().requires_grad_(True)
    images = torch.rand(3, 2, 5, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1), requires_grad=True)
    assert torch.autograd.gradcheck(lambda p: gaussian_attention_mask(p, (5, 6)), (params,))
    assert torch.autograd.gradcheck(lambda x, p: gaussian_attention(x, p).output, (images, params))


def test_exported_at_the_top_level():
    assert foveal.gaussian_attention is gaussian_attention
    assert foveal.gaussian_attention_mask is gaussian_attention_mask


def test_narrow_and_far_masks_stay_finite_with_finite_gradients():
    params = torch.tensor([[2.0, 0.0, 3.0, 1e-9], [1e6, 1.0, -1e6, 1.0]], requires_grad=True)
    images = torch.rand(2, 1, 5, 5)
    g, a = gaussian_attention(images, params)
    (g.sum() + a.sum()).backward()
    assert torch.isfinite(a).all() and torch.isfinite(g).all() and torch.isfinite(params.grad).all()
    assert a[0, 2, 3] == 1 and a[0].sum() == 1  # std clamped at SIGMA_MIN: one pixel
