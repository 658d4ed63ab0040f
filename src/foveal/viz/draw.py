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
from typing import Protocol

import torch
from PIL import Image, ImageDraw, ImageFont
from torch import Tensor, nn

from foveal._checks import check_shape
from foveal.attention import record_maps
from foveal.errors import FovealError
from foveal.models.draw import DRAW

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


def with_legend(sheet: Image.Image, entries: Sequence[tuple[str, tuple[int, int, int]]], note: str = "") -> Image.Image:
    """``sheet`` with a strip under it: the grey scale's bar (a pixel's probability, 0 black to 1 white), a
    swatch and name per box colour in ``entries``, and ``note``.

    Example:
        >>> sheet = Image.new("RGB", (200, 60))
        >>> with_legend(sheet, [("write window", WRITE_COLOUR)]).size[1] > 60
        True
    """
    font = ImageFont.load_default()
    line = 14
    width = max(sheet.width, 420)
    rows = 2 + bool(note)
    out = Image.new("RGB", (width, sheet.height + rows * line + 8), (255, 255, 255))
    out.paste(sheet, (0, 0))
    draw = ImageDraw.Draw(out)
    y = sheet.height + 4
    for x in range(100):  # the grey levels, black (0) to white (1)
        draw.line([(44 + x, y + 2), (44 + x, y + 10)], fill=(round(x * 2.55),) * 3)
    draw.rectangle([44, y + 2, 143, y + 10], outline=(0, 0, 0))
    draw.text((4, y), "0", fill=(0, 0, 0), font=font)
    draw.text((150, y), "1: a pixel's probability of being on", fill=(0, 0, 0), font=font)
    x = 4
    for name, colour in entries:
        draw.rectangle([x, y + line + 2, x + 10, y + line + 10], outline=colour, width=2)
        draw.text((x + 14, y + line), name, fill=(0, 0, 0), font=font)
        x += 24 + round(draw.textlength(name, font=font))
    if note:
        draw.text((4, y + 2 * line), note, fill=(0, 0, 0), font=font)
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
    steps = pick_steps(model.steps, 16)
    paths = []

    with record_maps(model) as looked:  # the windows, as a user asks for them
        gen = model.generate(samples, generator=generator)
    write_boxes = [(looked["write_boxes"], WRITE_COLOUR)] if "write_boxes" in looked else []
    rows = min(samples, 8)
    strip = grid(
        gen.canvases[steps, :rows].transpose(0, 1), [(b[steps, :rows].transpose(0, 1), c) for b, c in write_boxes]
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
    with_legend(grid(pictures, boxes, probabilities=True), legend, note).save(paths[-1])
    return paths
