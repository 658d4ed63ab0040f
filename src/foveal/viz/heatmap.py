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

import numpy as np
import torch  # noqa: F401  (the examples below use it)
import torch.nn.functional as F
from torch import Tensor

from foveal.errors import FovealError
from foveal.viz._mpl import pyplot


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


MAP_COLOURS = "magma"
"""A perceptually uniform colour map: equal steps of weight look like equal steps of colour."""


def overlay_heatmap(
    image: Tensor | np.ndarray,
    weights_grid: Tensor,
    *,
    alpha: float = 0.75,
    cmap: str = MAP_COLOURS,
    vmax: float | None = None,
    mode: str = "nearest",
) -> np.ndarray:
    """Colour a grid of attention weights over a grey copy of the image.

    The picture underneath is turned grey, so that no colour of the image can be mistaken for a
    colour of the map; the weights are drawn cell by cell (``mode="nearest"``), scaled to ``vmax``
    (default: their own maximum; pass one value to every map of a question so they compare).

    Args:
        image: RGB in [0, 1], channels first (a tensor) or last (an array).
        weights_grid: non-negative weights on the grid.
        alpha: opacity of the map at ``vmax`` (it fades with the weight, down to ``alpha / 3`` at 0).
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
    from matplotlib import colormaps

    if isinstance(image, Tensor):
        image = image.detach().float().cpu().permute(1, 2, 0).numpy()
    height, width = image.shape[:2]
    upsampled = upsample_heatmap(weights_grid.detach().float().cpu(), (height, width), mode=mode)
    top = float(upsampled.max()) if vmax is None else vmax
    heat = (upsampled / max(top, 1e-12)).clamp(0, 1).numpy()
    grey = image.mean(-1, keepdims=True).repeat(3, -1)
    colour = np.asarray(colormaps[cmap](heat))[..., :3]
    opacity = alpha * (1 + 2 * heat[..., None]) / 3
    return np.clip((1 - opacity) * grey + opacity * colour, 0.0, 1.0)  # rounding can step past 1


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
    dpi: int = 110,
) -> Path:
    """Save a figure: for each example, the image, then one map per hop on one colour scale.

    Every map of an example shares its scale, shown by a colour bar in weight per cell with the
    uniform level ``1 / (h w)`` marked, so hops compare at a glance; with ``masks`` the object's
    outline is drawn on each map and the attention mass inside it is in the map's title.

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
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    plt = pyplot()
    masks = list(masks) if masks is not None else [None] * len(images)
    per_example = 1 + max((m.shape[0] for m in maps if m is not None), default=0)
    rows = -(-len(images) // columns)
    fig, axes = plt.subplots(
        rows, columns * per_example, figsize=(1.9 * columns * per_example, 2.3 * rows), squeeze=False
    )
    for ax in axes.flat:
        ax.axis("off")
    uniform = 1.0 / (grid[0] * grid[1])
    for n, (image, weights, title, mask) in enumerate(zip(images, maps, titles, masks, strict=True)):
        r, c = divmod(n, columns)
        first = axes[r, c * per_example]
        first.imshow(image.permute(1, 2, 0).clamp(0, 1).cpu().numpy())
        first.set_title(title, fontsize=6, loc="left")
        if weights is None:
            continue
        vmax = max(float(weights.max()), uniform)
        mass = mass_in_mask(weights[None], mask[None], grid)[0] if mask is not None else None
        for k in range(weights.shape[0]):
            ax = axes[r, c * per_example + 1 + k]
            ax.imshow(overlay_heatmap(image, weights_to_grid(weights[k], grid), vmax=vmax))
            if mask is not None:
                ax.contour(mask.float().cpu().numpy(), levels=[0.5], colors="#00e5ff", linewidths=0.8)
            name = map_names[k] if map_names else f"hop {k + 1}"
            on_object = f": {float(mass[k]):.2f} on object" if mass is not None else ""
            ax.set_title(f"{name}{on_object}", fontsize=6)
        bar = fig.colorbar(ScalarMappable(Normalize(0, vmax), colormaps[MAP_COLOURS]), ax=ax, fraction=0.046, pad=0.02)
        bar.ax.axhline(uniform, color="#00e5ff", linewidth=1.2)
        bar.ax.tick_params(labelsize=5)
    if any(m is not None for m in maps):
        outline = "; cyan outline: the object" if any(m is not None for m in masks) else ""
        fig.suptitle(
            "colour: attention weight per grid cell, one scale per question (its bar); "
            f"cyan line on the bar: a uniform map's weight{outline}",
            fontsize=7,
            y=1.0,
        )
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return path
