"""The spatial transformer's grid generator and bilinear sampler (seed 004, Jaderberg et al. 2015).

The grid generator maps each output pixel's normalised coordinates through ``theta`` to a point of
the input; the sampler reads the input there with seed 004's bilinear kernel::

    V_i = sum_n sum_m U_nm max(0, 1 - |x_i - m|) max(0, 1 - |y_i - n|)

:class:`BilinearSampler` is that formula as a ``torch.autograd.Function`` with the seed's
gradients; ``F.grid_sample`` computes the same numbers faster and is the default (``fast=True``).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from foveal._checks import (
    LOW_PRECISION,
    check_choice,
    check_floating,
    check_hw,
    check_shape,
    check_tensor,
    work_dtype,
)
from foveal.errors import FovealError
from foveal.glimpse._images import check_fill_number, check_image

Padding = Literal["zeros", "border"]
PADDINGS = ("zeros", "border")

PROJECTIVE_EPS = 1e-6
"""Smallest ``|z|`` a projective grid divides by (points at or behind the horizon are pushed just in front)."""


def base_grid(size: tuple[int, int], *, align_corners: bool = False, device=None, dtype=None) -> Tensor:
    """The output grid's normalised ``(x, y, 1)``, one row per pixel, as ``F.affine_grid`` builds it.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): a size below 1, or a ``dtype`` that is not
            floating point (an integer grid would round every coordinate to -1, 0 or 1).

    Shape:
        - output: ``(h, w, 3)``

    Convention:
        ``x`` (column) first. ``align_corners=True`` puts -1 and +1 on the centres of the corner
        pixels; ``False`` on their outer edges, so pixel ``j`` of ``w`` is at ``(2j + 1) / w - 1``.

    Example:
        >>> base_grid((1, 2))[..., 0]
        tensor([[-0.5000,  0.5000]])
    """
    h, w = check_hw("size", size)
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise FovealError(f"dtype: expected a floating-point dtype, got {dtype!r}")
    xs = _normalised_centres(w, align_corners, device, dtype)
    ys = _normalised_centres(h, align_corners, device, dtype)
    grid = torch.ones(h, w, 3, device=device, dtype=dtype)
    grid[..., 0] = xs
    grid[..., 1] = ys[:, None]
    return grid


def affine_grid(theta: Tensor, size: tuple[int, int], *, align_corners: bool = False) -> Tensor:
    """Seed 004's grid generator: ``(x^s, y^s) = theta (x^t, y^t, 1)`` for every output pixel.

    Args:
        theta: the affine matrix, mapping output (target) to input (source) coordinates.
        size: ``(h, w)`` of the output.
        align_corners: see :func:`base_grid`.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): ``theta`` not ``(B, 2, 3)``, or not floating
            point (an integer ``theta`` would build an integer grid: write ``theta.float()``).

    Shape:
        - theta: ``(B, 2, 3)``, floating point
        - output: ``(B, h, w, 2)``, the source point ``(x, y)`` of each output pixel

    Convention:
        Normalised coordinates in ``[-1, 1]`` on both sides, ``x`` (column) first; ``theta`` maps
        the output grid into the input, so ``theta = [[s, 0, t_x], [0, s, t_y]]`` with ``s < 1``
        zooms in on the point ``(t_x, t_y)``. Equal to ``F.affine_grid(theta, (B, C, h, w), align_corners)``.

    Example:
        >>> theta = torch.tensor([[[1.0, 0, 0], [0, 1, 0]]])
        >>> affine_grid(theta, (2, 2))[0, :, :, 0]
        tensor([[-0.5000,  0.5000],
                [-0.5000,  0.5000]])
    """
    _check_theta(theta, 2, size)
    base = base_grid(size, align_corners=align_corners, device=theta.device, dtype=theta.dtype)
    return torch.einsum("hwk,bik->bhwi", base, theta)


def _check_theta(theta: Tensor, rows: int, size: tuple[int, int], sizes: dict[str, int] | None = None) -> None:
    check_shape("theta", check_tensor("theta", theta), ("B", rows, 3), sizes)
    check_floating(theta=theta)
    check_hw("size", size)


def projective_grid(theta: Tensor, size: tuple[int, int], *, align_corners: bool = False) -> Tensor:
    """A projective grid: ``(x^s, y^s) = (p_1, p_2) / p_3`` with ``p = theta (x^t, y^t, 1)``.

    ``|p_3|`` is kept at least :data:`PROJECTIVE_EPS` (sign kept), so the grid and its gradient stay
    finite when a point reaches the horizon.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): as :func:`affine_grid`, for a ``(B, 3, 3)`` ``theta``.

    Shape:
        - theta: ``(B, 3, 3)``, floating point
        - output: ``(B, h, w, 2)``

    Convention:
        As :func:`affine_grid`; a ``theta`` whose last row is ``(0, 0, 1)`` gives the affine grid.

    Example:
        >>> projective_grid(torch.eye(3)[None], (1, 2))[0, 0]
        tensor([[-0.5000,  0.0000],
                [ 0.5000,  0.0000]])
    """
    _check_theta(theta, 3, size)
    base = base_grid(size, align_corners=align_corners, device=theta.device, dtype=theta.dtype)
    p = torch.einsum("hwk,bik->bhwi", base, theta)
    z = p[..., 2:]
    z = torch.where(z >= 0, z.clamp_min(PROJECTIVE_EPS), z.clamp_max(-PROJECTIVE_EPS))
    return p[..., :2] / z


class BilinearSampler(torch.autograd.Function):
    """Seed 004's bilinear sampling kernel and its gradients, in pixel coordinates, zero outside.

    ``forward(U, x, y)`` returns ``V[b, c, i] = sum_n sum_m U[b, c, n, m] k(x[b, i] - m) k(y[b, i] - n)``
    with ``k(d) = max(0, 1 - |d|)``; ``n, m`` run over the image, so points off it see zeros. Only
    ``m = floor(x), floor(x) + 1`` have ``k > 0``, so the sum is computed over those four pixels.

    Backward, from the seed::

        dV_i/dU_nm = k(x_i - m) k(y_i - n)
        dV_i/dx_i  = sum_n sum_m U_nm k(y_i - n) * (0 if |m - x_i| >= 1; +1 if m >= x_i; -1 if m < x_i)

    and ``dV/dy`` likewise. At an integer ``x_i`` (where the identity transform samples!) the
    kernel has kinks and the seed's cases are ambiguous: read literally they give ``U_m``, which is
    no derivative of ``V``. We take the right derivative there, i.e. the pixels ``floor(x)`` (sign -1)
    and ``floor(x) + 1`` (sign +1), as ``F.grid_sample`` does; elsewhere it is the seed's formula.

    A point that is not finite reads NaN, and touches no other point or sample: it passes no gradient
    to the image, and gets none. 16-bit inputs are computed in float32 and cast back.

    Shape:
        - U: ``(B, C, H, W)``; x, y: ``(B, P)`` in pixels, floating point, the dtype of ``U``; output: ``(B, C, P)``
    """

    @staticmethod
    def forward(U: Tensor, x: Tensor, y: Tensor) -> Tensor:
        sizes = check_image("U", U)
        check_shape("x", check_tensor("x", x), ("B", "P"), sizes)
        check_shape("y", check_tensor("y", y), ("B", "P"), sizes)
        check_floating(U=U, x=x, y=y)
        work = work_dtype(U.dtype)
        V = U.new_zeros(U.shape[:2] + x.shape[1:], dtype=work)
        for index, inside, kx, ky, _, _ in _corners(U, x, y):
            # where, not a product with inside: a pixel off the image adds nothing, even an inf one
            V = V + torch.where(inside[:, None], _gather(U, index).to(work) * (kx * ky)[:, None], 0)
        return torch.where(_finite(x, y)[:, None], V, torch.nan).to(U.dtype)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        U, x, y = inputs
        ctx.save_for_backward(U, x, y)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_V: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        U, x, y = ctx.saved_tensors
        B, C, H, W = U.shape
        work = work_dtype(U.dtype)
        grad_V = grad_V.to(work)
        grad_U = torch.zeros(B, C, H * W, dtype=work, device=U.device) if ctx.needs_input_grad[0] else None
        grad_x = torch.zeros_like(x, dtype=work)
        grad_y = torch.zeros_like(y, dtype=work)
        # A point that is not finite has NaN kernel weights; torch.where (never a product with 0, which
        # is NaN) keeps them out of the pixels it is clamped onto and out of its own gradient.
        for index, inside, kx, ky, sign_x, sign_y in _corners(U, x, y):
            if grad_U is not None:
                contribution = torch.where(inside[:, None], grad_V * (kx * ky)[:, None], 0)
                grad_U.scatter_add_(2, index[:, None].expand(B, C, -1), contribution)
            if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
                # sum over channels of dL/dV_c U_nm, for the pixels on the image (the sums run over them)
                g = (grad_V * _gather(U, index).to(work)).sum(1)
                # d k(x - m) / dx = sign_x (+1 for m = floor(x) + 1, -1 for m = floor(x)); likewise for y
                grad_x = grad_x + torch.where(inside, g * sign_x * ky, 0)
                grad_y = grad_y + torch.where(inside, g * sign_y * kx, 0)
        return (
            grad_U.view(B, C, H, W).to(U.dtype) if grad_U is not None else None,
            grad_x.to(x.dtype) if ctx.needs_input_grad[1] else None,
            grad_y.to(y.dtype) if ctx.needs_input_grad[2] else None,
        )


def bilinear_sample(
    images: Tensor,
    grid: Tensor,
    *,
    align_corners: bool = False,
    padding: Padding = "zeros",
    fill: float | Tensor = 0.0,
    fast: bool = True,
) -> Tensor:
    """Read ``images`` at the points of ``grid`` with the bilinear kernel (seed 004's sampler).

    Args:
        images: ``U``, the input maps.
        grid: the normalised source point ``(x, y)`` of each output pixel (from :func:`affine_grid`).
        align_corners: how ``[-1, 1]`` maps to pixels (see :func:`base_grid`); use the same value as
            for the grid.
        padding: what points off the image read. ``"zeros"``: the constant ``fill``; ``"border"``:
            the nearest edge pixel (coordinates clamped; as in ``F.grid_sample``, no gradient flows to
            a coordinate off the image or exactly on its border).
        fill: the constant for ``"zeros"``, a number or one per channel. **Zero padding of a
            normalised image is a trap**: 0 is the mean colour, not the background. Pass the
            background's normalised value (``(0 - mean) / std``) or use ``"border"``.
        fast: ``True`` calls ``F.grid_sample`` (mode ``"bilinear"``); ``False`` runs
            :class:`BilinearSampler`, the seed's formula with hand-written gradients. They agree to
            rounding (tests/glimpse/test_sampler.py). 16-bit inputs are sampled in float32 on the CPU by
            both, and by the reference on any device, then cast back.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): a shape that does not fit, tensors that are
            not floating point or not of one dtype, an unknown ``padding``, a ``fill`` that is neither a
            number nor ``(C,)``.

    Shape:
        - images: ``(B, C, H, W)``, floating point
        - grid: ``(B, h, w, 2)``, the dtype of ``images``; a point that is not finite reads NaN (in its
          own output pixel only)
        - fill: a number or ``(C,)``
        - output: ``(B, C, h, w)``

    Convention:
        ``grid[..., 0]`` is ``x`` (column), ``grid[..., 1]`` is ``y`` (row), normalised to
        ``[-1, 1]``; ``align_corners=False`` (the default, as in torch) maps ``-1`` to the left edge
        of pixel 0 (pixel ``-0.5``) and ``True`` maps it to the centre of pixel 0.

    Example:
        >>> img = torch.arange(4.0).view(1, 1, 2, 2)
        >>> grid = torch.tensor([[[[0.0, 0.0]]]])  # the centre of the image
        >>> bilinear_sample(img, grid), bilinear_sample(img, grid, fast=False)
        (tensor([[[[1.5000]]]]), tensor([[[[1.5000]]]]))
    """
    sizes = check_image("images", images)
    check_shape("grid", check_tensor("grid", grid), ("B", "h", "w", 2), sizes)
    check_floating(images=images, grid=grid)
    check_choice("padding", padding, PADDINGS)
    B, C, H, W = images.shape
    fill_map = _fill(fill, C, images)  # checked whatever the padding, though only "zeros" reads it
    fill_map = fill_map if padding == "zeros" else None
    if fill_map is not None:
        images = images - fill_map  # sample (U - fill) with zero padding, then add fill back
    dtype = images.dtype
    if fast and images.device.type == "cpu" and dtype in LOW_PRECISION:
        # torch's CPU kernel reads the wrong memory for 16-bit images of a few hundred pixels (NaN or another
        # pixel's value in some outputs); in float32 it reads the right pixels, and the result is cast back.
        images, grid = images.float(), grid.float()
    if fast and padding == "border":
        # grid_sample's border mode clamps a NaN point to no pixel at all, and its backward pass then
        # writes out of bounds (a segmentation fault). Such a point reads pixel (0, 0) here, with no
        # gradient (nan_to_num passes none to it), and its output is set to NaN afterwards.
        lost = (torch.isnan(grid[..., 0]) | torch.isnan(grid[..., 1])).unsqueeze(1)  # (B, 1, h, w)
        out = F.grid_sample(
            images, grid.nan_to_num(0.0), mode="bilinear", padding_mode=padding, align_corners=align_corners
        )
        out = torch.where(lost, torch.nan, out)
    elif fast:
        out = F.grid_sample(images, grid, mode="bilinear", padding_mode=padding, align_corners=align_corners)
    else:
        # In float32 for 16-bit inputs: bfloat16 pixel coordinates are off by a pixel beyond 256.
        work = work_dtype(images.dtype)
        x = _to_pixels(grid[..., 0].to(work), W, align_corners)
        y = _to_pixels(grid[..., 1].to(work), H, align_corners)
        if padding == "border":
            x, y = _clamp_open(x, W - 1), _clamp_open(y, H - 1)
        h, w = grid.shape[1:3]
        out = BilinearSampler.apply(images.to(work), x.reshape(B, h * w), y.reshape(B, h * w))
        out = out.view(B, C, h, w)
    out = out.to(dtype)
    return out if fill_map is None else out + fill_map


def _to_pixels(coord: Tensor, size: int, align_corners: bool) -> Tensor:
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _clamp_open(coord: Tensor, limit: int) -> Tensor:
    # Clamp to [0, limit] with no gradient on the border itself, as F.grid_sample's border mode does
    # (torch.clamp would pass the gradient at exactly 0 and limit).
    inside = (coord > 0) & (coord < limit)
    return torch.where(inside, coord, coord.detach().clamp(0, limit))


def _normalised_centres(n: int, align_corners: bool, device, dtype) -> Tensor:
    if align_corners and n == 1:
        return torch.zeros(1, device=device, dtype=dtype)  # as torch: a single pixel sits at the centre
    if align_corners:
        return torch.linspace(-1, 1, n, device=device, dtype=dtype)
    return (2 * torch.arange(n, device=device, dtype=dtype) + 1) / n - 1


def _fill(fill: float | Tensor, C: int, images: Tensor) -> Tensor | None:
    if isinstance(fill, Tensor):
        check_shape("fill", fill, (C,))
        if fill.is_complex() or fill.dtype == torch.bool:
            raise FovealError(f"fill: expected real numbers, got {fill.dtype}")
        return fill.to(images)[None, :, None, None]
    check_fill_number("fill", fill)
    return None if fill == 0 else torch.full((1, C, 1, 1), float(fill), dtype=images.dtype, device=images.device)


def _gather(U: Tensor, index: Tensor) -> Tensor:
    B, C, H, W = U.shape
    return U.reshape(B, C, H * W).gather(2, index[:, None].expand(B, C, -1))


def _finite(x: Tensor, y: Tensor) -> Tensor:
    return torch.isfinite(x) & torch.isfinite(y)


def _corners(U: Tensor, x: Tensor, y: Tensor) -> list[tuple[Tensor, Tensor, Tensor, Tensor, int, int]]:
    """The four pixels ``(m, n)`` with a non-zero kernel weight around each point.

    Returns ``(flat index, inside, k(x - m), k(y - n), sign_x, sign_y)`` per corner, where ``inside``
    is True for pixels on the image (the seed's sums run over them only; a point that is not finite
    has none) and ``sign`` is the derivative of ``k`` with respect to the point (-1 for ``floor``,
    +1 for ``floor + 1``). The weights are in :func:`~foveal._checks.work_dtype`.
    """
    H, W = U.shape[-2:]
    work = work_dtype(U.dtype)
    x, y = x.to(work), y.to(work)
    x0, y0 = x.detach().floor(), y.detach().floor()
    kx1, ky1 = x - x0, y - y0  # k(x - (x0 + 1)) = 1 - (x0 + 1 - x) = x - x0
    # Pixel indices are integers: a 16-bit float holds neither m + 1 nor n * W exactly beyond 256
    # (bfloat16) or 2048 (float16), which would read the wrong pixel or one past the image.
    m0, n0 = _pixel(x0, W), _pixel(y0, H)
    corners = []
    for m, kx, sign_x in ((m0, 1 - kx1, -1), (m0 + 1, kx1, 1)):
        for n, ky, sign_y in ((n0, 1 - ky1, -1), (n0 + 1, ky1, 1)):
            inside = (m >= 0) & (m <= W - 1) & (n >= 0) & (n <= H - 1)
            index = n.clamp(0, H - 1) * W + m.clamp(0, W - 1)
            corners.append((index, inside, kx, ky, sign_x, sign_y))
    return corners


def _pixel(floor: Tensor, size: int) -> Tensor:
    """``floor`` as int64, moved to -2 where it lies off the image by more than a pixel or is not finite.

    Converting NaN, inf or a number beyond int64 to an integer is undefined; any index off the image by
    two reads nothing, so all of them become -2, whose two corners (-2 and -1) are both off the image.
    """
    on_image = (floor >= -1) & (floor <= size)
    return torch.where(on_image, floor, -2).long()


__all__ = [
    "PADDINGS",
    "PROJECTIVE_EPS",
    "BilinearSampler",
    "affine_grid",
    "base_grid",
    "bilinear_sample",
    "projective_grid",
]
