"""Where the Recurrent Attention Model looks: its glimpse path over time."""

from __future__ import annotations

from pathlib import Path

from torch import Tensor, nn
from torch.utils.data import Dataset

from foveal.viz._mpl import pyplot


def show_glimpses(model: nn.Module, dataset: Dataset, figures_dir: Path, names: tuple[str, ...]) -> list[Path]:
    """The glimpse path over time on 6 test images: the finest glimpse's square at each step, coloured by step."""
    from matplotlib.patches import Rectangle

    plt = pyplot()
    device = next(model.parameters()).device
    images = dataset.images[:6].float().to(device) / 255.0  # type: ignore[attr-defined]
    labels = dataset.labels[:6]  # type: ignore[attr-defined]
    out = model(images)
    predicted = out.logits.argmax(-1).cpu()
    H, W = images.shape[-2:]
    centres = ((out.locations.cpu() + 1) / 2 * Tensor([W, H])).numpy() - 0.5  # pixel-centre coordinates
    extents = out.extents.cpu().numpy()
    T = centres.shape[1]
    colours = plt.cm.plasma([t / max(T - 1, 1) for t in range(T)])
    fig, axes = plt.subplots(1, 6, figsize=(13, 2.6))
    for j, ax in enumerate(axes):
        ax.imshow(images[j, 0].cpu().numpy(), cmap="gray", vmin=0, vmax=1)
        ax.plot(centres[j, :, 0], centres[j, :, 1], color="white", linewidth=0.8, alpha=0.7)
        for t in range(T):
            side = float(extents[j, t])
            corner = (centres[j, t, 0] - side / 2, centres[j, t, 1] - side / 2)
            ax.add_patch(Rectangle(corner, side, side, fill=False, edgecolor=colours[t], linewidth=1.2))
            ax.text(centres[j, t, 0], centres[j, t, 1], str(t + 1), color=colours[t], fontsize=7, ha="center")
        colour = "limegreen" if predicted[j] == labels[j] else "red"
        ax.set_title(names[int(predicted[j])], fontsize=8, color=colour)
        ax.set_xlim(-0.5, W - 0.5)
        ax.set_ylim(H - 0.5, -0.5)
        ax.set_xticks([])
        ax.set_yticks([])
    kind = "hard glimpses (REINFORCE)" if getattr(model, "read", "hard") == "hard" else "Gaussian reads (backprop)"
    fig.suptitle(f"RAM, {kind}: the finest glimpse at steps 1..{T} (dark to bright)", fontsize=9)
    figures_dir.mkdir(parents=True, exist_ok=True)
    path = figures_dir / "glimpses.png"
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return [path]
