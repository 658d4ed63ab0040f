"""Coordinate features: append each cell's normalised ``(x, y)`` position to a feature map.

Relational questions ("which object is closest to the red one?") need to know *where* a region
is; a convolutional feature carries little of that, so Relation Networks (Santoro et al. 2017) tag
every cell with its coordinates before comparing cells. Applied before :func:`flatten_grid`, the
tag travels with each region vector through any attention module.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from foveal._checks import check_shape


def grid_coords(height: int, width: int, *, dtype: torch.dtype = torch.float32, device=None) -> Tensor:
    """The normalised ``(x, y)`` centre of every cell of an ``height x width`` grid.

    Convention:
        ``x`` runs left to right along the width, ``y`` top to bottom along the height, both in
        ``(-1, 1)`` at cell *centres*: ``x_j = (2 j + 1) / W - 1`` (the ``align_corners=False``
        convention of ``F.grid_sample``), so a 1-cell axis gets 0 and the grid is symmetric.

    Shape:
        - output: ``(2, height, width)``; channel 0 is x, channel 1 is y

    Example:
        >>> grid_coords(2, 4)[0, 0]
        tensor([-0.7500, -0.2500,  0.2500,  0.7500])
        >>> grid_coords(2, 4)[1, :, 0]
        tensor([-0.5000,  0.5000])
    """
    x = (2 * torch.arange(width, dtype=dtype, device=device) + 1) / width - 1
    y = (2 * torch.arange(height, dtype=dtype, device=device) + 1) / height - 1
    return torch.stack(torch.meshgrid(x, y, indexing="xy"))


def add_coords(x: Tensor) -> Tensor:
    """Append the two coordinate channels of :func:`grid_coords` to a feature map.

    Shape:
        - x: ``(B, C, H, W)``
        - output: ``(B, C + 2, H, W)``; channels ``C`` and ``C + 1`` are x and y

    Example:
        >>> add_coords(torch.zeros(2, 8, 5, 5)).shape
        torch.Size([2, 10, 5, 5])
    """
    batch, _, height, width = check_shape("x", x, ("B", "C", "H", "W")).values()
    coords = grid_coords(height, width, dtype=x.dtype, device=x.device)
    return torch.cat([x, coords.expand(batch, 2, height, width)], dim=1)


class AddCoords(nn.Module):
    """:func:`add_coords` as a layer, for ``nn.Sequential``.

    Shape:
        - x: ``(B, C, H, W)``
        - output: ``(B, C + 2, H, W)``

    Example:
        >>> nn.Sequential(nn.Conv2d(3, 4, 3), AddCoords())(torch.zeros(1, 3, 7, 7)).shape
        torch.Size([1, 6, 5, 5])
    """

    def forward(self, x: Tensor) -> Tensor:
        return add_coords(x)
