"""Seed 003's minimal working example as a figure: an input with a square, its crop, the Gaussian
glimpse and the STN glimpse, from the seed's own parameters, then the image-sized Gaussian attention
mask on the same place and the image it leaves (``foveal show glimpses``)."""

from __future__ import annotations

from pathlib import Path

import torch

from foveal.glimpse import gaussian_attention, gaussian_glimpse, stn_glimpse
from foveal.registry import FIGURES
from foveal.viz._mpl import pyplot

MASK_CENTRE = 4.0
"""Row and column of the mask's centre: the middle Gaussian of the glimpse, ``u + (h - 1) / 2 d = 2 + 2``."""

MASK_STD = 1.5
"""The mask's standard deviation in pixels: the square's pixels (1 px from the centre) keep 80% and more."""


def seed_003_example(seed: int = 0) -> dict[str, torch.Tensor]:
    """The images of seed 003's example, each ``(H, W)``: input, crop, Gaussian glimpse, STN glimpse,
    Gaussian attention mask and the masked input.

    The input is ``|N(0, 1)| * 0.3`` noise on a 10 x 10 image with a square of ones at ``3:6``; the crop
    is ``x[2:7, 2:7]``; the Gaussian glimpse uses ``u = 2, s = 0.5, d = 1`` on both axes and the STN
    glimpse ``(scale_y, shift_y, scale_x, shift_x) = (0.4, -0.1, 0.4, -0.1)``, both 5 x 5. The mask
    ``a = a_y a_x^T`` is centred where the glimpse's middle Gaussian is, pixel ``(4, 4)``, with a std of
    :data:`MASK_STD`, and the last image is ``a * x``, as large as the input.

    Example:
        >>> images = seed_003_example()
        >>> [tuple(v.shape) for v in images.values()]
        [(10, 10), (5, 5), (5, 5), (5, 5), (10, 10), (10, 10)]
    """
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 1, 10, 10, generator=generator).abs() * 0.3
    x[0, 0, 3:6, 3:6] = 1
    u, s, d = 2.0, 0.5, 1.0
    gaussian = gaussian_glimpse(x, torch.tensor([[u, s, d, u, s, d]]), (5, 5))
    stn = stn_glimpse(x, torch.tensor([[0.4, -0.1, 0.4, -0.1]]), (5, 5))
    masked, mask = gaussian_attention(x, torch.tensor([[MASK_CENTRE, MASK_STD, MASK_CENTRE, MASK_STD]]))
    return {
        "Input Image": x[0, 0],
        "Crop": x[0, 0, 2:7, 2:7],
        "Gaussian Att": gaussian[0, 0],
        "STN": stn[0, 0],
        "Gaussian Mask": mask[0],
        "Masked Image": masked[0, 0],
    }


@FIGURES.register("glimpses")
def glimpses_figure(out_dir: Path) -> list[Path]:
    """Write seed 003's figure (four glimpse panels, then the mask and the masked image) to ``out_dir/glimpses.png``."""
    plt = pyplot()

    images = seed_003_example()
    fig, axes = plt.subplots(1, len(images), figsize=(3 * len(images), 3))
    for ax, (title, image) in zip(axes, images.items(), strict=True):
        ax.imshow(image.numpy(), cmap="gray", vmin=0.0, vmax=1.0)
        ax.set_title(title)
        ax.xaxis.set_visible(False)
        ax.yaxis.set_visible(False)
    path = Path(out_dir) / "glimpses.png"
    fig.savefig(path, dpi=60, bbox_inches="tight")
    plt.close(fig)
    return [path]
