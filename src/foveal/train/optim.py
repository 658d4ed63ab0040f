"""Optimiser, learning-rate schedule and gradient clipping, built from :class:`LoopConfig`."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from torch import nn

from foveal.errors import FovealError
from foveal.train.task import LoopConfig


def build_optimizer(params: Iterable[nn.Parameter], loop: LoopConfig) -> torch.optim.Optimizer:
    """Adam, AdamW or RMSprop (with momentum) as ``loop.optimizer`` says.

    With ``loop.fused_optimizer`` Adam and AdamW update each weight in one fused kernel (PyTorch's
    ``fused=True``), as a compiled optimiser step would, instead of a dozen element-wise passes per weight.
    It rounds differently in the last bit; by default (None) a compiled step takes it and an eager step keeps
    the reference update.

    Example:
        >>> opt = build_optimizer(nn.Linear(2, 1).parameters(), LoopConfig(optimizer="rmsprop", momentum=0.9))
        >>> type(opt).__name__, opt.defaults["momentum"]
        ('RMSprop', 0.9)
    """
    params = list(params)
    wanted = loop.compile if loop.fused_optimizer is None else loop.fused_optimizer
    fused = True if wanted else None  # None, not False: PyTorch's own default (foreach where it can)
    if loop.optimizer == "adam":
        return torch.optim.Adam(params, lr=loop.lr, weight_decay=loop.weight_decay, fused=fused)
    if loop.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=loop.lr, weight_decay=loop.weight_decay, fused=fused)
    if loop.optimizer == "rmsprop":
        return torch.optim.RMSprop(
            params,
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
