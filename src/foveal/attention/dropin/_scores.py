"""What the drop-in forms share: timm's and torch's masks as :func:`~foveal.attention.attend`'s mask or score."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from foveal.attention.core import ScoreFn
from foveal.errors import FovealError


class ScaledDotWithBias:
    """The scaled dot product plus an additive mask, as ``F.scaled_dot_product_attention`` adds a float one.

    Shape:
        - query: ``(B, heads, n, d)``, key: ``(B, heads, m, d)``
        - bias: broadcastable to ``(B, heads, n, m)``; ``-inf`` rules a key out
    """

    def __init__(self, bias: Tensor) -> None:
        self.bias = bias

    def __call__(self, query: Tensor, key: Tensor) -> Tensor:
        return (query / math.sqrt(query.shape[-1])) @ key.transpose(-2, -1) + self.bias


def causal(n: int, m: int, device: torch.device) -> Tensor:
    """True where query ``j`` may attend key ``i`` (``i <= j``): the causal mask, ``(n, m)``."""
    return torch.ones(n, m, dtype=torch.bool, device=device).tril()


def as_bias(allowed: Tensor, dtype: torch.dtype) -> Tensor:
    """A bool mask (True = may attend) as an additive one: 0 where allowed, ``-inf`` where not."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, -math.inf)


def combine(parts: list[Tensor], dtype: torch.dtype) -> tuple[Tensor | None, str | ScoreFn]:
    """Masks to meet in every one (bool: True = may attend; float: added) as ``attend``'s mask and score.

    All bool: their conjunction, and the fused kernel stays available. Any float: the sum of their
    additive forms, in the score.
    """
    if not parts:
        return None, "scaled_dot"
    if all(p.dtype == torch.bool for p in parts):
        mask = parts[0]
        for p in parts[1:]:
            mask = mask & p
        return mask, "scaled_dot"
    bias = sum(p.to(dtype) if p.is_floating_point() else as_bias(p, dtype) for p in parts)
    return None, ScaledDotWithBias(bias)  # type: ignore[arg-type]


def check_mask_dtype(name: str, mask: Tensor | None) -> None:
    if mask is not None and not (mask.dtype == torch.bool or mask.is_floating_point()):
        raise FovealError(f"{name}: expected a bool or floating-point mask, got {mask.dtype}")
