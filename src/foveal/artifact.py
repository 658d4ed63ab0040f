"""A trained model as a directory that stands on its own: ``save_pretrained`` and ``from_pretrained``.

The directory holds ``model.safetensors`` (the weights) and ``card.json``, whose ``model`` entry
says how to build the network again: its registered name (:data:`foveal.registry.MODELS`), the
constructor's positional arguments and its spec. Next to it, ``preprocessing`` says what input the
model expects (size, channels, the ``mean`` and ``std`` that map an image in [0, 1] to the network's
input) and ``labels`` what its outputs mean (``classes`` of a classifier; ``vocab`` and ``answers``
of a VQA model). Loading reads these two files and nothing else, and needs torch, einops and
safetensors: no recipe, no data set, no numpy. The card may hold more (how the model was made, what
it scored); loading ignores it.

Example:
    >>> import tempfile, torch
    >>> from foveal.models.ntm import NTM
    >>> ntm = NTM(4, 3, controller_size=8, n_rows=6, n_cols=5)
    >>> with tempfile.TemporaryDirectory() as path:
    ...     _ = save_pretrained(ntm, path)
    ...     again = from_pretrained(path)
    >>> torch.equal(again(torch.ones(1, 2, 4)).logits, ntm.eval()(torch.ones(1, 2, 4)).logits)
    True
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import os
import pkgutil
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

import torch
from torch import nn

from foveal.errors import FovealError
from foveal.preprocess import Preprocessing
from foveal.registry import MODELS

__all__ = ["CARD", "WEIGHTS", "Labels", "ModelEntry", "from_pretrained", "read_card", "save_pretrained"]

WEIGHTS = "model.safetensors"
CARD = "card.json"


class ModelEntry(TypedDict):
    """A card's ``model``: what builds the network again (:func:`describe_model` writes it)."""

    name: str  # its name in foveal.registry.MODELS
    args: list[Any]  # the constructor's positional arguments, tuples as lists
    spec: dict[str, Any]  # the fields of its spec dataclass


class Labels(TypedDict, total=False):
    """A card's ``labels``: what a model's outputs mean (empty for a model whose outputs need no names)."""

    classes: list[str]  # a classifier's class names, by output index
    vocab: list[str]  # a VQA model's words, by token id (0 the padding)
    answers: list[str]  # a VQA model's answers, by output index


def _import_models() -> None:
    """Import every module of :mod:`foveal.models`: a model registers itself in ``MODELS`` as its module loads."""
    import foveal.models

    for module in pkgutil.walk_packages(foveal.models.__path__, "foveal.models."):
        importlib.import_module(module.name)


def _registered_name(model: nn.Module) -> str:
    for name, entry in MODELS.items():
        if entry is type(model):
            return name
    raise FovealError(
        f"save_pretrained: {type(model).__name__} is not in foveal.registry.MODELS; register it with "
        "@MODELS.register(NAME) so that from_pretrained can build it again"
    )


def _spec_type(cls: type[nn.Module]) -> type | None:
    """The dataclass a model's ``spec`` argument takes (None when its constructor has none)."""
    hints = typing.get_type_hints(cls.__init__)
    for option in typing.get_args(hints.get("spec")) or (hints.get("spec"),):
        if dataclasses.is_dataclass(option):
            return option  # type: ignore[return-value]
    return None


def _positional(cls: type[nn.Module]) -> list[str]:
    """The names of the constructor's arguments before ``spec``: each is kept as an attribute of that name."""
    names = []
    for parameter in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        positional = parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
        if parameter.name == "spec" or not positional:
            break
        names.append(parameter.name)
    return names


def describe_model(model: nn.Module) -> ModelEntry:
    """``{"name", "args", "spec"}``: what builds ``model`` again (its registered name, constructor arguments, spec).

    Example:
        >>> from foveal.models.ntm import NTM
        >>> entry = describe_model(NTM(4, 3, controller_size=8, n_rows=6, n_cols=5))
        >>> entry["name"], entry["args"], entry["spec"]["n_rows"]
        ('ntm', [4, 3], 6)
    """
    cls = type(model)
    name = _registered_name(model)
    missing = [arg for arg in _positional(cls) if not hasattr(model, arg)]
    if missing:
        raise FovealError(f"save_pretrained: {cls.__name__} keeps no attribute {', '.join(missing)} of its arguments")
    args = [_plain(getattr(model, arg)) for arg in _positional(cls)]
    spec_type, spec = _spec_type(cls), getattr(model, "spec", None)
    options = {}
    if spec_type is not None and spec is not None:
        fields = {f.name for f in dataclasses.fields(spec_type)}
        options = {key: _plain(value) for key, value in dataclasses.asdict(spec).items() if key in fields}
    return {"name": name, "args": args, "spec": options}


def _plain(value: Any) -> Any:
    """A JSON form of an argument: tuples as lists."""
    return [_plain(v) for v in value] if isinstance(value, tuple | list) else value


def _tuples(value: Any) -> Any:
    """The inverse of :func:`_plain` for spec values: JSON lists back to tuples."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def save_pretrained(
    model: nn.Module,
    path: str | Path,
    *,
    preprocessing: Preprocessing | Mapping[str, Any] | None = None,
    labels: Labels | Mapping[str, Any] | None = None,
    card: dict[str, Any] | None = None,
) -> Path:
    """Write ``model`` as a directory :func:`from_pretrained` loads: ``model.safetensors`` and ``card.json``.

    The model must be registered in :data:`foveal.registry.MODELS` and keep each positional argument
    of its constructor as an attribute of the same name (foveal's models do). ``preprocessing`` and
    ``labels`` are stored for the loaded model (see the module's doc); ``card`` adds any other entries
    to ``card.json`` (how it was trained, its scores). Returns the directory.
    """
    from safetensors.torch import save_file

    entry = {**(card or {}), "model": describe_model(model)}
    entry["preprocessing"] = dict(preprocessing or getattr(model, "preprocessing", None) or {})
    entry["labels"] = dict(labels or getattr(model, "labels", None) or {})
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    state = {key: value.detach().cpu().contiguous().clone() for key, value in model.state_dict().items()}
    save_file(state, str(directory / WEIGHTS))
    text = json.dumps(entry, indent=2) + "\n"
    temporary = directory / f".{CARD}.tmp"
    temporary.write_text(text)
    os.replace(temporary, directory / CARD)
    return directory


def read_card(path: str | Path) -> dict[str, Any]:
    """The ``card.json`` of a saved model directory, as a dict."""
    card = Path(path) / CARD
    if not card.is_file():
        raise FovealError(f"{path}: expected a saved model directory with {CARD} and {WEIGHTS}; there is no {CARD}")
    entry = json.loads(card.read_text())
    if "model" not in entry or not {"name", "args", "spec"} <= entry["model"].keys():
        raise FovealError(f"{card}: expected a 'model' entry with name, args and spec (written by save_pretrained)")
    return entry


def from_pretrained(path: str | Path, device: str | torch.device = "cpu") -> nn.Module:
    """The model saved in directory ``path`` (by :func:`save_pretrained`), in eval mode on ``device``.

    Its ``preprocessing`` and ``labels`` are the card's (empty dicts when it has none).
    """
    from safetensors.torch import load_file

    entry = read_card(path)
    described = entry["model"]
    if described["name"] not in MODELS:
        _import_models()
    cls = MODELS.get(described["name"])
    options = {key: _tuples(value) for key, value in described["spec"].items()}
    model = cls(*[_tuples(arg) for arg in described["args"]], **options)
    weights = Path(path) / WEIGHTS
    try:
        model.load_state_dict(load_file(str(weights)), strict=True)
    except RuntimeError as e:
        raise FovealError(f"{weights} does not fit {described['name']} built from its card: {e}") from None
    model.to(device)
    model.preprocessing = dict(entry.get("preprocessing", {}))
    model.labels = dict(entry.get("labels", {}))
    return model.eval()


def card_labels(model: nn.Module) -> dict[str, Any]:
    """What the outputs of a model loaded by :func:`from_pretrained` mean (its card's ``labels``: class names,
    or a VQA model's vocabulary and answers); empty for a model that was not loaded from an artifact."""
    labels = getattr(model, "labels", None)
    return labels if isinstance(labels, dict) else {}
