"""Attention maps as pictures: upsample a grid of weights to the image and blend it over the image.

Everything here consumes only what attention modules return (weights over the ``N = h w`` cells of
a row-major grid, see :func:`foveal.attention.grid.flatten_grid`), so any model can use it.

Convention:
    A grid cell ``(r, c)`` covers the image rows ``[r H / h, (r + 1) H / h)`` and columns
    ``[c W / w, (c + 1) W / w)``; row 0 is the top of the image. Weight index ``i = r w + c``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch  # noqa: F401  (the examples below use it)
import torch.nn.functional as F
from torch import Tensor

from foveal.errors import FovealError
from foveal.viz._mpl import FIGURE_DPI, FONT, chars_across, pyplot, wrap


def weights_to_grid(weights: Tensor, grid: tuple[int, int]) -> Tensor:
    """Fold flat attention weights back onto their grid.

    Shape:
        - weights: ``(..., h * w)``
        - output: ``(..., h, w)``

    Example:
        >>> weights_to_grid(torch.arange(6.0), (2, 3))
        tensor([[0., 1., 2.],
                [3., 4., 5.]])
    """
    return weights.unflatten(-1, grid)


def upsample_heatmap(weights_grid: Tensor, size: tuple[int, int], *, mode: str = "bilinear") -> Tensor:
    """Resize a grid of weights to image size, for drawing (``mode="nearest"`` shows the cells).

    Shape:
        - weights_grid: ``(h, w)``
        - output: ``(H, W)``

    Example:
        >>> upsample_heatmap(torch.eye(2), (4, 4), mode="nearest")[:, 0]
        tensor([1., 1., 0., 0.])
    """
    x = weights_grid[None, None].float()
    align = None if mode == "nearest" else False
    return F.interpolate(x, size=size, mode=mode, align_corners=align)[0, 0]


MAP_COLOURS = "Reds"
"""The map's colours: light to dark red as the weight grows, a hue no grey picture underneath can have."""
MAP_OPACITY = 0.75
"""How opaque the map is at the top of its scale; it fades with the weight, to nothing at 0."""
ZERO_WEIGHT_RULE = "0: the grey picture shows through unchanged"
"""What a weight of zero looks like on every attention picture, as its legend says."""

UNIFORM_COLOUR = "#00b8d4"
"""The line that marks a uniform map's weight on a colour bar, and the object's outline on a map."""


def grey_picture(image: Tensor | np.ndarray) -> np.ndarray:
    """The grey copy of an RGB picture that maps are drawn over.

    A picture's own colours could pass for the map's, so the maps go over its grey; the grey is kept
    between 0.3 and 1, so that the map's colour still shows over a black object.

    Shape:
        - image: ``(3, H, W)`` tensor or ``(H, W, 3)`` array, RGB in [0, 1]
        - output: float ``(H, W, 3)``

    Example:
        >>> float(grey_picture(torch.zeros(3, 2, 2)).min())
        0.3
    """
    if isinstance(image, Tensor):
        image = image.detach().float().cpu().permute(1, 2, 0).numpy()
    return (0.3 + 0.7 * np.asarray(image, dtype=np.float64).mean(-1, keepdims=True)).repeat(3, -1)


def overlay_heatmap(
    image: Tensor | np.ndarray,
    weights_grid: Tensor,
    *,
    alpha: float = MAP_OPACITY,
    cmap: str = MAP_COLOURS,
    vmax: float | None = None,
    mode: str = "nearest",
) -> np.ndarray:
    """Colour a grid of attention weights over a grey copy of the image (:func:`grey_picture`).

    The map's opacity is proportional to the weight: a cell of weight 0 leaves the picture as it is,
    a cell at ``vmax`` is covered by the top colour at opacity ``alpha``, and the colour also deepens with
    the weight (:func:`weight_colorbar` shows the scale as drawn). Weights are drawn cell by cell
    (``mode="nearest"``), scaled to ``vmax`` (default: their own maximum; pass one value to every map of a
    question so that they compare).

    Args:
        image: RGB in [0, 1], channels first (a tensor) or last (an array).
        weights_grid: non-negative weights on the grid.
        alpha: opacity of the map at ``vmax``.
        cmap: a matplotlib colour map name.
        vmax: the weight drawn as the top colour.
        mode: ``"nearest"`` (the cells as they are) or ``"bilinear"`` (smooth).

    Shape:
        - image: ``(3, H, W)`` tensor or ``(H, W, 3)`` array
        - weights_grid: ``(h, w)``
        - output: float ``(H, W, 3)`` in [0, 1]

    Example:
        >>> overlay_heatmap(torch.ones(3, 8, 8), torch.rand(2, 2)).shape
        (8, 8, 3)
    """
    grey = grey_picture(image)
    height, width = grey.shape[:2]
    upsampled = upsample_heatmap(weights_grid.detach().float().cpu(), (height, width), mode=mode)
    top = float(upsampled.max()) if vmax is None else vmax
    heat = (upsampled / max(top, 1e-12)).clamp(0, 1).numpy()
    return np.clip(_blend(grey, heat, alpha, cmap), 0.0, 1.0)  # rounding can step past 1


def _blend(grey: np.ndarray, heat: np.ndarray, alpha: float, cmap: str) -> np.ndarray:
    """``grey`` covered by the map's colour at ``heat`` (0 to 1 of the scale) with opacity ``alpha * heat``."""
    from matplotlib import colormaps

    colour = np.asarray(colormaps[cmap](heat))[..., :3]
    opacity = alpha * heat[..., None]
    return (1 - opacity) * grey + opacity * colour


def weight_colorbar(
    fig: Any,
    ax: Any,
    vmax: float,
    *,
    background: float = 1.0,
    uniform: float | None = None,
    alpha: float = MAP_OPACITY,
    cmap: str = MAP_COLOURS,
    fontsize: float = FONT,
) -> Any:
    """A colour bar beside ``ax`` of weights 0 to ``vmax`` as :func:`overlay_heatmap` draws them over a
    picture of grey level ``background``: 0 is that grey, the picture unchanged (:data:`ZERO_WEIGHT_RULE`).

    Args:
        fig: the matplotlib figure (or subfigure) that holds ``ax``.
        ax: the axes (or list of axes) the bar goes beside.
        vmax: the weight at the top of the scale.
        background: the grey (0 to 1) of the picture under the map, e.g. its median.
        uniform: a weight to mark with a cyan line (a uniform map's ``1 / N``), or None.
        fontsize: of the tick labels.

    Returns:
        The matplotlib ``Colorbar``.
    """
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import ListedColormap, Normalize

    levels = np.linspace(0.0, 1.0, 256)
    shown = _blend(np.full((256, 3), background), levels, alpha, cmap)
    bar = fig.colorbar(
        ScalarMappable(Normalize(0, vmax), ListedColormap(np.clip(shown, 0, 1))), ax=ax, fraction=0.06, pad=0.03
    )
    if uniform is not None and uniform <= vmax:
        bar.ax.axhline(uniform, color=UNIFORM_COLOUR, linewidth=1.5)
    bar.ax.tick_params(labelsize=fontsize)
    bar.ax.yaxis.get_offset_text().set_fontsize(fontsize)
    return bar


def mass_in_mask(weights: Tensor, mask: Tensor, grid: tuple[int, int]) -> Tensor:
    """Attention mass that falls on the object: ``sum_i alpha_i * coverage_i``.

    ``coverage_i`` is the fraction of cell ``i``'s pixels inside the mask, i.e. each cell's weight
    is spread evenly over its pixels and the mass on mask pixels is summed. Perfect attention on a
    small object that fills no whole cell therefore scores below 1.

    Shape:
        - weights: ``(B, ..., h * w)``, e.g. ``(B, hops, N)``
        - mask: bool ``(B, H, W)``, with ``H`` and ``W`` multiples of ``h`` and ``w``
        - output: ``(B, ...)``

    Example:
        >>> mask = torch.zeros(1, 4, 4, dtype=torch.bool); mask[0, :2, :2] = True
        >>> mass_in_mask(torch.tensor([[0.5, 0.5, 0.0, 0.0]]), mask, (2, 2))
        tensor([0.5000])
    """
    height, width = mask.shape[-2:]
    if height % grid[0] or width % grid[1]:
        raise FovealError(f"mask of size {(height, width)} does not split into a {grid} grid")
    coverage = F.avg_pool2d(mask[:, None].float(), (height // grid[0], width // grid[1])).flatten(1)  # (B, N)
    coverage = coverage.view(coverage.shape[0], *([1] * (weights.dim() - 2)), coverage.shape[1])
    return (weights * coverage).sum(-1)


def map_legend(outline: str | None = None) -> str:
    """The lines that explain an attention picture: how a weight is drawn, the scale, what is outlined."""
    lines = [
        f"red: attention weight per grid cell, deeper and more opaque as it grows ({ZERO_WEIGHT_RULE})",
        "one scale per question: its colour bar, drawn over the picture's background; cyan line: a uniform map",
    ]
    return "\n".join(lines + ([f"cyan outline: {outline}"] if outline else []))


def attention_figure(
    images: Sequence[Tensor],
    maps: Sequence[Tensor | None],
    titles: Sequence[str],
    path: str | Path,
    *,
    grid: tuple[int, int],
    masks: Sequence[Tensor | None] | None = None,
    map_names: Sequence[str] | None = None,
    columns: int = 2,
    dpi: int = FIGURE_DPI,
) -> Path:
    """Save a figure: for each example, the image, then one map per hop on one colour scale.

    Every map of an example shares its scale, shown by a colour bar in weight per cell with the
    uniform level ``1 / (h w)`` marked, so hops compare at a glance; with ``masks`` the object's
    outline is drawn on each map and the attention mass inside it is in the map's title. The text is
    at least :data:`foveal.viz._mpl.MIN_TEXT_PX` high where the page shows the figure.

    Args:
        images: RGB in [0, 1], each ``(3, H, W)``.
        maps: per example, the flat weights ``(K, h * w)`` (K maps, e.g. hops) or None (image only).
        titles: one caption per example (question, prediction, truth...).
        path: where to write the PNG.
        grid: ``(h, w)`` of the weights.
        masks: per example, a bool ``(H, W)`` object mask, or None.
        map_names: a label for each of the K maps (default ``hop 1, hop 2, ...``).
        columns: examples per row of the figure.
        dpi: resolution of the PNG.
    """
    plt = pyplot()
    masks = list(masks) if masks is not None else [None] * len(images)
    per_example = 1 + max((m.shape[0] for m in maps if m is not None), default=0)
    columns = max(1, min(columns, len(images)))
    rows = -(-len(images) // columns)
    width = 2.4 * columns * per_example
    fig = plt.figure(figsize=(width, 2.9 * rows + 0.6), layout="constrained")
    cells = fig.subfigures(rows, columns, squeeze=False)
    uniform = 1.0 / (grid[0] * grid[1])
    for n, (image, weights, title, mask) in enumerate(zip(images, maps, titles, masks, strict=True)):
        cell = cells[divmod(n, columns)]
        cell.suptitle(wrap(title, chars_across(width / columns)), fontsize=FONT, x=0.02, ha="left")
        axes = cell.subplots(1, per_example, squeeze=False)[0]
        for ax in axes:
            ax.axis("off")
        axes[0].imshow(image.permute(1, 2, 0).clamp(0, 1).cpu().numpy())
        if weights is None:
            continue
        vmax = max(float(weights.max()), uniform)
        mass = mass_in_mask(weights[None], mask[None], grid)[0] if mask is not None else None
        for k in range(weights.shape[0]):
            ax = axes[1 + k]
            ax.imshow(overlay_heatmap(image, weights_to_grid(weights[k], grid), vmax=vmax))
            if mask is not None:
                ax.contour(mask.float().cpu().numpy(), levels=[0.5], colors=UNIFORM_COLOUR, linewidths=1.0)
            name = map_names[k] if map_names else f"hop {k + 1}"
            on_object = f"\n{float(mass[k]):.2f} on object" if mass is not None else ""
            ax.set_title(f"{name}{on_object}", fontsize=FONT)
        background = float(np.median(grey_picture(image)))
        weight_colorbar(cell, list(axes[1:]), vmax, background=background, uniform=uniform)
    if any(m is not None for m in maps):
        outline = "the object" if any(m is not None for m in masks) else None
        fig.suptitle(wrap(map_legend(outline), chars_across(width)), fontsize=FONT, x=0.01, ha="left")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
