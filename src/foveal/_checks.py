"""Shape checks at module boundaries: one error format for the whole library."""

from __future__ import annotations

from collections.abc import Sequence

import torch

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
        ValueError: key: expected shape (B=2, m, d=8), got (2, 7, 4)
        >>> check_shape("affinity", torch.zeros(3, 4), ("n", "n"))
        Traceback (most recent call last):
        ...
        ValueError: affinity: expected shape (n, n), got (3, 4)
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
        raise ValueError(f"{name}: expected shape {_describe(expected, sizes, leading)}, got {shape}")
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
