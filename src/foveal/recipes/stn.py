"""``stn``: a CNN with and without a spatial transformer on distorted Fashion-MNIST or MNIST.

The STN paper's (Jaderberg et al. 2015, sec. 4.1) comparison: the same CNN, once on the
distorted image and once on a spatial transformer's output, on rotated (R), rotated-translated-
scaled (RTS, 42 x 42), projective (P), elastic (E) and cluttered (60 x 60) images
(:mod:`foveal.data.images`). The model is :class:`~foveal.models.stn_classifier.STNSpec`:
``model.name`` picks the CNN or the ST-CNN, the other ``model.*`` keys are their options.
``evaluate`` reports the test error in percent; ``show`` draws the input with the box the
transform selects, and what the CNN then sees.

    foveal train stn --preset quick --set distortion=RTS --set model.name=stcnn
    foveal train stn --preset paper --set distortion=RTS --set model.name=stcnn   # the paper's comparison

The ``paper`` preset is the STN paper's comparison at a CPU's budget (docs/stn.md has its table).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from torch import Tensor, nn

from foveal.artifact import card_labels
from foveal.data.images import DistortedImages
from foveal.models.stn_classifier import STNSpec, stn_classifier
from foveal.recipes._classify import (
    HeldOut,
    ImageData,
    class_names,
    classification_loss,
    describe_classifier,
    error_rate,
    image_sets,
    sample_images,
)
from foveal.recipes.base import LoopConfig, Recipe, RunConfig, Task
from foveal.registry import RECIPES
from foveal.viz.stn import show_transformer


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

    def show(model: nn.Module, dataset: DistortedImages, figures_dir: Path) -> list[Path]:
        return show_transformer(model, dataset, figures_dir, names)

    return Task(model, train_set, classification_loss, eval_set=test_set, evaluate=error_rate, show=show)


def gallery(config: STNConfig, model: nn.Module, tensors: dict[str, Tensor], figures_dir: Path) -> list[Path]:
    """:func:`show_transformer` on the shipped sample."""
    held_out = HeldOut(tensors["images"], tensors["labels"], tensors.get("boxes"))
    return show_transformer(model, held_out, figures_dir, tuple(card_labels(model)["classes"]))


QUICK = {"loop.steps": 1500, "data.n_test": 2000}
# The STN paper's comparison at this machine's budget: 3,000 steps of 64 with a cosine schedule from a peak of
# 3e-3 (what a constant 1e-3 reaches in 6,000), each evaluation on every test image; the transformer's output
# is the input's size and its sampler bilinear, as in the paper.
PAPER = {
    "loop.steps": 3000,
    "loop.lr": 3e-3,
    "loop.schedule": "cosine",
    "loop.warmup_steps": 100,
    "loop.eval_every": 300,
    "data.n_test": 0,
}
RECIPES.add(
    Recipe(
        name="stn",
        description="CNN vs ST-CNN on distorted Fashion-MNIST/MNIST (R, RTS, P, E, cluttered): test error %",
        config=STNConfig,
        build=build_stn,
        presets={
            "ci": {"loop.steps": 4, "loop.batch_size": 16, "data.n_train": 64, "data.n_test": 32, "model.width": 4},
            "quick": QUICK,
            "paper": PAPER,
            "full": {"loop.steps": 20000, "loop.schedule": "cosine", "loop.warmup_steps": 200},
        },
        describe=describe_classifier,
        sample=sample_images,
        gallery=gallery,
    )
)

__all__ = ["STNConfig", "build_stn", "show_transformer"]
