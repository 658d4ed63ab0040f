"""matplotlib for figures written to files: the Agg backend, chosen in one place."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PAGE_WIDTH_PX = 1100
"""The widest a picture shows on foveal's pages (their ``max-width``); a wider PNG is scaled down to it."""
MIN_TEXT_PX = 10
"""The least height of a figure's text, in pixels, where the page shows the figure."""
FIGURE_DPI = 100
"""Pixels per inch of the figures the pages show: a figure up to 11 inches wide shows unscaled."""
FONT = 8
"""Points of a figure's text at :data:`FIGURE_DPI`: 11 pixels."""


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


def chars_across(inches: float, fontsize: float = FONT) -> int:
    """About how many characters of text at ``fontsize`` points fit in ``inches``."""
    return max(1, int(inches * 72 / (0.6 * fontsize)))


def wrap(text: str, width: int) -> str:
    """``text`` with each of its lines broken at spaces to at most ``width`` characters.

    Example:
        >>> wrap("is the red shape on the left", 12).splitlines()
        ['is the red', 'shape on the', 'left']
    """
    import textwrap

    return "\n".join(part for line in text.splitlines() for part in (textwrap.wrap(line, width) or [""]))
