"""Where the Recurrent Attention Model looks: its glimpse path over time."""

from __future__ import annotations

from pathlib import Path

from torch import Tensor, nn

from foveal.attention import record_maps
from foveal.models.ram import glimpses_on_object
from foveal.viz._mpl import FIGURE_DPI, FONT, PAGE_WIDTH_PX, pyplot, save_figure
from foveal.viz.stn import OBJECT_COLOUR, LabelledImages


def show_glimpses(model: nn.Module, dataset: LabelledImages, figures_dir: Path, names: tuple[str, ...]) -> list[Path]:
    """The glimpse path over time on 6 test images: the finest glimpse's square at each step, coloured by step,
    and where the canvas has one, the object's box with the number of glimpses centred on it."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import BoundaryNorm
    from matplotlib.patches import Rectangle

    plt = pyplot()
    device = next(model.parameters()).device
    count = min(6, len(dataset))
    images = dataset.images[:count].float().to(device) / 255.0
    labels = dataset.labels[:count]
    objects = getattr(dataset, "boxes", None)
    with record_maps(model) as maps:  # where it looked, as a user asks for it
        predicted = model(images).logits.argmax(-1).cpu()
    H, W = images.shape[-2:]
    centres = ((maps["locations"].cpu() + 1) / 2 * Tensor([W, H])).numpy() - 0.5  # pixel-centre coordinates
    extents = maps["extents"].cpu().numpy()
    if objects is not None:
        on_object = glimpses_on_object(maps["locations"].float().cpu(), objects[:count].float(), (H, W))
    T = centres.shape[1]
    steps = plt.cm.plasma
    norm = BoundaryNorm([t + 0.5 for t in range(T + 1)], steps.N)
    width = PAGE_WIDTH_PX / FIGURE_DPI - 0.3  # the page's width less the saved margin: shown unscaled
    column = (width - 0.9) / count
    fig, axes = plt.subplots(1, count, figsize=(width, column + 1.0), squeeze=False, layout="constrained")
    for j, ax in enumerate(axes[0]):
        ax.imshow(images[j, 0].cpu().numpy(), cmap="gray", vmin=0, vmax=1)
        ax.plot(centres[j, :, 0], centres[j, :, 1], color="white", linewidth=0.8, alpha=0.7)
        for t in range(T):
            side, colour = float(extents[j, t]), steps(norm(t + 1))
            corner = (centres[j, t, 0] - side / 2, centres[j, t, 1] - side / 2)
            ax.add_patch(Rectangle(corner, side, side, fill=False, edgecolor=colour, linewidth=1.2))
            ax.text(centres[j, t, 0], centres[j, t, 1], str(t + 1), color=colour, fontsize=FONT, ha="center")
        title = names[int(predicted[j])]
        if objects is not None:
            x0, y0, x1, y1 = objects[j].tolist()  # pixel-centre coordinates, as imshow's
            ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, ec=OBJECT_COLOUR, lw=1, ls="--"))
            title += f"\n{round(float(on_object[j]) * T)} of {T} glimpses on it"
        ax.set_title(title, fontsize=FONT, color="limegreen" if predicted[j] == labels[j] else "red")
        ax.set_xlim(-0.5, W - 0.5)
        ax.set_ylim(H - 0.5, -0.5)
        ax.set_xticks([])
        ax.set_yticks([])
    bar = fig.colorbar(
        ScalarMappable(norm, steps), ax=axes.ravel().tolist(), shrink=0.8, pad=0.02, ticks=range(1, T + 1)
    )
    bar.set_label("step", fontsize=FONT)
    bar.ax.tick_params(labelsize=FONT)
    kind = "hard glimpses (REINFORCE)" if getattr(model, "read", "hard") == "hard" else "Gaussian reads (backprop)"
    fig.suptitle(
        f"RAM, {kind}: the finest glimpse at steps 1..{T} (colour: the step, its bar; white: the path)\n"
        "cyan dashed: the object's box; title: the prediction (green right, red wrong)",
        fontsize=FONT,
    )
    return [save_figure(fig, figures_dir / "glimpses.png", dpi=FIGURE_DPI)]
