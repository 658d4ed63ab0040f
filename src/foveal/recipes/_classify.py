"""What the ``stn`` and ``ram`` recipes share: the distorted image sets, the classification loss and the test error.

Not a recipe: it registers nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import Dataset

from foveal.data.images import FASHION_CLASSES, DistortedImages
from foveal.models.ram import glimpses_on_object
from foveal.models.stn_classifier import transform_box
from foveal.preprocess import picture_input
from foveal.recipes.base import Task

ImageSource = Literal["fashion-mnist", "mnist"]  # the undistorted images (foveal.data.images.BASES)


@dataclass
class ImageData:
    """Which distorted split to use (shared by the ``stn`` and ``ram`` recipes)."""

    dataset: ImageSource = "fashion-mnist"
    data_seed: int = 0  # seeds the distortions; the same for every model, so rows compare
    n_train: int = 0  # first n base images (0: all)
    n_test: int = 0
    data_dir: str = ""  # a directory with the Fashion-MNIST IDX files (searched first)
    cache_dir: str = ""  # where built splits are kept (default ~/.cache/foveal/images)


def image_sets(data: ImageData, distortion: str) -> tuple[DistortedImages, DistortedImages]:
    """The train and test splits of ``data.dataset`` under ``distortion``."""
    common: dict[str, Any] = {
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
    ``centre_px``, the mean distance between their centres in pixels. When the model returns glimpse
    ``locations`` (:class:`~foveal.models.ram.RAMOutput`) and the dataset knows its boxes, it adds
    ``on_object``: the fraction of glimpses whose centre lies inside the object's box (of all glimpses
    of all images; times ``T`` it is the mean number of glimpses on the object).
    """
    device = next(model.parameters()).device
    images, labels = dataset.images, dataset.labels  # type: ignore[attr-defined]
    boxes = getattr(dataset, "boxes", None)
    wrong, loss, iou, centre, on_object = 0, 0.0, 0.0, 0.0, 0.0
    located = looked = False
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
        locations = getattr(out, "locations", None)
        if boxes is not None and locations is not None:
            on_object += float(
                glimpses_on_object(locations.float().cpu(), boxes[i : i + batch_size], x.shape[-2:]).sum()
            )
            looked = True
    n = len(labels)
    out = {"error": 100.0 * wrong / n, "loss": loss / n}
    if located:
        out.update(iou=iou / n, centre_px=centre / n)
    if looked:
        out["on_object"] = on_object / n
    return out


class HeldOut(NamedTuple):
    """A few test images and their labels, as ``show`` reads a data set: uint8 ``(N, 1, H, W)``, int64 ``(N,)``,
    and where the objects are on a canvas (float ``(N, 4)``, pixels), else None."""

    images: Tensor
    labels: Tensor
    boxes: Tensor | None = None

    def __len__(self) -> int:
        return len(self.labels)


def describe_classifier(config: Any, task: Task) -> dict[str, dict[str, Any]]:
    """Greyscale float pictures in [0, 1] (the data set's uint8 divided by 255) of the test set's size; the class
    names."""
    size = list(task.evaluation_set().images.shape[-2:])
    return {
        "preprocessing": picture_input(size, 1, mean=[0.0], std=[1.0]),
        "labels": {"classes": list(class_names(config.data.dataset))},
    }


def sample_images(config: Any, task: Task, count: int = 8) -> dict[str, Tensor]:
    """The first ``count`` test images (uint8) and labels, the ones ``show`` draws, and their objects' boxes."""
    test = task.evaluation_set()
    held_out = {"images": test.images[:count].contiguous(), "labels": test.labels[:count].contiguous()}
    if getattr(test, "boxes", None) is not None:
        held_out["boxes"] = test.boxes[:count].contiguous()
    return held_out
