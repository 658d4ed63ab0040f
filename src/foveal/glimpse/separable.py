"""The product under every Gaussian glimpse: ``A_y I A_x^T`` with one 1-D Gaussian per row of ``A``.

:mod:`foveal.glimpse.gaussian` parametrises the Gaussians (seed 003's six pixel numbers, DRAW's
five unconstrained ones) and hands each axis here as ``(first centre, stride, variance)``:
:func:`gaussian_rows` builds the normalised rows, :func:`separable` multiplies, and
:func:`separable_glimpse` does both, over the whole image or over the window the Gaussians cover.

Speed. The product runs as two batched GEMMs with the channels folded into them (no loop over
channels, no 3-operand einsum). When the Gaussians are narrow and close together (a zoomed-in
glimpse: filters of a few pixels on a large image), almost every filter weight is zero; the
truncated path then multiplies only a window of the image that holds every Gaussian out to
``support`` standard deviations.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from foveal.glimpse.crop import crop

TRUNCATE_AREA_FRACTION = 0.25
"""``truncate="auto"`` takes the windowed path when the window is at most this fraction of the image
area (the speed-up is roughly the inverse of the fraction, less the cost of cutting the window)."""

Z_MAX = 1e3
"""Largest standardised distance ``|a - mu| / sigma`` evaluated (the weight beyond it is exactly 0)."""

Truncate = bool | Literal["auto"]
Axis = tuple[Tensor, Tensor, Tensor]
"""One axis of a glimpse: the centre of its first Gaussian, the stride between centres and the
variance, in pixels, each ``(B,)``."""


def gaussian_rows(
    first: Tensor,
    stride: Tensor,
    variance: Tensor,
    n: int,
    positions: Tensor,
    inside: Tensor | None = None,
    eps: float = 1e-8,
) -> Tensor:
    """``n`` Gaussians centred at ``first + r stride``, evaluated at ``positions``, each row normalised.

    ``A[r, p] = exp(-(positions[p] - mu_r)^2 / (2 variance)) / (sum_p' exp(...) + eps)``.

    Args:
        first, stride, variance: the axis (see :data:`Axis`); the variance must be positive.
        n: the number of Gaussians (rows).
        positions: where each column sits, in the same units.
        inside: False where a position is off the image: it weighs zero and leaves the row sums.
        eps: added to each row's sum, so a row with no weight on the image is zero, not NaN.

    Shape:
        - first, stride, variance: ``(*batch)``
        - positions, inside: ``(L,)`` or ``(*batch, L)``
        - output: ``(*batch, n, L)``

    Example:
        >>> one = torch.ones(1)
        >>> A = gaussian_rows(one, 2 * one, 0.25 * one, 3, torch.arange(6.0))
        >>> A.shape, A[0].argmax(-1).tolist(), torch.allclose(A.sum(-1), torch.ones(1, 3))
        (torch.Size([1, 3, 6]), [1, 3, 5], True)
    """
    r = torch.arange(n, device=first.device, dtype=first.dtype)
    centres = first[..., None] + r * stride[..., None]  # (*batch, n)
    offsets = positions[..., None, :] - centres[..., :, None]  # (*batch, n, L)
    # Clamping the standardised offset changes no weight (exp(-Z_MAX^2 / 2) is 0 in float64) but keeps
    # inf out of the forward pass, and with it 0 * inf = NaN out of the backward.
    z = (offsets * variance.rsqrt()[..., None, None]).clamp(-Z_MAX, Z_MAX)
    weights = torch.exp(-0.5 * z.square())
    if inside is not None:
        weights = weights * inside[..., None, :]
    return weights / (weights.sum(-1, keepdim=True) + eps)


def separable(images: Tensor, Ay: Tensor, Ax: Tensor) -> Tensor:
    """``Ay @ images[b, c] @ Ax^T`` for every image and channel, the channels folded into two GEMMs.

    The first GEMM is ``Ax (w x W) @ X^T (W x C*H)``, the second ``(w*C x H) @ Ay^T (H x h)``: every
    channel rides in one matrix dimension, which is 1.0-4x faster than a 3-operand einsum or a
    matmul broadcast over C (benchmarks/glimpse.py).

    Shape:
        - images: ``(B, C, H, W)``; Ay: ``(B, h, H)``; Ax: ``(B, w, W)``
        - output: ``(B, C, h, w)``

    Example:
        >>> images = torch.rand(2, 3, 5, 4)
        >>> same = separable(images, torch.eye(5).expand(2, 5, 5), torch.eye(4).expand(2, 4, 4))
        >>> torch.equal(same, images)
        True
    """
    B, C, H, W = images.shape
    h, w = Ay.shape[1], Ax.shape[1]
    t = torch.bmm(Ax, images.reshape(B, C * H, W).transpose(1, 2))  # (B, w, C*H)
    g = torch.bmm(t.reshape(B, w * C, H), Ay.transpose(1, 2))  # (B, w*C, h)
    return g.view(B, w, C, h).permute(0, 2, 3, 1)


def separable_glimpse(
    images: Tensor,
    axis_y: Axis,
    axis_x: Axis,
    size: tuple[int, int],
    *,
    origin: float = 0.0,
    truncate: Truncate = "auto",
    support: float = 5.0,
    eps: float = 1e-8,
) -> Tensor:
    """The ``h x w`` Gaussian glimpse ``A_y I A_x^T``, over the whole image or the window it covers.

    Args:
        images: the images.
        axis_y, axis_x: the Gaussians of each axis (see :data:`Axis`), in pixels.
        size: ``(h, w)``, the number of Gaussians per axis.
        origin: the coordinate of 0-based pixel 0 (0 for seed 003's pixels, 1 for DRAW's).
        truncate: ``True`` multiplies only the window within ``support`` standard deviations of the
            Gaussians (cut out with :func:`~foveal.glimpse.crop`, pixels off the image masked out of
            the sums); ``False`` always takes the dense product; ``"auto"`` takes the window when its
            area is at most :data:`TRUNCATE_AREA_FRACTION` of the image. The window's size is the
            largest the batch needs and is read with one ``.item()``.
        support: how many standard deviations of each Gaussian the window keeps.
        eps: added to each row's sum (see :func:`gaussian_rows`).

    Shape:
        - images: ``(B, C, H, W)``
        - output: ``(B, C, h, w)``

    Example:
        >>> images = torch.rand(1, 2, 40, 40)
        >>> one = torch.ones(1)
        >>> axis = (10 * one, one, 0.25 * one)  # 4 narrow Gaussians on pixels 10..13
        >>> dense = separable_glimpse(images, axis, axis, (4, 4), truncate=False)
        >>> windowed = separable_glimpse(images, axis, axis, (4, 4), truncate=True)
        >>> dense.shape, torch.allclose(dense, windowed, atol=1e-6)
        (torch.Size([1, 2, 4, 4]), True)
    """
    if truncate not in (True, False, "auto"):
        raise ValueError(f"truncate: expected True, False or 'auto', got {truncate!r}")
    H, W = images.shape[-2:]
    h, w = size
    if truncate is not False:
        (y0, ny), (x0, nx) = _window(axis_y, h, support, origin), _window(axis_x, w, support, origin)
        if truncate is True or ny * nx <= TRUNCATE_AREA_FRACTION * H * W:
            window = crop(images, torch.stack([x0, y0], dim=-1), (ny, nx))
            ys = y0[:, None] + torch.arange(ny, device=images.device)  # (B, ny)
            xs = x0[:, None] + torch.arange(nx, device=images.device)  # (B, nx)
            Ay = gaussian_rows(*axis_y, h, ys.to(images.dtype) + origin, (ys >= 0) & (ys < H), eps)
            Ax = gaussian_rows(*axis_x, w, xs.to(images.dtype) + origin, (xs >= 0) & (xs < W), eps)
            return separable(window, Ay, Ax)
    positions = origin + torch.arange(max(H, W), device=images.device, dtype=images.dtype)
    Ay = gaussian_rows(*axis_y, h, positions[:H], None, eps)
    Ax = gaussian_rows(*axis_x, w, positions[:W], None, eps)
    return separable(images, Ay, Ax)


def _window(axis: Axis, n: int, support: float, origin: float) -> tuple[Tensor, int]:
    """First 0-based pixel of each image's window ``(B,)`` and the window length (the batch's largest)."""
    first, stride, variance = (t.detach() for t in axis)
    last = first + (n - 1) * stride
    reach = support * variance.sqrt()
    lo = torch.minimum(first, last) - reach - origin
    hi = torch.maximum(first, last) + reach - origin
    start = lo.floor()
    length = int((hi.ceil() - start).max().item()) + 1
    return start.long(), max(length, 1)


__all__ = [
    "TRUNCATE_AREA_FRACTION",
    "Z_MAX",
    "Axis",
    "Truncate",
    "gaussian_rows",
    "separable",
    "separable_glimpse",
]
