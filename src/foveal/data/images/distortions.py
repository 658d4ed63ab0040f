"""The distortions of the STN and RAM papers, and the chunked driver that applies them.

Distortions (:data:`DISTORTIONS`), each ``fn(images, generator, **options) -> images`` on float
images ``(N, C, 28, 28)`` in [0, 1] with a zero background, vectorised over the batch (one
``grid_sample`` or one scatter per chunk) and fully determined by the ``torch.Generator``:

=============  =========  =====================================================================
name           output     what (STN paper, Jaderberg et al. 2015, sec. 4.1; RAM paper, Mnih et
                          al. 2014, sec. 4.1)
=============  =========  =====================================================================
``none``       28 x 28    the input
``R``          28 x 28    rotated by an angle uniform in [-90, 90] degrees
``RTS``        42 x 42    rotated in [-45, 45] degrees, scaled in [0.7, 1.2], placed at a random
                          position of a 42 x 42 canvas
``P``          28 x 28    projective: scaled in [0.75, 1], then the four corners moved by
                          Gaussian noise (std 0.1 of the half-width)
``E``          28 x 28    elastic (Simard et al. 2003): a uniform random displacement field
                          smoothed by a Gaussian (sigma 4 px), scaled by alpha = 34 px
``translated`` 60 x 60    the 28 x 28 image pasted whole at a random integer position
``cluttered``  60 x 60    ``translated`` plus 4 to 8 random 8 x 8 patches cut from other images
                          of the set (the element-wise maximum, so clutter never erases)
=============  =========  =====================================================================

Convention:
    Images are ``(N, C, H, W)``, row ``y`` then column ``x``. Geometric distortions are written as
    ``grid_sample`` grids: a map from normalised *output* coordinates to normalised *input*
    coordinates in [-1, 1], ``align_corners=False`` (-1 and 1 are the outer edges of the border
    pixels, so the identity grid samples every pixel centre exactly). Outside the input is zero.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor

from foveal._checks import check_shape
from foveal.errors import FovealError

__all__ = [
    "CHUNK",
    "DISTORTIONS",
    "PLACED",
    "affine_distort",
    "cluttered",
    "distort",
    "elastic",
    "object_boxes",
    "place",
    "projective",
    "rotated",
    "rts",
    "to_float",
    "translated",
]

CHUNK = 4096
"""Images per vectorised chunk. Random draws are made chunk by chunk, so results depend on it."""


def to_float(images: Tensor) -> Tensor:
    """uint8 ``(N, H, W)`` or ``(N, C, H, W)`` -> float ``(N, C, H, W)`` in [0, 1]."""
    images = images.unsqueeze(1) if images.ndim == 3 else images
    return images.float() / 255.0


def _uniform(n: int, low: float, high: float, generator: torch.Generator) -> Tensor:
    return low + (high - low) * torch.rand(n, generator=generator)


def affine_distort(images: Tensor, angle: Tensor, scale: Tensor, shift: Tensor, out_size: int) -> Tensor:
    """Rotate by ``angle``, scale by ``scale`` and move by ``shift``, drawn on an ``out_size`` canvas.

    The input's centre goes to the canvas centre plus ``shift``; the rest of the canvas is zero.

    Args:
        images: float input.
        angle: anticlockwise rotation in degrees (as seen on screen, y pointing down).
        scale: size factor (> 1 enlarges).
        shift: ``(dx, dy)`` in output pixels.
        out_size: side of the square output canvas.

    Shape:
        - images: ``(N, C, H, H)``
        - angle, scale: ``(N,)``; shift: ``(N, 2)``
        - output: ``(N, C, out_size, out_size)``

    Convention:
        Pixel shifts ``(dx, dy)``, x to the right, y down. Bilinear sampling, ``align_corners=False``,
        zeros outside. Zero angle, unit scale, zero shift and ``out_size == H`` return the input.

    Example:
        >>> x = torch.rand(2, 1, 28, 28)
        >>> z = torch.zeros(2)
        >>> torch.allclose(affine_distort(x, z, z + 1, torch.zeros(2, 2), 28), x, atol=1e-5)
        True
    """
    sizes = check_shape("images", images, ("N", None, "H", "H"))
    check_shape("angle", angle, ("N",), sizes)
    check_shape("scale", scale, ("N",), sizes)
    check_shape("shift", shift, ("N", 2), sizes)
    n, c, h, _ = images.shape
    rad = torch.deg2rad(angle)
    cos, sin = torch.cos(rad), torch.sin(rad)
    # Output -> input: undo the shift, then the rotation and the scale. With y down, an anticlockwise
    # rotation on screen by a is the matrix [[cos, sin], [-sin, cos]]; its inverse is the transpose.
    inverse_rotation = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)
    linear = inverse_rotation * (out_size / h / scale)[:, None, None]
    shift_norm = 2.0 * shift / out_size
    offset = -(linear @ shift_norm.unsqueeze(-1))
    theta = torch.cat([linear, offset], dim=-1).to(images.dtype)
    grid = F.affine_grid(theta, [n, c, out_size, out_size], align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def rotated(images: Tensor, generator: torch.Generator, *, max_angle: float = 90.0) -> Tensor:
    """R: rotate each image by an angle uniform in ``[-max_angle, max_angle]`` degrees.

    Shape:
        ``(N, C, H, H)`` -> ``(N, C, H, H)``
    """
    n, _, h, _ = images.shape
    angle = _uniform(n, -max_angle, max_angle, generator)
    return affine_distort(images, angle, torch.ones(n), torch.zeros(n, 2), h)


def rts(
    images: Tensor,
    generator: torch.Generator,
    *,
    max_angle: float = 45.0,
    scale_range: tuple[float, float] = (0.7, 1.2),
    out_size: int = 42,
) -> Tensor:
    """RTS: rotate, scale, and place at a random position of an ``out_size`` canvas.

    The shift keeps the scaled (unrotated) square of the input inside the canvas, so an object
    within the inscribed disc of that square is never cut.

    Shape:
        ``(N, C, H, H)`` -> ``(N, C, out_size, out_size)``
    """
    n, _, h, _ = images.shape
    angle = _uniform(n, -max_angle, max_angle, generator)
    scale = _uniform(n, *scale_range, generator)
    room = ((out_size - h * scale) / 2).clamp(min=0)
    shift = (2 * torch.rand(n, 2, generator=generator) - 1) * room[:, None]
    return affine_distort(images, angle, scale, shift, out_size)


def projective(
    images: Tensor,
    generator: torch.Generator,
    *,
    scale_range: tuple[float, float] = (0.75, 1.0),
    corner_std: float = 0.1,
) -> Tensor:
    """P: a random homography, from a uniform scale and Gaussian noise on the four corners.

    The output's corners ``(+-1, +-1)`` (normalised) sample the input at ``c / s + noise``: the
    image shrinks by ``s`` and its corners wander independently. The homography through the
    four point pairs is solved for the whole batch at once (an 8 x 8 linear system per image).

    Shape:
        ``(N, C, H, W)`` -> ``(N, C, H, W)``
    """
    n, c, h, w = images.shape
    corners = torch.tensor([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]])
    scale = _uniform(n, *scale_range, generator)
    source = corners / scale[:, None, None] + corner_std * torch.randn(n, 4, 2, generator=generator)
    # Solve H (h33 = 1) with H [x, y, 1]^T ~ [u, v, 1]^T for the pairs (x, y) -> (u, v).
    x, y = corners[:, 0].expand(n, 4), corners[:, 1].expand(n, 4)
    u, v = source[..., 0], source[..., 1]
    one, zero = torch.ones_like(u), torch.zeros_like(u)
    rows_u = torch.stack([x, y, one, zero, zero, zero, -u * x, -u * y], -1)
    rows_v = torch.stack([zero, zero, zero, x, y, one, -v * x, -v * y], -1)
    system = torch.cat([rows_u, rows_v], dim=1)  # (N, 8, 8)
    rhs = torch.cat([u, v], dim=1).unsqueeze(-1)
    homography = torch.cat([torch.linalg.solve(system, rhs).squeeze(-1), torch.ones(n, 1)], -1).view(n, 3, 3)
    base = F.affine_grid(torch.eye(2, 3).expand(n, 2, 3), [n, c, h, w], align_corners=False)
    points = torch.cat([base, torch.ones(n, h, w, 1)], -1) @ homography.transpose(1, 2)[:, None]
    # The corners stay near their places, so w stays near 1; the clamp only guards the division.
    denominator = points[..., 2:].clamp(min=1e-3)
    grid = (points[..., :2] / denominator).to(images.dtype)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def _blur_matrix(size: int, sigma: float) -> Tensor:
    """``(size, size)``: row i is the normalised Gaussian around pixel i, truncated at 4 sigma."""
    radius = int(4 * sigma + 0.5)
    t = torch.arange(-radius, radius + 1, dtype=torch.float32)
    kernel = torch.exp(-0.5 * (t / sigma) ** 2)
    kernel = kernel / kernel.sum()
    offset = torch.arange(size)[None, :] - torch.arange(size)[:, None]  # j - i
    inside = offset.abs() <= radius
    return torch.where(inside, kernel[(offset + radius).clamp(0, 2 * radius)], torch.zeros(()))


def elastic(images: Tensor, generator: torch.Generator, *, alpha: float = 34.0, sigma: float = 4.0) -> Tensor:
    """E: elastic distortion (Simard et al. 2003).

    A displacement field uniform in [-1, 1] per pixel and axis is smoothed by a Gaussian of
    ``sigma`` pixels (zero outside the image), scaled by ``alpha`` pixels, and each output pixel
    samples the input at its own position plus that displacement.

    Shape:
        ``(N, C, H, W)`` -> ``(N, C, H, W)``
    """
    n, c, h, w = images.shape
    field = 2 * torch.rand(n, 2, h, w, generator=generator) - 1
    if sigma > 0:
        # A zero-padded Gaussian blur is a product with a banded matrix on each side: K_h F K_w^T.
        field = _blur_matrix(h, sigma) @ field @ _blur_matrix(w, sigma).T
    displacement = alpha * field.permute(0, 2, 3, 1)  # (N, H, W, (dx, dy)) in pixels
    base = F.affine_grid(torch.eye(2, 3).expand(n, 2, 3), [n, c, h, w], align_corners=False)
    grid = base + displacement * torch.tensor([2.0 / w, 2.0 / h])
    return F.grid_sample(images, grid.to(images.dtype), mode="bilinear", padding_mode="zeros", align_corners=False)


def place(images: Tensor, top: Tensor, left: Tensor, canvas: int) -> Tensor:
    """Paste each image whole at ``(top, left)`` of a zero ``canvas x canvas`` image (no resampling).

    Shape:
        - images: ``(N, C, h, w)``; top, left: ``(N,)`` int64 in ``[0, canvas - h]``, ``[0, canvas - w]``
        - output: ``(N, C, canvas, canvas)``

    Example:
        >>> out = place(torch.ones(1, 1, 2, 2), torch.tensor([1]), torch.tensor([3]), 5)
        >>> out[0, 0].nonzero().tolist()
        [[1, 3], [1, 4], [2, 3], [2, 4]]
    """
    n, c, h, w = images.shape
    flat_index = (top[:, None, None] + torch.arange(h)[:, None]) * canvas + left[:, None, None] + torch.arange(w)
    out = images.new_zeros(n, c, canvas * canvas)
    out.scatter_(2, flat_index.reshape(n, 1, h * w).expand(n, c, h * w), images.reshape(n, c, h * w))
    return out.view(n, c, canvas, canvas)


def object_boxes(images: Tensor, top: Tensor, left: Tensor) -> Tensor:
    """The tight box of each image's non-zero pixels once pasted at ``(top, left)``.

    Shape:
        - images: ``(N, C, h, w)``; top, left: ``(N,)``
        - output: ``(N, 4)`` float ``(x_min, y_min, x_max, y_max)`` in continuous pixel coordinates
          (pixel ``j`` spans ``[j - 0.5, j + 0.5]``, as :func:`foveal.models.stn_classifier.transform_box`);
          an all-zero image gets its whole ``h x w`` square.

    Example:
        >>> img = torch.zeros(1, 1, 4, 4)
        >>> img[0, 0, 1:3, 2] = 1
        >>> object_boxes(img, torch.tensor([10]), torch.tensor([20])).tolist()
        [[21.5, 10.5, 22.5, 12.5]]
    """
    _, _, h, w = images.shape
    on = images.detach().amax(1) > 0  # (N, h, w)
    rows, cols = on.any(2), on.any(1)  # (N, h), (N, w)

    def extent(mask: Tensor, size: int) -> tuple[Tensor, Tensor]:
        index = torch.arange(size).expand_as(mask)
        low = torch.where(mask, index, size).amin(1)
        high = torch.where(mask, index, -1).amax(1)
        empty = high < 0
        return torch.where(empty, 0, low), torch.where(empty, size - 1, high)

    y0, y1 = extent(rows, h)
    x0, x1 = extent(cols, w)
    box = torch.stack([left + x0, top + y0, left + x1, top + y1], dim=1).float()
    return box + torch.tensor([-0.5, -0.5, 0.5, 0.5])


def translated(
    images: Tensor, generator: torch.Generator, *, canvas: int = 60, return_boxes: bool = False
) -> Tensor | tuple[Tensor, Tensor]:
    """Translated: each image pasted whole at a uniformly random integer position of the canvas.

    With ``return_boxes`` also returns where the object landed (:func:`object_boxes`), for
    measuring whether a glimpse finds it.

    Shape:
        ``(N, C, H, W)`` -> ``(N, C, canvas, canvas)`` (and boxes ``(N, 4)``)
    """
    n, _, h, w = images.shape
    top = torch.randint(0, canvas - h + 1, (n,), generator=generator)
    left = torch.randint(0, canvas - w + 1, (n,), generator=generator)
    out = place(images, top, left, canvas)
    return (out, object_boxes(images, top, left)) if return_boxes else out


def cluttered(
    images: Tensor,
    generator: torch.Generator,
    *,
    canvas: int = 60,
    pieces: tuple[int, int] = (4, 8),
    piece_size: int = 8,
    source: Tensor | None = None,
    return_boxes: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Cluttered: ``translated`` plus random ``piece_size`` patches cut from images of ``source``.

    Each canvas gets a number of patches uniform in ``[pieces[0], pieces[1]]``, each cut at a random
    position of a random source image and pasted at a random position; overlaps keep the maximum.
    With ``return_boxes`` also returns the object's box (:func:`object_boxes`; clutter excluded).

    Shape:
        - images: ``(N, C, H, W)``; source: ``(M, C, H, W)`` (default: ``images``)
        - output: ``(N, C, canvas, canvas)`` (and boxes ``(N, 4)``)
    """
    source = images if source is None else source
    n, c, h, w = images.shape
    out, boxes = translated(images, generator, canvas=canvas, return_boxes=True)
    k = pieces[1]
    p = piece_size
    which = torch.randint(0, source.shape[0], (n, k), generator=generator)
    cut_y = torch.randint(0, h - p + 1, (n, k), generator=generator)
    cut_x = torch.randint(0, w - p + 1, (n, k), generator=generator)
    put_y = torch.randint(0, canvas - p + 1, (n, k), generator=generator)
    put_x = torch.randint(0, canvas - p + 1, (n, k), generator=generator)
    count = torch.randint(pieces[0], pieces[1] + 1, (n, 1), generator=generator)
    used = torch.arange(k) < count  # (N, k): the first `count` patches of each canvas
    offs = torch.arange(p)
    # Gather all patches at once: (N, k, C, p, p).
    src_rows = (cut_y[..., None] + offs)[:, :, None, :, None]
    src_cols = (cut_x[..., None] + offs)[:, :, None, None, :]
    patches = source[which[:, :, None, None, None], torch.arange(c)[None, None, :, None, None], src_rows, src_cols]
    patches = patches * used[:, :, None, None, None]
    # Scatter them with a maximum into the flattened canvases.
    dst = (put_y[..., None] + offs)[:, :, :, None] * canvas + (put_x[..., None] + offs)[:, :, None, :]  # (N,k,p,p)
    index = dst.reshape(n, 1, -1).expand(n, c, -1)
    values = patches.permute(0, 2, 1, 3, 4).reshape(n, c, -1)
    flat = out.reshape(n, c, -1).scatter_reduce(2, index, values, reduce="amax", include_self=True)
    out = flat.view(n, c, canvas, canvas)
    return (out, boxes) if return_boxes else out


def _identity(images: Tensor, generator: torch.Generator) -> Tensor:
    return images


DISTORTIONS: dict[str, Callable[..., Tensor | tuple[Tensor, Tensor]]] = {
    "none": _identity,
    "R": rotated,
    "RTS": rts,
    "P": projective,
    "E": elastic,
    "translated": translated,
    "cluttered": cluttered,
}
"""Distortion name -> ``fn(images, generator, **options)`` on float ``(N, C, 28, 28)`` images."""


PLACED = ("translated", "cluttered")
"""The distortions that paste the object whole and can say where (``return_boxes=True``)."""


def distort(
    images: Tensor, name: str, generator: torch.Generator, *, progress: bool | None = None, **options: Any
) -> Tensor | tuple[Tensor, Tensor]:
    """Apply the distortion ``name`` chunk by chunk (``CHUNK`` images at a time, with a progress bar).

    ``cluttered`` cuts its patches from the whole of ``images`` unless ``source`` is given. With
    ``return_boxes=True`` (:data:`PLACED` distortions only) returns ``(images, boxes)``.

    Shape:
        ``(N, C, 28, 28)`` float -> ``(N, C, H', W')`` float (see the module's table); boxes ``(N, 4)``
    """
    if name not in DISTORTIONS:
        raise FovealError(f"unknown distortion {name!r}; choose from: {', '.join(DISTORTIONS)}")
    fn = DISTORTIONS[name]
    if name == "cluttered":
        options.setdefault("source", images)
    from tqdm.auto import tqdm  # a recipes extra, which building a data set needs and importing this does not

    chunks = range(0, images.shape[0], CHUNK)
    show = progress if progress is not None else images.shape[0] > 4 * CHUNK
    parts = [
        fn(images[i : i + CHUNK], generator, **options)
        for i in tqdm(chunks, desc=f"distort {name}", unit="chunk", disable=not show, leave=False)
    ]
    if options.get("return_boxes"):  # each part is (images, boxes)
        pairs = cast(list[tuple[Tensor, Tensor]], parts)
        return torch.cat([p[0] for p in pairs]), torch.cat([p[1] for p in pairs])
    return torch.cat(cast(list[Tensor], parts))
