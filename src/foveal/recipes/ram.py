"""``ram``: the Recurrent Attention Model on 60 x 60 translated or cluttered images, and its baselines.

The RAM paper's (Mnih et al. 2014, sec. 4.1) comparison on 60 x 60 canvases: RAM with hard
multi-scale glimpses trained by the hybrid loss (cross-entropy + REINFORCE with a learned
baseline), its differentiable variant with Gaussian filterbank reads (``model.read=gaussian``,
trained by backprop alone), and convolutional baselines on the whole canvas
(``model.name=glimpse-cnn``, the paper's one-layer conv net; ``model.name=cnn``,
:class:`~foveal.models.stn_classifier.CNN`). The model is
:class:`~foveal.models.ram.RAMClassifierSpec`. ``evaluate`` reports the test error in percent
(RAM looks at the mean locations, no sampling); ``show`` draws the glimpse path over time.

    foveal train ram --preset quick --set distortion=cluttered --set model.read=hard
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from torch import Tensor, nn

from foveal.artifact import card_labels
from foveal.data.images import DistortedImages
from foveal.models.ram import RAMClassifierSpec, Reward, ram_classifier, ram_loss
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
from foveal.viz.ram import show_glimpses


@dataclass
class RAMConfig(RunConfig):
    """The ``ram`` recipe: RAM or a conv baseline (``model.*``), a 60 x 60 image set and the loop."""

    # An LSTM core: the paper's rectifier core ("rnn") learned slower here. The policy's std, the reward and the
    # decaying rate are what put the glimpses on the object (docs/studies/ram-policy.md): with std 0.15, the
    # paper's right-or-wrong reward and a constant rate, REINFORCE's gradient was noise and the glimpses drifted off.
    model: RAMClassifierSpec = field(default_factory=lambda: RAMClassifierSpec(core="lstm", std=0.3))
    distortion: Literal["translated", "cluttered"] = "cluttered"
    reinforce_weight: float = 1.0  # w of the hybrid loss CE + w REINFORCE + baseline MSE (hard read)
    reward: Reward = "probability"  # REINFORCE's R: "probability" of the label, or "correct" (the paper's 1[right])
    policy_lr_scale: float = 1.0  # the location network's learning rate, as a multiple of loop.lr (hard read)
    data: ImageData = field(default_factory=ImageData)
    loop: LoopConfig = field(
        default_factory=lambda: LoopConfig(
            steps=4000,
            batch_size=64,
            lr=1e-3,
            schedule="cosine",
            warmup_steps=200,
            clip_norm=5.0,
            ckpt_every=1000,
        )
    )


def build_ram(config: RAMConfig) -> Task:
    train_set, test_set = image_sets(config.data, config.distortion)
    size = train_set.image_size
    names = class_names(config.data.dataset)
    model = ram_classifier(1, size, len(names), config.model)
    if config.model.name != "ram":
        return Task(model, train_set, classification_loss, eval_set=test_set, evaluate=error_rate)
    weight, reward = config.reinforce_weight, config.reward

    def loss(model: nn.Module, batch: list[Tensor]) -> tuple[Tensor, dict[str, float]]:
        images, labels = batch
        return ram_loss(model(images), labels, reinforce_weight=weight, reward=reward)

    def show(model: nn.Module, dataset: DistortedImages, figures_dir: Path) -> list[Path]:
        return show_glimpses(model, dataset, figures_dir, names)

    scales = {"locator": config.policy_lr_scale} if config.policy_lr_scale != 1.0 else {}
    return Task(model, train_set, loss, eval_set=test_set, evaluate=error_rate, show=show, lr_scales=scales)


def gallery(config: RAMConfig, model: nn.Module, tensors: dict[str, Tensor], figures_dir: Path) -> list[Path]:
    """:func:`show_glimpses` on the shipped sample."""
    held_out = HeldOut(tensors["images"], tensors["labels"], tensors.get("boxes"))
    return show_glimpses(model, held_out, figures_dir, tuple(card_labels(model)["classes"]))


RECIPES.add(
    Recipe(
        name="ram",
        description="Recurrent Attention Model (hard REINFORCE or Gaussian reads) vs conv nets on 60x60 canvases",
        config=RAMConfig,
        build=build_ram,
        presets={
            "ci": {"loop.steps": 4, "loop.batch_size": 16, "data.n_train": 64, "data.n_test": 32, "model.glimpses": 2},
            # Minutes of one thread: shows the policy learning, not convergence (docs/stn.md)
            "quick": {"loop.steps": 3000, "data.n_test": 2000},
            # The RAM paper's comparison at this machine's budget (docs/stn.md): about 500 CPU seconds a RAM run
            "paper": {"loop.steps": 15000, "loop.eval_every": 2500},
            "full": {"loop.steps": 30000, "model.glimpses": 8},
        },
        describe=describe_classifier,
        sample=lambda config, task: sample_images(config, task, count=6),
        gallery=gallery,
    )
)

__all__ = ["RAMConfig", "build_ram", "show_glimpses"]
