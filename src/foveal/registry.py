"""Name -> constructor registries, so modules, models and recipes can be built by name.

``foveal list`` prints every registry; the conformance tests sweep them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar, cast

from foveal.errors import FovealError

T = TypeVar("T")


class Named(Protocol):
    """An entry that carries its own name (a recipe)."""

    name: str


class Registry(Generic[T]):
    """A dict of named entries that raises one clear error for an unknown name.

    Example:
        >>> reg = Registry("colour")
        >>> @reg.register("red")
        ... def make_red():
        ...     return "red"
        >>> reg.get("red")()
        'red'
        >>> reg.get("blue")
        Traceback (most recent call last):
        ...
        foveal.errors.FovealError: unknown colour 'blue'; choose from: red
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def add(entry: T) -> T:
            if name in self._entries and self._entries[name] is not entry:
                raise FovealError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = entry
            return entry

        return add

    def add(self, entry: T) -> T:
        """Register an entry under its own ``name`` (a :class:`~foveal.recipes.base.Recipe`), written once.

        Example:
            >>> from types import SimpleNamespace
            >>> reg = Registry("colour")
            >>> reg.add(SimpleNamespace(name="red")).name in reg
            True
        """
        return self.register(cast(Named, entry).name)(entry)

    def get(self, name: str) -> T:
        if name not in self._entries:
            raise FovealError(f"unknown {self.kind} {name!r}; choose from: {', '.join(self.names())}")
        return self._entries[name]

    def names(self) -> list[str]:
        return sorted(self._entries)

    def items(self) -> Iterator[tuple[str, T]]:
        for name in self.names():
            yield name, self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)


ATTENTION: Registry[Any] = Registry("attention module")
"""Attention modules by name: ``ATTENTION.get(name)`` returns a factory ``(dim, **kw) -> Module``."""

MODELS: Registry[Any] = Registry("model")
"""Whole models by name."""

RECIPES: Registry[Any] = Registry("recipe")
"""Named experiments (:class:`foveal.recipes.base.Recipe`), found by ``foveal train NAME``; a recipe module
registers its own with ``RECIPES.add(Recipe(name, ...))``."""

FIGURES: Registry[Any] = Registry("figure")
"""Stand-alone figures for ``foveal show NAME`` that need no run: ``fn(out_dir: Path) -> list[Path]``."""
