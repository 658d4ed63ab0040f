"""Model specs: one dataclass of a model's options, with each option's default and one-line doc.

A model takes its spec (``NTM(8, 8, spec)``) or single options (``NTM(8, 8, n_rows=64)``), and a
recipe's config nests the spec (``--set model.n_rows=64``). The doc of a field is the comment on
its line (or the comment lines just above it), read from the source by :func:`field_docs`, so
``foveal config RECIPE`` prints the same words a reader sees in the code.

A part chosen by name has options of its own: the spec holds the name in one field and the options
in another, a mapping marked by :func:`options_of` (the VQA model's ``head`` and ``head_options``).
:func:`resolve_options` turns the mapping into the chosen part's own spec, and an option the part
does not have is an error naming the part; a config sets one as ``--set model.head_options.hops=3``.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from typing import Any, NamedTuple, TypeVar

from foveal.errors import FovealError

S = TypeVar("S")


def resolve_spec(spec_type: type[S], spec: S | None, options: dict[str, Any]) -> S:
    """``spec`` (or the defaults) with ``options`` replacing single fields.

    Example:
        >>> @dataclasses.dataclass
        ... class Spec:
        ...     size: int = 4
        ...     depth: int = 2
        >>> resolve_spec(Spec, None, {"depth": 3})
        Spec(size=4, depth=3)
        >>> resolve_spec(Spec, Spec(size=8), {"dpth": 3})
        Traceback (most recent call last):
        ...
        foveal.errors.FovealError: unknown option 'dpth' of Spec; did you mean 'depth'? options: size, depth
    """
    base = spec_type() if spec is None else spec
    if not isinstance(base, spec_type):
        raise FovealError(f"spec must be a {spec_type.__name__}, got {type(base).__name__}")
    names = [f.name for f in dataclasses.fields(spec_type)]  # type: ignore[arg-type]
    if unknown := _unknown(options, names):
        key, hint = unknown
        raise FovealError(f"unknown option {key!r} of {spec_type.__name__}; {hint}options: {', '.join(names)}")
    return dataclasses.replace(base, **options) if options else base  # type: ignore[type-var]


class Choice(NamedTuple):
    """What :func:`options_of` puts in an options field's metadata."""

    by: str  # the sibling field naming the chosen part ("head")
    spec_of: Callable[[str], type]  # the chosen part's name -> the dataclass of its options


CHOICE = "choice"  # the metadata key of an options field (see options_of)


def options_of(by: str, spec_of: Callable[[str], type]) -> dict[str, Choice]:
    """The metadata of a dict field holding the options of the part named by the sibling field ``by``.

    Written ``field(default_factory=dict, metadata=options_of("head", spec_of))``; ``spec_of(name)`` is the
    dataclass of that part's options, which :func:`resolve_options` makes from the mapping. A config sets one
    option as ``PREFIX.FIELD.NAME``; choosing another part starts its options from that part's defaults.
    """
    return {CHOICE: Choice(by, spec_of)}


def resolve_options(kind: str, name: str, spec_type: type[S], options: Mapping[str, Any]) -> S:
    """The options of the ``kind`` named ``name``: its spec ``spec_type`` with ``options`` replacing defaults.

    Example:
        >>> @dataclasses.dataclass
        ... class Hops:
        ...     hops: int = 2
        >>> resolve_options("head", "channel", Hops, {"hops": 3})
        Hops(hops=3)
        >>> resolve_options("head", "channel", Hops, {"gate": True})
        Traceback (most recent call last):
        ...
        foveal.errors.FovealError: head 'channel' has no option 'gate'; its options: hops
    """
    if not isinstance(options, Mapping):
        raise FovealError(f"the options of {kind} {name!r} must be a mapping of names to values, got {options!r}")
    names = [f.name for f in dataclasses.fields(spec_type)]  # type: ignore[arg-type]
    if unknown := _unknown(options, names):
        key, hint = unknown
        raise FovealError(f"{kind} {name!r} has no option {key!r}; {hint}its options: {', '.join(names) or 'none'}")
    return spec_type(**options)


def _unknown(keys: Iterable[str], names: Sequence[str]) -> tuple[str, str] | None:
    """The first of ``keys`` not in ``names``, with a "did you mean" hint for it (or None: all are known)."""
    for key in keys:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            return key, f"did you mean {close[0]!r}? " if close else ""
    return None


_FIELD = re.compile(r"^\s*(\w+)\s*:[^#]*?(?:#\s*(.*))?$")


@cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field name: doc}`` of a dataclass and its bases, from the comments in their source.

    Example:
        >>> from foveal.train import LoopConfig  # (the example only: specs.py imports nothing of foveal)
        >>> field_docs(LoopConfig)["clip_norm"]
        'clip the global gradient norm'
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            lines = inspect.getsource(klass).splitlines()
        except (OSError, TypeError):
            continue
        above: list[str] = []
        for line in lines[1:]:
            stripped = line.strip()
            if stripped.startswith("#"):
                above.append(stripped.lstrip("#").strip())
                continue
            match = _FIELD.match(line)
            if match and match.group(1) in klass.__dataclass_fields__:
                doc = match.group(2) or " ".join(above)
                if doc:
                    docs[match.group(1)] = doc
            above = []
    return docs


def flatten(overrides: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Turn nested dicts into dotted keys: ``{"loop": {"lr": 1}}`` -> ``{"loop.lr": 1}``.

    Example:
        >>> flatten({"seed": 1, "loop": {"lr": 0.1}})
        {'seed': 1, 'loop.lr': 0.1}
    """
    flat: dict[str, Any] = {}
    for key, value in overrides.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat
