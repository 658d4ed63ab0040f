"""Seed 003's four-panel example: registered, written, and the glimpses contain the square."""

import foveal.viz  # noqa: F401  (registers the figures)
from foveal.registry import FIGURES
from foveal.viz.glimpses import seed_003_example


def test_glimpses_figure_is_registered_and_written(tmp_path):
    paths = FIGURES.get("glimpses")(tmp_path)
    assert [p.name for p in paths] == ["glimpses.png"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_glimpse_shows_the_square_in_its_middle():
    images = seed_003_example()
    for name in ("Crop", "Gaussian Att", "STN"):
        middle, border = images[name][1:4, 1:4], images[name][[0, 4]]
        assert middle.mean() > 0.8 and middle.mean() > border.mean() + 0.3, name
