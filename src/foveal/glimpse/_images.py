"""Checks only the glimpses need: an image batch, and the number that fills outside it.

Everything else (sizes, ``(h, w)`` pairs, numbers, options, dtypes) is checked with
:mod:`foveal._checks`. :func:`~foveal.glimpse.crop` alone indexes, so it takes images of any dtype
and integer boxes; every other glimpse computes with its images, which are then floating point.
"""

from __future__ import annotations

import numbers

from torch import Tensor

from foveal._checks import check_shape, check_tensor
from foveal.errors import FovealError


def check_image(name: str, images: object) -> dict[str, int]:
    """``images`` is a ``(B, C, H, W)`` tensor with at least one pixel; returns the bound sizes.

    Example:
        >>> import torch
        >>> check_image("images", torch.zeros(2, 3, 8, 8))
        {'B': 2, 'C': 3, 'H': 8, 'W': 8}
    """
    tensor = check_tensor(name, images)
    sizes = check_shape(name, tensor, ("B", "C", "H", "W"))
    if sizes["H"] < 1 or sizes["W"] < 1:
        raise FovealError(f"{name}: expected at least one pixel (H, W >= 1), got shape {tuple(tensor.shape)}")
    return sizes


def check_fill_number(name: str, value: object) -> None:
    """A :class:`FovealError` unless ``value`` is a real number or a 0-dim tensor (the value outside the image)."""
    if isinstance(value, Tensor) and value.dim() == 0 and not value.is_complex():
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise FovealError(f"{name}: expected a number, got {value!r}")
