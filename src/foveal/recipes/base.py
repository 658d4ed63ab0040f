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
from typing import Any, Literal

from torch import Tensor, nn
from torch.utils.data import Dataset

Batch = Any
LossFn = Callable[[nn.Module, Batch], tuple[Tensor, dict[str, float]]]
"""``loss(model, batch) -> (scalar loss, {metric name: float})``; the metrics are logged.

The batch is already on the loop's device. Under ``torchrun`` the model is wrapped in
``DistributedDataParallel``: call it (its forward); reach anything else through
``getattr(model, "module", model)``. The loss should be a mean over the batch, so that N ranks
on ``batch_size / N`` each give the gradient of one process on the whole batch."""
EvalFn = Callable[[nn.Module, Dataset], dict[str, float]]
"""``evaluate(model, dataset) -> {metric name: float}``; runs under ``torch.no_grad`` in eval mode.

The model is the plain module (never DDP-wrapped), on the loop's device: move data to
``next(model.parameters()).device``. Evaluation runs on rank 0 only and cannot disturb the
training random stream (the loop saves and restores the RNG states around it)."""
ShowFn = Callable[[nn.Module, Dataset, Path], list[Path]]
"""``show(model, dataset, figures_dir) -> written paths``: the pictures of where the model looks."""


@dataclass
class LoopConfig:
    """Settings of the one training loop, shared by every recipe (``loop.*`` keys)."""

    steps: int = 1000
    batch_size: int = 64
    optimizer: Literal["adam", "adamw", "rmsprop"] = "adam"
    lr: float = 1e-3
    weight_decay: float = 0.0
    momentum: float = 0.0  # rmsprop's momentum (the NTM paper uses 0.9)
    rmsprop_alpha: float = 0.99  # rmsprop's squared-gradient decay (Graves 2013 uses 0.95)
    rmsprop_centered: bool = False  # Graves 2013 divides by the centred second moment
    schedule: Literal["constant", "cosine", "step"] = "constant"
    warmup_steps: int = 0
    step_size: int = 0  # for schedule="step": multiply lr by gamma every step_size steps
    gamma: float = 0.1
    clip_norm: float | None = None  # clip the global gradient norm
    clip_value: float | None = None  # clip each gradient element to [-v, v]
    eval_every: int = 0  # 0: evaluate only at the end
    ckpt_every: int = 200
    log_every: int = 20
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    ddp_find_unused: bool = False  # under torchrun: True if some parameters get no gradient in a step


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
    lr_scale: Callable[[], float] | None = None
    """A multiplier of the scheduled learning rate, read every step (see ``build_scheduler``)."""


@dataclass
class Recipe:
    """A named experiment: ``foveal train NAME --preset quick``."""

    name: str
    description: str
    config: type[RunConfig]
    build: Callable[[Any], Task]
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Preset name -> overrides as dotted keys, e.g. ``{"quick": {"loop.steps": 300}}``."""
