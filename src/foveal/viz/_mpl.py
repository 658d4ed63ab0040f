"""matplotlib for figures written to files: the Agg backend, chosen in one place."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@cache
def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` with the Agg backend (draws to files, needs no display), imported on first use.

    Every figure foveal makes is saved to a file, often on a machine without a display. The import
    waits for the first figure so that ``import foveal`` stays free of matplotlib.

    Example:
        >>> plt = pyplot()
        >>> plt.get_backend().lower()
        'agg'
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Figure, path: Path, dpi: int = 100) -> Path:
    """Write ``fig`` to ``path`` (its folder made if need be), cropped to what is drawn, and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)
    return path
