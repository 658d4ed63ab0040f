"""The torch internals foveal reaches into, in one place.

``torch.compile``'s public API has no way to add a graph pass, read a mode's inductor options, find
inductor's C++ compiler or count compiled graphs, and ``torch.export`` none to name a named-tuple
output for its files; these names do, and a torch upgrade may move them first. :mod:`foveal.compiling`
uses the compiler's; the modules' output classes use :func:`exportable_output`; a function a compiled
model must run eagerly uses :func:`eager_when_compiled`. The compiler's names
are imported when a model is compiled, never before: inductor's import loads ``torch._dynamo``, which
eager code does not need. A torch that lacks one of them makes :func:`require` raise, naming the
torch version and the name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from types import SimpleNamespace
from typing import Any, TypeVar, cast

import torch

from foveal.errors import FovealError

TESTED = "2.5 to 2.13"
"""The torch versions foveal's compile support was tested with."""
MINIMUM = (2, 5)


@functools.cache
def _compiler() -> SimpleNamespace:
    """The compiler's private names, imported on the first call: inductor's import loads ``torch._dynamo``
    (over a second), which loading and running a model never need. Raises ImportError where torch lacks one."""
    from torch._dynamo.utils import counters
    from torch._guards import detect_fake_mode
    from torch._inductor import list_mode_options
    from torch._inductor.cpp_builder import get_cpp_compiler
    from torch._inductor.custom_graph_pass import CustomGraphPass

    return SimpleNamespace(
        counters=counters,
        detect_fake_mode=detect_fake_mode,
        list_mode_options=list_mode_options,
        get_cpp_compiler=get_cpp_compiler,
        CustomGraphPass=CustomGraphPass,
    )


def missing() -> str | None:
    """What this torch lacks of the compiler's names (the import's error), or None; imports the compiler."""
    try:
        _compiler()
    except ImportError as error:
        return str(error)
    return None


def torch_version() -> tuple[int, int]:
    """torch's ``(major, minor)`` version."""
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def require() -> None:
    """Raise :class:`~foveal.errors.FovealError` unless this torch has every internal foveal compiles with.

    Example:
        >>> require()  # the installed torch has them
    """
    absent = missing()
    if torch_version() < MINIMUM or absent is not None:
        lacking = f" ({absent})" if absent else ""
        raise FovealError(
            f"loop.compile uses torch internals that torch {torch.__version__} lacks{lacking}; foveal was tested "
            f"with torch {TESTED}: install one of those, or set loop.compile=false"
        )


def mode_options(mode: str) -> dict[str, Any]:
    """The inductor options of ``torch.compile``'s ``mode`` (torch.compile takes a mode or options, not both)."""
    return dict(_compiler().list_mode_options(mode))


def fake_mode(values: Any) -> AbstractContextManager[Any]:
    """The fake-tensor mode of ``values`` (inside an inductor pass), to compute a new node's fake value in."""
    mode = _compiler().detect_fake_mode(values)
    return nullcontext() if mode is None else mode


def check_cpp_compiler() -> None:
    """Find inductor's C++ compiler, raising what inductor raises when there is none."""
    _compiler().get_cpp_compiler()


def graphs_compiled() -> int:
    """Graphs compiled in this process so far (forward and backward)."""
    counters = _compiler().counters
    return int(counters["stats"]["unique_graphs"]) + int(counters["aot_autograd"]["total"])


def allow_recompiles(limit: int) -> None:
    """Let dynamo keep at least ``limit`` graphs of one function. Its default keeps 8 and then runs the function
    eagerly without a word; a process that trains many configurations of a model (a sweep's grid, a test
    session) compiles the same method once for each, and the ninth would train eagerly."""
    from torch._dynamo import config

    config.recompile_limit = max(config.recompile_limit, limit)


def register_graph_pass(cls: type) -> None:
    """Make ``cls`` (a ``__call__(graph)`` and a ``uuid()``) one of inductor's custom graph passes, which
    inductor requires of a pass before it caches the graphs it ran on. A virtual subclass, registered when a
    model is compiled, so that defining a pass imports no compiler.
    """
    _compiler().CustomGraphPass.register(cls)


F = TypeVar("F", bound=Callable[..., Any])


def eager_when_compiled(function: F) -> F:
    """Run ``function`` eagerly under ``torch.compile`` (a graph break around it), as
    ``torch.compiler.disable`` does, but without importing the compiler when it decorates.

    ``torch.compiler.disable`` imports ``torch._dynamo`` (about 2 s) at decoration time, so a model module
    that used it would make ``foveal.pretrained`` that much slower to import; torch's private
    ``torch._disable_dynamo`` is the lazy form, which imports it on the first call.
    """
    return cast(F, torch._disable_dynamo(function))


T = TypeVar("T", bound=type)


def exportable_output(cls: T) -> T:
    """Register a NamedTuple output class with torch's pytree under a stable name, so that
    ``torch.export.save`` can write a program that returns it (and ``torch.export.load`` read it back).

    torch has no public way to do this for a named tuple (``torch.export.register_dataclass`` takes
    dataclasses only). A class decorator; the serialised name is the class's import path.
    """
    from torch.utils import _pytree

    _pytree._register_namedtuple(cls, serialized_type_name=f"{cls.__module__}.{cls.__qualname__}")
    return cls
