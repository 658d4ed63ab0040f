"""``stn``: a CNN with and without a spatial transformer on distorted Fashion-MNIST or MNIST.

The STN paper's (Jaderberg et al. 2015, sec. 4.1) comparison: the same CNN, once on the
distorted image and once on a spatial transformer's output, on rotated (R), rotated-translated-
scaled (RTS, 42 x 42), projective (P), elastic (E) and cluttered (60 x 60) images
(:mod:`foveal.data.images`). The model is :class:`~foveal.models.stn_classifier.STNSpec`:
``model.name`` picks the CNN or the ST-CNN, the other ``model.*`` keys are their options.
``evaluate`` reports the test error in percent; ``show`` draws the input with the box the
transform selects, and what the CNN then sees.

    foveal train stn --preset quick --set distortion=RTS --set model.name=stcnn
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import Dataset

from foveal.data.images import FASHION_CLASSES, DistortedImages
from foveal.models.stn_classifier import STNSpec, stn_classifier, transform_box
from foveal.recipes.base import LoopConfig, Recipe, RunConfig, Task
from foveal.registry import RECIPES

Base = Literal["fashion-mnist", "mnist"]


@dataclass
class ImageData:
    """Which distorted split to use (shared by the ``stn`` and ``ram`` recipes)."""

    dataset: Base = "fashion-mnist"
    data_seed: int = 0  # seeds the distortions; the same for every model, so rows compare
    n_train: int = 0  # first n base images (0: all)
    n_test: int = 0
    data_dir: str = ""  # a directory with the Fashion-MNIST IDX files (searched first)
    cache_dir: str = ""  # where built splits are kept (default ~/.cache/foveal/images)


def image_sets(data: ImageData, distortion: str) -> tuple[DistortedImages, DistortedImages]:
    """The train and test splits of ``data.dataset`` under ``distortion``."""
    common = {
        "seed": data.data_seed,
        "cache_dir": data.cache_dir or None,
        "root": data.data_dir or None,
    }
    train = DistortedImages(data.dataset, "train", distortion, limit=data.n_train or None, **common)
    test = DistortedImages(data.dataset, "test", distortion, limit=data.n_test or None, **common)
    return train, test


def class_names(dataset: str) -> tuple[str, ...]:
    return FASHION_CLASSES if dataset == "fashion-mnist" else tuple(str(d) for d in range(10))


def classification_loss(model: nn.Module, batch: list[Tensor]) -> tuple[Tensor, dict[str, float]]:
    """Cross-entropy of a classifier returning ``(logits, ...)``; logs the batch accuracy."""
    images, labels = batch
    logits = model(images)[0]
    return F.cross_entropy(logits, labels), {"acc": (logits.argmax(-1) == labels).float().mean().item()}


def box_iou(a: Tensor, b: Tensor) -> Tensor:
    """Intersection over union of axis-aligned boxes ``(x_min, y_min, x_max, y_max)``.

    Shape:
        - a, b: ``(N, 4)``
        - output: ``(N,)``

    Example:
        >>> box_iou(torch.tensor([[0.0, 0, 2, 2]]), torch.tensor([[1.0, 0, 3, 2]])).tolist()
        [0.3333333432674408]
    """
    width = (torch.minimum(a[:, 2], b[:, 2]) - torch.maximum(a[:, 0], b[:, 0])).clamp_min(0)
    height = (torch.minimum(a[:, 3], b[:, 3]) - torch.maximum(a[:, 1], b[:, 1])).clamp_min(0)
    inter = width * height
    area = (a[:, 2:] - a[:, :2]).prod(-1) + (b[:, 2:] - b[:, :2]).prod(-1)
    return inter / (area - inter).clamp_min(1e-12)


def error_rate(model: nn.Module, dataset: Dataset, batch_size: int = 500) -> dict[str, float]:
    """Test error in percent and mean cross-entropy, in batches (the model's first output is the logits).

    When the model also returns a transform ``theta`` and the dataset knows where its objects are
    (``dataset.boxes``, translated and cluttered canvases), it adds where the transformer looks:
    ``iou``, the mean intersection over union of the box the transform selects (the bounding box
    of :func:`~foveal.models.stn_classifier.transform_box`) with the object's tight box, and
    ``centre_px``, the mean distance between their centres in pixels.
    """
    device = next(model.parameters()).device
    images, labels = dataset.images, dataset.labels  # type: ignore[attr-defined]
    boxes = getattr(dataset, "boxes", None)
    wrong, loss, iou, centre = 0, 0.0, 0.0, 0.0
    located = False
    for i in range(0, len(labels), batch_size):
        x = images[i : i + batch_size].to(device).float() / 255.0
        y = labels[i : i + batch_size].to(device)
        out = model(x)
        logits, theta = out[0], getattr(out, "theta", None)  # RAM's second output is not a theta
        wrong += int((logits.argmax(-1) != y).sum())
        loss += float(F.cross_entropy(logits, y, reduction="sum"))
        if boxes is not None and theta is not None and theta.shape[1:] == (2, 3):
            corners = transform_box(theta.float().cpu(), tuple(x.shape[-2:]))  # (B, 5, 2)
            seen = torch.cat([corners.amin(1), corners.amax(1)], dim=1)
            truth = boxes[i : i + batch_size]
            iou += float(box_iou(seen, truth).sum())
            centre += float(((seen[:, :2] + seen[:, 2:]) / 2 - (truth[:, :2] + truth[:, 2:]) / 2).norm(dim=1).sum())
            located = True
    n = len(labels)
    out = {"error": 100.0 * wrong / n, "loss": loss / n}
    if located:
        out.update(iou=iou / n, centre_px=centre / n)
    return out


def _figure_path(figures_dir: Path, name: str) -> Path:
    figures_dir.mkdir(parents=True, exist_ok=True)
    return figures_dir / name


@dataclass
class STNConfig(RunConfig):
    """The ``stn`` recipe: a classifier (``model.*``), a distorted image set and the loop."""

    model: STNSpec = field(default_factory=STNSpec)
    # R, RTS, P, E: the STN paper's distortions; translated, cluttered: 60 x 60 canvases (foveal.data.images)
    distortion: Literal["none", "R", "RTS", "P", "E", "translated", "cluttered"] = "RTS"
    data: ImageData = field(default_factory=ImageData)
    loop: LoopConfig = field(
        default_factory=lambda: LoopConfig(steps=3000, batch_size=64, lr=1e-3, ckpt_every=1000, log_every=50)
    )


def build_stn(config: STNConfig) -> Task:
    train_set, test_set = image_sets(config.data, config.distortion)
    names = class_names(config.data.dataset)
    model = stn_classifier(1, train_set.image_size, len(names), config.model)

    def show(model: nn.Module, dataset: Dataset, figures_dir: Path) -> list[Path]:
        return show_transformer(model, dataset, figures_dir, names)

    return Task(model, train_set, classification_loss, eval_set=test_set, evaluate=error_rate, show=show)


OBJECT_COLOUR = "#00e5ff"  # the object's outline, as on the VQA figures
OBJECT_LEVEL = 0.1  # a pixel brighter than this (of 1) is the object: the canvases' background is 0


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


def show_transformer(model: nn.Module, dataset: Dataset, figures_dir: Path, names: tuple[str, ...]) -> list[Path]:
    """Input with the transform's box and the object's outline (top), the transformer's output (bottom), for 8
    test images; each title gives the prediction and the share of the object's brightness inside the box."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    from foveal.viz._mpl import pyplot

    plt = pyplot()
    device = next(model.parameters()).device
    count = min(8, len(dataset))
    images = dataset.images[:count].float().to(device) / 255.0  # type: ignore[attr-defined]
    labels = dataset.labels[:count]  # type: ignore[attr-defined]
    logits, theta, seen = model(images)
    predicted = logits.argmax(-1).cpu()
    rows = 1 if theta is None else 2
    fig, axes = plt.subplots(rows, count, figsize=(1.5 * count + 0.8, 1.8 * rows + 0.9), squeeze=False)
    boxes = None if theta is None else transform_box(theta.cpu(), tuple(images.shape[-2:]))
    masses = None if boxes is None else mass_in_box(images.cpu(), boxes)
    for j in range(count):
        ax = axes[0, j]
        picture = images[j, 0].cpu().numpy()
        ax.imshow(picture, cmap="gray", vmin=0, vmax=1)
        ax.contour(picture > OBJECT_LEVEL, levels=[0.5], colors=OBJECT_COLOUR, linewidths=0.6)
        colour = "limegreen" if predicted[j] == labels[j] else "red"
        inside = "" if masses is None else f"\n{float(masses[j]):.2f} in box"
        ax.set_title(f"{names[int(predicted[j])]}{inside}", fontsize=7, color=colour)
        if boxes is not None:
            box = boxes[j].numpy()
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
    bar = fig.colorbar(
        ScalarMappable(Normalize(0, 1), colormaps["gray"]), ax=axes.ravel().tolist(), shrink=0.6, pad=0.02
    )
    bar.set_label("pixel value", fontsize=6)
    bar.ax.tick_params(labelsize=5)
    fig.suptitle(
        "spatial transformer: the box it selects in the input (orange, dot: the output's top-left) and what the "
        "CNN sees\ncyan: the object's outline; title: the prediction (green right, red wrong) and the share of "
        "the object's brightness inside the box",
        fontsize=7,
    )
    path = _figure_path(figures_dir, "transformer.png")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return [path]


class HeldOut(NamedTuple):
    """A few test images and their labels, as ``show`` reads a data set: uint8 ``(N, 1, H, W)``, int64 ``(N,)``,
    and where the objects are on a canvas (float ``(N, 4)``, pixels), else None."""

    images: Tensor
    labels: Tensor
    boxes: Tensor | None = None

    def __len__(self) -> int:
        return len(self.labels)


def describe_classifier(config: STNConfig, task: Task) -> dict[str, dict[str, Any]]:
    """Greyscale pictures in [0, 1] of the test set's size; the class names."""
    size = list(task.eval_set.images.shape[-2:])  # type: ignore[attr-defined]
    return {
        "preprocessing": {"size": size, "channels": 1, "mean": [0.0], "std": [1.0]},
        "labels": {"classes": list(class_names(config.data.dataset))},
    }


def sample_images(config: STNConfig, task: Task, count: int = 8) -> dict[str, Tensor]:
    """The first ``count`` test images (uint8) and labels, the ones ``show`` draws, and their objects' boxes."""
    test = task.eval_set
    held_out = {"images": test.images[:count].contiguous(), "labels": test.labels[:count].contiguous()}  # type: ignore[attr-defined]
    if getattr(test, "boxes", None) is not None:
        held_out["boxes"] = test.boxes[:count].contiguous()  # type: ignore[attr-defined]
    return held_out


def gallery(config: STNConfig, model: nn.Module, tensors: dict[str, Tensor], figures_dir: Path) -> list[Path]:
    """:func:`show_transformer` on the shipped sample."""
    held_out = HeldOut(tensors["images"], tensors["labels"], tensors.get("boxes"))
    return show_transformer(model, held_out, figures_dir, tuple(model.labels["classes"]))


QUICK = {"loop.steps": 1500, "data.n_test": 2000}
RECIPES.register("stn")(
    Recipe(
        name="stn",
        description="CNN vs ST-CNN on distorted Fashion-MNIST/MNIST (R, RTS, P, E, cluttered): test error %",
        config=STNConfig,
        build=build_stn,
        presets={
            "ci": {"loop.steps": 4, "loop.batch_size": 16, "data.n_train": 64, "data.n_test": 32, "model.width": 4},
            "quick": QUICK,
            "full": {"loop.steps": 20000, "loop.schedule": "cosine", "loop.warmup_steps": 200},
        },
        describe=describe_classifier,
        sample=sample_images,
        gallery=gallery,
    )
)
