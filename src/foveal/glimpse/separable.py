"""The product under every Gaussian glimpse: ``A_y I A_x^T`` with one 1-D Gaussian per row of ``A``.

:mod:`foveal.glimpse.gaussian` parametrises the Gaussians (seed 003's six pixel numbers, DRAW's
five unconstrained ones) and hands each axis here as ``(first centre, stride, variance)``:
:func:`gaussian_rows` builds the normalised rows, :func:`separable` multiplies, and
:func:`separable_glimpse` does both, over the whole image or over the window the Gaussians cover.

Speed. The product runs as two batched GEMMs with the channels folded into them (no loop over
channels, no 3-operand einsum). When the Gaussians are narrow and close together (a zoomed-in
glimpse: filters of a few pixels on a large image), almost every filter weight is zero; the
truncated path then multiplies only a window of the image that holds every Gaussian out to
``support`` standard deviations. While a graph is traced, a small image (DRAW's write patch) is
multiplied as sums of broadcast products that the compiler fuses, not as GEMMs.

Graphs. The window's size is read from the parameters' values, which a traced graph cannot do (it
would fail, or keep the size of the one call it saw). While ``torch.compile`` or ``torch.export``
traces it (:func:`~foveal._checks.tracing`), ``truncate="auto"`` takes the dense product, exact at
any parameters, and ``truncate=True`` is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import torch
from torch import Tensor

from foveal._checks import check_choice, tracing, work_dtype
from foveal.errors import FovealError
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
    *,
    dtype: torch.dtype | None = None,
) -> Tensor:
    """``n`` Gaussians centred at ``first + r stride``, evaluated at ``positions``, each row normalised.

    ``A[r, p] = exp(-(positions[p] - mu_r)^2 / (2 variance)) / (sum_p' exp(...) + eps)``.

    Args:
        first, stride, variance: the axis (see :data:`Axis`); the variance must be positive.
        n: the number of Gaussians (rows).
        positions: where each column sits, in the same units.
        inside: False where a position is off the image: it weighs zero and leaves the row sums.
        eps: added to each row's sum, so a row with no weight on the image is zero, not NaN.
        dtype: the dtype returned; by default that of ``first`` and ``positions`` together. The
            weights are computed in float32 when that is a 16-bit float
            (:func:`~foveal._checks.work_dtype`).

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
    out_dtype = torch.promote_types(first.dtype, positions.dtype) if dtype is None else dtype
    work = work_dtype(first.dtype, stride.dtype, variance.dtype, positions.dtype)
    first, stride, variance, positions = (t.to(work) for t in (first, stride, variance, positions))
    r = torch.arange(n, device=first.device, dtype=work)
    centres = first[..., None] + r * stride[..., None]  # (*batch, n)
    offsets = positions[..., None, :] - centres[..., :, None]  # (*batch, n, L)
    # Clamping the standardised offset changes no weight (exp(-Z_MAX^2 / 2) is 0 in float64) but keeps
    # inf out of the forward pass, and with it 0 * inf = NaN out of the backward.
    z = (offsets * variance.rsqrt()[..., None, None]).clamp(-Z_MAX, Z_MAX)
    weights = torch.exp(-0.5 * z.square())
    if inside is not None:
        weights = weights * inside[..., None, :]
    return (weights / (weights.sum(-1, keepdim=True) + eps)).to(out_dtype)


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
    finite: Tensor | None = None,
) -> Tensor:
    """The ``h x w`` Gaussian glimpse ``A_y I A_x^T``, over the whole image or the window it covers.

    The callers check the arguments; the Gaussians are computed in
    :func:`~foveal._checks.work_dtype` (float32 for 16-bit images) and cast to the images' dtype.

    Args:
        images: the images.
        axis_y, axis_x: the Gaussians of each axis (see :data:`Axis`), in pixels.
        size: ``(h, w)``, the number of Gaussians per axis.
        origin: the coordinate of 0-based pixel 0 (0 for seed 003's pixels, 1 for DRAW's).
        truncate: ``True`` multiplies only the window within ``support`` standard deviations of the
            Gaussians (cut out with :func:`~foveal.glimpse.crop`, pixels off the image masked out of
            the sums); ``False`` always takes the dense product; ``"auto"`` takes the window when its
            area is at most :data:`TRUNCATE_AREA_FRACTION` of the image. The window's size is the
            largest the batch needs, read from the device with one ``.tolist()``; while a graph is
            traced (``torch.compile``, ``torch.export``), ``"auto"`` takes the dense product instead
            and ``True`` is refused.
        support: how many standard deviations of each Gaussian the window keeps.
        eps: added to each row's sum (see :func:`gaussian_rows`).
        finite: False for a sample whose parameters were not finite before they became the axes (DRAW
            clamps them); None if the axes say it all.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): ``truncate=True`` while a graph is traced
            (the window's size cannot be read there).

    A sample whose window is not finite (NaN or infinite parameters), or whose ``finite`` is False,
    takes no part in choosing the window and is read by the dense product instead (what
    ``truncate=False`` gives it): it would otherwise make the window NaN (which has no length) or
    infinite, and take every other sample down with it. A finite window is cut to the image (and a
    pixel beyond each edge), since pixels off the image weigh nothing: however wide the Gaussians, the
    windowed product reads no more than the image, and where its window holds all of the image it
    gives the dense product's glimpse (to rounding).

    Shape:
        - images: ``(B, C, H, W)``
        - finite: ``(B,)``, bool
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
    check_choice("truncate", truncate, (True, False, "auto"))
    traced = tracing()
    if truncate is True and traced:
        raise FovealError(
            "truncate=True: the windowed product reads the size of its window from the parameter values, "
            'which a traced graph (torch.compile, torch.export) cannot do; pass truncate="auto", which takes '
            "the dense product while tracing (exact at any parameters), or truncate=False"
        )
    H, W = images.shape[-2:]
    h, w = size
    work = work_dtype(images.dtype, *(t.dtype for t in (*axis_y, *axis_x)))
    axis_y, axis_x = _axis(t.to(work) for t in axis_y), _axis(t.to(work) for t in axis_x)
    # A traced graph is replayed at other parameters, and only the dense product is right at all of them.
    if truncate is not False and not traced:
        y0, y_span = _window(axis_y, h, support, origin, H)
        x0, x_span = _window(axis_x, w, support, origin, W)
        windowed = torch.isfinite(y_span) & torch.isfinite(x_span)
        if finite is not None:
            windowed = windowed & finite
        # One read from the device for the window's size and whether any sample is left to the dense product.
        zero = y_span.new_zeros(())
        spans = [torch.where(windowed, span, 0).amax(0) if len(span) else zero for span in (y_span, x_span)]
        ny, nx, n_dense = (int(v) for v in torch.stack([*spans, (~windowed).sum().to(zero)]).tolist())
        ny, nx = ny + 1, nx + 1
        if truncate is True or ny * nx <= TRUNCATE_AREA_FRACTION * H * W:
            if n_dense == 0:
                return _windowed(images, axis_y, axis_x, (h, w), (y0, ny), (x0, nx), origin, eps)
            # The samples left out read a harmless window at pixel 0 (torch.where passes their parameters
            # no gradient from it), and their glimpse is then replaced by the dense product.
            neutral = (0.0, 1.0, 1.0)
            safe_y = _axis(torch.where(windowed, t, v) for t, v in zip(axis_y, neutral, strict=True))
            safe_x = _axis(torch.where(windowed, t, v) for t, v in zip(axis_x, neutral, strict=True))
            y0, x0 = torch.where(windowed, y0, 0), torch.where(windowed, x0, 0)
            out = _windowed(images, safe_y, safe_x, (h, w), (y0, ny), (x0, nx), origin, eps)
            left = (~windowed).nonzero().squeeze(1)
            picked_y, picked_x = _axis(t[left] for t in axis_y), _axis(t[left] for t in axis_x)
            return out.index_copy(0, left, _dense(images[left], picked_y, picked_x, (h, w), origin, eps))
    return _dense(images, axis_y, axis_x, (h, w), origin, eps)


def _axis(parts: Iterable[Tensor]) -> Axis:
    """The three tensors of an axis, from an iterable of them."""
    first, stride, variance = parts
    return first, stride, variance


def _dense(images: Tensor, axis_y: Axis, axis_x: Axis, size: tuple[int, int], origin: float, eps: float) -> Tensor:
    H, W = images.shape[-2:]
    positions = origin + torch.arange(max(H, W), device=images.device, dtype=axis_y[0].dtype)
    Ay = gaussian_rows(*axis_y, size[0], positions[:H], None, eps, dtype=images.dtype)
    Ax = gaussian_rows(*axis_x, size[1], positions[:W], None, eps, dtype=images.dtype)
    return separable(images, Ay, Ax)


def _windowed(
    images: Tensor,
    axis_y: Axis,
    axis_x: Axis,
    size: tuple[int, int],
    rows: tuple[Tensor, int],
    cols: tuple[Tensor, int],
    origin: float,
    eps: float,
) -> Tensor:
    """The glimpse from the ``ny x nx`` window of each image whose top-left pixel is ``(y0, x0)``."""
    H, W = images.shape[-2:]
    (y0, ny), (x0, nx) = rows, cols
    work = axis_y[0].dtype
    window = crop(images, torch.stack([x0, y0], dim=-1), (ny, nx))
    ys = y0[:, None] + torch.arange(ny, device=images.device)  # (B, ny)
    xs = x0[:, None] + torch.arange(nx, device=images.device)  # (B, nx)
    Ay = gaussian_rows(*axis_y, size[0], ys.to(work) + origin, (ys >= 0) & (ys < H), eps, dtype=images.dtype)
    Ax = gaussian_rows(*axis_x, size[1], xs.to(work) + origin, (xs >= 0) & (xs < W), eps, dtype=images.dtype)
    return separable(window, Ay, Ax)


def _window(axis: Axis, n: int, support: float, origin: float, length: int) -> tuple[Tensor, Tensor]:
    """First 0-based pixel of each image's window and its span (last pixel minus first), each ``(B,)``.

    The window is cut to the axis's ``length`` pixels and one beyond each edge: pixels off the image
    weigh nothing, so a wider window would read no more of the image, only more padding (wide
    Gaussians reach far past a small image); and one that misses the image still misses it. The start
    is a long; the span stays floating point, so a NaN or infinite one (whose start is 0) can be told
    apart.
    """
    first, stride, variance = (t.detach() for t in axis)
    last = first + (n - 1) * stride
    reach = support * variance.sqrt()
    lo = torch.minimum(first, last) - reach - origin
    hi = torch.maximum(first, last) + reach - origin
    start, end = lo.floor(), hi.ceil()
    finite = torch.isfinite(end - start)
    cut_start, cut_end = start.clamp(-1, length), end.clamp(-1, length)
    span = torch.where(finite, cut_end - cut_start, end - start)
    return torch.where(finite, cut_start, 0).long(), span


__all__ = [
    "TRUNCATE_AREA_FRACTION",
    "Z_MAX",
    "Axis",
    "Truncate",
    "gaussian_rows",
    "separable",
    "separable_glimpse",
]
