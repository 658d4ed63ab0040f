"""The torch internals foveal's compile support reaches into, in one place.

``torch.compile``'s public API has no way to add a graph pass, read a mode's inductor options, find
inductor's C++ compiler or count compiled graphs; these names do, and a torch upgrade may move them
first. Only :mod:`foveal.compiling` imports this module. Importing it never fails: a torch that lacks
one of the names makes :func:`require` raise, naming the torch version and the name, when a model is
compiled (eager code does not need them).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from foveal.errors import FovealError

TESTED = "2.5 to 2.13"
"""The torch versions foveal's compile support was tested with."""
MINIMUM = (2, 5)

try:
    from torch._dynamo.utils import counters as _counters
    from torch._guards import detect_fake_mode as _detect_fake_mode
    from torch._inductor import list_mode_options as _list_mode_options
    from torch._inductor.cpp_builder import get_cpp_compiler as _get_cpp_compiler
    from torch._inductor.custom_graph_pass import CustomGraphPass
except ImportError as error:
    MISSING: str | None = str(error)

    class CustomGraphPass:  # type: ignore[no-redef]
        """Stands in for inductor's base class so that foveal imports; :func:`require` refuses to compile."""

        def __call__(self, graph: torch.fx.Graph) -> None:
            raise NotImplementedError

        def uuid(self) -> Any:
            raise NotImplementedError

else:
    MISSING = None


def torch_version() -> tuple[int, int]:
    """torch's ``(major, minor)`` version."""
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def require() -> None:
    """Raise :class:`~foveal.errors.FovealError` unless this torch has every internal foveal compiles with.

    Example:
        >>> require()  # the installed torch has them
    """
    if torch_version() < MINIMUM or MISSING is not None:
        lacking = f" ({MISSING})" if MISSING else ""
        raise FovealError(
            f"loop.compile uses torch internals that torch {torch.__version__} lacks{lacking}; foveal was tested "
            f"with torch {TESTED}: install one of those, or set loop.compile=false"
        )


def mode_options(mode: str) -> dict[str, Any]:
    """The inductor options of ``torch.compile``'s ``mode`` (torch.compile takes a mode or options, not both)."""
    return dict(_list_mode_options(mode))


def fake_mode(values: Any) -> AbstractContextManager[Any]:
    """The fake-tensor mode of ``values`` (inside an inductor pass), to compute a new node's fake value in."""
    mode = _detect_fake_mode(values)
    return nullcontext() if mode is None else mode


def check_cpp_compiler() -> None:
    """Find inductor's C++ compiler, raising what inductor raises when there is none."""
    _get_cpp_compiler()


def graphs_compiled() -> int:
    """Graphs compiled in this process so far (forward and backward)."""
    return int(_counters["stats"]["unique_graphs"]) + int(_counters["aot_autograd"]["total"])
