"""What the NTM recipes share: their base config, loop defaults, loss and the build from a curriculum's levels.

Not a recipe: it registers nothing (the recipes are in :mod:`foveal.recipes.ntm`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from foveal.data.ntm_eval import NTMEvalSet, evaluate, generalisation_sets
from foveal.data.ntm_tasks import Copy, NTMBatch, NTMTask, SequenceSet, TaskDataset, output_phase, wrong_bits
from foveal.models.ntm import NTM, NTMSpec
from foveal.recipes.base import LoopConfig, RunConfig, Task
from foveal.train import Curriculum
from foveal.viz.ntm import show_ntm

TRAIN_SET_SIZE = 100_000  # item indices only; every batch is drawn afresh from its own seed


def loop_config(steps: int) -> LoopConfig:
    """The loop every NTM recipe trains with, for ``steps`` steps."""
    return LoopConfig(steps=steps, batch_size=32, lr=3e-3, clip_norm=10.0, eval_every=0, ckpt_every=500, log_every=50)


def spec(**options: Any) -> Callable[[], NTMSpec]:
    """A default factory of the model's spec with ``options`` changed."""
    return lambda: NTMSpec(**options)


@dataclass
class NTMConfig(RunConfig):
    """The model, curriculum and evaluation settings shared by every NTM recipe."""

    model: NTMSpec = field(default_factory=NTMSpec)
    width: int = 8  # bits per vector
    curriculum: bool = True  # start on short sequences and lengthen them as they are mastered
    curriculum_threshold: float = 0.01  # raise the level when the running bit error rate is below this
    # A constant rate let copy converge and then collapse, hence a lower one once mastered (docs/studies/ntm-copy.md).
    anneal: float = 0.1  # learning-rate multiplier once the last curriculum level is mastered
    n_eval: int = 1000  # sequences in the evaluation set (the task's full range)
    eval_seed: int = 12345  # the evaluation set does not change with the training seed


def loss(model: nn.Module, batch: NTMBatch) -> tuple[Tensor, dict[str, float]]:
    """BCE of the output phase; logs the wrong bits per sequence, the bit error rate and the length."""
    logits = output_phase(model(batch.inputs).logits, batch.targets)
    loss = F.binary_cross_entropy_with_logits(logits, batch.targets)
    wrong = wrong_bits(logits, batch.targets)
    metrics = {
        "bits": wrong.mean().item(),
        "bit_error": wrong.sum().item() / batch.targets.numel(),  # what the curriculum reads
        "length": float(batch.inputs.shape[1]),
    }
    return loss, metrics


def build(config: NTMConfig, levels: Sequence[NTMTask]) -> Task:
    """The task: train on ``levels`` (a curriculum, easiest first, ending on the task itself), evaluate on
    the task's full range and on the sets beyond it that the config's ``generalise_*`` keys name
    (:func:`foveal.data.ntm_eval.generalisation_sets`)."""
    top = levels[-1]
    model = NTM(top.input_size, top.output_size, config.model)
    callbacks: list[Curriculum] = []
    if config.curriculum and len(levels) > 1:
        curriculum = Curriculum(len(levels), threshold=config.curriculum_threshold, anneal=config.anneal)
        callbacks.append(curriculum)

        def current() -> NTMTask:
            return levels[curriculum.level]

        train_set = TaskDataset(current, TRAIN_SET_SIZE, seed=config.seed)
    else:
        train_set = TaskDataset(top, TRAIN_SET_SIZE, seed=config.seed)
    if isinstance(top, Copy):  # evaluation scores the task itself, without the training's emphasis
        top = dataclasses.replace(top, blank_rate=0.0)
    beyond = {key: value for key, value in vars(config).items() if key.startswith("generalise_")}
    extras = generalisation_sets(top, getattr(config, "n_eval_long", 0), config.eval_seed, **beyond)
    eval_set = NTMEvalSet(SequenceSet(top, config.n_eval, config.eval_seed), extras)
    return Task(model, train_set, loss, eval_set, evaluate, train_set.collate, show_ntm, list(callbacks))
