"""Trained weights that ship with foveal, each made by one of its own recipes.

``foveal/weights/NAME/`` is a saved model (:mod:`foveal.artifact`): ``model.safetensors`` and
``card.json``, whose ``model``, ``preprocessing`` and ``labels`` entries build and use the model with
no recipe or data (:func:`pretrained`). The card also records how it was made: the recipe, preset and
resolved config, the metrics of the full evaluation, a check (a small evaluation subset and what it
scored), the command that made it, the commit and the torch version. ``sample.safetensors`` holds a
few of the recipe's held-out test examples, which ``foveal demo`` and ``foveal show NAME`` draw on a
machine without the data set. ``scripts/train_pretrained.py`` trains and writes every one of them
again; ``scripts/describe_pretrained.py`` writes the card's model entries and the sample from the
recipe once more.

Example:
    >>> from foveal.zoo import available
    >>> "ntm-copy" in available()
    True
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import Tensor, nn

from foveal.artifact import from_pretrained, save_pretrained
from foveal.errors import FovealError

if TYPE_CHECKING:
    from foveal.recipes.base import Recipe, RunConfig, Task

WEIGHTS_DIR = Path(__file__).parent / "weights"
SAMPLE = "sample.safetensors"


@dataclass
class Card:
    """What is known of a shipped model: how to build it, how it was made and what it scores."""

    name: str
    recipe: str
    preset: str | None
    config: dict[str, Any]  # the resolved config it was trained with
    metrics: dict[str, float]  # the recipe's evaluation at the end of training
    check: dict[str, Any]  # {"sets": overrides that shrink the evaluation, "metrics": what they scored}
    command: str  # the command that trained it
    commit: str  # the commit of foveal that trained it
    torch: str  # the torch version that trained it
    seconds: float  # CPU seconds of training (and its evaluations), one thread
    model: dict[str, Any] = field(default_factory=dict)  # {"name", "args", "spec"}: foveal.artifact builds it
    preprocessing: dict[str, Any] = field(default_factory=dict)  # the input the model expects
    labels: dict[str, Any] = field(default_factory=dict)  # what its outputs mean: classes, vocab and answers

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
    weights = entry.directory / "model.safetensors"
    load_model_state(task.model, load_file(str(weights)), weights)
    # setattr: nn.Module's annotations admit only tensors and modules as attributes set after construction
    for attribute, value in (("preprocessing", entry.preprocessing), ("labels", entry.labels)):
        setattr(task.model, attribute, dict(value))
    task.model.eval()
    return recipe, config, task


def pretrained(name: str) -> nn.Module:
    """The trained model ``name`` (see :func:`available`), in eval mode, with its ``preprocessing`` and ``labels``.

    It is built from its card (:func:`foveal.artifact.from_pretrained`): no recipe, no data set.

    Example:
        >>> import torch
        >>> ntm = pretrained("ntm-copy")
        >>> ntm(torch.zeros(1, 5, ntm.input_size)).logits.shape[-1] == ntm.output_size
        True
    """
    card(name)  # an unknown name lists the shipped ones
    return from_pretrained(WEIGHTS_DIR / name)


def config(name: str) -> RunConfig:
    """The resolved recipe config a shipped model was trained with."""
    from foveal.recipes.config import apply_overrides
    from foveal.runs import get_recipe

    entry = card(name)
    return apply_overrides(get_recipe(entry.recipe).config(), entry.config, f"{name}/card.json")


def sample(name: str) -> dict[str, Tensor]:
    """The held-out test examples shipped with model ``name`` (empty when it ships none)."""
    from safetensors.torch import load_file

    path = card(name).directory / SAMPLE
    return load_file(str(path)) if path.is_file() else {}


def save(name: str, run: Any, metrics: dict[str, float], check: dict[str, Any], command: str, seconds: float) -> Path:
    """Write ``weights/NAME/`` from a trained :class:`foveal.runs.Run`: weights, card and test sample."""
    import torch

    from foveal.recipes.config import config_to_dict
    from foveal.runs import commit_id

    entry = Card(
        name=name,
        recipe=run.recipe.name,
        preset=run.preset,
        config=config_to_dict(run.config),
        metrics=metrics,
        check=check,
        command=command,
        commit=commit_id(),
        torch=torch.__version__,
        seconds=round(seconds, 1),
    )
    described = describe(run.recipe, run.config, run.task)
    provenance = {k: v for k, v in asdict(entry).items() if k not in ("model", "preprocessing", "labels")}
    save_pretrained(run.task.model, entry.directory, card=provenance, **described)
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
    write_text_atomic(json.dumps(asdict(entry), indent=2) + "\n", entry.directory / "card.json")
    return entry.directory
