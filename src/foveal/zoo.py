"""Trained weights that ship with foveal, each made by one of its own recipes.

``foveal/weights/NAME/`` holds ``model.safetensors`` and ``card.json``: the recipe, preset and
resolved config, the metrics of the full evaluation, a check (a small evaluation subset and what it
scored), the command that made it, the commit and the torch version. ``scripts/train_pretrained.py``
trains and writes every one of them again.

Example:
    >>> from foveal.zoo import available
    >>> "ntm-copy" in available()
    True
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from torch import nn

from foveal.errors import FovealError
from foveal.recipes.base import Recipe, RunConfig, Task
from foveal.recipes.config import apply_overrides, config_to_dict
from foveal.runs import commit_id, get_recipe
from foveal.train import seed_everything
from foveal.train.checkpoint import load_model_state, write_text_atomic

WEIGHTS_DIR = Path(__file__).parent / "weights"


@dataclass
class Card:
    """What is known of a shipped model: how it was made and what it scores."""

    name: str
    recipe: str
    preset: str | None
    config: dict[str, Any]  # the resolved config it was trained with
    metrics: dict[str, float]  # the recipe's evaluation at the end of training
    check: dict[str, Any]  # {"sets": overrides that shrink the evaluation, "metrics": what they scored}
    command: str  # the command that trained it
    commit: str  # the commit of foveal that trained it
    torch: str  # the torch version that trained it
    seconds: float  # training time, one thread

    @property
    def directory(self) -> Path:
        return WEIGHTS_DIR / self.name


def available() -> list[str]:
    """The names of the shipped models."""
    return sorted(p.name for p in WEIGHTS_DIR.iterdir() if (p / "card.json").is_file()) if WEIGHTS_DIR.is_dir() else []


def card(name: str) -> Card:
    """The card of a shipped model; an unknown name raises :class:`FovealError` listing the known ones."""
    path = WEIGHTS_DIR / name / "card.json"
    if not path.is_file():
        raise FovealError(f"no shipped model {name!r}; choose from: {', '.join(available()) or '(none)'}")
    return Card(**json.loads(path.read_text()))


def build(name: str, sets: dict[str, Any] | None = None) -> tuple[Recipe, RunConfig, Task]:
    """The recipe, config and task of a shipped model, its weights loaded; ``sets`` override config keys.

    The task is the recipe's own (its data sets included), so its ``evaluate`` and ``show`` work as
    on a freshly trained run.
    """
    from safetensors.torch import load_file

    entry = card(name)
    recipe = get_recipe(entry.recipe)
    config = apply_overrides(recipe.config(), entry.config, f"{name}/card.json")
    if sets:
        apply_overrides(config, sets, "sets")
    seed_everything(config.seed)
    task = recipe.build(config)
    weights = entry.directory / "model.safetensors"
    load_model_state(task.model, load_file(str(weights)), weights)
    task.model.eval()
    return recipe, config, task


def pretrained(name: str) -> nn.Module:
    """The trained model ``name`` (see :func:`available`), in eval mode.

    Building it builds the recipe's task, so the recipe's data must be on the machine.

    Example:
        >>> import torch
        >>> ntm = pretrained("ntm-copy")
        >>> ntm(torch.zeros(1, 5, ntm.input_size)).logits.shape[-1] == ntm.output_size
        True
    """
    return build(name)[2].model


def save(name: str, run: Any, metrics: dict[str, float], check: dict[str, Any], command: str, seconds: float) -> Path:
    """Write ``weights/NAME/`` from a trained :class:`foveal.runs.Run`: weights, then the card."""
    import torch
    from safetensors.torch import save_file

    directory = WEIGHTS_DIR / name
    directory.mkdir(parents=True, exist_ok=True)
    state = {key: value.detach().contiguous().clone() for key, value in run.task.model.state_dict().items()}
    save_file(state, str(directory / "model.safetensors"))
    (directory / "model.safetensors").chmod(0o644)
    commit = commit_id()
    entry = Card(
        name=name,
        recipe=run.recipe.name,
        preset=run.preset,
        config=config_to_dict(run.config),
        metrics=metrics,
        check=check,
        command=command,
        commit=commit,
        torch=torch.__version__,
        seconds=round(seconds, 1),
    )
    return save_card(entry)


def save_card(entry: Card, **changes: Any) -> Path:
    """Write ``weights/NAME/card.json`` (with ``changes`` to its fields); returns the directory."""
    entry = replace(entry, **changes)
    entry.directory.mkdir(parents=True, exist_ok=True)
    write_text_atomic(json.dumps(asdict(entry), indent=2) + "\n", entry.directory / "card.json")
    return entry.directory
