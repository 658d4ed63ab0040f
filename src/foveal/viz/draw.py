"""DRAW's pictures: the canvas at every step with the attention box drawn on it (PNG strip, GIF).

Everything is drawn with PIL on the model's outputs (:class:`foveal.models.draw.Generation`,
:class:`foveal.models.draw.DRAWOutput`): ``sigmoid(c_t)`` as grey levels (white = 1, the Bernoulli
mean), the write box in red and the read box in green.

Convention:
    Boxes are ``(x0, y0, x1, y1)`` in 0-based pixel-centre coordinates (pixel ``p`` covers
    ``[p - 0.5, p + 0.5]``), as :meth:`foveal.models.draw.DRAW.box` returns them. On a picture
    scaled by ``s``, coordinate ``u`` lands at ``(u + 0.5) s``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from PIL import Image, ImageDraw
from torch import Tensor

from foveal._checks import check_shape

WRITE_COLOUR = (230, 40, 40)
READ_COLOUR = (40, 200, 60)


def _tile(images: Tensor, scale: int) -> Image.Image:
    """One image ``(C, H, W)`` in [0, 1] -> an RGB PIL image scaled ``scale`` times (nearest)."""
    C, H, W = images.shape
    array = (images.clamp(0, 1) * 255).round().to(torch.uint8)
    array = array.expand(3, H, W) if C == 1 else array[:3]
    picture = Image.fromarray(array.permute(1, 2, 0).contiguous().numpy(), "RGB")
    return picture.resize((W * scale, H * scale), Image.Resampling.NEAREST)


def _box(draw: ImageDraw.ImageDraw, box: Tensor, scale: int, colour: tuple[int, ...]) -> None:
    if not torch.isfinite(box).all():  # a NaN box marks a cell without one
        return
    # clip to the tile, so a box larger than the image outlines the part of it that is visible
    width, height = draw.im.size
    x0, y0, x1, y1 = ((float(v) + 0.5) * scale for v in box)
    x0, x1 = max(0.0, min(x0, width - 1.0)), max(0.0, min(x1, width - 1.0))
    y0, y1 = max(0.0, min(y0, height - 1.0)), max(0.0, min(y1, height - 1.0))
    draw.rectangle([x0, y0, x1, y1], outline=colour, width=max(1, scale // 3))


def grid(
    logits: Tensor,
    boxes: Sequence[tuple[Tensor, tuple[int, int, int]]] = (),
    *,
    scale: int = 3,
    pad: int = 2,
    probabilities: bool = False,
) -> Image.Image:
    """A sheet of ``sigmoid(logits)`` cells in rows and columns, each ``(boxes, colour)`` drawn on its cell.

    Args:
        logits: canvases ``c_t`` (Bernoulli logits), laid out as ``(rows, columns)``.
        boxes: pairs ``(boxes, colour)`` with one box per cell (see the module's Convention); a
            NaN box draws nothing.
        scale: output pixels per image pixel.
        pad: gap between cells, in output pixels.
        probabilities: the values are already in [0, 1] (no sigmoid).

    Shape:
        - logits: ``(R, K, C, H, W)``
        - boxes: ``(R, K, 4)`` each

    Example:
        >>> grid(torch.zeros(2, 3, 1, 8, 8), [(torch.zeros(2, 3, 4), WRITE_COLOUR)], scale=2).size
        (56, 38)
    """
    sizes = check_shape("logits", logits, ("R", "K", None, "H", "W"))
    for b, _ in boxes:
        check_shape("boxes", b, ("R", "K", 4), sizes)
    R, K, _, H, W = logits.shape
    cell_w, cell_h = W * scale + pad, H * scale + pad
    sheet = Image.new("RGB", (K * cell_w + pad, R * cell_h + pad), (90, 90, 90))
    pictures = logits.detach().float().cpu()
    pictures = pictures if probabilities else torch.sigmoid(pictures)
    for r in range(R):
        for k in range(K):
            tile = _tile(pictures[r, k], scale)
            draw = ImageDraw.Draw(tile)  # boxes drawn on the tile are clipped to it
            for b, colour in boxes:
                _box(draw, b[r, k], scale, colour)
            sheet.paste(tile, (pad + k * cell_w, pad + r * cell_h))
    return sheet


def gif_frames(
    canvases: Tensor,
    boxes: Sequence[tuple[Tensor, tuple[int, int, int]]] = (),
    *,
    scale: int = 3,
    columns: int = 8,
) -> list[Image.Image]:
    """One frame per step: the ``n`` canvases of step ``t`` in rows of ``columns``, boxes drawn.

    ``n`` must be a multiple of ``columns`` (or smaller than it).

    Shape:
        - canvases: ``(T, n, C, H, W)``; boxes: ``(T, n, 4)`` each
    """
    T, n = canvases.shape[:2]
    columns = min(columns, n)
    if n % columns:
        raise ValueError(f"gif_frames: {n} images do not fill rows of {columns}")
    shape = (n // columns, columns)
    return [
        grid(
            canvases[t].reshape(*shape, *canvases.shape[2:]),
            [(b[t].reshape(*shape, 4), c) for b, c in boxes],
            scale=scale,
        )
        for t in range(T)
    ]


def save_gif(frames: list[Image.Image], path: Path, *, ms_per_frame: int = 120, hold_last_ms: int = 1500) -> Path:
    """Write ``frames`` as a looping GIF; the last frame is held a little longer."""
    durations = [ms_per_frame] * (len(frames) - 1) + [hold_last_ms]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=durations, loop=0, optimize=False)
    return path


def pick_steps(T: int, most: int = 16) -> list[int]:
    """At most ``most`` step indices spread evenly over ``0 .. T-1``, always with the last.

    Example:
        >>> pick_steps(64, 5)
        [0, 16, 32, 47, 63]
    """
    if most >= T:
        return list(range(T))
    return sorted({round(i * (T - 1) / (most - 1)) for i in range(most)})
