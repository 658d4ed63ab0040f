"""Callbacks that ship with the loop (see :class:`foveal.train.Callback`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from foveal.errors import FovealError
from foveal.train.task import Callback


class Curriculum(Callback):
    """An adaptive curriculum: the level goes up by one each time the model masters the current one.

    After every step the running mean of the step's ``metric`` (an error rate, e.g. wrong bits /
    target bits) is updated; when it drops below ``threshold`` the level rises (up to
    ``n_levels - 1``) and the running mean restarts at ``3 * threshold``, so each level must be
    earned afresh. ``mastered`` is set, for good, when the running mean drops below ``threshold``
    on the last level too; from then on the learning rate is multiplied by ``anneal``. What a level
    means (a longer sequence, more items) is up to the dataset that reads :attr:`level`.

    Example:
        >>> c = Curriculum(3, threshold=0.1, decay=0.0, anneal=0.5)
        >>> c.update(0.5); c.update(0.05); c.level
        1
        >>> c.update(0.0); c.level, c.mastered
        (2, False)
        >>> c.update(0.0); c.update(0.9); c.level, c.mastered, c.lr_scale()
        (2, True, 0.5)
    """

    def __init__(
        self,
        n_levels: int,
        *,
        metric: str = "bit_error",
        threshold: float = 0.01,
        decay: float = 0.9,
        anneal: float = 1.0,
    ) -> None:
        if n_levels < 1:
            raise FovealError(f"a curriculum needs at least one level, got {n_levels}")
        if not 0.0 <= decay < 1.0:
            raise FovealError(f"a curriculum's decay must be in [0, 1), got {decay}")
        self.n_levels, self.metric, self.threshold, self.decay, self.anneal = n_levels, metric, threshold, decay, anneal
        # float32 tensors, so the running mean is the same number on every machine and after a resume
        self._error = torch.tensor(0.5)
        self.level, self.mastered = 0, False

    @torch.no_grad()
    def update(self, error_rate: float) -> None:
        self._error.mul_(self.decay).add_((1 - self.decay) * error_rate)
        if self._error < self.threshold and self.level < self.n_levels - 1:
            self.level += 1
            self._error.fill_(3 * self.threshold)
        elif self._error < self.threshold:
            self.mastered = True

    def on_step_end(self, step: int, metrics: dict[str, float]) -> None:
        if self.metric not in metrics:
            raise FovealError(f"the curriculum reads the metric {self.metric!r}, which the loss does not return")
        self.update(metrics[self.metric])
        metrics["level"] = float(self.level)

    def lr_scale(self) -> float:
        return self.anneal if self.mastered else 1.0

    def eval_metrics(self) -> dict[str, float]:
        return {"level": float(self.level)}

    def state_dict(self) -> dict[str, Any]:
        return {"level": self.level, "error": self._error.clone(), "mastered": self.mastered}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.level, self.mastered = int(state["level"]), bool(state["mastered"])
        self._error = state["error"].clone().float()


class Anneal(Callback):
    """A setting that moves geometrically from ``start`` to ``end`` over the first ``steps`` optimiser
    steps and then stays at ``end``: after ``s`` steps it is ``start * (end / start) ** min(1, s / steps)``.

    ``apply`` puts the value wherever it lives (a model's score temperature). It is called before
    every step with the value so far, and after it, so a finished run leaves ``end`` in place. The
    value is a function of the step alone, so a resumed run goes on from where it was; building a
    model to evaluate it calls nothing and leaves the model's own value. Each step's value is logged
    as the metric ``name``.

    Example:
        >>> seen = []
        >>> a = Anneal(seen.append, start=16.0, end=1.0, steps=4, name="temperature")
        >>> for step in (1, 2, 3, 4, 5): a.on_step_begin(step)
        >>> seen
        [16.0, 8.0, 4.0, 2.0, 1.0]
    """

    def __init__(
        self, apply: Callable[[float], None], *, start: float, end: float, steps: int, name: str = "annealed"
    ) -> None:
        if not (start > 0 and end > 0):
            raise FovealError(f"a geometric schedule needs start and end > 0, got {start!r} and {end!r}")
        if steps < 1:
            raise FovealError(f"a schedule needs at least one step, got {steps}")
        self.apply, self.start, self.end, self.steps, self.name = apply, start, end, steps, name

    def value(self, done: int) -> float:
        """The value after ``done`` steps."""
        return self.start * (self.end / self.start) ** min(1.0, done / self.steps)

    def on_step_begin(self, step: int) -> None:
        self.apply(self.value(step - 1))

    def on_step_end(self, step: int, metrics: dict[str, float]) -> None:
        metrics[self.name] = self.value(step - 1)
        self.apply(self.value(step))
