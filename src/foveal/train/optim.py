"""Optimiser, learning-rate schedule and gradient clipping, built from :class:`LoopConfig`."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from foveal.errors import FovealError
from foveal.train.task import LoopConfig


def parameter_groups(model: nn.Module, lr_scales: dict[str, float], lr: float) -> list[dict[str, Any]]:
    """The model's parameters as optimiser groups: one at ``lr``, one per entry of ``lr_scales`` at ``lr * scale``.

    ``lr_scales`` maps a submodule's name (as ``model.get_submodule`` takes it) to its multiplier; a name
    the model does not have, a submodule inside another one named, or a scale that is not a positive
    finite number raises :class:`FovealError`. The scheduler multiplies every group's rate alike.

    Example:
        >>> model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
        >>> [(len(g["params"]), g["lr"]) for g in parameter_groups(model, {"1": 0.5}, 1e-3)]
        [(2, 0.001), (2, 0.0005)]
    """
    groups: dict[str, list[nn.Parameter]] = {}
    for name, scale in lr_scales.items():
        if not (isinstance(scale, int | float) and math.isfinite(scale) and scale > 0):
            raise FovealError(f"lr_scales[{name!r}]: expected a positive number, got {scale!r}")
        try:
            model.get_submodule(name)
        except AttributeError:
            raise FovealError(f"lr_scales: the model has no submodule {name!r}") from None
        groups[name] = []
    nested = [(a, b) for a in groups for b in groups if a != b and b.startswith(a + ".")]
    if nested:
        raise FovealError(f"lr_scales: {nested[0][1]!r} lies inside {nested[0][0]!r}; give each parameter one scale")
    rest: list[nn.Parameter] = []
    for name, param in model.named_parameters():
        owner = next((part for part in groups if name.startswith(part + ".")), None)
        (rest if owner is None else groups[owner]).append(param)
    scaled = [{"params": params, "lr": lr * lr_scales[name]} for name, params in groups.items() if params]
    return ([{"params": rest, "lr": lr}] if rest else []) + scaled


def build_optimizer(params: Iterable[nn.Parameter] | list[dict[str, Any]], loop: LoopConfig) -> torch.optim.Optimizer:
    """Adam, AdamW or RMSprop (with momentum) as ``loop.optimizer`` says, over parameters or groups of them.

    With ``loop.fused_optimizer`` Adam and AdamW update each weight in one fused kernel (PyTorch's
    ``fused=True``), as a compiled optimiser step would, instead of a dozen element-wise passes per weight.
    It rounds differently in the last bit; by default (None) a compiled step takes it and an eager step keeps
    the reference update.

    Example:
        >>> opt = build_optimizer(nn.Linear(2, 1).parameters(), LoopConfig(optimizer="rmsprop", momentum=0.9))
        >>> type(opt).__name__, opt.defaults["momentum"]
        ('RMSprop', 0.9)
    """
    groups: list[Any] = list(params)
    wanted = loop.compile if loop.fused_optimizer is None else loop.fused_optimizer
    fused = True if wanted else None  # None, not False: PyTorch's own default (foreach where it can)
    if loop.optimizer == "adam":
        return torch.optim.Adam(groups, lr=loop.lr, weight_decay=loop.weight_decay, fused=fused)
    if loop.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=loop.lr, weight_decay=loop.weight_decay, fused=fused)
    if loop.optimizer == "rmsprop":
        return torch.optim.RMSprop(
            groups,
            lr=loop.lr,
            alpha=loop.rmsprop_alpha,
            momentum=loop.momentum,
            weight_decay=loop.weight_decay,
            centered=loop.rmsprop_centered,
        )
    raise FovealError(f"unknown optimizer {loop.optimizer!r}; choose from: adam, adamw, rmsprop")


def lr_factor(step: int, loop: LoopConfig) -> float:
    """The multiplier of ``loop.lr`` for optimiser step ``step`` (0-based).

    Linear warmup over ``warmup_steps`` (from ``1/warmup`` to 1), then ``constant``, ``cosine``
    (to 0 at ``loop.steps``) or ``step`` (times ``gamma`` every ``step_size`` steps after warmup).

    Example:
        >>> loop = LoopConfig(steps=10, warmup_steps=2, schedule="cosine")
        >>> [round(lr_factor(s, loop), 3) for s in (0, 1, 2, 6, 10)]
        [0.5, 1.0, 1.0, 0.5, 0.0]
    """
    if step < loop.warmup_steps:
        return (step + 1) / loop.warmup_steps
    after = step - loop.warmup_steps
    if loop.schedule == "constant":
        return 1.0
    if loop.schedule == "cosine":
        span = max(1, loop.steps - loop.warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(after, span) / span))
    if loop.schedule == "step":
        return loop.gamma ** (after // loop.step_size)
    raise FovealError(f"unknown schedule {loop.schedule!r}; choose from: constant, cosine, step")


def build_scheduler(
    optimizer: torch.optim.Optimizer, loop: LoopConfig, scale: Callable[[], float] | None = None
) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` following :func:`lr_factor`, times ``scale()`` when given; its state is the step count.

    ``scale`` lets a task lower the rate as it learns (the NTM recipes: once the curriculum's last
    level is mastered). It is read at every step, so it must be a function of state that is saved
    and resumed (a buffer of the model), or a resumed run would not continue exactly.

    Example:
        >>> opt = build_optimizer(nn.Linear(2, 1).parameters(), LoopConfig(lr=1.0))
        >>> sched = build_scheduler(opt, LoopConfig(lr=1.0), scale=lambda: 0.1)
        >>> opt.param_groups[0]["lr"]
        0.1
    """
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, loop) * (1.0 if scale is None else scale())
    )


def clip_gradients(params: Iterable[nn.Parameter], loop: LoopConfig) -> float | None:
    """Clip each gradient element to ``[-clip_value, clip_value]``, then the global norm to ``clip_norm``.

    Returns the global norm before norm clipping (None when ``clip_norm`` is off).

    Example:
        >>> p = nn.Parameter(torch.zeros(2)); p.grad = torch.tensor([3.0, -4.0])
        >>> clip_gradients([p], LoopConfig(clip_value=3.5, clip_norm=1.0)) > 4.6
        True
        >>> torch.linalg.vector_norm(p.grad).item() <= 1.0 + 1e-6
        True
    """
    params = [p for p in params if p.grad is not None]
    if loop.clip_value is not None:
        torch.nn.utils.clip_grad_value_(params, loop.clip_value)
    if loop.clip_norm is not None:
        return float(torch.nn.utils.clip_grad_norm_(params, loop.clip_norm))
    return None


def gradient_norm(params: Iterable[nn.Parameter]) -> float:
    """The global 2-norm of the gradients (0.0 when there are none); NaN or inf if any element is.

    Example:
        >>> p = nn.Parameter(torch.zeros(2)); p.grad = torch.tensor([3.0, -4.0])
        >>> gradient_norm([p])
        5.0
    """
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))
