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


def show_transformer(model: nn.Module, dataset: Dataset, figures_dir: Path, names: tuple[str, ...]) -> list[Path]:
    """Input with the transform's box (top), the transformer's output (bottom), for 8 test images."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    path = _figure_path(figures_dir, "transformer.png")
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return [path]


class HeldOut(NamedTuple):
    """A few test images and their labels, as ``show`` reads a data set: uint8 ``(N, 1, H, W)``, int64 ``(N,)``."""

    images: Tensor
    labels: Tensor

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
    """The first ``count`` test images (uint8) and labels, the ones ``show`` draws."""
    test = task.eval_set
    return {"images": test.images[:count].contiguous(), "labels": test.labels[:count].contiguous()}  # type: ignore[attr-defined]


def gallery(config: STNConfig, model: nn.Module, tensors: dict[str, Tensor], figures_dir: Path) -> list[Path]:
    """:func:`show_transformer` on the shipped sample."""
    held_out = HeldOut(tensors["images"], tensors["labels"])
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
