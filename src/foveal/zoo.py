"""Trained weights that ship with foveal, each made by one of its own recipes: their recipe side.

Each shipped model is declared once, by its card (:mod:`foveal.shipped`, which also loads it with no
recipe or data: :func:`pretrained`). This module is what needs the recipe: the task a model was
trained in (:func:`build`, :func:`config`), the run its card's command makes (:func:`training`), and
writing ``weights/NAME/`` from a trained run (:func:`save`). ``scripts/train_pretrained.py`` trains
every shipped model again; ``scripts/describe_pretrained.py`` writes the cards' model entries and the
samples from the recipes once more.

Example:
    >>> from foveal.zoo import available, training
    >>> training("ntm-copy").recipe
    'ntm-copy'
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from foveal.artifact import CARD, WEIGHTS, save_pretrained
from foveal.errors import FovealError
from foveal.shipped import SAMPLE, WEIGHTS_DIR, Card, Check, available, card, pretrained, sample

if TYPE_CHECKING:
    from foveal.recipes.base import Recipe, RunConfig, Task

__all__ = [
    "SAMPLE",
    "WEIGHTS_DIR",
    "Card",
    "Check",
    "Training",
    "available",
    "build",
    "card",
    "config",
    "describe",
    "pretrained",
    "sample",
    "save",
    "save_card",
    "training",
    "write_sample",
]


@dataclass(frozen=True)
class Training:
    """The run a shipped model's card command makes: ``foveal train RECIPE [--preset P] [--set K=V ...] --seed S
    --threads T``, read into its parts."""

    recipe: str
    preset: str | None
    sets: dict[str, str]
    seed: int
    threads: int


def training(name: str) -> Training:
    """What shipped model ``name``'s card command trains; a command of another form raises :class:`FovealError`."""
    command = card(name).command
    form = "foveal train RECIPE [--preset P] [--set KEY=VALUE ...] --seed S --threads T"
    words = shlex.split(command)
    if words[:2] != ["foveal", "train"] or len(words) < 3 or len(words) % 2 == 0:
        raise FovealError(f"{name}/card.json: expected a command {form}, got {command!r}")
    options: dict[str, Any] = {"--preset": None, "--set": {}}
    for flag, value in zip(words[3::2], words[4::2], strict=True):
        if flag == "--set" and "=" in value:
            key, _, setting = value.partition("=")
            options["--set"][key] = setting
        elif flag in ("--preset", "--seed", "--threads"):
            options[flag] = value
        else:
            raise FovealError(f"{name}/card.json: expected a command {form}, got {flag} {value} in {command!r}")
    if not {"--seed", "--threads"} <= options.keys():
        raise FovealError(f"{name}/card.json: expected a command {form} (seed and threads stated), got {command!r}")
    return Training(words[2], options["--preset"], options["--set"], int(options["--seed"]), int(options["--threads"]))


def build(name: str, sets: dict[str, Any] | None = None) -> tuple[Recipe, RunConfig, Task]:
    """The recipe, config and task of a shipped model, its weights loaded; ``sets`` override config keys.

    The task is the recipe's own (its data sets included), so its ``evaluate`` and ``show`` work as
    on a freshly trained run.
    """
    from safetensors.torch import load_file

    from foveal.recipes.config import apply_overrides
    from foveal.runs import get_recipe
    from foveal.train import seed_everything
    from foveal.train.checkpoint import load_model_state

    entry = card(name)
    recipe = get_recipe(entry.recipe)
    config = apply_overrides(recipe.config(), entry.config, f"{name}/card.json")
    if sets:
        apply_overrides(config, sets, "sets")
    seed_everything(config.seed)
    task = recipe.build(config)
    weights = entry.directory / WEIGHTS
    load_model_state(task.model, load_file(str(weights)), weights)
    # setattr: nn.Module's annotations admit only tensors and modules as attributes set after construction
    for attribute, value in (("preprocessing", entry.preprocessing), ("labels", entry.labels)):
        setattr(task.model, attribute, dict(value))
    task.model.eval()
    return recipe, config, task


def config(name: str) -> RunConfig:
    """The resolved recipe config a shipped model was trained with."""
    from foveal.recipes.config import apply_overrides
    from foveal.runs import get_recipe

    entry = card(name)
    return apply_overrides(get_recipe(entry.recipe).config(), entry.config, f"{name}/card.json")


def save(name: str, run: Any, metrics: dict[str, float], seconds: float) -> Path:
    """Write ``weights/NAME/`` from a trained :class:`foveal.runs.Run` of its card's command: weights, the
    card (its declaration kept; the check's metrics left to be measured on the stored weights) and test sample."""
    import torch

    from foveal.recipes.config import config_to_dict
    from foveal.runs import commit_id

    entry = replace(
        card(name),
        recipe=run.recipe.name,
        preset=run.preset,
        config=config_to_dict(run.config),
        metrics=metrics,
        check=Check(sets=card(name).check["sets"]),
        commit=commit_id(),
        torch=torch.__version__,
        seconds=round(seconds, 1),
    )
    described = describe(run.recipe, run.config, run.task)
    provenance = {k: v for k, v in asdict(entry).items() if k not in ("model", "preprocessing", "labels")}
    save_pretrained(run.task.model, entry.directory, card=provenance, **described)
    (entry.directory / WEIGHTS).chmod(0o644)  # package data: safetensors writes its file for its owner alone
    write_sample(name, run.recipe, run.config, run.task)
    return entry.directory


def describe(recipe: Recipe, config: RunConfig, task: Task) -> dict[str, dict[str, Any]]:
    """``{"preprocessing", "labels"}`` of a recipe's model, from the recipe (empty for a recipe that says none)."""
    return recipe.describe(config, task) if recipe.describe else {"preprocessing": {}, "labels": {}}


def write_sample(name: str, recipe: Recipe, config: RunConfig, task: Task) -> Path | None:
    """Write ``weights/NAME/sample.safetensors``: the recipe's cut of its held-out test data (None if it has none)."""
    from safetensors.torch import save_file

    if recipe.sample is None:
        return None
    path = WEIGHTS_DIR / name / SAMPLE
    save_file({k: v.contiguous() for k, v in recipe.sample(config, task).items()}, str(path))
    path.chmod(0o644)
    return path


def save_card(entry: Card, **changes: Any) -> Path:
    """Write ``weights/NAME/card.json`` (with ``changes`` to its fields); returns the directory."""
    from foveal.train.checkpoint import write_text_atomic

    entry = replace(entry, **changes)
    entry.directory.mkdir(parents=True, exist_ok=True)
    write_text_atomic(json.dumps(asdict(entry), indent=2) + "\n", entry.directory / CARD)
    return entry.directory
