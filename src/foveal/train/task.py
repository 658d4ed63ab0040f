"""The loop's contract: what a recipe hands the loop (:class:`Task`) and how it is configured.

The loop (:func:`foveal.train.train`) knows only these types; it never imports a model, a dataset
or a recipe. Behaviour beyond "loss, backward, step" (a curriculum, a learning-rate multiplier,
extra metrics) plugs in as a :class:`Callback`, whose state the loop saves in the checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from foveal.errors import FovealError

Batch = Any
LossFn = Callable[[nn.Module, Batch], tuple[Tensor, dict[str, float]]]
"""``loss(model, batch) -> (scalar loss, {metric name: float})``; the metrics are logged.

The batch is already on the loop's device. Under ``torchrun`` the model is wrapped in
``DistributedDataParallel``: call it (its forward); reach anything else through
``getattr(model, "module", model)``. The loss should be a mean over the batch, so that N ranks
on ``batch_size / N`` each give the gradient of one process on the whole batch. A loss has no
side effects: what must change as training goes (a curriculum) is a :class:`Callback`."""
ModelT = TypeVar("ModelT", bound=nn.Module)
TrainT = TypeVar("TrainT", bound=Dataset)
EvalT = TypeVar("EvalT", bound=Dataset)
EvalFn = Callable[[ModelT, EvalT], dict[str, float]]
"""``evaluate(model, dataset) -> {metric name: float}``; runs under ``torch.no_grad`` in eval mode.

The model is the plain module (never DDP-wrapped), on the loop's device: move data to
``next(model.parameters()).device``. Evaluation runs on rank 0 only and cannot disturb the
training random stream (the loop saves and restores the RNG states around it)."""
ShowFn = Callable[[ModelT, EvalT, Path], list[Path]]
"""``show(model, dataset, figures_dir) -> written paths``: the pictures of where the model looks."""


@dataclass
class LoopConfig:
    """Settings of the one training loop, shared by every recipe (``loop.*`` keys)."""

    steps: int = 1000  # optimiser steps in the whole run
    batch_size: int = 64  # the global batch (split across ranks under torchrun)
    optimizer: Literal["adam", "adamw", "rmsprop"] = "adam"
    lr: float = 1e-3  # the peak learning rate
    weight_decay: float = 0.0
    momentum: float = 0.0  # rmsprop's momentum (the NTM paper uses 0.9)
    rmsprop_alpha: float = 0.99  # rmsprop's squared-gradient decay (Graves 2013 uses 0.95)
    rmsprop_centered: bool = False  # Graves 2013 divides by the centred second moment
    schedule: Literal["constant", "cosine", "step"] = "constant"
    warmup_steps: int = 0  # linear warmup from lr / warmup_steps
    step_size: int = 0  # for schedule="step": multiply lr by gamma every step_size steps
    gamma: float = 0.1  # for schedule="step"
    clip_norm: float | None = None  # clip the global gradient norm
    clip_value: float | None = None  # clip each gradient element to [-v, v]
    # a NaN or infinite loss or gradient stops the run (its last checkpoint is kept) or skips the step
    nonfinite: Literal["stop", "skip"] = "stop"
    eval_every: int = 0  # 0: evaluate only at the end
    ckpt_every: int = 200  # steps between checkpoints (one is always written at the end)
    log_every: int = 20  # steps averaged into one line of metrics.jsonl
    device: Literal["cpu", "cuda", "auto"] = "auto"  # auto: the GPU when there is one, else the CPU
    # torch.compile the model (a recurrent model its time step; foveal.compiling): the first steps compile
    compile: bool = False
    # torch.compile's mode (foveal.compiling.COMPILE_MODES): "max-autotune-no-cudagraphs" also picks each matrix
    # product's fastest kernel, for a faster step after a longer compile; "reduce-overhead" (loop.device=cuda)
    # replays the graphs as CUDA graphs
    compile_mode: str = "default"
    # Adam and AdamW update each weight in one fused kernel (PyTorch's fused=True) instead of a dozen element-wise
    # passes: it rounds differently in the last bit. None: fused when loop.compile is on, the reference update else
    fused_optimizer: bool | None = None
    ddp_find_unused: bool = False  # under torchrun: True if some parameters get no gradient in a step


@dataclass
class RunConfig:
    """Base of every recipe's config: subclass it and add a ``model`` spec and data fields."""

    seed: int = 0  # seeds the model's initialisation, the data order and every random draw
    # torch intra-op threads; 0: every core this process may use (shared among torchrun's ranks on one machine)
    threads: int = 0
    loop: LoopConfig = field(default_factory=LoopConfig)


def cpu_threads(threads: int = 0) -> int:
    """The intra-op thread count a setting means: ``threads`` itself when positive, else (0: auto) the cores
    this process may run on, divided among the ranks ``torchrun`` starts on this machine.

    Example:
        >>> cpu_threads(3)
        3
        >>> cpu_threads(0) >= 1
        True
    """
    if threads > 0:
        return threads
    return max(1, available_cores() // int(os.environ.get("LOCAL_WORLD_SIZE", 1)))


def use_threads(threads: int = 0) -> int:
    """Set torch's intra-op threads to what ``threads`` means (:func:`cpu_threads`) and return the count.

    Every command that runs a model sets its threads here, so ``--threads`` and the config's ``threads``
    mean the same everywhere.
    """
    count = cpu_threads(threads)
    torch.set_num_threads(count)
    return count


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it, else every core)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Callback:
    """Extra behaviour plugged into the loop; every hook is optional.

    The loop calls :meth:`on_step_begin` before each optimiser step and :meth:`on_step_end` after it
    (before the learning rate of the next step is set), multiplies the scheduled rate by :meth:`lr_scale`, adds
    :meth:`eval_metrics` to each evaluation, and saves :meth:`state_dict` in the checkpoint so a
    resumed run continues exactly. A callback's state must be tensors and plain values.

    Example:
        >>> class CountSteps(Callback):
        ...     def __init__(self): self.steps = 0
        ...     def on_step_end(self, step, metrics): self.steps += 1
        ...     def state_dict(self): return {"steps": self.steps}
        ...     def load_state_dict(self, state): self.steps = state["steps"]
        >>> c = CountSteps(); c.on_step_end(1, {}); c.state_dict()
        {'steps': 1}
    """

    def on_step_begin(self, step: int) -> None:
        """Before optimiser step ``step`` (1-based; after a resume, the first step run)."""

    def on_step_end(self, step: int, metrics: dict[str, float]) -> None:
        """After optimiser step ``step`` (1-based); ``metrics`` are the step's, and may be added to."""

    def lr_scale(self) -> float:
        """A multiplier of the scheduled learning rate, read before every step."""
        return 1.0

    def eval_metrics(self) -> dict[str, float]:
        """Values added to every evaluation's metrics."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        del state


@dataclass
class Task(Generic[ModelT, TrainT, EvalT]):
    """What a recipe builds and the loop consumes.

    Generic in the model and the two data sets, so that a recipe's evaluation and figures are typed
    with the data set it built (``Task[VQA, EasyVQA, EasyVQA]``); the loop takes any.
    """

    model: ModelT
    train_set: TrainT
    loss: LossFn
    eval_set: EvalT | None = None
    evaluate: EvalFn[ModelT, EvalT] | None = None
    collate: Callable[[list[Any]], Batch] | None = None
    show: ShowFn[ModelT, EvalT] | None = None
    callbacks: list[Callback] = field(default_factory=list)
    # Learning-rate multipliers of parts of the model, by submodule name ({"locator": 0.3}: the parameters under
    # model.locator train at 0.3 times the scheduled rate); the rest at 1
    lr_scales: dict[str, float] = field(default_factory=dict)
    # What the evaluations during training (every loop.eval_every steps) read, when not all of eval_set: a fixed
    # slice of it, to follow the run at a fraction of the cost. The last evaluation, and `foveal eval`, read eval_set.
    interim_eval_set: EvalT | None = None

    def evaluation_set(self) -> EvalT:
        """The evaluation set, which a recipe's description, sample and figures read."""
        if self.eval_set is None:
            raise FovealError("this task has no evaluation set (eval_set=None)")
        return self.eval_set
