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


def overlay_heatmap(
    image: Tensor | np.ndarray, weights_grid: Tensor, *, alpha: float = 0.55, cmap: str = "jet"
) -> np.ndarray:
    """Blend a heatmap of attention weights over an image.

    The weights are upsampled bilinearly and scaled by their maximum, so the most attended cell is
    the hottest colour whatever the total mass.

    Args:
        image: RGB in [0, 1], channels first (a tensor) or last (an array).
        weights_grid: non-negative weights on the grid.
        alpha: opacity of the heatmap at the hottest point (it fades with the weight).
        cmap: a matplotlib colour map name.

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
    heat = upsample_heatmap(weights_grid.detach().float().cpu(), (height, width))
    heat = (heat / heat.max().clamp_min(1e-12)).clamp(0, 1).numpy()
    colour = colormaps[cmap](heat)[..., :3]
    opacity = alpha * heat[..., None]
    return np.clip((1 - opacity) * image + opacity * colour, 0.0, 1.0)  # rounding can step past 1


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
        raise ValueError(f"mask of size {(height, width)} does not split into a {grid} grid")
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
    map_names: Sequence[str] | None = None,
    columns: int = 2,
    dpi: int = 100,
) -> Path:
    """Save a figure: for each example, the image and one overlay per attention map, with a title.

    Args:
        images: RGB in [0, 1], each ``(3, H, W)``.
        maps: per example, the flat weights ``(K, h * w)`` (K maps, e.g. hops) or None (image only).
        titles: one caption per example (question, prediction, truth...).
        path: where to write the PNG.
        grid: ``(h, w)`` of the weights.
        map_names: a label for each of the K maps (default ``hop 1, hop 2, ...``).
        columns: examples per row of the figure.
        dpi: resolution of the PNG.
    """
    plt = pyplot()

    per_example = 1 + max((m.shape[0] for m in maps if m is not None), default=0)
    rows = -(-len(images) // columns)
    fig, axes = plt.subplots(
        rows, columns * per_example, figsize=(1.6 * columns * per_example, 2.0 * rows), squeeze=False
    )
    for ax in axes.flat:
        ax.axis("off")
    for n, (image, weights, title) in enumerate(zip(images, maps, titles, strict=True)):
        r, c = divmod(n, columns)
        first = axes[r, c * per_example]
        first.imshow(image.permute(1, 2, 0).clamp(0, 1).cpu().numpy())
        first.set_title(title, fontsize=6, loc="left")
        for k in range(0 if weights is None else weights.shape[0]):
            ax = axes[r, c * per_example + 1 + k]
            ax.imshow(overlay_heatmap(image, weights_to_grid(weights[k], grid)))
            ax.set_title(map_names[k] if map_names else f"hop {k + 1}", fontsize=6)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
