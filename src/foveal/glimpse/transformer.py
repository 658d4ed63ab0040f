"""The spatial transformer (seed 004) and seed 003's no-shear STN glimpse.

A localisation net regresses the transform's parameters from the input, :func:`transform_matrix`
turns them into ``theta``, the grid generator maps the output grid through ``theta`` and the sampler
reads the input there.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch
from torch import Tensor, nn

from foveal._checks import (
    check_choice,
    check_floating,
    check_hw,
    check_module_dtype,
    check_number,
    check_shape,
    check_tensor,
)
from foveal._torch_private import exportable_output
from foveal.attention.maps import register_map_module
from foveal.errors import FovealError
from foveal.glimpse._images import check_fill_number, check_image
from foveal.glimpse.gaussian import gaussian_glimpse
from foveal.glimpse.sampler import PADDINGS, Padding, affine_grid, bilinear_sample, projective_grid

Transform = Literal["affine", "no_shear", "attention", "projective"]
Read = Literal["bilinear", "gaussian"]

IDENTITY: dict[str, tuple[float, ...]] = {
    "affine": (1.0, 0.0, 0.0, 0.0, 1.0, 0.0),  # theta row by row
    "no_shear": (1.0, 0.0, 1.0, 0.0),  # (scale_y, shift_y, scale_x, shift_x), seed 003's order
    "attention": (1.0, 0.0, 0.0),  # (s, t_x, t_y): isotropic zoom and shift (STN paper's attention)
    "projective": (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0),  # the 3x3 matrix row by row, last entry fixed at 1
}
"""Each transform's parameters, in order, at the identity."""


@exportable_output
class TransformerOutput(NamedTuple):
    """What :class:`SpatialTransformer` returns: the warped maps, the matrix and the sampling grid."""

    output: Tensor
    theta: Tensor
    grid: Tensor


def transform_matrix(params: Tensor, transform: Transform) -> Tensor:
    """Turn a transform's parameters into ``theta`` (``2 x 3``, or ``3 x 3`` for ``"projective"``).

    - ``"affine"``: 6 numbers, ``theta`` row by row.
    - ``"no_shear"``: seed 003's ``(scale_y, shift_y, scale_x, shift_x)`` ->
      ``[[scale_x, 0, shift_x], [0, scale_y, shift_y]]``.
    - ``"attention"``: ``(s, t_x, t_y)`` -> ``[[s, 0, t_x], [0, s, t_y]]``.
    - ``"projective"``: 8 numbers -> ``[[a, b, c], [d, e, f], [g, h, 1]]``.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): an unknown ``transform``, ``params`` not
            ``(B, P)`` or not floating point.

    Shape:
        - params: ``(B, P)`` with ``P`` = 6, 4, 3 or 8, floating point
        - output: ``(B, 2, 3)`` or ``(B, 3, 3)``

    Convention:
        ``theta`` maps output (target) to input (source) normalised coordinates, ``x`` first:
        scales below 1 zoom in, shifts move the window's centre (in units of half the image).

    Example:
        >>> transform_matrix(torch.tensor([[0.4, -0.1, 0.5, 0.2]]), "no_shear")
        tensor([[[ 0.5000,  0.0000,  0.2000],
                 [ 0.0000,  0.4000, -0.1000]]])
    """
    check_choice("transform", transform, tuple(IDENTITY))
    check_shape("params", check_tensor("params", params), (None, len(IDENTITY[transform])))
    check_floating(params=params)
    zero = torch.zeros_like(params[:, 0])
    if transform == "affine":
        return params.view(-1, 2, 3)
    if transform == "no_shear":
        sy, ty, sx, tx = params.unbind(-1)
        rows = [(sx, zero, tx), (zero, sy, ty)]
    elif transform == "attention":
        s, tx, ty = params.unbind(-1)
        rows = [(s, zero, tx), (zero, s, ty)]
    else:
        return torch.cat([params, torch.ones_like(params[:, :1])], dim=-1).view(-1, 3, 3)
    return torch.stack([torch.stack(row, dim=-1) for row in rows], dim=1)


def warp(
    images: Tensor,
    theta: Tensor,
    size: tuple[int, int],
    *,
    align_corners: bool = False,
    padding: Padding = "zeros",
    fill: float | Tensor = 0.0,
    fast: bool = True,
) -> TransformerOutput:
    """Sample ``images`` through ``theta`` (affine ``2 x 3`` or projective ``3 x 3``) on an ``h x w`` grid.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): ``theta`` neither ``(B, 2, 3)`` nor
            ``(B, 3, 3)``, batch sizes that differ, tensors that are not floating point or not of one
            dtype, a size below 1, or a sampling option out of range.

    Shape:
        - images: ``(B, C, H, W)``; theta: ``(B, 2, 3)`` or ``(B, 3, 3)``, the dtype of ``images``
        - output: ``(B, C, h, w)``; grid: ``(B, h, w, 2)``

    Convention:
        As :func:`~foveal.glimpse.sampler.affine_grid` and
        :func:`~foveal.glimpse.sampler.bilinear_sample`: normalised ``[-1, 1]``, ``x`` first,
        ``theta`` maps output to input.

    Example:
        >>> img = torch.rand(2, 3, 8, 8)
        >>> out = warp(img, torch.eye(2, 3).expand(2, 2, 3), (8, 8))
        >>> torch.allclose(out.output, img, atol=1e-6)
        True
    """
    check_hw("size", size)
    sizes = check_image("images", images)
    check_tensor("theta", theta)
    check_shape("theta", theta, ("B", 3 if theta.dim() == 3 and theta.shape[1] == 3 else 2, 3), sizes)
    check_floating(images=images, theta=theta)
    if theta.dim() == 3 and theta.shape[1:] == (3, 3):
        grid = projective_grid(theta, size, align_corners=align_corners)
    else:
        grid = affine_grid(theta, size, align_corners=align_corners)
    out = bilinear_sample(images, grid, align_corners=align_corners, padding=padding, fill=fill, fast=fast)
    return TransformerOutput(out, theta, grid)


def gaussian_params(
    theta: Tensor, in_size: tuple[int, int], out_size: tuple[int, int], std: float, *, align_corners: bool = False
) -> Tensor:
    """The Gaussian glimpse whose filter centres are the sampling points of an axis-aligned ``theta``.

    Turns ``theta = [[s_x, 0, t_x], [0, s_y, t_y]]`` (output -> input, normalised) into seed 003's six
    pixel parameters, so that :func:`~foveal.glimpse.gaussian_glimpse` puts its ``h x w`` Gaussians
    exactly where :func:`warp` would sample, each ``std`` strides wide. Output point ``i`` sits at
    normalised ``u_i = (2i + 1) / w - 1`` (``align_corners=False``; ``-1 + 2i / (w - 1)`` with
    ``True``), maps to ``s u_i + t`` and to pixel ``(v + 1) W / 2 - 0.5`` (``(v + 1) (W - 1) / 2``).
    The off-diagonal entries are ignored: use it with the ``"attention"`` or ``"no_shear"`` transforms.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): ``theta`` not ``(B, 2, 3)`` or not floating
            point, a size below 1, ``std`` not a finite number > 0.

    Shape:
        - theta: ``(B, 2, 3)``
        - output: ``(B, 6)`` = ``(mean_y, std_y, d_y, mean_x, std_x, d_x)`` in pixels

    Example:
        >>> gaussian_params(torch.eye(2, 3)[None], (60, 60), (30, 30), 0.5)  # identity: every other pixel
        tensor([[0.5000, 1.0000, 2.0000, 0.5000, 1.0000, 2.0000]])
    """
    check_shape("theta", check_tensor("theta", theta), (None, 2, 3))
    check_floating(theta=theta)
    in_size, out_size = check_hw("in_size", in_size), check_hw("out_size", out_size)
    check_number("std", std, why="the Gaussians' width in strides")

    def axis(scale: Tensor, shift: Tensor, n_in: int, n_out: int) -> tuple[Tensor, Tensor, Tensor]:
        if align_corners:
            first, step, half = -1.0, 2.0 / max(n_out - 1, 1), (n_in - 1) / 2
            mean = (scale * first + shift + 1) * half
        else:
            first, step, half = 1.0 / n_out - 1, 2.0 / n_out, n_in / 2
            mean = (scale * first + shift + 1) * half - 0.5
        stride = scale * step * half
        return mean, std * stride.abs(), stride

    my, sy, dy = axis(theta[:, 1, 1], theta[:, 1, 2], in_size[0], out_size[0])
    mx, sx, dx = axis(theta[:, 0, 0], theta[:, 0, 2], in_size[1], out_size[1])
    return torch.stack([my, sy, dy, mx, sx, dx], dim=-1)


def stn_glimpse(
    images: Tensor,
    params: Tensor,
    size: tuple[int, int],
    *,
    align_corners: bool = False,
    padding: Padding = "zeros",
    fill: float | Tensor = 0.0,
    fast: bool = True,
) -> Tensor:
    """Seed 003's spatial-transformer glimpse: scale and shift, no shear, bilinear sampling.

    Args:
        images: the images to look at.
        params: ``(scale_y, shift_y, scale_x, shift_x)`` per image, seed 003's order.
        size: ``(h, w)`` of the glimpse.
        align_corners, padding, fill, fast: as in :func:`~foveal.glimpse.sampler.bilinear_sample`.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): as :func:`warp`, for ``params`` ``(B, 4)``.

    Shape:
        - images: ``(B, C, H, W)``, floating point
        - params: ``(B, 4)``, the dtype of ``images``
        - output: ``(B, C, h, w)``

    Convention:
        Normalised coordinates: the glimpse covers ``[shift - scale, shift + scale]`` of the
        image's ``[-1, 1]`` along each axis (``theta`` maps the glimpse's grid into the image).
        Seed 003's ``[.4, -.1, .4, -.1]`` on a 10 x 10 image samples pixels 2.4, 3.2, 4.0, 4.8, 5.6
        (0-based centres) along each axis: the square at 3:6 fills the middle 3 x 3.

    Example:
        >>> img = torch.zeros(1, 1, 10, 10)
        >>> img[0, 0, 3:6, 3:6] = 1
        >>> g = stn_glimpse(img, torch.tensor([[0.4, -0.1, 0.4, -0.1]]), (5, 5))
        >>> g[0, 0]
        tensor([[0.1600, 0.4000, 0.4000, 0.4000, 0.1600],
                [0.4000, 1.0000, 1.0000, 1.0000, 0.4000],
                [0.4000, 1.0000, 1.0000, 1.0000, 0.4000],
                [0.4000, 1.0000, 1.0000, 1.0000, 0.4000],
                [0.1600, 0.4000, 0.4000, 0.4000, 0.1600]])
    """
    sizes = check_image("images", images)
    check_shape("params", check_tensor("params", params), ("B", 4), sizes)
    check_floating(images=images, params=params)
    theta = transform_matrix(params, "no_shear")
    return warp(images, theta, size, align_corners=align_corners, padding=padding, fill=fill, fast=fast).output


@register_map_module
class SpatialTransformer(nn.Module):
    """A spatial transformer (Jaderberg et al. 2015, seed 004): localisation net, grid generator, sampler.

    Args:
        localization: a module mapping the input maps to the transform's parameters, ``(B, P)``
            with ``P`` = 6 (``"affine"``), 4 (``"no_shear"``), 3 (``"attention"``) or 8
            (``"projective"``), in :func:`transform_matrix`'s order. Its **last** ``nn.Linear`` must
            produce them: it is set to the identity transform (zero weight, bias = the identity's
            parameters), so training starts from "look at the whole input" and the gradient is not
            swamped by a random warp. A localisation net with no ``nn.Linear``, or whose last one
            has the wrong width, raises ``ValueError``.
        out_size: ``(h, w)`` of the output.
        transform: which family of transforms (see :func:`transform_matrix`).
        align_corners, padding, fill, fast: as in :func:`~foveal.glimpse.sampler.bilinear_sample`
            (for normalised inputs prefer ``padding="border"`` or ``fill`` = the background's value).
        init_identity: set the last ``nn.Linear`` to the identity (True) or leave it as built.
        read: ``"bilinear"`` (the STN's sampler) or ``"gaussian"``: a Gaussian glimpse with one
            Gaussian per output pixel, centred where the sampler would read (:func:`gaussian_params`)
            and ``gaussian_std`` strides wide; only for the axis-aligned ``"attention"`` and
            ``"no_shear"`` transforms. The same localisation net then drives either read, which is
            how ``docs/glimpses.md`` compares them end to end. Outside the image the Gaussians are
            renormalised over the pixels they cover (not zero-padded); ``padding``, ``fill`` and
            ``fast`` apply to the bilinear read only.
        gaussian_std: the Gaussians' std in strides (pixels between neighbouring Gaussians).

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): an argument out of range (a ``localization``
            that is no module, an unknown ``transform``, ``read`` or ``padding``, an ``out_size`` below 1,
            ``gaussian_std <= 0``); in ``forward``, images that are not ``(B, C, H, W)`` of the
            localisation net's dtype, or a localisation output that is not ``(B, P)``.

    Shape:
        - images: ``(B, C, H, W)``
        - output: ``(B, C, h, w)``; theta: ``(B, 2, 3)`` (``(B, 3, 3)`` projective); grid: ``(B, h, w, 2)``

    Convention:
        ``theta`` maps output (target) to input (source) normalised coordinates in ``[-1, 1]``,
        ``x`` (column) first, ``align_corners=False`` unless set.

    Example:
        >>> loc = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 4))
        >>> st = SpatialTransformer(loc, (8, 8), transform="no_shear")
        >>> img = torch.rand(2, 1, 8, 8)
        >>> out, theta, grid = st(img)
        >>> torch.allclose(out, img, atol=1e-6), theta.shape
        (True, torch.Size([2, 2, 3]))
    """

    def __init__(
        self,
        localization: nn.Module,
        out_size: tuple[int, int],
        *,
        transform: Transform = "affine",
        align_corners: bool = False,
        padding: Padding = "zeros",
        fill: float | Tensor = 0.0,
        fast: bool = True,
        init_identity: bool = True,
        read: Read = "bilinear",
        gaussian_std: float = 0.5,
    ) -> None:
        super().__init__()
        if not isinstance(localization, nn.Module):
            raise FovealError(f"localization: expected an nn.Module, got {type(localization).__name__}")
        check_choice("transform", transform, tuple(IDENTITY))
        check_choice("read", read, ("bilinear", "gaussian"))
        if read == "gaussian" and transform not in ("attention", "no_shear"):
            raise FovealError(
                f"read='gaussian' needs an axis-aligned transform ('attention' or 'no_shear'), got {transform!r}"
            )
        check_number("gaussian_std", gaussian_std, why="the Gaussians' width in strides")
        check_choice("padding", padding, PADDINGS)
        if not isinstance(fill, Tensor):
            check_fill_number("fill", fill)
        self.read, self.gaussian_std = read, gaussian_std
        self.localization = localization
        self.out_size = check_hw("out_size", out_size)
        self.transform = transform
        self.align_corners = align_corners
        self.padding = padding
        self.fill = fill
        self.fast = fast
        if init_identity:
            init_identity_regressor(localization, transform)

    def forward(self, images: Tensor) -> TransformerOutput:
        sizes = check_image("images", images)
        check_module_dtype(self.localization, images=images)
        params = self.localization(images)
        n_params = len(IDENTITY[self.transform])
        check_shape("localization(images)", check_tensor("localization(images)", params), ("B", n_params), sizes)
        theta = transform_matrix(params, self.transform)
        if self.read == "gaussian":
            in_size = (images.shape[-2], images.shape[-1])
            glimpse_params = gaussian_params(
                theta, in_size, self.out_size, self.gaussian_std, align_corners=self.align_corners
            )
            grid = affine_grid(theta, self.out_size, align_corners=self.align_corners)  # the Gaussians' centres
            return TransformerOutput(gaussian_glimpse(images, glimpse_params, self.out_size), theta, grid)
        return warp(
            images, theta, self.out_size,
            align_corners=self.align_corners, padding=self.padding, fill=self.fill, fast=self.fast,
        )  # fmt: skip


def init_identity_regressor(localization: nn.Module, transform: Transform) -> nn.Linear:
    """Set the last ``nn.Linear`` of ``localization`` to output the identity transform; return it.

    Example:
        >>> last = init_identity_regressor(nn.Sequential(nn.Linear(5, 3)), "attention")
        >>> last.bias.tolist(), float(last.weight.detach().abs().sum())
        ([1.0, 0.0, 0.0], 0.0)
    """
    if not isinstance(localization, nn.Module):
        raise FovealError(f"localization: expected an nn.Module, got {type(localization).__name__}")
    check_choice("transform", transform, tuple(IDENTITY))
    linears = [m for m in localization.modules() if isinstance(m, nn.Linear)]
    identity = IDENTITY[transform]
    if not linears:
        raise FovealError("localization: needs a final nn.Linear regressing the transform's parameters, found none")
    last = linears[-1]
    if last.out_features != len(identity):
        raise FovealError(
            f"localization: its last nn.Linear must output {len(identity)} parameters for transform={transform!r}, "
            f"got out_features={last.out_features}"
        )
    if last.bias is None:
        raise FovealError("localization: its last nn.Linear needs a bias (it holds the identity transform)")
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.tensor(identity, dtype=last.bias.dtype))
    return last


__all__ = [
    "IDENTITY",
    "SpatialTransformer",
    "TransformerOutput",
    "gaussian_params",
    "init_identity_regressor",
    "stn_glimpse",
    "transform_matrix",
    "warp",
]
