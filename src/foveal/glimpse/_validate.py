"""Argument checks shared by the glimpses and the memory: sizes, numbers, dtypes, in one wording.

Shapes are checked with :func:`foveal._checks.check_shape`; what is here covers what a shape cannot
say. The rules, for every public function of :mod:`foveal.glimpse` (and, but for the images, of
:mod:`foveal.memory`):

- every tensor that enters arithmetic (images, parameters, grids, ``theta``) is floating point, and
  all of one call share a dtype (autocast, which mixes them on purpose, is left to cast them itself);
  :func:`~foveal.glimpse.crop` alone indexes, so it takes images of any dtype and integer boxes;
- sizes are integers ``>= 1``; scalars such as ``support`` or ``std`` are finite and positive;
- 16-bit floats are accepted, and the parts whose range they cannot hold run in float32 (see
  :func:`work_dtype`).
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

from foveal._checks import check_shape
from foveal.errors import FovealError

LOW_PRECISION = (torch.float16, torch.bfloat16)


def check_count(name: str, value: object, *, minimum: int = 1) -> int:
    """``value`` as an int, or a :class:`FovealError` unless it is an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise FovealError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def check_size(name: str, size: object) -> tuple[int, int]:
    """``(h, w)`` as two ints, or a :class:`FovealError` unless it is two positive integers.

    Integral floats (``28.0``) are accepted, as they always were; bools and fractions are not.
    """
    try:
        pair = tuple(size)  # type: ignore[arg-type]
    except TypeError:
        raise FovealError(f"{name}: expected two positive ints (h, w), got {size!r}") from None
    if len(pair) != 2 or not all(_positive_integral(s) for s in pair):
        raise FovealError(f"{name}: expected two positive ints (h, w), got {pair}")
    return int(pair[0]), int(pair[1])


def _positive_integral(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Tensor):
        return False
    if isinstance(value, Tensor) and (value.numel() != 1 or value.is_complex()):
        return False
    return math.isfinite(float(value)) and int(value) == value and value >= 1


def check_number(name: str, value: object, *, positive: bool = True, why: str = "") -> float:
    """``value`` as a float, or a :class:`FovealError` unless finite and ``> 0`` (``>= 0`` if not ``positive``)."""
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
    ok = ok and (value > 0 if positive else value >= 0)
    if not ok:
        bound = "> 0" if positive else ">= 0"
        raise FovealError(f"{name}: expected a finite number {bound}{f' ({why})' if why else ''}, got {value!r}")
    return float(value)


def check_choice(name: str, value: object, choices: tuple) -> None:
    """A :class:`FovealError` unless ``value`` is one of ``choices``."""
    # Only plain values are compared: a tensor or an array would answer == elementwise.
    if not (isinstance(value, str | int) and value in choices):
        raise FovealError(f"{name}: expected one of {choices}, got {value!r}")


def check_tensor(name: str, value: object) -> Tensor:
    """``value`` if it is a tensor, else a :class:`FovealError` naming what came instead."""
    if not isinstance(value, Tensor):
        raise FovealError(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
    return value


def check_image(name: str, images: object) -> dict[str, int]:
    """``images`` is a ``(B, C, H, W)`` tensor with at least one pixel; returns the bound sizes."""
    sizes = check_shape(name, check_tensor(name, images), ("B", "C", "H", "W"))
    if sizes["H"] < 1 or sizes["W"] < 1:
        raise FovealError(f"{name}: expected at least one pixel (H, W >= 1), got shape {tuple(images.shape)}")
    return sizes


def check_fill_number(name: str, value: object) -> None:
    """A :class:`FovealError` unless ``value`` is a real number or a 0-dim tensor."""
    if isinstance(value, Tensor) and value.dim() == 0 and not value.is_complex():
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise FovealError(f"{name}: expected a number, got {value!r}")


def check_floating(**tensors: Tensor | None) -> None:
    """Each tensor (None skipped) is floating point, and all share one dtype, except under autocast."""
    first = None
    for name, tensor in tensors.items():
        if tensor is None:
            continue
        check_tensor(name, tensor)
        if not tensor.is_floating_point():
            raise FovealError(f"{name}: expected a floating-point tensor, got {tensor.dtype}; convert it with .float()")
        if first is None:
            first = name, tensor
        elif tensor.dtype != first[1].dtype and not torch.is_autocast_enabled(tensor.device.type):
            raise FovealError(
                f"{name}: expected dtype {first[1].dtype} (the dtype of {first[0]}), got {tensor.dtype}; "
                "convert one to the other"
            )


def check_module_dtype(module: torch.nn.Module, name: str, tensor: Tensor) -> None:
    """``tensor`` is floating point with the dtype of ``module``'s parameters (except under autocast)."""
    check_floating(**{name: tensor})
    parameter = next(module.parameters(), None)
    if parameter is not None and tensor.dtype != parameter.dtype and not torch.is_autocast_enabled(tensor.device.type):
        raise FovealError(
            f"{name}: expected dtype {parameter.dtype} (the module's parameters), got {tensor.dtype}; "
            f"convert the input, or the module with module.to({tensor.dtype})"
        )


def work_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """The dtype the Gaussian weights are computed in: float32 in place of a 16-bit float.

    float16 tops out at 65504 and rounds 1e-8 to 0, so ``exp(log sigma^2)``, a squared standardised
    distance or the ``eps`` of a row's sum overflow or vanish where float32 holds them, and a row
    with no weight on the image becomes ``0 / 0``. bfloat16 has the range but not the precision: its
    pixel coordinates are off by a pixel beyond 256. Both get float32, and the result is cast back.
    """
    result = dtypes[0]
    for dtype in dtypes[1:]:
        result = torch.promote_types(result, dtype)
    return torch.float32 if result in LOW_PRECISION else result


def finite_rows(tensor: Tensor) -> Tensor:
    """True for each sample (leading dim) whose entries are all finite: ``(B, ...) -> (B,)``."""
    return torch.isfinite(tensor.detach()).flatten(1).all(1) if tensor.dim() > 1 else torch.isfinite(tensor.detach())
