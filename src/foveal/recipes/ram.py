"""``ram``: the Recurrent Attention Model on 60 x 60 translated or cluttered images, and its baselines.

The RAM paper's (Mnih et al. 2014, sec. 4.1) comparison on 60 x 60 canvases: RAM with hard
multi-scale glimpses trained by the hybrid loss (cross-entropy + REINFORCE with a learned
baseline), its differentiable variant with Gaussian filterbank reads (``model.read=gaussian``,
trained by backprop alone), and convolutional baselines on the whole canvas
(``model.name=glimpse-cnn``, the paper's one-layer conv net; ``model.name=cnn``,
:class:`~foveal.models.stn_classifier.CNN`). The model is
:class:`~foveal.models.ram.RAMOrBaselineSpec`. ``evaluate`` reports the test error in percent
(RAM looks at the mean locations, no sampling); ``show`` draws the glimpse path over time.

    foveal train ram --preset quick --set distortion=cluttered --set model.read=hard
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from torch import Tensor, nn
from torch.utils.data import Dataset

from foveal.models.ram import RAMOrBaselineSpec, ram_loss, ram_or_baseline
from foveal.recipes.base import LoopConfig, Recipe, RunConfig, Task
from foveal.recipes.stn import (
    OBJECT_COLOUR,
    HeldOut,
    ImageData,
    _figure_path,
    class_names,
    classification_loss,
    describe_classifier,
    error_rate,
    image_sets,
    sample_images,
)
from foveal.registry import RECIPES


@dataclass
class RAMConfig(RunConfig):
    """The ``ram`` recipe: RAM or a conv baseline (``model.*``), a 60 x 60 image set and the loop."""

    # An LSTM core: the paper's rectifier core ("rnn") learned slower here
    model: RAMOrBaselineSpec = field(default_factory=lambda: RAMOrBaselineSpec(core="lstm"))
    distortion: Literal["translated", "cluttered"] = "cluttered"
    reinforce_weight: float = 1.0  # w of the hybrid loss CE + w REINFORCE + baseline MSE (hard read)
    data: ImageData = field(default_factory=ImageData)
    loop: LoopConfig = field(
        default_factory=lambda: LoopConfig(steps=4000, batch_size=64, lr=1e-3, clip_norm=5.0, ckpt_every=1000)
    )


def build_ram(config: RAMConfig) -> Task:
    train_set, test_set = image_sets(config.data, config.distortion)
    size = train_set.image_size
    names = class_names(config.data.dataset)
    model = ram_or_baseline(1, size, len(names), config.model)
    if config.model.name != "ram":
        return Task(model, train_set, classification_loss, eval_set=test_set, evaluate=error_rate)
    weight = config.reinforce_weight

    def loss(model: nn.Module, batch: list[Tensor]) -> tuple[Tensor, dict[str, float]]:
        images, labels = batch
        return ram_loss(model(images), labels, reinforce_weight=weight)

    def show(model: nn.Module, dataset: Dataset, figures_dir: Path) -> list[Path]:
        return show_glimpses(model, dataset, figures_dir, names)

    return Task(model, train_set, loss, eval_set=test_set, evaluate=error_rate, show=show)


def show_glimpses(model: nn.Module, dataset: Dataset, figures_dir: Path, names: tuple[str, ...]) -> list[Path]:
    """The glimpse path over time on 6 test images: the finest glimpse's square at each step, coloured by step,
    and where the canvas has one, the object's box with the number of glimpses centred on it."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import BoundaryNorm
    from matplotlib.patches import Rectangle

    from foveal.viz._mpl import pyplot

    plt = pyplot()
    device = next(model.parameters()).device
    count = min(6, len(dataset))
    images = dataset.images[:count].float().to(device) / 255.0  # type: ignore[attr-defined]
    labels = dataset.labels[:count]  # type: ignore[attr-defined]
    objects = getattr(dataset, "boxes", None)
    out = model(images)
    predicted = out.logits.argmax(-1).cpu()
    H, W = images.shape[-2:]
    centres = ((out.locations.cpu() + 1) / 2 * Tensor([W, H])).numpy() - 0.5  # pixel-centre coordinates
    extents = out.extents.cpu().numpy()
    T = centres.shape[1]
    steps = plt.cm.plasma
    norm = BoundaryNorm([t + 0.5 for t in range(T + 1)], steps.N)
    fig, axes = plt.subplots(1, count, figsize=(2.2 * count + 0.8, 3.0), squeeze=False)
    for j, ax in enumerate(axes[0]):
        ax.imshow(images[j, 0].cpu().numpy(), cmap="gray", vmin=0, vmax=1)
        ax.plot(centres[j, :, 0], centres[j, :, 1], color="white", linewidth=0.8, alpha=0.7)
        for t in range(T):
            side, colour = float(extents[j, t]), steps(norm(t + 1))
            corner = (centres[j, t, 0] - side / 2, centres[j, t, 1] - side / 2)
            ax.add_patch(Rectangle(corner, side, side, fill=False, edgecolor=colour, linewidth=1.2))
            ax.text(centres[j, t, 0], centres[j, t, 1], str(t + 1), color=colour, fontsize=7, ha="center")
        title = names[int(predicted[j])]
        if objects is not None:
            x0, y0, x1, y1 = objects[j].tolist()
            ax.add_patch(Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False, ec=OBJECT_COLOUR, lw=1, ls="--"))
            on = ((centres[j, :, 0] >= x0 - 0.5) & (centres[j, :, 0] < x1 - 0.5)) & (
                (centres[j, :, 1] >= y0 - 0.5) & (centres[j, :, 1] < y1 - 0.5)
            )
            title += f"\n{int(on.sum())} of {T} glimpses on it"
        ax.set_title(title, fontsize=8, color="limegreen" if predicted[j] == labels[j] else "red")
        ax.set_xlim(-0.5, W - 0.5)
        ax.set_ylim(H - 0.5, -0.5)
        ax.set_xticks([])
        ax.set_yticks([])
    bar = fig.colorbar(
        ScalarMappable(norm, steps), ax=axes.ravel().tolist(), shrink=0.8, pad=0.02, ticks=range(1, T + 1)
    )
    bar.set_label("step", fontsize=7)
    bar.ax.tick_params(labelsize=6)
    kind = "hard glimpses (REINFORCE)" if getattr(model, "read", "hard") == "hard" else "Gaussian reads (backprop)"
    fig.suptitle(
        f"RAM, {kind}: the finest glimpse at steps 1..{T} (colour: the step, its bar; white: the path)\n"
        "cyan dashed: the object's box; title: the prediction (green right, red wrong)",
        fontsize=8,
    )
    path = _figure_path(figures_dir, "glimpses.png")
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return [path]


def gallery(config: RAMConfig, model: nn.Module, tensors: dict[str, Tensor], figures_dir: Path) -> list[Path]:
    """:func:`show_glimpses` on the shipped sample."""
    held_out = HeldOut(tensors["images"], tensors["labels"], tensors.get("boxes"))
    return show_glimpses(model, held_out, figures_dir, tuple(model.labels["classes"]))


RECIPES.register("ram")(
    Recipe(
        name="ram",
        description="Recurrent Attention Model (hard REINFORCE or Gaussian reads) vs conv nets on 60x60 canvases",
        config=RAMConfig,
        build=build_ram,
        presets={
            "ci": {"loop.steps": 4, "loop.batch_size": 16, "data.n_train": 64, "data.n_test": 32, "model.glimpses": 2},
            # 3,000 steps: at most three minutes of one thread (6,000: 43.9% test error, seed 0)
            "quick": {"loop.steps": 3000, "data.n_test": 2000},
            "full": {"loop.steps": 30000, "model.glimpses": 8, "loop.schedule": "cosine", "loop.warmup_steps": 200},
        },
        describe=describe_classifier,
        sample=lambda config, task: sample_images(config, task, count=6),
        gallery=gallery,
    )
)

__all__ = ["RAMConfig", "build_ram", "show_glimpses"]
