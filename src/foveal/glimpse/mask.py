"""Seed 003's image-sized Gaussian attention: a soft mask ``a = a_y a_x^T`` that darkens all but one place.

Before it casts the Gaussians into glimpse matrices, seed 003 builds an attention map the size of the
image from two 1-D Gaussians, ``a_y`` over the rows and ``a_x`` over the columns, and multiplies it
into the image, ``g = a * x``: the attended place keeps its brightness, everything away from it goes
dark. Nothing shrinks, so the network after it still processes every pixel ("still wasteful", in the
seed's words); the glimpse ``A_y I A_x^T`` of :mod:`foveal.glimpse.gaussian` is its cheaper form.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from foveal._checks import check_floating, check_hw, check_shape, check_tensor, work_dtype
from foveal._torch_private import exportable_output
from foveal.glimpse._images import check_image
from foveal.glimpse.gaussian import SIGMA_MIN
from foveal.glimpse.separable import Z_MAX


@exportable_output
class GaussianAttentionOutput(NamedTuple):
    """What :func:`gaussian_attention` returns; unpacks like the seed's ``(g, a)``.

    - output: ``(B, C, H, W)``, the gated image ``g = a * x``
    - weights: ``(B, H, W)``, the mask ``a``, in ``(0, 1]``
    """

    output: Tensor
    weights: Tensor


def gaussian_attention_mask(params: Tensor, size: tuple[int, int]) -> Tensor:
    """Seed 003's image-sized attention mask ``a = a_y a_x^T``, one per image.

    ``a_y[r] = exp(-((r - mean_y) / std_y)^2 / 2)`` for each row ``r`` of the image, ``a_x[c]`` likewise
    for each column ``c``, and ``a[r, c] = a_y[r] a_x[c]``. Each vector is the seed's
    ``gaussian_mask(u, s, d, R, C)`` with one Gaussian (``R = 1``, so the stride ``d`` plays no part),
    scaled to peak at 1 instead of summing to 1: the mask multiplies the image, and the attended pixels
    keep their brightness (``a_y / a_y.sum()`` is ``gaussian_mask(mean_y, std_y, d, 1, H)``'s row).

    Args:
        params: ``(mean_y, std_y, mean_x, std_x)`` per image, in pixels: the centre of the attended
            place and the Gaussians' standard deviations (seed 003's order, ``y`` first; the glimpse's
            six parameters without the strides). ``std`` is clamped at
            :data:`~foveal.glimpse.gaussian.SIGMA_MIN`.
        size: ``(H, W)``, the image's height and width.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): ``params`` not ``(B, 4)`` or not floating
            point, a size below 1.

    Shape:
        - params: ``(B, 4)``, floating point (16-bit floats: computed in float32 and cast back)
        - output: ``(B, H, W)``, the dtype of ``params``, values in ``[0, 1]``

    Convention:
        Pixel units, 0-based, as :func:`~foveal.glimpse.gaussian_glimpse`: pixel ``(r, c)`` is at
        ``(r, c)``, so ``mean = (3, 5)`` centres the mask on row 3, column 5. A centre off the image
        is allowed (the whole image then goes dark). Gradients reach all four parameters.

    Example:
        >>> a = gaussian_attention_mask(torch.tensor([[3.0, 1.0, 5.0, 2.0]]), (8, 10))
        >>> a.shape, a[0, 3, 5].item(), (a[0].argmax() // 10).item(), (a[0].argmax() % 10).item()
        (torch.Size([1, 8, 10]), 1.0, 3, 5)
    """
    H, W = check_hw("size", size)
    check_shape("params", check_tensor("params", params), (None, 4))
    check_floating(params=params)
    mean_y, std_y, mean_x, std_x = params.to(work_dtype(params.dtype)).unbind(-1)
    a_y = _gaussian(mean_y, std_y, H)  # (B, H)
    a_x = _gaussian(mean_x, std_x, W)  # (B, W)
    return (a_y[:, :, None] * a_x[:, None, :]).to(params.dtype)


def _gaussian(mean: Tensor, std: Tensor, n: int) -> Tensor:
    """``exp(-((i - mean) / std)^2 / 2)`` for ``i = 0..n-1``: ``(B,) -> (B, n)``, peak 1."""
    positions = torch.arange(n, device=mean.device, dtype=mean.dtype)
    # Clamped as in gaussian_rows: no weight changes (exp(-Z_MAX^2 / 2) is 0), but no inf reaches the backward.
    z = ((positions - mean[:, None]) / std.clamp_min(SIGMA_MIN)[:, None]).clamp(-Z_MAX, Z_MAX)
    return torch.exp(-0.5 * z.square())


def gaussian_attention(images: Tensor, params: Tensor) -> GaussianAttentionOutput:
    """Seed 003's soft Gaussian attention on images: ``g = a * x`` with ``a = a_y a_x^T``.

    Every channel of image ``b`` is multiplied by its mask ``a[b]`` (:func:`gaussian_attention_mask`):
    pixels near ``(mean_y, mean_x)`` keep their values, the rest fade to 0 within a few ``std``.

    Args:
        images: ``x``, the images.
        params: ``(mean_y, std_y, mean_x, std_x)`` per image, in pixels (see :func:`gaussian_attention_mask`).

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): a shape that does not fit (batch sizes that
            differ), images or parameters that are not floating point or not of one dtype.

    Shape:
        - images: ``(B, C, H, W)``, floating point
        - params: ``(B, 4)``, the dtype of ``images``
        - output: ``(B, C, H, W)``; weights: ``(B, H, W)``

    Convention:
        As :func:`gaussian_attention_mask`: 0-based pixels, ``y`` first.

    Example:
        >>> x = torch.ones(2, 3, 8, 8)
        >>> g, a = gaussian_attention(x, torch.tensor([[2.0, 1.0, 2.0, 1.0], [6.0, 0.5, 1.0, 3.0]]))
        >>> g.shape, a.shape, g[0, :, 2, 2].tolist(), bool(g[0, :, 7, 7].max() < 1e-6)
        (torch.Size([2, 3, 8, 8]), torch.Size([2, 8, 8]), [1.0, 1.0, 1.0], True)
    """
    sizes = check_image("images", images)
    check_shape("params", check_tensor("params", params), ("B", 4), sizes)
    check_floating(images=images, params=params)
    mask = gaussian_attention_mask(params, (sizes["H"], sizes["W"]))
    return GaussianAttentionOutput(images * mask[:, None].to(images.dtype), mask)


__all__ = ["GaussianAttentionOutput", "gaussian_attention", "gaussian_attention_mask"]
