"""What a spatial transformer does to its input: the box its transform selects and what the CNN then sees."""

from __future__ import annotations

from pathlib import Path

from torch import nn
from torch.utils.data import Dataset

from foveal.models.stn_classifier import transform_box
from foveal.viz._mpl import pyplot


def show_transformer(model: nn.Module, dataset: Dataset, figures_dir: Path, names: tuple[str, ...]) -> list[Path]:
    """Input with the transform's box (top), the transformer's output (bottom), for 8 test images."""
    plt = pyplot()
    device = next(model.parameters()).device
    images = dataset.images[:8].float().to(device) / 255.0  # type: ignore[attr-defined]
    labels = dataset.labels[:8]  # type: ignore[attr-defined]
    logits, theta, seen = model(images)
    predicted = logits.argmax(-1).cpu()
    rows = 1 if theta is None else 2
    fig, axes = plt.subplots(rows, 8, figsize=(12, 1.7 * rows + 0.4), squeeze=False)
    for j in range(8):
        ax = axes[0, j]
        ax.imshow(images[j, 0].cpu().numpy(), cmap="gray", vmin=0, vmax=1)
        colour = "limegreen" if predicted[j] == labels[j] else "red"
        ax.set_title(names[int(predicted[j])], fontsize=8, color=colour)
        if theta is not None:
            box = transform_box(theta[j : j + 1].cpu(), tuple(images.shape[-2:]))[0].numpy()
            ax.plot(box[:, 0], box[:, 1], color="orange", linewidth=1.2)
            ax.plot(box[0, 0], box[0, 1], "o", color="orange", markersize=3)  # the output's top-left
            axes[1, j].imshow(seen[j, 0].cpu().numpy(), cmap="gray", vmin=0, vmax=1)
    H, W = images.shape[-2:]
    for ax in axes[0]:
        ax.set_xlim(-2.5, W + 1.5)  # the image and a thin margin, so a box at the edge stays visible
        ax.set_ylim(H + 1.5, -2.5)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0, 0].set_ylabel("input")
    if theta is not None:
        axes[1, 0].set_ylabel("transformed")
    fig.suptitle("spatial transformer: the box it selects (orange) and what the CNN sees", fontsize=9)
    figures_dir.mkdir(parents=True, exist_ok=True)
    path = figures_dir / "transformer.png"
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return [path]
