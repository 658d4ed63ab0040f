"""The contract between recipes and the training loop.

A recipe is data plus a builder: a config dataclass (defaults), named presets (overrides), and
``build(config) -> Task``. The loop (``foveal.train``) knows only :class:`Task` and
:class:`LoopConfig`; it never imports a model or a dataset.

Config resolution, lowest to highest priority: the dataclass defaults, the preset, a config file
(``--config FILE``, TOML or JSON), ``--set key=value`` flags (dotted keys reach nested fields:
``loop.lr=3e-4``), ``--seed``. The resolved config is saved as ``RUN/config.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import Tensor, nn
from torch.utils.data import Dataset

Batch = Any
LossFn = Callable[[nn.Module, Batch], tuple[Tensor, dict[str, float]]]
"""``loss(model, batch) -> (scalar loss, {metric name: float})``; the metrics are logged."""
EvalFn = Callable[[nn.Module, Dataset], dict[str, float]]
"""``evaluate(model, dataset) -> {metric name: float}``; runs under ``torch.no_grad`` in eval mode."""
ShowFn = Callable[[nn.Module, Dataset, Path], list[Path]]
"""``show(model, dataset, figures_dir) -> written paths``: the pictures of where the model looks."""


@dataclass
class LoopConfig:
    """Settings of the one training loop, shared by every recipe (``loop.*`` keys)."""

    steps: int = 1000
    batch_size: int = 64
    optimizer: str = "adam"  # adam | adamw | rmsprop
    lr: float = 1e-3
    weight_decay: float = 0.0
    momentum: float = 0.0  # rmsprop's momentum (the NTM paper uses 0.9)
    schedule: str = "constant"  # constant | cosine | step
    warmup_steps: int = 0
    step_size: int = 0  # for schedule="step": multiply lr by gamma every step_size steps
    gamma: float = 0.1
    clip_norm: float | None = None  # clip the global gradient norm
    clip_value: float | None = None  # clip each gradient element to [-v, v]
    eval_every: int = 0  # 0: evaluate only at the end
    ckpt_every: int = 200
    log_every: int = 20
    device: str = "cpu"  # cpu | cuda | auto


@dataclass
class RunConfig:
    """Base of every recipe's config: subclass it and add the model and data fields."""

    seed: int = 0
    threads: int = 1  # torch intra-op threads; 1 is fastest on a busy 2-core machine
    loop: LoopConfig = field(default_factory=LoopConfig)


@dataclass
class Task:
    """What a recipe builds and the loop consumes."""

    model: nn.Module
    train_set: Dataset
    loss: LossFn
    eval_set: Dataset | None = None
    evaluate: EvalFn | None = None
    collate: Callable[[list[Any]], Batch] | None = None
    show: ShowFn | None = None


@dataclass
class Recipe:
    """A named experiment: ``foveal train NAME --preset quick``."""

    name: str
    description: str
    config: type[RunConfig]
    build: Callable[[Any], Task]
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Preset name -> overrides as dotted keys, e.g. ``{"quick": {"loop.steps": 300}}``."""
