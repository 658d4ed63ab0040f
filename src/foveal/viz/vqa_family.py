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
from foveal.viz._mpl import pyplot
from foveal.viz.heatmap import MAP_COLOURS, overlay_heatmap, weights_to_grid

OBJECT_COLOUR = "#00e5ff"  # the outline of an object a question is about, as on the easy-vqa figure
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
        ax.text(x0 - 0.5, y0 - 1.5, str(k), color=colour, fontsize=5)


def _draw_maps(fig, axes: list, panel: QuestionPanel, maps: Tensor, grid: tuple[int, int], extent: int) -> None:
    """Every hop's map (``maps``, the panel's) on one scale with its colour bar, the question's objects
    outlined, the mass on each."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
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
            ax.text(0, -0.03, "\n".join(on), transform=ax.transAxes, fontsize=5, va="top")
        ax.set_title(title, fontsize=6)
        ax.axis("off")
    bar = fig.colorbar(
        ScalarMappable(Normalize(0, vmax), colormaps[MAP_COLOURS]), ax=axes[-1], fraction=0.046, pad=0.02
    )
    bar.ax.axhline(uniform, color=OBJECT_COLOUR, linewidth=1.2)
    bar.ax.tick_params(labelsize=4)


def vqa_family_figure(
    panels: Sequence[QuestionPanel],
    path: str | Path,
    *,
    grid: tuple[int, int],
    extent: int,
    head: str = "",
) -> Path:
    """Save one row per question: the image (with the candidate boxes: the chosen one solid, green if
    right and red if wrong, the correct one dashed), one heatmap per hop with a strip of word weights
    under it, and a bar chart of the channel weights.

    Args:
        panels: one :class:`QuestionPanel` per question.
        path: where to write the PNG.
        grid: ``(h, w)`` of the maps.
        extent: pixels per side covered by the grid (see the module's Convention).
        head: the head's name, for the figure title.
    """
    plt = pyplot()

    maps = max((p.maps.shape[0] for p in panels if p.maps is not None), default=0)
    steps = max((p.word_weights.shape[0] for p in panels if p.word_weights is not None), default=0)
    channels = any(p.channel_weights is not None for p in panels)
    columns = 1 + max(maps, steps) + channels
    height = 2.4 * len(panels)
    fig = plt.figure(figsize=(2.2 * columns + 0.4, height))
    outer = fig.add_gridspec(len(panels), 1, hspace=0.55, top=1 - 0.9 / height)  # room for titles, head name
    for row, panel in enumerate(panels):
        cells = outer[row].subgridspec(2, columns, height_ratios=(4, 1), hspace=0.05, wspace=0.15)
        ax = fig.add_subplot(cells[0, 0])
        ax.imshow(panel.image.permute(1, 2, 0).cpu().numpy())
        if panel.boxes is not None:
            _draw_boxes(ax, panel, panel.boxes)
        ax.set_title(panel.title, fontsize=5, loc="left")
        ax.axis("off")
        if panel.maps is not None:
            subplots = [fig.add_subplot(cells[0, 1 + k]) for k in range(panel.maps.shape[0])]
            _draw_maps(fig, subplots, panel, panel.maps, grid, extent)
        for s, step_weights in enumerate([] if panel.word_weights is None else panel.word_weights.split(1)):
            ax = fig.add_subplot(cells[1, 1 + s])
            ax.imshow(step_weights.numpy(), cmap="Reds", vmin=0, aspect="auto")
            ax.set_xticks(range(len(panel.words)), panel.words, rotation=90, fontsize=4)
            ax.set_yticks([])
            ax.tick_params(length=0, pad=1)
            ax.set_ylabel(f"words {s + 1}", fontsize=4, rotation=0, ha="right", va="center")
        if panel.channel_weights is not None:
            ax = fig.add_subplot(cells[0, columns - 1])
            weights = panel.channel_weights.numpy()
            ax.bar(range(len(weights)), weights, width=1.0, color="tab:purple")
            ax.axhline(1 / len(weights), color="gray", lw=0.5, ls="--")  # uniform weights
            ax.set_title("channel weights", fontsize=6)
            ax.tick_params(labelsize=4)
    legend = (
        "colour: attention weight per grid cell, one scale per question\n(its bar; cyan line: a uniform map's weight)"
        "\ncyan outlines: the objects the question is about,\nwith the map's mass on the cells they touch"
        "\ncandidates: the chosen box solid (green right, red wrong),\nthe correct one dashed"
    )
    fig.suptitle(f"head: {head}\n{legend}" if head else legend, fontsize=6, y=1 - 0.05 / height, va="bottom")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return path
