"""What a spatial transformer does to its input: the box its transform selects and what the CNN then sees."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import torch
from torch import Tensor, nn

from foveal.attention import record_maps
from foveal.models.stn_classifier import transform_box
from foveal.viz._mpl import FIGURE_DPI, FONT, PAGE_WIDTH_PX, chars_across, pyplot, save_figure, wrap

OBJECT_COLOUR = "#00e5ff"  # the object's outline, as on the VQA figures
OBJECT_LEVEL = 0.1  # a pixel brighter than this (of 1) is the object: the canvases' background is 0


class LabelledImages(Protocol):
    """A data set that holds its test images and labels as tensors: uint8 ``(N, 1, H, W)``, int64 ``(N,)``."""

    @property
    def images(self) -> Tensor: ...

    @property
    def labels(self) -> Tensor: ...

    def __len__(self) -> int: ...


def mass_in_box(images: Tensor, corners: Tensor) -> Tensor:
    """The share of each image's brightness that falls inside the box (a polygon, pixel centres tested).

    Shape:
        - images: ``(B, 1, H, W)`` in [0, 1]; corners: ``(B, 5, 2)`` from :func:`transform_box`
        - output: ``(B,)``

    Example:
        >>> images = torch.zeros(1, 1, 4, 4); images[0, 0, :2, :2] = 1.0; images[0, 0, 3, 3] = 1.0
        >>> box = torch.tensor([[[-0.5, -0.5], [1.5, -0.5], [1.5, 1.5], [-0.5, 1.5], [-0.5, -0.5]]])
        >>> mass_in_box(images, box).tolist()
        [0.800000011920929]
    """
    from matplotlib.path import Path as Polygon

    H, W = images.shape[-2:]
    ys, xs = torch.meshgrid(torch.arange(H, dtype=torch.float32), torch.arange(W, dtype=torch.float32), indexing="ij")
    centres = torch.stack([xs.flatten(), ys.flatten()], 1).numpy()
    inside = torch.stack([torch.from_numpy(Polygon(c[:4].numpy()).contains_points(centres)) for c in corners.float()])
    flat = images.flatten(1).float().cpu()
    return (flat * inside).sum(1) / flat.sum(1).clamp_min(1e-12)


def show_transformer(
    model: nn.Module, dataset: LabelledImages, figures_dir: Path, names: tuple[str, ...]
) -> list[Path]:
    """Input with the transform's box and the object's outline (top), the transformer's output (bottom), for 8
    test images; each title gives the prediction and the share of the object's brightness inside the box."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    plt = pyplot()
    device = next(model.parameters()).device
    count = min(8, len(dataset))
    images = dataset.images[:count].float().to(device) / 255.0
    labels = dataset.labels[:count]
    with record_maps(model) as maps:  # where it looked, as a user asks for it
        logits, _, seen = model(images)
    theta = maps.get("transformer.theta")
    predicted = logits.argmax(-1).cpu()
    rows = 1 if theta is None else 2
    width = PAGE_WIDTH_PX / FIGURE_DPI - 0.3  # the page's width less the saved margin: shown unscaled
    column = (width - 0.9) / count
    fig, axes = plt.subplots(rows, count, figsize=(width, column * rows + 0.9), squeeze=False, layout="constrained")
    H, W = images.shape[-2:]
    boxes = None if theta is None else transform_box(theta.cpu(), (H, W))
    masses = None if boxes is None else mass_in_box(images.cpu(), boxes)
    for j in range(count):
        ax = axes[0, j]
        picture = images[j, 0].cpu().numpy()
        ax.imshow(picture, cmap="gray", vmin=0, vmax=1)
        ax.contour(picture > OBJECT_LEVEL, levels=[0.5], colors=OBJECT_COLOUR, linewidths=0.6)
        colour = "limegreen" if predicted[j] == labels[j] else "red"
        inside = "" if masses is None else f"\n{float(masses[j]):.2f} in box"
        ax.set_title(f"{names[int(predicted[j])]}{inside}", fontsize=FONT, color=colour)
        if boxes is not None:
            box = boxes[j].numpy()
            ax.plot(box[:, 0], box[:, 1], color="orange", linewidth=1.2)
            ax.plot(box[0, 0], box[0, 1], "o", color="orange", markersize=3)  # the output's top-left
            axes[1, j].imshow(seen[j, 0].cpu().numpy(), cmap="gray", vmin=0, vmax=1)
    for ax in axes[0]:
        ax.set_xlim(-2.5, W + 1.5)  # the image and a thin margin, so a box at the edge stays visible
        ax.set_ylim(H + 1.5, -2.5)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0, 0].set_ylabel("input", fontsize=FONT)
    if theta is not None:
        axes[1, 0].set_ylabel("transformed", fontsize=FONT)
    bar = fig.colorbar(
        ScalarMappable(Normalize(0, 1), colormaps["gray"]), ax=axes.ravel().tolist(), shrink=0.6, pad=0.02
    )
    bar.set_label("pixel value", fontsize=FONT)
    bar.ax.tick_params(labelsize=FONT)
    caption = (
        "spatial transformer: the box it selects in the input (orange, dot: the output's top-left) and what the "
        "CNN sees\ncyan: the object's outline; title: the prediction (green right, red wrong) and the share of "
        "the object's brightness inside the box"
    )
    fig.suptitle(wrap(caption, chars_across(width - 0.5)), fontsize=FONT)
    return [save_figure(fig, figures_dir / "transformer.png", dpi=FIGURE_DPI)]
