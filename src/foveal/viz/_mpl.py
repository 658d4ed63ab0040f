"""matplotlib for figures written to files: the Agg backend, chosen in one place."""

from __future__ import annotations

from functools import cache
from types import ModuleType


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
