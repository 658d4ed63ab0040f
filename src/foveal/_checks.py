"""Argument checks at module boundaries: one check and one error format for each kind of input.

foveal's public functions and modules check what they are given with these, and each raises a
``ValueError`` (a :class:`~foveal.errors.FovealError` but for :func:`check_shape`) that names the
argument, what was expected and what came:

- shapes with :func:`check_shape`; sizes, counts and ``(h, w)`` pairs with :func:`check_int`,
  :func:`check_ints` and :func:`check_hw`; scalars with :func:`check_number`; options with
  :func:`check_choice`;
- every tensor that enters arithmetic is floating point, and all of one call share a dtype, the
  module's parameters' too (:func:`check_floating`, :func:`check_module_dtype`); autocast, which
  mixes them on purpose, is left to cast them itself;
- 16-bit floats are accepted, and the parts whose range they cannot hold run in :func:`work_dtype`;
- :func:`tracing` says when ``torch.compile`` or ``torch.export`` traces the code, so that a check
  of a tensor's *values* (not its shape or dtype), or a path sized by them, can step aside: the
  values are not known then, and reading them would break the graph.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Iterable, Sequence
from typing import Any, Literal, SupportsFloat, cast

import torch
from torch import Tensor, nn

from foveal.errors import FovealError

LOW_PRECISION = (torch.float16, torch.bfloat16)
"""The 16-bit floats, which :func:`work_dtype` replaces with float32."""

Bound = Literal["> 0", ">= 0"] | None
"""What :func:`check_number` asks of a number besides being finite."""

Dim = int | str | None
"""An expected size: an int must match, a str names a size that must agree wherever it recurs,
and None accepts anything."""


def check_shape(
    name: str,
    tensor: torch.Tensor,
    expected: Sequence[Dim],
    sizes: dict[str, int] | None = None,
    *,
    leading: bool = False,
) -> dict[str, int]:
    """Check ``tensor.shape`` against ``expected`` and raise ``ValueError`` naming both.

    Args:
        name: what the tensor is called in the caller's signature.
        tensor: the tensor to check.
        expected: one entry per dimension (see :data:`Dim`).
        sizes: sizes already bound by earlier checks; updated in place and returned.
        leading: if True, ``expected`` describes the trailing dims and any number of
            leading dims (batch, heads, ...) may come first, written ``...`` in the message.

    Example:
        >>> sizes = check_shape("query", torch.zeros(2, 5, 8), ("B", "n", "d"))
        >>> check_shape("key", torch.zeros(2, 7, 4), ("B", "m", "d"), sizes)
        Traceback (most recent call last):
        ...
        foveal.errors.FovealError: key: expected shape (B=2, m, d=8), got (2, 7, 4)
        >>> check_shape("affinity", torch.zeros(3, 4), ("n", "n"))
        Traceback (most recent call last):
        ...
        foveal.errors.FovealError: affinity: expected shape (n, n), got (3, 4)
    """
    sizes = {} if sizes is None else sizes
    shape = tuple(tensor.shape)
    ndim_ok = len(shape) >= len(expected) if leading else len(shape) == len(expected)
    tail = shape[len(shape) - len(expected) :] if ndim_ok else ()
    # Bind names on a copy while checking, so a name repeated within one shape must agree too and a
    # failed check leaves the caller's sizes untouched (the message shows them as they were).
    bound = dict(sizes)
    ok = ndim_ok
    for want, got in zip(expected, tail, strict=False):
        if isinstance(want, str):
            bound.setdefault(want, got)
        if (isinstance(want, int) and want != got) or (isinstance(want, str) and bound[want] != got):
            ok = False
    if not ok:
        raise FovealError(f"{name}: expected shape {_describe(expected, sizes, leading)}, got {shape}")
    sizes.update(bound)
    return sizes


def _describe(expected: Sequence[Dim], sizes: dict[str, int], leading: bool) -> str:
    parts = ["..."] if leading else []
    for want in expected:
        if want is None:
            parts.append("*")
        elif isinstance(want, str) and want in sizes:
            parts.append(f"{want}={sizes[want]}")
        else:
            parts.append(str(want))
    return "(" + ", ".join(parts) + ")"


def check_int(name: str, value: object, *, minimum: int = 1) -> int:
    """``value`` as an int, or a :class:`FovealError` unless it is an integer ``>= minimum``.

    A bool is refused: ``True`` heads or ``False`` rows is a mistake, not a size.

    Example:
        >>> check_int("heads", 4)
        4
        >>> check_int("heads", 2.5)
        Traceback (most recent call last):
        ...
        foveal.errors.FovealError: heads: expected an integer >= 1, got 2.5
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise FovealError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def check_ints(*, minimum: int = 1, **values: object) -> None:
    """:func:`check_int` for each keyword, in order: ``check_ints(dim=dim, heads=heads)``."""
    for name, value in values.items():
        check_int(name, value, minimum=minimum)


def check_hw(name: str, size: object) -> tuple[int, int]:
    """``(h, w)`` as two ints, or a :class:`FovealError` unless it is two positive integers.

    Any sequence of two entries is taken (a tuple, a list, a ``torch.Size``), and integral floats
    (``28.0``) too; bools and fractions are not.

    Example:
        >>> check_hw("size", [28.0, 14])
        (28, 14)
        >>> check_hw("size", (28,))
        Traceback (most recent call last):
        ...
        foveal.errors.FovealError: size: expected two positive ints (h, w), got (28,)
    """
    try:
        pair = tuple(cast("Iterable[Any]", size))  # a non-iterable raises here
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
    number = float(value)
    return math.isfinite(number) and number.is_integer() and number >= 1


def check_number(name: str, value: object, *, bound: Bound = "> 0", why: str = "") -> float:
    """``value`` as a float, or a :class:`FovealError` unless it is a finite real number within ``bound``.

    Args:
        name: the argument's name in the caller's signature.
        value: what was passed.
        bound: ``"> 0"`` (a scale, a temperature), ``">= 0"`` (an ``eps``, a standard deviation
            that may be 0) or None (any finite number).
        why: who needs the bound, said in the message.

    Example:
        >>> check_number("eps", 0.0, bound=">= 0")
        0.0
        >>> check_number("temperature", 0, why="it divides the score")
        Traceback (most recent call last):
        ...
        foveal.errors.FovealError: temperature: expected a finite number > 0 (it divides the score), got 0
    """
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    number = float(cast(SupportsFloat, value)) if real else math.nan
    ok = math.isfinite(number) and (bound is None or (number > 0 if bound == "> 0" else number >= 0))
    if not ok:
        expected = "a finite number" + ("" if bound is None else f" {bound}") + (f" ({why})" if why else "")
        raise FovealError(f"{name}: expected {expected}, got {value!r}")
    return number


def check_choice(name: str, value: object, choices: tuple) -> None:
    """A :class:`FovealError` unless ``value`` is one of ``choices``.

    Example:
        >>> check_choice("padding", "reflect", ("zeros", "border"))
        Traceback (most recent call last):
        ...
        foveal.errors.FovealError: padding: expected one of ('zeros', 'border'), got 'reflect'
    """
    # Only plain values are compared: a tensor or an array would answer == elementwise.
    if not (isinstance(value, str | int) and value in choices):
        raise FovealError(f"{name}: expected one of {choices}, got {value!r}")


def check_tensor(name: str, value: object) -> Tensor:
    """``value`` if it is a tensor, else a :class:`FovealError` naming what came instead."""
    if not isinstance(value, Tensor):
        raise FovealError(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
    return value


def check_floating(*, optional: Collection[str] = (), **tensors: Tensor | None) -> None:
    """Each tensor is floating point, and all share one dtype, except under autocast.

    Autocast mixes dtypes on purpose and casts them itself, so a mix is left to it where it is on.

    Args:
        optional: the names of the tensors that may be None (an input the caller may leave out);
            None in place of any other is refused like any non-tensor.
        tensors: the tensors by their names in the caller's signature; the first speaks for the dtype.

    Example:
        >>> check_floating(query=torch.zeros(2, 3), mask=None, optional=("mask",))
        >>> check_floating(query=torch.zeros(2, 3), key=torch.zeros(2, 3, dtype=torch.float64))
        Traceback (most recent call last):
        ...
        foveal.errors.FovealError: key: expected dtype torch.float32 (the dtype of query), got torch.float64; \
convert one to the other
    """
    first = None
    for name, tensor in tensors.items():
        if tensor is None and name in optional:
            continue
        tensor = check_tensor(name, tensor)
        if not tensor.is_floating_point():
            raise FovealError(f"{name}: expected a floating-point tensor, got {tensor.dtype}; {_to_float(tensor)}")
        if first is None:
            first = name, tensor
        elif tensor.dtype != first[1].dtype and not _autocast_on(tensor):
            raise FovealError(
                f"{name}: expected dtype {first[1].dtype} (the dtype of {first[0]}), got {tensor.dtype}; "
                "convert one to the other"
            )


def _to_float(tensor: Tensor) -> str:
    """How to make ``tensor`` a float input: a uint8 one is most likely a picture in 0-255, which ``.float()``
    alone would hand to a network trained on [0, 1] (every shipped model's pictures are)."""
    if tensor.dtype == torch.uint8:
        return "a picture in 0-255 converts with x.float() / 255, or foveal.transform_for(model)(x) for a saved model"
    return "convert it with .float()"


def check_module_dtype(module: nn.Module, *, optional: Collection[str] = (), **tensors: Tensor | None) -> None:
    """:func:`check_floating`, and the tensors have the dtype of ``module``'s parameters (except under autocast).

    Example:
        >>> check_module_dtype(nn.Linear(3, 2), x=torch.zeros(1, 3, dtype=torch.float64))
        Traceback (most recent call last):
        ...
        foveal.errors.FovealError: x: expected dtype torch.float32 (the module's parameters), got torch.float64; \
convert the input, or the module with module.to(torch.float64)
    """
    check_floating(optional=optional, **tensors)
    parameter = next(module.parameters(), None)
    present = [(name, tensor) for name, tensor in tensors.items() if tensor is not None]
    if parameter is None or not present:
        return
    # check_floating has made the tensors one dtype, so the first speaks for all of them.
    name, tensor = present[0]
    if tensor.dtype != parameter.dtype and not _autocast_on(tensor):
        raise FovealError(
            f"{name}: expected dtype {parameter.dtype} (the module's parameters), got {tensor.dtype}; "
            f"convert the input, or the module with module.to({tensor.dtype})"
        )


def _autocast_on(tensor: Tensor) -> bool:
    return torch.is_autocast_enabled(tensor.device.type)


def check_index(name: str, index: Tensor, low: int, high: int) -> Tensor:
    """An integer tensor whose every value lies in ``[low, high]``: token ids, lengths, positions.

    Example:
        >>> check_index("length", torch.tensor([1, 3]), 1, 3).tolist()
        [1, 3]
        >>> check_index("question", torch.tensor([[0, 7]]), 0, 4)
        Traceback (most recent call last):
        ...
        foveal.errors.FovealError: question: expected integers in [0, 4], got values from 0 to 7
    """
    check_tensor(name, index)
    if index.is_floating_point() or index.is_complex() or index.dtype == torch.bool:
        raise FovealError(f"{name}: expected an integer tensor, got {index.dtype}")
    if index.numel() and not tracing():  # a traced graph has no values to check
        smallest, largest = int(index.min()), int(index.max())
        if smallest < low or largest > high:
            raise FovealError(f"{name}: expected integers in [{low}, {high}], got values from {smallest} to {largest}")
    return index


def tracing() -> bool:
    """True while ``torch.compile`` or ``torch.export`` traces the code, or ``torch.jit.trace`` records it.

    A traced graph is run later at other values, so code that reads a tensor's values into Python
    (a size, a branch, a check) cannot be part of it: a compile stops the graph there (or fails with
    ``fullgraph=True``), an export fails, and ``torch.jit.trace`` keeps the value it saw. Such code
    asks this first and takes a path that does not read values.

    Example:
        >>> tracing()
        False
    """
    return torch.compiler.is_compiling() or torch.jit.is_tracing()


def work_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """The dtype to compute in: the promotion of ``dtypes``, with float32 in place of a 16-bit float.

    float16 tops out at 65504 and rounds 1e-8 to 0, so ``exp(log sigma^2)``, a squared standardised
    distance, a sharpening power or the ``eps`` of a sum overflow or vanish where float32 holds them,
    and a row with no weight becomes ``0 / 0``. bfloat16 has the range but not the precision: its
    pixel coordinates are off by a pixel beyond 256. Both get float32, and the caller casts back.

    Example:
        >>> work_dtype(torch.float16), work_dtype(torch.float32, torch.float64)
        (torch.float32, torch.float64)
    """
    result = dtypes[0]
    for dtype in dtypes[1:]:
        result = torch.promote_types(result, dtype)
    return torch.float32 if result in LOW_PRECISION else result
