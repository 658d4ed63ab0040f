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
from torch import Tensor, nn

from foveal._checks import check_shape
from foveal.glimpse.crop import _check_size
from foveal.glimpse.separable import (
    TRUNCATE_AREA_FRACTION,
    Z_MAX,
    Axis,
    Truncate,
    gaussian_rows,
    separable,
    separable_glimpse,
)

# benchmarks/glimpse.py imports the product under its old private name from here.
_separable = separable

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

    Shape:
        - center, sigma, stride: ``(*batch)``, any batch shape, the same for all three
        - output: ``(*batch, rows, cols)``

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
    if center.shape != sigma.shape or center.shape != stride.shape:
        raise ValueError(
            f"center, sigma, stride: expected one shape, got {tuple(center.shape)}, "
            f"{tuple(sigma.shape)}, {tuple(stride.shape)}"
        )
    positions = torch.arange(cols, device=center.device, dtype=center.dtype)
    return gaussian_rows(center, stride, sigma.clamp_min(SIGMA_MIN) ** 2, rows, positions, None, eps)


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
            The window's size is the largest the batch needs and is read with one ``.item()``.
        support: how many standard deviations of each Gaussian the window keeps.
        eps: added to each filter's sum (see :func:`gaussian_mask`).

    Shape:
        - images: ``(B, C, H, W)``
        - params: ``(B, 6)``
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
    h, w = _check_size(size)
    sizes = check_shape("images", images, ("B", "C", "H", "W"))
    check_shape("params", params, ("B", 6), sizes)
    uy, sy, dy, ux, sx, dx = params.unbind(-1)
    axis_y, axis_x = (uy, dy, sy.clamp_min(SIGMA_MIN) ** 2), (ux, dx, sx.clamp_min(SIGMA_MIN) ** 2)
    return separable_glimpse(images, axis_y, axis_x, (h, w), truncate=truncate, support=support, eps=eps)


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


class Filterbank(NamedTuple):
    """DRAW's filterbank matrices: ``F_X`` is ``(B, N, W)``, ``F_Y`` is ``(B, N, H)``, with the window."""

    F_X: Tensor
    F_Y: Tensor
    window: DrawWindow


class ReadOutput(NamedTuple):
    """What :func:`gaussian_read` returns: the glimpse and the window it was read through."""

    output: Tensor
    window: DrawWindow


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

    Shape:
        - params: ``(B, 5)``
        - each field of the output: ``(B,)``

    Convention:
        1-based pixel indices, as in the DRAW paper: ``g~ = 0`` puts the grid centre at
        ``(A + 1) / 2``, the middle of pixels ``1..A``; ``g~ = -1`` and ``+1`` are just outside the
        two edges. ``x`` before ``y`` in ``params``, as in the seed.

    Example:
        >>> w = draw_window(torch.zeros(1, 5), (28, 28), 5)
        >>> w.g_X, w.delta
        (tensor([14.5000]), tensor([6.7500]))
    """
    check_shape("params", params, (None, 5))
    H, W = _check_size(image_size)
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

    Shape:
        - params: ``(B, 5)``
        - F_X: ``(B, N, W)``; F_Y: ``(B, N, H)``

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
    window = draw_window(params, image_size, N)
    H, W = image_size
    (fy, dy, vy), (fx, dx, vx) = _draw_axes(window, N)
    one_based = 1.0 + torch.arange(max(H, W), device=params.device, dtype=params.dtype)
    F_X = gaussian_rows(fx, dx, vx, N, one_based[:W], None, eps)
    F_Y = gaussian_rows(fy, dy, vy, N, one_based[:H], None, eps)
    return Filterbank(F_X, F_Y, window)


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
        truncate, support: the windowed fast path, as in :func:`gaussian_glimpse`.
        eps: added to each filter's sum.

    Shape:
        - images, error_images: ``(B, C, H, W)``
        - params: ``(B, 5)``
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
    sizes = check_shape("images", images, ("B", "C", "H", "W"))
    check_shape("params", params, ("B", 5), sizes)
    if error_images is not None:
        check_shape("error_images", error_images, ("B", "C", "H", "W"), sizes)
        images = torch.cat([images, error_images], dim=1)
    window = draw_window(params, images.shape[-2:], N)
    axis_y, axis_x = _draw_axes(window, N)
    glimpse = separable_glimpse(images, axis_y, axis_x, (N, N), origin=1.0, truncate=truncate, support=support, eps=eps)
    return ReadOutput(glimpse * window.gamma[:, None, None, None], window)


def gaussian_write(patch: Tensor, params: Tensor, image_size: tuple[int, int], *, eps: float = 1e-8) -> WriteOutput:
    """DRAW's write with attention: ``(1 / gamma) F_Y^T w F_X`` (seed 004).

    Args:
        patch: ``w``, the ``N x N`` writing patch.
        params: ``(g~_X, g~_Y, log sigma^2, log delta~, log gamma)`` per image (the write's own).
        image_size: ``(H, W)`` of the canvas.
        eps: added to each filter's sum.

    Shape:
        - patch: ``(B, C, N, N)``
        - params: ``(B, 5)``
        - output: ``(B, C, H, W)``

    Convention:
        As :func:`filterbank`. ``1 / gamma`` is computed as ``exp(-log gamma)``: no division.

    Example:
        >>> out, _ = gaussian_write(torch.ones(1, 1, 5, 5), torch.zeros(1, 5), (28, 28))
        >>> out.shape
        torch.Size([1, 1, 28, 28])
    """
    N = patch.shape[-1] if patch.dim() == 4 else 0
    sizes = check_shape("patch", patch, ("B", "C", N, N))
    check_shape("params", params, ("B", 5), sizes)
    F_X, F_Y, window = filterbank(params, image_size, N, eps=eps)
    canvas = separable(patch, F_Y.transpose(1, 2), F_X.transpose(1, 2))
    return WriteOutput(canvas * (-params[:, 4].clamp(-LOG_MAX, LOG_MAX)).exp()[:, None, None, None], window)


class GaussianRead(nn.Module):
    """DRAW's attentive read: a linear layer turns a state into the five parameters, then :func:`gaussian_read`.

    The layer is the seed's ``[g~_X, g~_Y, log sigma^2, log delta~, log gamma] = W(h^dec)``.

    Args:
        in_features: size of the state ``h`` (DRAW: the decoder's previous hidden state).
        N: the glimpse is ``N x N``.
        truncate: as in :func:`gaussian_glimpse`.

    Shape:
        - images, error_images: ``(B, C, H, W)``; h: ``(B, in_features)``
        - output: ``(B, C or 2C, N, N)``

    Example:
        >>> read = GaussianRead(16, N=5)
        >>> out, window = read(torch.rand(3, 1, 28, 28), torch.zeros(3, 16))
        >>> out.shape
        torch.Size([3, 1, 5, 5])
    """

    def __init__(self, in_features: int, N: int, *, truncate: Truncate = "auto") -> None:
        super().__init__()
        self.N = N
        self.truncate = truncate
        self.params = nn.Linear(in_features, 5)

    def forward(self, images: Tensor, h: Tensor, error_images: Tensor | None = None) -> ReadOutput:
        return gaussian_read(images, self.params(h), self.N, error_images, truncate=self.truncate)


class GaussianWrite(nn.Module):
    """DRAW's attentive write: ``w_t = W(h)`` and the five parameters from ``h``, then :func:`gaussian_write`.

    Args:
        in_features: size of the state ``h`` (DRAW: the decoder's hidden state).
        N: the writing patch is ``N x N``.
        channels: channels of the canvas.

    Shape:
        - h: ``(B, in_features)``
        - output: ``(B, channels, H, W)``

    Example:
        >>> write = GaussianWrite(16, N=5, channels=1)
        >>> out, window = write(torch.zeros(3, 16), (28, 28))
        >>> out.shape
        torch.Size([3, 1, 28, 28])
    """

    def __init__(self, in_features: int, N: int, channels: int = 1) -> None:
        super().__init__()
        self.N = N
        self.channels = channels
        self.params = nn.Linear(in_features, 5)
        self.patch = nn.Linear(in_features, channels * N * N)

    def forward(self, h: Tensor, image_size: tuple[int, int]) -> WriteOutput:
        patch = self.patch(h).view(-1, self.channels, self.N, self.N)
        return gaussian_write(patch, self.params(h), image_size)


__all__ = [
    "LOG_MAX",
    "SIGMA_MIN",
    "TRUNCATE_AREA_FRACTION",
    "Z_MAX",
    "DrawWindow",
    "Filterbank",
    "GaussianRead",
    "GaussianWrite",
    "ReadOutput",
    "WriteOutput",
    "draw_window",
    "filterbank",
    "gaussian_glimpse",
    "gaussian_mask",
    "gaussian_read",
    "gaussian_write",
]
