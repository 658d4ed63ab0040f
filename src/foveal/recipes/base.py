"""What a recipe is: a config dataclass (defaults), named presets (overrides), and ``build(config) -> Task``.

The loop's contract (:class:`Task`, :class:`RunConfig`, :class:`LoopConfig`, :class:`Callback`)
lives in :mod:`foveal.train`; a recipe's config subclasses :class:`RunConfig` and nests its
model's spec as ``model``.

Config resolution, lowest to highest priority: the dataclass defaults, the preset, a config file
(``--config FILE``, TOML or JSON), ``--set key=value`` flags (dotted keys reach nested fields:
``loop.lr=3e-4``, ``model.head_options.hops=2``), ``--seed``. The resolved config is saved in the run directory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import Tensor

from foveal.train.task import Callback, LoopConfig, RunConfig, Task

__all__ = ["Callback", "LoopConfig", "Recipe", "RunConfig", "Task"]


@dataclass
class Recipe:
    """A named experiment: ``foveal train NAME --preset quick``."""

    name: str
    description: str
    config: type[RunConfig]
    build: Callable[[Any], Task]
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Preset name -> overrides as dotted keys, e.g. ``{"quick": {"loop.steps": 300}}``."""
    describe: Callable[[Any, Task], dict[str, dict[str, Any]]] | None = None
    """``(config, task) -> {"preprocessing", "labels"}``: what a saved model of this recipe expects and
    what its outputs mean (:func:`foveal.artifact.save_pretrained`)."""
    sample: Callable[[Any, Task], dict[str, Tensor]] | None = None
    """``(config, task) -> tensors``: a few held-out test examples, shipped with a trained model."""
    gallery: Callable[[Any, Any, dict[str, Tensor], Path], list[Path]] | None = None  # (config, model, ...)
    """``(config, model, sample, figures_dir) -> paths``: the figures of ``show`` drawn from ``sample``,
    with no data set. A recipe without it draws from the test set it builds (its data are generated)."""
