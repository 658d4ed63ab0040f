"""Resolve a recipe's config: defaults -> preset -> config file -> ``--set`` flags -> ``--seed``.

Every layer is a set of dotted keys (``loop.lr``) reaching into nested dataclasses; nested
dicts (TOML tables, JSON objects) are flattened to dotted keys first. A value given as a string
(from ``--set``) is parsed to the field's declared type; a value from TOML/JSON is checked
against it. An unknown key or a bad value raises one ``ValueError`` line naming the choices.

The resolved config is saved as ``RUN/config.json`` with the recipe name and preset, so that a
run directory alone is enough to rebuild its task (``foveal eval RUN``, ``show``, ``--resume``).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from foveal.errors import FovealError
from foveal.recipes.base import Recipe, RunConfig
from foveal.specs import CHOICE, Choice, field_docs, flatten, resolve_options
from foveal.train.checkpoint import write_text_atomic
from foveal.train.run_dir import RunDir


def field_types(cls: type) -> dict[str, Any]:
    """Every leaf field of a (nested) config dataclass as ``{dotted key: type}``.

    Example:
        >>> from foveal.recipes.base import RunConfig
        >>> field_types(RunConfig)["loop.lr"]
        <class 'float'>
    """
    hints = typing.get_type_hints(cls)
    types_: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if CHOICE in f.metadata:  # its keys depend on the part chosen: see _chosen_options
            continue
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            types_.update({f"{f.name}.{k}": v for k, v in field_types(tp).items()})
        else:
            types_[f.name] = tp
    return types_


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "None"
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return str(tp).replace("typing.", "")


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def coerce(value: Any, tp: Any) -> Any:
    """Convert ``value`` (a string from the command line, or a TOML/JSON value) to type ``tp``.

    Supports bool, int, float, str, None, ``X | None``, ``Literal[...]``, ``tuple[X, ...]``,
    ``tuple[X, Y]`` and ``list[X]``. Raises ``ValueError`` when the value does not fit.

    Example:
        >>> coerce("3e-4", float), coerce("off", bool), coerce("none", int | None)
        (0.0003, False, None)
        >>> coerce("4,8", tuple[int, ...])
        (4, 8)
    """
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin is Literal:
        if value not in args:
            raise FovealError("not a valid choice")
        return value
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and (value is None or (isinstance(value, str) and value.lower() in ("none", "null"))):
            return None
        errors = []
        for member in args:
            if member is type(None):
                continue
            try:
                return coerce(value, member)
            except ValueError as e:
                errors.append(str(e))
        raise FovealError(f"{value!r} is not {_type_name(tp)}")
    if origin in (tuple, list):
        items = value
        if isinstance(value, str):
            text = value.strip()
            if text.startswith(("[", "(")):
                text = text[1:-1]
            items = [s.strip() for s in text.split(",") if s.strip()]
        if not isinstance(items, list | tuple):
            raise FovealError(f"{value!r} is not a sequence ({_type_name(tp)})")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(items) != len(args):
                raise FovealError(f"{value!r} needs {len(args)} items ({_type_name(tp)})")
            return tuple(coerce(v, a) for v, a in zip(items, args, strict=True))
        item_tp = args[0] if args else Any
        return origin(coerce(v, item_tp) for v in items)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise FovealError(f"{value!r} is not a bool (true/false)")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value.replace("_", ""))
            except ValueError:
                pass
        raise FovealError(f"{value!r} is not an int")
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise FovealError(f"{value!r} is not a float")
    if tp is str:
        if isinstance(value, str):
            return value
        raise FovealError(f"{value!r} is not a string")
    raise FovealError(f"cannot set a field of type {_type_name(tp)}")


def apply_overrides(config: RunConfig, overrides: Mapping[str, Any], source: str = "override") -> RunConfig:
    """Set dotted keys on ``config`` in place (values coerced to each field's type) and return it.

    An options field (marked by :func:`foveal.specs.options_of`: the VQA model's ``head_options``) takes one key per
    option, ``model.head_options.hops``, checked against the chosen part's options. A layer that chooses
    another part (``model.head``) starts its options from that part's defaults, whatever order its keys
    come in.

    Args:
        config: a config dataclass instance.
        overrides: ``{dotted key: value}``; nested dicts are flattened first.
        source: where the overrides come from, for the error message (``--set``, a file name).

    Example:
        >>> from foveal.recipes.base import RunConfig
        >>> apply_overrides(RunConfig(), {"loop.lr": "0.01", "seed": 3}).loop.lr
        0.01
        >>> apply_overrides(RunConfig(), {"loop.lrr": 1})
        Traceback (most recent call last):
        ...
        foveal.errors.FovealError: unknown config key 'loop.lrr' (override); did you mean 'loop.lr'? ...
    """
    known = field_types(type(config))
    flat = flatten(overrides)
    chosen = _chosen_options(config)
    options = {key: value for key, value in flat.items() if key.rpartition(".")[0] in chosen}
    for key, value in flat.items():
        if key in options:
            continue
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise FovealError(f"unknown config key {key!r} ({source}); {hint}valid keys: {', '.join(sorted(known))}")
        *path, leaf = key.split(".")
        target: Any = config
        for part in path:
            target = getattr(target, part)
        parsed = _parse(key, value, known[key], source)
        for owner, name, choice in chosen.values():
            if owner is target and choice.by == leaf and getattr(owner, leaf) != parsed:
                setattr(owner, name, {})  # another part: its own options, from its defaults
        setattr(target, leaf, parsed)
    for key, value in options.items():
        prefix, _, option = key.rpartition(".")
        owner, name, choice = chosen[prefix]
        chosen_name = getattr(owner, choice.by)
        spec_type = choice.spec_of(chosen_name)
        resolve_options(choice.by, chosen_name, spec_type, {option: value})  # an option it lacks: name the part
        parsed = _parse(key, value, typing.get_type_hints(spec_type)[option], source)
        setattr(owner, name, {**getattr(owner, name), option: parsed})
    return config


def _parse(key: str, value: Any, tp: Any, source: str) -> Any:
    """``value`` coerced to ``tp``, or one error line naming the key and what it takes."""
    try:
        return coerce(value, tp)
    except ValueError:
        if typing.get_origin(tp) is Literal:
            expected = f"choose from: {', '.join(map(str, typing.get_args(tp)))}"
        else:
            expected = f"expected {_type_name(tp)}"
        raise FovealError(f"bad value {value!r} for {key} ({source}); {expected}") from None


def _chosen_options(config: Any, prefix: str = "") -> dict[str, tuple[Any, str, Choice]]:
    """Every options field of a (nested) config: ``{dotted key: (the dataclass holding it, its name, its Choice)}``."""
    found: dict[str, tuple[Any, str, Choice]] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if CHOICE in f.metadata:
            found[f"{prefix}{f.name}"] = (config, f.name, f.metadata[CHOICE])
        elif dataclasses.is_dataclass(value):
            found.update(_chosen_options(value, f"{prefix}{f.name}."))
    return found


def _resolved_options(owner: Any, name: str, choice: Choice) -> Any:
    """The chosen part's options spec, from the mapping in ``owner.name`` (an error names the part)."""
    chosen = getattr(owner, choice.by)
    return resolve_options(choice.by, chosen, choice.spec_of(chosen), getattr(owner, name))


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Read overrides from a ``.toml`` or ``.json`` file (nested tables or dotted keys)."""
    path = Path(path)
    if not path.is_file():
        raise FovealError(f"config file {str(path)!r} does not exist")
    try:
        if path.suffix == ".toml":
            with path.open("rb") as f:
                return tomllib.load(f)
        if path.suffix == ".json":
            data = json.loads(path.read_text())
            if not isinstance(data, dict):
                raise FovealError("the top level must be an object")
            # A saved RUN/config.json may be passed back in: take its config part.
            return data["config"] if {"recipe", "config"} <= data.keys() else data
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, ValueError) as e:
        raise FovealError(f"cannot read config file {str(path)!r}: {e}") from None
    raise FovealError(f"config file {str(path)!r} must end in .toml or .json")


def parse_sets(pairs: list[str] | None) -> dict[str, str]:
    """Parse ``--set key=value`` flags into a dict (values stay strings until coerced).

    Example:
        >>> parse_sets(["loop.lr=0.1", "name=a=b"])
        {'loop.lr': '0.1', 'name': 'a=b'}
    """
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise FovealError(f"--set needs key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def resolve_config(
    recipe: Recipe,
    preset: str | None = None,
    config_file: str | Path | None = None,
    sets: Mapping[str, Any] | None = None,
    seed: int | None = None,
    threads: int | None = None,
) -> RunConfig:
    """Build a recipe's config from its layers, lowest priority first.

    Args:
        recipe: the recipe whose config dataclass gives the defaults.
        preset: a name in ``recipe.presets`` (None: the defaults alone).
        config_file: a ``.toml``/``.json`` file of overrides.
        sets: ``{dotted key: value}`` from ``--set`` (strings are parsed to the field's type).
        seed: ``--seed``, applied last.
        threads: ``--threads``, applied last.

    Example:
        >>> from foveal.recipes.base import Recipe, RunConfig
        >>> r = Recipe("r", "demo", RunConfig, build=None, presets={"quick": {"loop.steps": 5}})
        >>> c = resolve_config(r, "quick", sets={"loop.lr": "0.1"}, seed=7)
        >>> c.loop.steps, c.loop.lr, c.seed
        (5, 0.1, 7)
    """
    config = recipe.config()
    if preset is not None:
        if preset not in recipe.presets:
            choices = ", ".join(sorted(recipe.presets)) or "(none)"
            raise FovealError(f"unknown preset {preset!r} for recipe {recipe.name!r}; choose from: {choices}")
        apply_overrides(config, recipe.presets[preset], f"preset {preset}")
    if config_file is not None:
        apply_overrides(config, read_config_file(config_file), str(config_file))
    if sets:
        apply_overrides(config, sets, "--set")
    if seed is not None:
        config.seed = seed
    if threads is not None:
        config.threads = threads
    validate(config)
    for owner, name, choice in _chosen_options(config).values():  # every option of the part, set or default
        setattr(owner, name, dataclasses.asdict(_resolved_options(owner, name, choice)))
    return config


def validate(config: RunConfig) -> None:
    """Check ranges the types cannot express (positive steps, batch size, ...)."""
    loop = config.loop
    for key in ("steps", "batch_size"):
        if getattr(loop, key) < 1:
            raise FovealError(f"bad value for loop.{key}: {getattr(loop, key)}; expected an int >= 1")
    for key in ("eval_every", "ckpt_every", "log_every", "warmup_steps", "step_size"):
        if getattr(loop, key) < 0:
            raise FovealError(f"bad value for loop.{key}: {getattr(loop, key)}; expected an int >= 0")
    if loop.schedule == "step" and loop.step_size < 1:
        raise FovealError("loop.schedule=step needs loop.step_size >= 1")
    if config.threads < 0:
        raise FovealError(f"bad value for threads: {config.threads}; expected an int >= 0 (0: every core)")
    for owner, name, choice in _chosen_options(config).values():
        _resolved_options(owner, name, choice)


def describe_config(config: Any, prefix: str = "") -> list[tuple[str, str, Any, str]]:
    """Every leaf key of a config as ``(dotted key, type, value, doc)``; docs come from the source comments.

    Example:
        >>> from foveal.recipes.base import RunConfig
        >>> key, type_name, value, doc = describe_config(RunConfig())[0]
        >>> key, type_name, value
        ('seed', 'int', 0)
    """
    config_type: type = type(config)
    hints = typing.get_type_hints(config_type)
    docs = field_docs(config_type)
    rows: list[tuple[str, str, Any, str]] = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if CHOICE in f.metadata:  # the chosen part's options, each with its doc
            rows += describe_config(_resolved_options(config, f.name, f.metadata[CHOICE]), f"{prefix}{f.name}.")
        elif dataclasses.is_dataclass(value):
            rows += describe_config(value, f"{prefix}{f.name}.")
        else:
            rows.append((f"{prefix}{f.name}", _type_name(hints[f.name]), value, docs.get(f.name, "")))
    return rows


def format_config(config: RunConfig) -> str:
    """:func:`describe_config` as aligned text: ``key = value  (type)  doc``, one key a line."""
    rows = [
        (key, json.dumps(value) if not isinstance(value, str) else value, tp, doc)
        for key, tp, value, doc in describe_config(config)
    ]
    width = max(len(f"{key} = {value}") for key, value, _, _ in rows)
    return "\n".join(
        f"{f'{key} = {value}':<{width}}  ({tp}){f'  {doc}' if doc else ''}" for key, value, tp, doc in rows
    )


def config_to_dict(config: RunConfig) -> dict[str, Any]:
    """The config as plain JSON types (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


def save_run_config(run_dir: str | Path, recipe: str, preset: str | None, config: RunConfig) -> Path:
    """Write ``RUN/config.json``: the recipe name, the preset and the resolved config."""
    path = RunDir(run_dir).config
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"recipe": recipe, "preset": preset, "config": config_to_dict(config)}
    write_text_atomic(json.dumps(record, indent=2) + "\n", path)
    return path


def load_run_config(run_dir: str | Path) -> tuple[Recipe, str | None, RunConfig]:
    """Rebuild ``(recipe, preset, config)`` from ``RUN/config.json``."""
    from foveal.recipes import load_all
    from foveal.registry import RECIPES

    path = RunDir(run_dir).config
    if not path.is_file():
        raise FovealError(f"{str(run_dir)!r} is not a run directory (no {path.name}); train one with `foveal train`")
    try:
        record = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise FovealError(f"{path!s} is not valid JSON ({e}); train the run again with --overwrite") from None
    if not isinstance(record, dict) or not isinstance(record.get("recipe"), str) or "config" not in record:
        raise FovealError(f"{path!s} names no recipe and config; train the run again with --overwrite")
    load_all()
    recipe = RECIPES.get(record["recipe"])
    config = apply_overrides(recipe.config(), record["config"], str(path))
    return recipe, record.get("preset"), config
