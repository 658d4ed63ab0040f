"""Named experiments. Every module in this package registers its recipes on import."""

import importlib
import pkgutil

from foveal.recipes.base import LoopConfig, Recipe, RunConfig, Task

__all__ = ["LoopConfig", "Recipe", "RunConfig", "Task", "load_all"]


def load_all() -> None:
    """Import every recipe module, and the stand-alone figures, so the registries are complete."""
    importlib.import_module("foveal.viz")
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")
