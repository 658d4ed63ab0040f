"""One place picks matplotlib's backend, and only when a figure is drawn."""

from __future__ import annotations

import subprocess
import sys

from foveal.viz import pyplot


def test_pyplot_is_agg_and_imported_once() -> None:
    plt = pyplot()
    assert plt.get_backend().lower() == "agg" and pyplot() is plt


def test_importing_viz_leaves_matplotlib_unimported() -> None:
    code = "import sys, foveal.viz; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
