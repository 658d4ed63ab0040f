"""Gaussian attention glimpses: seed 003's ``g = A_y I A_x^T`` and DRAW's filterbank read/write (seed 004).

Both are the same separable product: one matrix of 1-D Gaussians per axis, one Gaussian per
glimpse row (or column), each row normalised to sum to one over the image's pixels. They differ
only in how the Gaussians are parametrised:

- seed 003: six pixel parameters ``(mean_y, std_y, d_y, mean_x, std_x, d_x)``, the centre of the
  first Gaussian, their standard deviation and the distance between consecutive centres;
- DRAW: five unconstrained numbers ``(g~_X, g~_Y, log sigma^2, log delta~, log gamma)`` mapped to a
  grid centre, a stride scaled to the image, one variance and an intensity.

Each turns its parameters into one ``(first centre, stride, variance)`` per axis; the product
itself, dense or cut to the window the Gaussians cover (``truncate``), is
:mod:`foveal.glimpse.separable`.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from foveal._checks import (
    check_choice,
    check_floating,
    check_hw,
    check_int,
    check_number,
    check_shape,
    check_tensor,
    work_dtype,
)
from foveal._torch_private import exportable_output
from foveal.errors import FovealError
from foveal.glimpse._images import check_image
from foveal.glimpse.separable import (
    TRUNCATE_AREA_FRACTION,
    Z_MAX,
    Axis,
    Truncate,
    gaussian_rows,
    separable,
    separable_glimpse,
)

SIGMA_MIN = 1e-3
"""Smallest standard deviation used, in pixels. Narrower Gaussians are clamped to it (their gradient
is then zero): below it a filter is a one-hot pixel anyway, and ``(c - mu) / sigma`` would overflow to
``inf`` and turn ``0 * inf`` into NaN in the backward pass."""

LOG_MAX = 50.0
"""DRAW's five parameters are clamped to ``[-LOG_MAX, LOG_MAX]`` before use (the three logs before ``exp``),
so a diverging network gives a finite (if useless) window instead of inf and NaN; the gradient is zero
beyond the clamp. ``g~ = +-50`` is already 25 image widths off the image."""


def gaussian_mask(center: Tensor, sigma: Tensor, stride: Tensor, rows: int, cols: int, *, eps: float = 1e-8) -> Tensor:
    """Seed 003's ``gaussian_mask(u, s, d, R, C)``: one normalised 1-D Gaussian per row.

    ``A[r, c] = exp(-((c - mu_r) / s)^2 / 2) / (sum_c' exp(-((c' - mu_r) / s)^2 / 2) + eps)`` with
    ``mu_r = u + r d``. ``A_y = gaussian_mask(u_y, s_y, d_y, h, H)`` is ``h x H``.

    Args:
        center: ``u``, the centre of the first Gaussian, in pixels.
        sigma: ``s``, their standard deviation in pixels (clamped to :data:`SIGMA_MIN`).
        stride: ``d``, the distance between the centres of consecutive rows, in pixels.
        rows: ``R``, the number of Gaussians (the glimpse's size along this axis).
        cols: ``C``, the number of pixels along this axis of the image.
        eps: added to each row's sum, so a row whose Gaussian lies wholly off the image is zero,
            not NaN.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): shapes that differ, a tensor that is not
            floating point or of another dtype, ``rows`` or ``cols`` below 1, a negative ``eps``.

    Shape:
        - center, sigma, stride: ``(*batch)``, any batch shape, the same for all three
        - output: ``(*batch, rows, cols)``, the dtype of the parameters (16-bit floats are computed in
          float32 and cast back)

    Convention:
        Pixel units, 0-based: pixel ``c`` of the image is at coordinate ``c``, so ``u = 0`` puts the
        first Gaussian on the first pixel's centre. Rows are Gaussians, columns are image pixels
        (seed 003's TensorFlow code returns the transpose, ``C x R``, and multiplies with
        ``adjoint_a``).

    Example:
        >>> A = gaussian_mask(torch.tensor([2.0]), torch.tensor([0.5]), torch.tensor([1.0]), 5, 10)
        >>> A.shape, torch.allclose(A.sum(-1), torch.ones(1, 5))
        (torch.Size([1, 5, 10]), True)
        >>> A[0].argmax(-1)
        tensor([2, 3, 4, 5, 6])
    """
    check_floating(center=center, sigma=sigma, stride=stride)
    if center.shape != sigma.shape or center.shape != stride.shape:
        raise FovealError(
            f"center, sigma, stride: expected one shape, got {tuple(center.shape)}, "
            f"{tuple(sigma.shape)}, {tuple(stride.shape)}"
        )
    rows, cols = check_int("rows", rows), check_int("cols", cols)
    check_number("eps", eps, bound=">= 0")
    dtype, work = center.dtype, work_dtype(center.dtype, sigma.dtype, stride.dtype)
    center, sigma, stride = center.to(work), sigma.to(work), stride.to(work)
    positions = torch.arange(cols, device=center.device, dtype=work)
    return gaussian_rows(center, stride, sigma.clamp_min(SIGMA_MIN) ** 2, rows, positions, None, eps, dtype=dtype)


def gaussian_glimpse(
    images: Tensor,
    params: Tensor,
    size: tuple[int, int],
    *,
    truncate: Truncate = "auto",
    support: float = 5.0,
    eps: float = 1e-8,
) -> Tensor:
    """Seed 003's Gaussian glimpse ``g = A_y I A_x^T`` for every channel, in one batched product.

    ``A_y = gaussian_mask(mean_y, std_y, d_y, h, H)`` and ``A_x = gaussian_mask(mean_x, std_x, d_x, w, W)``.
    With ``mean = 0, std -> 0, d = 1`` and ``h, w = H, W`` it returns the image itself.

    Args:
        images: the images to look at.
        params: ``(mean_y, std_y, d_y, mean_x, std_x, d_x)`` per image, in pixels (seed 003's order).
        size: ``(h, w)``, the glimpse's height and width.
        truncate: ``True`` multiplies only the window of the image within ``support`` standard
            deviations of the Gaussians (exact up to the dropped tails, which weigh at most
            ``~erfc(support / sqrt 2) / 2`` per filter: 3e-7 at the default 5); ``False`` always
            takes the dense product; ``"auto"`` takes the window when its area is at most
            :data:`TRUNCATE_AREA_FRACTION` of the image (zoomed-in glimpses: small ``std`` and ``d``).
            The window's size is the largest the batch needs, read from the device with one
            ``.tolist()``, which a traced graph cannot hold: while ``torch.compile`` or
            ``torch.export`` traces the call, ``"auto"`` takes the dense product (exact at any
            parameters, so the graph is right wherever it is run) and ``True`` raises.
            A sample with NaN or infinite parameters takes no part in that choice and is read by the
            dense product: the others' glimpses are what they would be without it.
        support: how many standard deviations of each Gaussian the window keeps.
        eps: added to each filter's sum (see :func:`gaussian_mask`).

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): a shape that does not fit (batch sizes that
            differ), images or parameters that are not floating point or not of one dtype, a size
            below 1, an unknown ``truncate``, ``support <= 0`` or ``eps < 0``; ``truncate=True`` while
            a graph is traced.

    Shape:
        - images: ``(B, C, H, W)``, floating point (16-bit floats: the filters are computed in float32)
        - params: ``(B, 6)``, the dtype of ``images``
        - output: ``(B, C, h, w)``

    Convention:
        Pixel units, 0-based (pixel ``(y, x)`` is at coordinate ``(y, x)``); ``y`` parameters
        first, as in seed 003. Gradients reach every parameter and the image; outside the image
        the Gaussians see zeros (renormalised over the pixels they do cover).

    Example:
        >>> img = torch.zeros(1, 1, 10, 10)
        >>> img[0, 0, 3:6, 3:6] = 1
        >>> params = torch.tensor([[2.0, 0.5, 1.0, 2.0, 0.5, 1.0]])  # seed 003's u=2, s=.5, d=1
        >>> g = gaussian_glimpse(img, params, (5, 5))
        >>> g.shape, bool(g[0, 0, 2, 2] > 0.9), bool(g[0, 0, 0, 0] < 0.05)
        (torch.Size([1, 1, 5, 5]), True, True)
    """
    h, w = check_hw("size", size)
    sizes = check_image("images", images)
    check_shape("params", check_tensor("params", params), ("B", 6), sizes)
    check_floating(images=images, params=params)
    _check_glimpse_options(truncate, support, eps)
    uy, sy, dy, ux, sx, dx = params.to(work_dtype(images.dtype, params.dtype)).unbind(-1)
    axis_y, axis_x = (uy, dy, sy.clamp_min(SIGMA_MIN) ** 2), (ux, dx, sx.clamp_min(SIGMA_MIN) ** 2)
    # The clamp turns a std of -inf into SIGMA_MIN: such a sample must still stay out of the window choice.
    finite = torch.isfinite(params.detach()).all(-1)
    return separable_glimpse(images, axis_y, axis_x, (h, w), truncate=truncate, support=support, eps=eps, finite=finite)


def _check_glimpse_options(truncate: object, support: object, eps: object) -> None:
    check_choice("truncate", truncate, (True, False, "auto"))
    check_number("support", support, why="standard deviations the window keeps")
    check_number("eps", eps, bound=">= 0")


@exportable_output
class DrawWindow(NamedTuple):
    """DRAW's attention window in pixels (seed 004), from the five unconstrained parameters.

    ``g_X, g_Y`` are the grid centre (1-based pixels), ``delta`` the stride between filters,
    ``sigma2`` their variance and ``gamma`` the intensity; each ``(B,)``.
    """

    g_X: Tensor
    g_Y: Tensor
    delta: Tensor
    sigma2: Tensor
    gamma: Tensor


@exportable_output
class Filterbank(NamedTuple):
    """DRAW's filterbank matrices: ``F_X`` is ``(B, N, W)``, ``F_Y`` is ``(B, N, H)``, with the window."""

    F_X: Tensor
    F_Y: Tensor
    window: DrawWindow


@exportable_output
class ReadOutput(NamedTuple):
    """What :func:`gaussian_read` returns: the glimpse and the window it was read through."""

    output: Tensor
    window: DrawWindow


@exportable_output
class WriteOutput(NamedTuple):
    """What :func:`gaussian_write` returns: the canvas update and the window it was written through."""

    output: Tensor
    window: DrawWindow


def draw_window(params: Tensor, image_size: tuple[int, int], N: int) -> DrawWindow:
    """Seed 004's map from ``(g~_X, g~_Y, log sigma^2, log delta~, log gamma)`` to the window.

    For an ``A x B`` image (``A`` = width ``W``, ``B`` = height ``H``)::

        g_X = (A + 1) / 2 (g~_X + 1)          g_Y = (B + 1) / 2 (g~_Y + 1)
        delta = (max(A, B) - 1) / (N - 1) delta~          sigma^2, delta~, gamma = exp(.)

    Args:
        params: the five unconstrained numbers per image, in the seed's order.
        image_size: ``(H, W)``.
        N: the glimpse is ``N x N``. For ``N = 1`` the stride is irrelevant and ``N - 1`` is taken as 1.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): ``params`` not ``(B, 5)`` or not floating
            point, an ``image_size`` or ``N`` below 1.

    Shape:
        - params: ``(B, 5)``
        - each field of the output: ``(B,)``, the dtype of ``params``. For 16-bit params the window
          is computed in float32 and cast back, so a field beyond float16's range (``exp(50)``) is inf.

    Convention:
        1-based pixel indices, as in the DRAW paper: ``g~ = 0`` puts the grid centre at
        ``(A + 1) / 2``, the middle of pixels ``1..A``; ``g~ = -1`` and ``+1`` are just outside the
        two edges. ``x`` before ``y`` in ``params``, as in the seed.

    Example:
        >>> w = draw_window(torch.zeros(1, 5), (28, 28), 5)
        >>> w.g_X, w.delta
        (tensor([14.5000]), tensor([6.7500]))
    """
    _check_draw(params, image_size, N)
    window = _draw_window(params.to(work_dtype(params.dtype)), image_size, N)
    return _cast_window(window, params.dtype)


def _check_draw(params: Tensor, image_size: tuple[int, int], N: int, sizes: dict[str, int] | None = None) -> None:
    check_shape("params", check_tensor("params", params), ("B", 5), sizes)
    check_floating(params=params)
    check_hw("image_size", image_size)
    check_int("N", N)


def _cast_window(window: DrawWindow, dtype: torch.dtype) -> DrawWindow:
    return DrawWindow(*(field.to(dtype) for field in window))


def _draw_window(params: Tensor, image_size: tuple[int, int], N: int) -> DrawWindow:
    # draw_window without the checks, in the dtype of params (float32 or wider: exp(50) must not overflow).
    H, W = int(image_size[0]), int(image_size[1])
    gx_t, gy_t, log_sigma2, log_delta_t, log_gamma = params.clamp(-LOG_MAX, LOG_MAX).unbind(-1)
    return DrawWindow(
        g_X=(W + 1) / 2 * (gx_t + 1),
        g_Y=(H + 1) / 2 * (gy_t + 1),
        delta=(max(W, H) - 1) / max(N - 1, 1) * log_delta_t.exp(),
        sigma2=log_sigma2.exp(),
        gamma=log_gamma.exp(),
    )


def _draw_axes(window: DrawWindow, N: int) -> tuple[Axis, Axis]:
    # mu^i = g + (i - N/2 - 0.5) delta for i = 1..N: the first centre is g - (N - 1)/2 delta.
    variance = window.sigma2.clamp_min(SIGMA_MIN**2)
    first = -(N - 1) / 2 * window.delta
    return (window.g_Y + first, window.delta, variance), (window.g_X + first, window.delta, variance)


def filterbank(params: Tensor, image_size: tuple[int, int], N: int, *, eps: float = 1e-8) -> Filterbank:
    """DRAW's ``N x A`` and ``N x B`` Gaussian filterbanks (seed 004).

    ``F_X[i, a] = exp(-(a - mu_X^i)^2 / (2 sigma^2)) / Z_X`` with ``mu_X^i = g_X + (i - N/2 - 0.5) delta``
    for ``i = 1..N`` and ``Z_X = sum_a exp(...) + eps``; ``F_Y`` likewise over the rows. ``sigma^2``
    enters once (it is a variance: some public ports square it again).

    Args:
        params: ``(g~_X, g~_Y, log sigma^2, log delta~, log gamma)`` per image (see :func:`draw_window`).
        image_size: ``(H, W)``.
        N: number of filters per axis.
        eps: added to each filter's sum, so a filter wholly off the image is zero, not NaN.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): as :func:`draw_window`, and ``eps < 0``.

    Shape:
        - params: ``(B, 5)``, floating point
        - F_X: ``(B, N, W)``; F_Y: ``(B, N, H)``, the dtype of ``params`` (16-bit floats: computed in
          float32 and cast back, so a filter is finite wherever float32's is)

    Convention:
        1-based pixel indices ``a = 1..A`` and ``i = 1..N`` (the DRAW paper's), so the grid of
        centres is symmetric about ``g_X``. Column ``a`` of ``F_X`` is 0-based pixel ``a - 1``.
        The variance is clamped below at ``SIGMA_MIN ** 2``.

    Example:
        >>> fb = filterbank(torch.tensor([[0.0, 0.0, -2.0, 0.0, 0.0]]), (28, 28), 5)
        >>> fb.F_X.shape, torch.allclose(fb.F_X.sum(-1), torch.ones(1, 5))
        (torch.Size([1, 5, 28]), True)
        >>> fb.F_X[0].argmax(-1)  # centred: 0-based pixels 13.5 +- 6.75 k
        tensor([ 0,  7, 13, 20, 27])
    """
    _check_draw(params, image_size, N)
    check_number("eps", eps, bound=">= 0")
    return _filterbank(params, image_size, N, eps)


def _filterbank(params: Tensor, image_size: tuple[int, int], N: int, eps: float) -> Filterbank:
    work = work_dtype(params.dtype)
    window = _draw_window(params.to(work), image_size, N)
    H, W = int(image_size[0]), int(image_size[1])
    (fy, dy, vy), (fx, dx, vx) = _draw_axes(window, N)
    one_based = 1.0 + torch.arange(max(H, W), device=params.device, dtype=work)
    F_X = gaussian_rows(fx, dx, vx, N, one_based[:W], None, eps, dtype=params.dtype)
    F_Y = gaussian_rows(fy, dy, vy, N, one_based[:H], None, eps, dtype=params.dtype)
    return Filterbank(F_X, F_Y, _cast_window(window, params.dtype))


def gaussian_read(
    images: Tensor,
    params: Tensor,
    N: int,
    error_images: Tensor | None = None,
    *,
    truncate: Truncate = "auto",
    support: float = 5.0,
    eps: float = 1e-8,
) -> ReadOutput:
    """DRAW's read with attention: ``gamma [F_Y x F_X^T, F_Y x_hat F_X^T]`` (seed 004).

    Args:
        images: ``x``, the images.
        params: ``(g~_X, g~_Y, log sigma^2, log delta~, log gamma)`` per image.
        N: the glimpse is ``N x N``.
        error_images: ``x_hat``, the error image (``x - sigmoid(c_{t-1})`` in DRAW); its glimpse is
            concatenated after the image's along the channels. None reads the image alone.
        truncate, support: the windowed fast path, as in :func:`gaussian_glimpse` (a sample with NaN or
            infinite parameters is read by the dense product and changes no other sample's glimpse;
            while a graph is traced, ``"auto"`` is the dense product and ``True`` raises).
        eps: added to each filter's sum.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): a shape that does not fit, tensors that are
            not floating point or not of one dtype, ``N`` below 1, or an option out of range;
            ``truncate=True`` while a graph is traced.

    Shape:
        - images, error_images: ``(B, C, H, W)``, floating point, one dtype
        - params: ``(B, 5)``, the dtype of ``images`` (16-bit floats: the window and the filters are
          computed in float32, the product in the images' dtype)
        - output: ``(B, C, N, N)``, or ``(B, 2C, N, N)`` with ``error_images``

    Convention:
        As :func:`filterbank`: 1-based pixels, ``x`` before ``y`` in ``params``; output row ``j``
        is filter ``F_Y[j]``, column ``i`` filter ``F_X[i]``.

    Example:
        >>> x = torch.rand(2, 1, 28, 28)
        >>> out, window = gaussian_read(x, torch.zeros(2, 5), 12, x - 0.5)
        >>> out.shape, window.gamma
        (torch.Size([2, 2, 12, 12]), tensor([1., 1.]))
    """
    sizes = check_image("images", images)
    _check_draw(params, (sizes["H"], sizes["W"]), N, sizes)
    if error_images is not None:
        check_shape("error_images", check_tensor("error_images", error_images), ("B", "C", "H", "W"), sizes)
    check_floating(images=images, params=params, error_images=error_images, optional=("error_images",))
    _check_glimpse_options(truncate, support, eps)
    if error_images is not None:
        images = torch.cat([images, error_images], dim=1)
    work = work_dtype(images.dtype, params.dtype)
    window = _draw_window(params.to(work), (sizes["H"], sizes["W"]), N)
    axis_y, axis_x = _draw_axes(window, N)
    # The clamp makes an infinite parameter finite, but such a sample's window spans ~exp(LOG_MAX) pixels:
    # it is read densely rather than sizing every image's window.
    finite = torch.isfinite(params.detach()).all(-1)
    glimpse = separable_glimpse(
        images, axis_y, axis_x, (N, N), origin=1.0, truncate=truncate, support=support, eps=eps, finite=finite
    )
    # gamma is scaled in before the cast: exp(log gamma) may overflow float16 where the product need not.
    glimpse = (glimpse.to(work) * window.gamma[:, None, None, None]).to(glimpse.dtype)
    return ReadOutput(glimpse, _cast_window(window, params.dtype))


def gaussian_write(patch: Tensor, params: Tensor, image_size: tuple[int, int], *, eps: float = 1e-8) -> WriteOutput:
    """DRAW's write with attention: ``(1 / gamma) F_Y^T w F_X`` (seed 004).

    Args:
        patch: ``w``, the ``N x N`` writing patch.
        params: ``(g~_X, g~_Y, log sigma^2, log delta~, log gamma)`` per image (the write's own).
        image_size: ``(H, W)`` of the canvas.
        eps: added to each filter's sum.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): a patch that is not ``(B, C, N, N)`` with
            ``N >= 1``, params not ``(B, 5)``, tensors that are not floating point or not of one dtype.

    Shape:
        - patch: ``(B, C, N, N)``, floating point
        - params: ``(B, 5)``, the dtype of ``patch`` (16-bit floats: the filters are computed in float32)
        - output: ``(B, C, H, W)``

    Convention:
        As :func:`filterbank`. ``1 / gamma`` is computed as ``exp(-log gamma)``: no division.

    Example:
        >>> out, _ = gaussian_write(torch.ones(1, 1, 5, 5), torch.zeros(1, 5), (28, 28))
        >>> out.shape
        torch.Size([1, 1, 28, 28])
    """
    check_tensor("patch", patch)
    N = patch.shape[-1] if patch.dim() == 4 else 0
    sizes = check_shape("patch", patch, ("B", "C", N, N))
    if N < 1:
        raise FovealError(f"patch: expected an N x N patch with N >= 1, got shape {tuple(patch.shape)}")
    _check_draw(params, image_size, N, sizes)
    check_floating(patch=patch, params=params)
    check_number("eps", eps, bound=">= 0")
    work = work_dtype(patch.dtype, params.dtype)
    F_X, F_Y, window = _filterbank(params.to(work), image_size, N, eps)
    canvas = separable(patch.to(work), F_Y.transpose(1, 2), F_X.transpose(1, 2))
    inverse_gamma = (-params.to(work)[:, 4].clamp(-LOG_MAX, LOG_MAX)).exp()[:, None, None, None]
    return WriteOutput((canvas * inverse_gamma).to(patch.dtype), _cast_window(window, params.dtype))


__all__ = [
    "LOG_MAX",
    "SIGMA_MIN",
    "TRUNCATE_AREA_FRACTION",
    "Z_MAX",
    "DrawWindow",
    "Filterbank",
    "ReadOutput",
    "WriteOutput",
    "draw_window",
    "filterbank",
    "gaussian_glimpse",
    "gaussian_mask",
    "gaussian_read",
    "gaussian_write",
]
