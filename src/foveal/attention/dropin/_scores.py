"""What the drop-in forms share: timm's and torch's masks as :func:`~foveal.attention.attend`'s mask or score,
and reading the layer they replace."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

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


def layer_state(
    kind: str,
    layer: nn.Module | Mapping[str, Tensor],
    heads: int | None,
    refusal: Callable[[nn.Module], str | None],
    options_of: Callable[[nn.Module], dict[str, Any]],
) -> tuple[dict[str, Tensor], int, dict[str, Any]]:
    """The weights, head count and options of the layer a drop-in replaces: read off the module itself, or
    from its state dict with ``heads`` (which a state dict does not hold). ``refusal`` says why a module
    cannot be taken (None: it can); ``options_of`` reads its dropout and layout."""
    options: dict[str, Any] = {}
    if isinstance(layer, nn.Module):
        if reason := refusal(layer):
            raise FovealError(f"{kind}: {reason}")
        if heads is not None and heads != layer.num_heads:
            raise FovealError(f"heads={heads}, but the layer has num_heads={layer.num_heads}")
        heads, options, state = int(layer.num_heads), options_of(layer), dict(layer.state_dict())  # type: ignore[arg-type]
    else:
        state = dict(layer)
    if heads is None:
        raise FovealError("heads: a state dict does not say how many heads the layer has; pass heads=")
    return state, heads, options
