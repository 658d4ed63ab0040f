"""Pictures of the seed 002 family: per question, every hop's heatmap with the word weights under it,
the channel weights of channel attention, and the candidate boxes of a pointing question.

It consumes only what :class:`foveal.models.vqa.VQAOutput` returns (maps over a row-major grid, word
weights, channel weights, candidate scores), through :class:`QuestionPanel`.

Convention:
    The grid covers the top-left ``extent x extent`` pixels of the image (a CNN that floors odd sizes
    leaves the last few rows and columns out); heatmaps are drawn over that square. Boxes are
    ``(x0, y0, x1, y1)`` in pixels, half-open, ``x`` right and ``y`` down.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from torch import Tensor

from foveal.attention import box_weights
from foveal.viz._mpl import FIGURE_DPI, FONT, PAGE_WIDTH_PX, chars_across, pyplot, wrap
from foveal.viz.heatmap import (
    UNIFORM_COLOUR,
    grey_picture,
    map_legend,
    overlay_heatmap,
    weight_colorbar,
    weights_to_grid,
)

OBJECT_COLOUR = UNIFORM_COLOUR  # the outline of an object a question is about, as on the easy-vqa figure
OBJECT_STYLES = ("-", "--", ":")


class QuestionPanel(NamedTuple):
    """What to draw for one question.

    Shape:
        - image: ``(3, H, W)`` RGB in [0, 1]
        - maps: ``(K, h * w)`` image weights per hop, or None
        - word_weights: ``(S, T)`` weights over the ``T = len(words)`` real words per step, or None
        - channel_weights: ``(C,)`` or None
        - boxes: ``(4, 4)`` candidate boxes of a pointing question, or None
        - objects: ``(R, 4)`` boxes of the objects the question is about (``object_names``), or None
    """

    image: Tensor
    title: str
    maps: Tensor | None = None
    words: Sequence[str] = ()
    word_weights: Tensor | None = None
    channel_weights: Tensor | None = None
    boxes: Tensor | None = None
    chosen: int | None = None
    correct: int | None = None
    objects: Tensor | None = None
    object_names: Sequence[str] = ()


def overlay_on_extent(
    image: Tensor, weights: Tensor, grid: tuple[int, int], extent: int, vmax: float | None = None
) -> np.ndarray:
    """The heatmap of flat grid weights over the top-left ``extent`` pixels; the rest of the image unchanged.

    Shape:
        - image: ``(3, H, W)``; weights: ``(h * w,)``
        - output: float ``(H, W, 3)`` in [0, 1]

    Example:
        >>> import torch
        >>> overlay_on_extent(torch.ones(3, 10, 10), torch.rand(4), (2, 2), 8).shape
        (10, 10, 3)
    """
    picture = image.detach().float().cpu().permute(1, 2, 0).numpy().copy()
    picture[:extent, :extent] = overlay_heatmap(picture[:extent, :extent], weights_to_grid(weights, grid), vmax=vmax)
    return picture


def _draw_boxes(ax, panel: QuestionPanel, boxes: Tensor) -> None:
    from matplotlib.patches import Rectangle

    for k, (x0, y0, x1, y1) in enumerate(boxes.tolist()):
        chosen, correct = k == panel.chosen, k == panel.correct
        colour = "lime" if chosen and correct else "red" if chosen else "black"
        style = "-" if chosen else "--" if correct else ":"
        # Pixel (x, y) is centred at (x, y) in imshow's coordinates, so a half-open box starts at x0 - 0.5.
        ax.add_patch(
            Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False, ec=colour, lw=2 if chosen else 1, ls=style)
        )
        ax.text(x0 - 0.5, y0 - 1.5, str(k), color=colour, fontsize=FONT, fontweight="bold")


def _draw_maps(fig, axes: list, panel: QuestionPanel, maps: Tensor, grid: tuple[int, int], extent: int) -> None:
    """Every hop's map (``maps``, the panel's) on one scale with its colour bar, the question's objects
    outlined, the mass on each."""
    from matplotlib.patches import Rectangle

    maps = maps.float()
    uniform = 1.0 / (grid[0] * grid[1])
    vmax = max(float(maps.max()), uniform)
    masses, boxes = None, []
    if panel.objects is not None:
        touched = (box_weights(panel.objects.float(), (extent, extent), grid) > 0).float()  # (R, N)
        masses = maps @ touched.T  # (hops, R)
        boxes = panel.objects.tolist()
    for k, ax in enumerate(axes):
        ax.imshow(overlay_on_extent(panel.image, maps[k], grid, extent, vmax=vmax))
        title = f"hop {k + 1}"
        if masses is not None:
            for (x0, y0, x1, y1), style in zip(boxes, OBJECT_STYLES, strict=False):
                box = Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False, ec=OBJECT_COLOUR, lw=1, ls=style)
                ax.add_patch(box)
            on = [f"{float(m):.2f} on {name}" for m, name in zip(masses[k], panel.object_names, strict=True)]
            ax.set_xlabel("\n".join(on), fontsize=FONT)
        ax.set_title(title, fontsize=FONT)
        ax.set_xticks([])
        ax.set_yticks([])
    background = float(np.median(grey_picture(panel.image[:, :extent, :extent])))
    weight_colorbar(fig, axes, vmax, background=background, uniform=uniform)


# Inches per panel: three questions of two panels each fill the page's width.
PANEL_INCHES = 1.55
BAR_INCHES = 0.35  # a question's colour bar


def vqa_family_figure(
    panels: Sequence[QuestionPanel],
    path: str | Path,
    *,
    grid: tuple[int, int],
    extent: int,
    head: str = "",
    dpi: int = FIGURE_DPI,
) -> Path:
    """Save a grid of questions, as many to a row as the page's width holds: for each, the image (with the
    candidate boxes: the chosen one solid, green if right and red if wrong, the correct one dashed), one
    heatmap per hop with a strip of word weights under it, and a bar chart of the channel weights.

    The text is at least :data:`foveal.viz._mpl.MIN_TEXT_PX` high where the page shows the figure.

    Args:
        panels: one :class:`QuestionPanel` per question.
        path: where to write the PNG.
        grid: ``(h, w)`` of the maps.
        extent: pixels per side covered by the grid (see the module's Convention).
        head: the head's name, for the figure title.
        dpi: resolution of the PNG.
    """
    plt = pyplot()

    maps = max((p.maps.shape[0] for p in panels if p.maps is not None), default=0)
    steps = max((p.word_weights.shape[0] for p in panels if p.word_weights is not None), default=0)
    channels = any(p.channel_weights is not None for p in panels)
    words = steps > 0
    per_question = 1 + max(maps, steps) + channels
    page_inches = PAGE_WIDTH_PX / dpi * 0.95
    columns = max(1, min(len(panels), int(page_inches // (PANEL_INCHES * per_question + BAR_INCHES))))
    panel_inches = min(1.3 * PANEL_INCHES, (page_inches / columns - BAR_INCHES) / per_question)
    question_width = panel_inches * per_question + BAR_INCHES
    rows = -(-len(panels) // columns)
    question_height = panel_inches * (1.9 + 0.9 * words)
    fig = plt.figure(figsize=(columns * question_width, rows * question_height + 1.0), layout="constrained")
    cells = fig.subfigures(rows, columns, squeeze=False)
    for ax in cells.flat[len(panels) :]:
        ax.set_visible(False)
    for n, panel in enumerate(panels):
        cell = cells[divmod(n, columns)]
        cell.suptitle(wrap(panel.title, chars_across(question_width)), fontsize=FONT, x=0.02, ha="left")
        layout = cell.add_gridspec(1 + words, per_question, height_ratios=(4, 1.6) if words else (1,))
        ax = cell.add_subplot(layout[0, 0])
        ax.imshow(panel.image.permute(1, 2, 0).cpu().numpy())
        if panel.boxes is not None:
            _draw_boxes(ax, panel, panel.boxes)
        ax.axis("off")
        if panel.maps is not None:
            subplots = [cell.add_subplot(layout[0, 1 + k]) for k in range(panel.maps.shape[0])]
            _draw_maps(cell, subplots, panel, panel.maps, grid, extent)
        for s, step_weights in enumerate([] if panel.word_weights is None else panel.word_weights.split(1)):
            ax = cell.add_subplot(layout[1, 1 + s])
            ax.imshow(step_weights.numpy(), cmap="Reds", vmin=0, aspect="auto")
            ax.set_xticks(range(len(panel.words)), panel.words, rotation=90, fontsize=FONT)
            ax.set_yticks([])
            ax.tick_params(length=0, pad=1)
            ax.set_ylabel(f"words {s + 1}", fontsize=FONT, rotation=0, ha="right", va="center")
        if panel.channel_weights is not None:
            ax = cell.add_subplot(layout[0, per_question - 1])
            weights = panel.channel_weights.numpy()
            ax.bar(range(len(weights)), weights, width=1.0, color="tab:purple")
            ax.axhline(1 / len(weights), color="gray", lw=0.8, ls="--")  # uniform weights
            ax.set_title("channel weights", fontsize=FONT)
            ax.tick_params(labelsize=FONT)
    legend = [
        map_legend(
            "the objects the question is about (solid, then dashed, in the order of the masses under each map: "
            "the map's mass on the cells they touch)"
        )
    ]
    if any(p.boxes is not None for p in panels):
        legend.append("candidate boxes: the chosen one solid (green right, red wrong), the correct one dashed")
    if words:
        legend.append("under each map: that hop's weights over the question's words (darker: more)")
    if head:
        legend.insert(0, f"head: {head}")
    fig.suptitle(wrap("\n".join(legend), chars_across(columns * question_width)), fontsize=FONT, x=0.01, ha="left")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
