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

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import torch
from PIL import Image, ImageDraw, ImageFont
from torch import Tensor, nn

from foveal._checks import check_shape
from foveal.attention import record_maps
from foveal.errors import FovealError
from foveal.models.draw import DRAW
from foveal.viz._mpl import FIGURE_DPI, FONT, PAGE_WIDTH_PX

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


def legend_size(width: int) -> int:
    """The legend's font size, in pixels, for a picture ``width`` pixels wide: the matplotlib figures' text
    (:data:`~foveal.viz._mpl.FONT` at :data:`~foveal.viz._mpl.FIGURE_DPI`) where the page shows it, so
    larger on a picture wider than the page, which the page scales down.

    Example:
        >>> legend_size(800), legend_size(2 * PAGE_WIDTH_PX)
        (12, 23)
    """
    return math.ceil(FONT * FIGURE_DPI / 72 * max(1.0, width / PAGE_WIDTH_PX))


def with_legend(sheet: Image.Image, entries: Sequence[tuple[str, tuple[int, int, int]]], note: str = "") -> Image.Image:
    """``sheet`` with a strip under it: the grey scale's bar (a pixel's probability, 0 black to 1 white), a
    swatch and name per box colour in ``entries``, and ``note``, in a font of :func:`legend_size`.

    Example:
        >>> sheet = Image.new("RGB", (200, 60))
        >>> with_legend(sheet, [("write window", WRITE_COLOUR)]).size[1] > 60
        True
    """
    scale_label = "1: a pixel's probability of being on"
    size = legend_size(sheet.width)
    font = ImageFont.load_default(size=size)

    def length(text: str) -> int:
        return math.ceil(font.getlength(text))

    line, gap, bar = round(1.4 * size), size // 2, 9 * size
    side = size - size // 5  # the bar and the swatches as high as a capital letter
    needed = max(
        4 * gap + length("0") + bar + length(scale_label),
        gap + sum(side + 3 * gap + length(name) for name, _ in entries),
        2 * gap + length(note),
    )
    rows = 2 + bool(note)
    out = Image.new("RGB", (max(sheet.width, needed), sheet.height + rows * line + gap), (255, 255, 255))
    out.paste(sheet, (0, 0))
    draw = ImageDraw.Draw(out)
    y = sheet.height + gap // 2
    top = y + size // 5
    left = 2 * gap + length("0")
    for x in range(bar):  # the grey levels, black (0) to white (1)
        draw.line([(left + x, top), (left + x, top + side)], fill=(round(x * 255 / (bar - 1)),) * 3)
    draw.rectangle([left, top, left + bar - 1, top + side], outline=(0, 0, 0))
    draw.text((gap, y), "0", fill=(0, 0, 0), font=font)
    draw.text((left + bar + gap, y), scale_label, fill=(0, 0, 0), font=font)
    x = gap
    for name, colour in entries:
        draw.rectangle([x, top + line, x + side, top + line + side], outline=colour, width=max(2, size // 6))
        draw.text((x + side + gap, y + line), name, fill=(0, 0, 0), font=font)
        x += side + 3 * gap + length(name)
    if note:
        draw.text((gap, y + 2 * line), note, fill=(0, 0, 0), font=font)
    return out


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
        raise FovealError(f"gif_frames: {n} images do not fill rows of {columns}")
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


def page_layout(
    T: int, width: int, *, pad: int = 2, most_steps: int = 16, most_scale: int = 3
) -> tuple[list[int], int]:
    """The steps to show of ``T`` (:func:`pick_steps`) and the scale for :func:`grid`, so that a row of those
    steps and one more cell (the target) of pictures ``width`` pixels wide fits the page unscaled: the
    largest scale up to ``most_scale`` at which all of up to ``most_steps`` steps fit, else as many steps as
    fit at scale 1.

    Example:
        >>> page_layout(16, 28)  # MNIST: 17 cells of 58 pixels, where 86 would not fit
        ([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], 2)
        >>> steps, scale = page_layout(64, 100); len(steps), scale
        (9, 1)
    """
    steps = pick_steps(T, most_steps)
    for scale in range(most_scale, 0, -1):
        if (len(steps) + 1) * (width * scale + pad) + pad <= PAGE_WIDTH_PX:
            return steps, scale
    columns = (PAGE_WIDTH_PX - pad) // (width + pad)
    return pick_steps(T, max(2, columns - 1)), 1


class ImageSet(Protocol):
    """A data set that holds its images as one tensor ``images``, ``(N, C, H, W)``."""

    @property
    def images(self) -> Tensor: ...

    def __len__(self) -> int: ...


def show_draw(
    model: nn.Module, dataset: ImageSet, figures_dir: Path, *, samples: int = 16, seed: int = 0
) -> list[Path]:
    """``generation.png`` and ``generation.gif``: ``samples`` generations step by step (the write box in
    red); ``reconstruction.png``: test images evenly spread over ``dataset`` rebuilt step by step, with the
    read (green) and write (red) boxes, the target in the last column. ``seed`` seeds the model's noise.

    Args:
        model: a :class:`foveal.models.draw.DRAW` (or a wrapper holding it as ``module``).
        dataset: holds the test images as ``images``, ``(N, C, H, W)`` in {0, 1}.
    """
    model = getattr(model, "module", model)
    if not isinstance(model, DRAW):
        raise FovealError(
            f"show_draw: expected a DRAW model (or a wrapper holding it as module), got {type(model).__name__}"
        )
    device = next(model.parameters()).device
    figures_dir.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator(device=device).manual_seed(seed)
    steps, scale = page_layout(model.steps, model.image_size[1])
    paths = []

    with record_maps(model) as looked:  # the windows, as a user asks for them
        gen = model.generate(samples, generator=generator)
    write_boxes = [(looked["write_boxes"], WRITE_COLOUR)] if "write_boxes" in looked else []
    rows = min(samples, 8)
    strip = grid(
        gen.canvases[steps, :rows].transpose(0, 1),
        [(b[steps, :rows].transpose(0, 1), c) for b, c in write_boxes],
        scale=scale,
    )
    paths.append(figures_dir / "generation.png")
    legend = [("write window", WRITE_COLOUR)] if write_boxes else []
    with_legend(strip, legend, "rows: samples from noise; columns: the canvas at steps 1..T").save(paths[-1])
    paths.append(save_gif(gif_frames(gen.canvases, write_boxes), figures_dir / "generation.gif"))

    spread = torch.linspace(0, len(dataset) - 1, rows).long()  # MNIST 5k's test split is sorted by digit
    x = dataset.images[spread].to(device)
    with record_maps(model) as looked:
        out = model(x, generator=generator, return_steps=True)
    pictures = torch.sigmoid(out.canvases[steps]).transpose(0, 1)  # (rows, steps, C, H, W)
    pictures = torch.cat([pictures, x[:, None]], dim=1)  # the target in the last column
    boxes = []
    if model.attention:
        no_box = torch.full((rows, 1, 4), float("nan"), device=device)
        for name, colour in (("read_boxes", READ_COLOUR), ("write_boxes", WRITE_COLOUR)):
            b = looked[name][steps].transpose(0, 1)
            boxes.append((torch.cat([b, no_box], dim=1), colour))
    paths.append(figures_dir / "reconstruction.png")
    legend = [("read window", READ_COLOUR), ("write window", WRITE_COLOUR)] if boxes else []
    note = "rows: test images; columns: the canvas at steps 1..T, then the image"
    with_legend(grid(pictures, boxes, scale=scale, probabilities=True), legend, note).save(paths[-1])
    return paths
