"""The models that ship with foveal: their cards, their names and loading one.

``foveal/weights/NAME/`` is a saved model (:mod:`foveal.artifact`): ``model.safetensors`` and
``card.json``, and ``sample.safetensors``, a few of its recipe's held-out test examples. The cards are
the one catalogue of shipped models: a model is shipped when its directory has a card, and its card
declares how it is made (``command``, ``check["sets"]``) and what its figures show (``shows``);
``scripts/train_pretrained.py`` trains it from that and writes the rest. Loading needs this module,
:mod:`foveal.artifact` and the models alone: no recipe, data set or training code
(:mod:`foveal.zoo`, above, builds a shipped model's recipe task).

Example:
    >>> "ntm-copy" in available()
    True
    >>> card("ntm-copy").command.startswith("foveal train ntm-copy ")
    True
"""

from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from torch import Tensor, nn

from foveal.artifact import CARD, Labels, ModelEntry, from_pretrained
from foveal.errors import FovealError
from foveal.preprocess import Preprocessing

__all__ = ["SAMPLE", "WEIGHTS_DIR", "Card", "Check", "available", "card", "pretrained", "sample"]

WEIGHTS_DIR = Path(__file__).parent / "weights"
SAMPLE = "sample.safetensors"


class Check(TypedDict):
    """A card's ``check``: the recipe's evaluation made small, and what the shipped weights score on it."""

    sets: dict[str, str]  # config overrides (``--set`` keys) that shrink the data; `foveal demo` builds this task
    metrics: NotRequired[dict[str, float]]  # what the shipped weights scored on it (written by training)


@dataclass(kw_only=True)
class Card:
    """A shipped model's ``card.json``: how it is made, what it scored, and what builds and uses it.

    ``name``, ``command``, ``shows`` and ``check["sets"]`` are its declaration, written by hand before it is
    trained; ``scripts/train_pretrained.py`` runs the command and writes every other field.
    """

    name: str  # the directory's name under foveal/weights/
    recipe: str = ""  # the recipe the command trains
    preset: str | None = None
    config: dict[str, Any] = field(default_factory=dict)  # the resolved config it was trained with
    metrics: dict[str, float] = field(default_factory=dict)  # the recipe's evaluation at the end of training
    check: Check
    command: str  # `foveal train RECIPE [--preset P] [--set KEY=VALUE ...] --seed S --threads T`: what trains it
    shows: str  # what its figures show: their caption in `foveal demo`
    commit: str = ""  # the commit of foveal that trained it
    torch: str = ""  # the torch version that trained it
    seconds: float = 0.0  # CPU seconds of training (and its evaluations), one thread
    model: ModelEntry | None = None  # what builds the network again (foveal.artifact)
    preprocessing: Preprocessing = field(default_factory=lambda: Preprocessing())  # the input the model takes
    labels: Labels = field(default_factory=lambda: Labels())  # what its outputs mean: classes, vocab and answers

    @property
    def directory(self) -> Path:
        return WEIGHTS_DIR / self.name


FIELDS = {f.name for f in fields(Card)}
# The fields without a default: what a card declares before its model is trained.
DECLARED = {f.name for f in fields(Card) if f.default is MISSING and f.default_factory is MISSING}


def available() -> list[str]:
    """The names of the shipped models: the directories of ``foveal/weights/`` that hold a card."""
    if not WEIGHTS_DIR.is_dir():
        return []
    return sorted(p.name for p in WEIGHTS_DIR.iterdir() if (p / CARD).is_file())


def _directory(name: str) -> Path:
    """``weights/NAME/``; an unknown name raises :class:`FovealError` listing the shipped ones."""
    directory = WEIGHTS_DIR / name
    if not (directory / CARD).is_file():
        raise FovealError(f"no shipped model {name!r}; choose from: {', '.join(available()) or '(none)'}")
    return directory


def card(name: str) -> Card:
    """The card of shipped model ``name``; an unknown name raises :class:`FovealError` listing the known ones."""
    path = _directory(name) / CARD
    entry = json.loads(path.read_text())
    missing, unknown = sorted(DECLARED - entry.keys()), sorted(entry.keys() - FIELDS)
    if missing or unknown:
        raise FovealError(
            f"{path}: expected a card that declares {', '.join(sorted(DECLARED))} and has no other keys than "
            f"foveal.shipped.Card's; missing {missing}, unknown {unknown}"
        )
    if entry["name"] != name:
        raise FovealError(f"{path}: expected the name of its directory, {name!r}, got {entry['name']!r}")
    return Card(**entry)


def pretrained(name: str) -> nn.Module:
    """The shipped trained model ``name`` (``foveal.zoo.available()`` lists them), in eval mode.

    It is built from the files shipped with foveal alone (no recipe, no data set) and carries its
    ``preprocessing`` and ``labels``; a VQA model answers questions in words (``model.answer``).

    Example:
        >>> import foveal
        >>> type(foveal.pretrained("ntm-copy")).__name__
        'NTM'
        >>> foveal.pretrained("stn").labels["classes"][:2]
        ['T-shirt/top', 'Trouser']
    """
    return from_pretrained(_directory(name))


def sample(name: str) -> dict[str, Tensor]:
    """The held-out test examples shipped with model ``name`` (empty when it ships none)."""
    from safetensors.torch import load_file

    path = _directory(name) / SAMPLE
    return load_file(str(path)) if path.is_file() else {}
