"""Masks and padding in the attention modules: bool masks that cannot grow the result, leading dims
that broadcast, and the one way padded positions are taken out before any arithmetic; and the
modules' on/off options, which must be bools.

Every other argument is checked with :mod:`foveal._checks`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from foveal._checks import check_tensor
from foveal.errors import FovealError


def check_mask(mask: object, shape: Sequence[int], name: str = "mask", symbols: str | None = None) -> Tensor:
    """A bool mask that broadcasts to ``shape`` without changing it (it may not add or grow a dim).

    A mask that grew the result would silently give an output with more dims than the inputs.
    ``symbols`` names the dims in the message, e.g. ``"(B, n, m)"``.
    """
    mask = check_tensor(name, mask)
    if mask.dtype != torch.bool:
        raise FovealError(f"{name} must be bool (True = may be attended), got {mask.dtype}")
    shape = tuple(shape)
    if _broadcast(tuple(mask.shape), shape) != shape:
        expected = (
            f"a shape broadcastable to {shape}"
            if symbols is None
            else f"shape {symbols} = {shape} or one broadcastable to it"
        )
        raise FovealError(f"{name}: expected {expected}, got {tuple(mask.shape)}")
    return mask


def check_flags(**flags: object) -> None:
    """A :class:`FovealError` unless every flag is a bool: ``embed="no"`` would read as True."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise FovealError(f"{name}: expected True or False, got {value!r}")


def check_broadcast(name: str, tensor: Tensor, lead: Sequence[int], other: str, trailing: int = 2) -> torch.Size:
    """The broadcast of ``lead`` with ``tensor``'s leading dims (all but the last ``trailing``), or a ValueError."""
    mine = tuple(tensor.shape[: tensor.dim() - trailing])
    full = _broadcast(tuple(lead), mine)
    if full is None:
        raise FovealError(
            f"{name}: expected leading (batch, head) dims that broadcast with {tuple(lead)} ({other}), "
            f"got {mine} in shape {tuple(tensor.shape)}"
        )
    return torch.Size(full)


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """torch's broadcast of two shapes, or None where they do not broadcast.

    In Python because ``torch.broadcast_shapes`` costs several microseconds a call, more than the
    rest of a module's checks together.
    """
    if a == b:
        return a
    if len(a) < len(b):
        a, b = b, a
    b = (1,) * (len(a) - len(b)) + b
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return tuple(out)


def drop_padding(x: Tensor, real: Tensor) -> Tensor:
    """``x`` with the vectors where ``real`` is False replaced by zeros.

    ``where``, not a product: ``0 * NaN`` is NaN, so a product would let a NaN or Inf at a padded
    position into every sum over the set, and its backward would put ``0 * NaN`` into the gradients
    of the weights that read it. ``where`` gives that position a zero value and a zero gradient.

    Shape:
        - x: ``(..., N, d)``
        - real: bool ``(..., N)``, broadcastable against ``x``'s leading dims
        - output: ``x``'s shape (or the broadcast of both)
    """
    return torch.where(real.unsqueeze(-1), x, 0)
