"""Seed 003's minimal working example as a figure: an input with a square, its crop, the Gaussian
glimpse and the STN glimpse, from the seed's own parameters (``foveal show glimpses``)."""

from __future__ import annotations

from pathlib import Path

import torch

from foveal.glimpse import gaussian_glimpse, stn_glimpse
from foveal.registry import FIGURES
from foveal.viz._mpl import pyplot


def seed_003_example(seed: int = 0) -> dict[str, torch.Tensor]:
    """The four images of seed 003's example, each ``(H, W)``: input, crop, Gaussian glimpse, STN glimpse.

    The input is ``|N(0, 1)| * 0.3`` noise on a 10 x 10 image with a square of ones at ``3:6``; the crop
    is ``x[2:7, 2:7]``; the Gaussian glimpse uses ``u = 2, s = 0.5, d = 1`` on both axes and the STN
    glimpse ``(scale_y, shift_y, scale_x, shift_x) = (0.4, -0.1, 0.4, -0.1)``, both 5 x 5.

    Example:
        >>> images = seed_003_example()
        >>> [tuple(v.shape) for v in images.values()]
        [(10, 10), (5, 5), (5, 5), (5, 5)]
    """
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 1, 10, 10, generator=generator).abs() * 0.3
    x[0, 0, 3:6, 3:6] = 1
    u, s, d = 2.0, 0.5, 1.0
    gaussian = gaussian_glimpse(x, torch.tensor([[u, s, d, u, s, d]]), (5, 5))
    stn = stn_glimpse(x, torch.tensor([[0.4, -0.1, 0.4, -0.1]]), (5, 5))
    return {"Input Image": x[0, 0], "Crop": x[0, 0, 2:7, 2:7], "Gaussian Att": gaussian[0, 0], "STN": stn[0, 0]}


@FIGURES.register("glimpses")
def glimpses_figure(out_dir: Path) -> list[Path]:
    """Write seed 003's four-panel figure to ``out_dir/glimpses.png`` and return its path."""
    plt = pyplot()

    images = seed_003_example()
    fig, axes = plt.subplots(1, 4, figsize=(12, 3))
    for ax, (title, image) in zip(axes, images.items(), strict=True):
        ax.imshow(image.numpy(), cmap="gray", vmin=0.0, vmax=1.0)
        ax.set_title(title)
        ax.xaxis.set_visible(False)
        ax.yaxis.set_visible(False)
    path = Path(out_dir) / "glimpses.png"
    fig.savefig(path, dpi=60, bbox_inches="tight")
    plt.close(fig)
    return [path]
