"""Coordinate features: append each cell's normalised ``(x, y)`` position to a feature map.

Relational questions ("which object is closest to the red one?") need to know *where* a region
is; a convolutional feature carries little of that, so Relation Networks (Santoro et al. 2017) tag
every cell with its coordinates before comparing cells. Applied before :func:`flatten_grid`, the
tag travels with each region vector through any attention module.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from foveal._checks import check_floating, check_hw, check_int, check_shape, check_tensor


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
    height, width = check_int("height", height, minimum=0), check_int("width", width, minimum=0)
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
    batch, _, height, width = check_shape("x", check_tensor("x", x), ("B", "C", "H", "W")).values()
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


def box_weights(boxes: Tensor, image_size: tuple[int, int], grid_size: tuple[int, int]) -> Tensor:
    """How much of each box falls in each cell of a feature grid, normalised to sum to 1 per box.

    ``box_weights(boxes, ...) @ V`` pools the region vectors ``V`` (a grid flattened row-major) inside
    each box, weighting each cell by its overlap area: the feature of a candidate box of a pointing
    question.

    Args:
        boxes: ``(x0, y0, x1, y1)`` in pixels of the image.
        image_size: ``(height, width)`` of the image in pixels.
        grid_size: ``(H, W)`` of the feature grid, which tiles the image evenly.

    Convention:
        Pixel boxes are half-open, ``x`` right and ``y`` down, ``(0, 0)`` the top-left corner of the
        top-left pixel (so a box ``(0, 0, 1, 1)`` is exactly that pixel). Cell ``(row, col)`` covers
        ``[col * width / W, (col + 1) * width / W)`` in ``x`` and likewise in ``y``. A box with no
        area gets all-zero weights.

    Shape:
        - boxes: ``(..., 4)``
        - output: ``(..., H * W)``, row-major like :func:`foveal.attention.grid.flatten_grid`

    Example:
        >>> w = box_weights(torch.tensor([[0.0, 0.0, 25.0, 25.0]]), (75, 75), (3, 3))
        >>> w.view(3, 3)
        tensor([[1., 0., 0.],
                [0., 0., 0.],
                [0., 0., 0.]])
    """
    check_floating(boxes=boxes)
    check_shape("boxes", boxes, (4,), leading=True)
    (height, width), (rows, cols) = check_hw("image_size", image_size), check_hw("grid_size", grid_size)
    x_edges = torch.linspace(0, width, cols + 1, dtype=boxes.dtype, device=boxes.device)
    y_edges = torch.linspace(0, height, rows + 1, dtype=boxes.dtype, device=boxes.device)
    x0, y0, x1, y1 = boxes.unsqueeze(-1).unbind(-2)  # each (..., 1)
    overlap_x = (torch.minimum(x1, x_edges[1:]) - torch.maximum(x0, x_edges[:-1])).clamp_min(0)  # (..., W)
    overlap_y = (torch.minimum(y1, y_edges[1:]) - torch.maximum(y0, y_edges[:-1])).clamp_min(0)  # (..., H)
    area = (overlap_y.unsqueeze(-1) * overlap_x.unsqueeze(-2)).flatten(-2)  # (..., H * W)
    # The clamp keeps a box of zero area at zero weights instead of 0 / 0.
    return area / area.sum(-1, keepdim=True).clamp_min(torch.finfo(area.dtype).tiny)
