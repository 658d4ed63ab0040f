"""Hard attention: batched image crops (seed 003's ``g = I[y:y+h, x:x+w]``).

A crop is indexing, so it passes gradients to the image but not to the box: a model that learns
where to crop needs the score-function estimator (REINFORCE), as seed 003 says.
"""

from __future__ import annotations

import torch
from torch import Tensor

from foveal._checks import check_hw, check_shape, check_tensor, work_dtype
from foveal.errors import FovealError
from foveal.glimpse._images import check_fill_number, check_image

CORNER_LIMIT = 2**52
"""Largest ``|x|, |y|`` of a corner taken as given; a box further out (or not finite) lies wholly off the
image, and is moved to this distance so that its pixel indices stay within int64."""


def crop(images: Tensor, boxes: Tensor, size: tuple[int, int], *, fill: float = 0.0) -> Tensor:
    """Cut one ``h x w`` window per image, all in one gather (no loop over the batch).

    Output pixel ``(i, j)`` of image ``b`` is ``images[b, :, y_b + i, x_b + j]`` -- seed 003's
    ``I[y:y+h, x:x+w]``. Windows may stick out of the image (negative or too-large ``x, y``): the
    pixels outside read ``fill``, as if the image were padded with it. For a normalised image,
    pass the normalised value of the background (e.g. ``(0 - mean) / std``), not 0.

    Args:
        images: the images to crop.
        boxes: top-left corner ``(x, y)`` of each window in pixels; floats are floored. A box that is
            not finite (NaN, inf) reads ``fill`` everywhere, and leaves the other windows as they are.
        size: ``(h, w)``, the window's height and width in pixels.
        fill: the value read outside the image.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): a shape, size or dtype that does not fit
            (``images`` may be of any dtype; ``boxes`` integer or floating point).

    Shape:
        - images: ``(B, C, H, W)``
        - boxes: ``(B, 2)``
        - output: ``(B, C, h, w)``

    Convention:
        ``boxes`` are ``(x, y)``: column first, then row, in integer pixel indices (0-based,
        top-left of the window). ``size`` is ``(h, w)``, rows first, as torch shapes are.
        No normalised coordinates and no ``align_corners``: nothing is interpolated.

    Example:
        >>> img = torch.arange(16.0).view(1, 1, 4, 4)
        >>> crop(img, torch.tensor([[1, 2]]), (2, 2))[0, 0]
        tensor([[ 9., 10.],
                [13., 14.]])
        >>> crop(img, torch.tensor([[3, 3]]), (2, 2))[0, 0]  # sticks out: padded with fill
        tensor([[15.,  0.],
                [ 0.,  0.]])
    """
    h, w = check_hw("size", size)
    sizes = check_image("images", images)
    check_shape("boxes", check_tensor("boxes", boxes), ("B", 2), sizes)
    if boxes.dtype == torch.bool or boxes.is_complex():
        raise FovealError(f"boxes: expected integer or floating-point corners, got {boxes.dtype}")
    check_fill_number("fill", fill)
    B, C, H, W = images.shape
    corner = boxes.detach()
    if corner.is_floating_point():
        # NaN and inf have no integer value (converting them is undefined): send them, and any corner
        # beyond int64's reach once the window is added, far off the image, where every pixel reads fill.
        # float16 cannot hold that distance (it tops out at 65504): 16-bit corners are widened first.
        far = float(CORNER_LIMIT)
        corner = corner.floor().to(work_dtype(corner.dtype)).nan_to_num(nan=-far).clamp(-far, far)
    corner = corner.long().clamp(-CORNER_LIMIT, CORNER_LIMIT)
    rows = corner[:, 1:2] + torch.arange(h, device=images.device)  # (B, h)
    cols = corner[:, 0:1] + torch.arange(w, device=images.device)  # (B, w)
    inside = ((rows >= 0) & (rows < H))[:, :, None] & ((cols >= 0) & (cols < W))[:, None, :]  # (B, h, w)
    # Flat index into H*W, clamped so the gather stays in bounds; the outside pixels are refilled below.
    flat = rows.clamp(0, H - 1)[:, :, None] * W + cols.clamp(0, W - 1)[:, None, :]  # (B, h, w)
    out = images.reshape(B, C, H * W).gather(2, flat.reshape(B, 1, h * w).expand(B, C, h * w))
    out = out.view(B, C, h, w)
    return out.masked_fill(~inside[:, None], fill)
