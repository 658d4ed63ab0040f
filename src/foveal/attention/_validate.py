"""Argument checks shared by the attention modules: one wording for sizes, dtypes, masks and padding.

Shapes themselves are checked with :func:`foveal._checks.check_shape`; what is here covers what a
shape cannot say: constructor sizes, positive scalars, dtypes, bool masks that broadcast without
growing the result, and the one way padded positions are taken out before any arithmetic.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from foveal.errors import FovealError


def check_size(name: str, value: object, *, minimum: int = 1) -> int:
    """``value`` as an int, or a :class:`FovealError` if it is not an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise FovealError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def check_sizes(minimum: int = 1, **sizes: object) -> None:
    """:func:`check_size` for each keyword, in order."""
    for name, value in sizes.items():
        check_size(name, value, minimum=minimum)


def check_positive(name: str, value: object, why: str) -> float:
    """``value`` as a float, or a :class:`FovealError` unless it is finite and ``> 0`` (``why``: who needs it)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (0 < value < math.inf):
        raise FovealError(f"{name}: expected a finite number > 0 ({why}), got {value!r}")
    return float(value)


def check_tensor(name: str, value: object) -> Tensor:
    """``value`` if it is a tensor, else a :class:`FovealError` naming what came instead."""
    if not isinstance(value, Tensor):
        raise FovealError(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
    return value


def autocast_on(tensor: Tensor) -> bool:
    """Whether autocast is on for ``tensor``'s device, where mixed dtypes are autocast's to resolve."""
    return torch.is_autocast_enabled(tensor.device.type)


def check_floating(**tensors: Tensor) -> None:
    """Each tensor is floating point, and all share one dtype (except under autocast, which casts them itself)."""
    first = None
    for name, tensor in tensors.items():
        check_tensor(name, tensor)
        if not tensor.is_floating_point():
            raise FovealError(f"{name}: expected a floating-point tensor, got {tensor.dtype}")
        if first is None:
            first = name, tensor
        elif tensor.dtype != first[1].dtype and not autocast_on(tensor):
            raise FovealError(
                f"{name}: expected dtype {first[1].dtype} (the dtype of {first[0]}), got {tensor.dtype}; "
                "convert one to the other"
            )


def check_module_dtype(module: nn.Module, **tensors: Tensor) -> None:
    """Each tensor is floating point with the dtype of ``module``'s parameters (except under autocast)."""
    check_floating(**tensors)
    parameter = next(module.parameters(), None)
    if parameter is None or not tensors:
        return
    # check_floating has made the tensors one dtype, so the first speaks for all of them.
    name, tensor = next(iter(tensors.items()))
    if tensor.dtype != parameter.dtype and not autocast_on(tensor):
        raise FovealError(
            f"{name}: expected dtype {parameter.dtype} (the module's parameters), got {tensor.dtype}; "
            f"convert the input, or the module with module.to({tensor.dtype})"
        )


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
