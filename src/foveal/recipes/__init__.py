"""Named experiments. Every module in this package registers its recipes on import."""

import importlib
import pkgutil

from foveal.recipes.base import LoopConfig, Recipe, RunConfig, Task

__all__ = ["LoopConfig", "Recipe", "RunConfig", "Task", "load_all"]


def load_all() -> None:
    """Import every recipe module so that :data:`foveal.registry.RECIPES` is complete."""
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")
