"""timm for the tests, importable where torchvision is not.

timm imports torchvision when it is imported (for its data transforms and a frozen batch-norm layer), but
none of what these tests use (the ViT, its ``Block`` and ``Attention``) calls it. PyPI's torchvision is
built against the CUDA torch and fails to import beside the CPU build foveal installs ('operator
torchvision::nms does not exist'), and installing it would pull that torch in. So timm is installed
without its dependencies (the Makefile's setup), and where torchvision does not import, :func:`import_timm`
puts a stand-in under its name first: a package whose every attribute is a placeholder class that raises
when called, so anything that does use torchvision fails loudly instead of quietly.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any


class _Placeholder(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        attr = _Placeholder(name, (cls,), {})  # distinct per name: timm keys dicts by enum members
        setattr(cls, name, attr)
        return attr


class Unavailable(metaclass=_Placeholder):
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("torchvision is a stand-in in these tests (tests/_timm.py); it cannot be used")


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(Unavailable, name)


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: object, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _StandInModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []


def import_timm() -> types.ModuleType:
    """timm, with the stand-in torchvision where the real one does not import (also for the benchmarks)."""
    if importlib.util.find_spec("timm") is None:
        raise ModuleNotFoundError("timm is not installed (make setup installs it: pip install --no-deps timm)")
    if "timm" not in sys.modules:
        try:
            import torchvision  # noqa: F401
        except Exception:  # not installed, or built for another torch
            for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
                del sys.modules[name]
            sys.meta_path.insert(0, _StandInFinder())
    return importlib.import_module("timm")
