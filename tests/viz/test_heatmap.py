"""Heatmap helpers: folding weights onto the grid, upsampling, overlays, attention mass in a mask."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib import colormaps

from foveal.viz.heatmap import (
    MAP_COLOURS,
    grey_picture,
    mass_in_mask,
    overlay_heatmap,
    upsample_heatmap,
    weight_colorbar,
    weights_to_grid,
)


def test_weights_fold_row_major() -> None:
    grid = weights_to_grid(torch.arange(12.0).view(2, 6), (2, 3))
    assert grid.shape == (2, 2, 3) and grid[1, 1, 0] == 9.0  # row 1, column 0 of the second map


def test_mass_in_mask_hand_computed() -> None:
    # 4x4 image, 2x2 grid: the mask fills cell 0, half of cell 1, nothing of cells 2 and 3.
    mask = torch.zeros(1, 4, 4, dtype=torch.bool)
    mask[0, :2, :2] = True
    mask[0, :2, 2] = True
    weights = torch.tensor([[[0.1, 0.2, 0.3, 0.4], [1.0, 0.0, 0.0, 0.0]]])  # (B=1, hops=2, N=4)
    expected = torch.tensor([[0.1 * 1 + 0.2 * 0.5, 1.0]])
    torch.testing.assert_close(mass_in_mask(weights, mask, (2, 2)), expected)


def test_mass_in_mask_matches_pixelwise_sum_of_spread_weights() -> None:
    g = torch.Generator().manual_seed(0)
    weights = torch.rand(3, 16, generator=g).softmax(-1)
    mask = torch.rand(3, 8, 8, generator=g) > 0.7
    spread = weights.view(3, 4, 4).repeat_interleave(2, 1).repeat_interleave(2, 2) / 4  # each cell over its pixels
    torch.testing.assert_close(mass_in_mask(weights, mask, (4, 4)), (spread * mask).sum((1, 2)))


def test_mass_in_mask_rejects_a_grid_that_does_not_divide_the_image() -> None:
    with pytest.raises(ValueError, match="does not split"):
        mass_in_mask(torch.ones(1, 9) / 9, torch.ones(1, 8, 8, dtype=torch.bool), (3, 3))


def test_overlay_colours_the_map_over_a_grey_picture() -> None:
    image = torch.rand(3, 8, 8, generator=torch.Generator().manual_seed(1))
    weights = torch.zeros(2, 2)
    weights[0, 0] = 1.0
    out = overlay_heatmap(image, weights)
    assert out.shape == (8, 8, 3) and out.min() >= 0 and out.max() <= 1
    # The picture's own colours cannot pass for the map's: the same grey picture in other colours
    # gives the same figure.
    swapped = image[[2, 0, 1]]
    assert abs(overlay_heatmap(swapped, weights) - out).max() < 1e-6
    # A weight of zero leaves the grey picture as it is; the hottest cell wears the top colour.
    grey = grey_picture(image)
    assert abs(out[4:, 4:] - grey[4:, 4:]).max() < 1e-6
    top = colormaps[MAP_COLOURS](1.0)[:3]
    assert abs(out[0, 0] - top).max() < abs(grey[0, 0] - top).max()


def test_zero_weight_looks_the_same_on_the_map_and_on_its_colour_bar() -> None:
    """The bar's bottom is the picture's grey, and each level of the bar is the colour the map gives that weight."""
    from foveal.viz import pyplot

    image = torch.full((3, 4, 4), 0.6)
    weights = torch.tensor([[0.0, 0.25], [0.5, 1.0]])
    out = overlay_heatmap(image, weights)
    fig, ax = pyplot().subplots()
    bar = weight_colorbar(fig, ax, 1.0, background=float(grey_picture(image)[0, 0, 0]))
    shown = bar.cmap(bar.norm(np.array([0.0, 0.25, 0.5, 1.0])))[:, :3]
    pyplot().close(fig)
    drawn = out[[0, 0, 2, 2], [0, 2, 0, 2]]  # the cells of weight 0, 0.25, 0.5 and 1
    assert abs(shown - drawn).max() < 0.01  # the bar has 256 levels


def test_overlay_on_a_shared_scale_dims_the_weaker_map() -> None:
    image = torch.full((3, 4, 4), 0.5)
    strong, weak = torch.tensor([[1.0, 0.0], [0.0, 0.0]]), torch.tensor([[0.5, 0.0], [0.0, 0.0]])
    own = overlay_heatmap(image, weak)  # scaled to its own maximum: looks as hot as the strong one
    shared = overlay_heatmap(image, weak, vmax=1.0)
    assert abs(own[0, 0] - overlay_heatmap(image, strong)[0, 0]).max() < 1e-6
    assert abs(shared[0, 0] - own[0, 0]).max() > 0.05


def test_upsample_nearest_repeats_cells() -> None:
    grid = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert torch.equal(
        upsample_heatmap(grid, (4, 4), mode="nearest"), grid.repeat_interleave(2, 0).repeat_interleave(2, 1)
    )
