"""Seed 003's example figure: registered, written, the glimpses contain the square and the mask sits on it."""

import torch

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


def test_the_mask_sits_on_the_square_and_darkens_the_rest():
    images = seed_003_example()
    mask, masked, x = images["Gaussian Mask"], images["Masked Image"], images["Input Image"]
    assert divmod(int(mask.argmax()), 10) == (4, 4) and mask[4, 4] == 1  # the square's middle pixel
    assert mask[3:6, 3:6].min() > 0.6 and mask[[0, 9]].max() < 0.05
    torch.testing.assert_close(masked, mask * x)
    assert masked[3:6, 3:6].mean() > 0.7 and masked[[0, 1, 8, 9]].max() < 0.1  # the square stays, the edges go dark
