"""The fast paths of :func:`foveal.attention.attend`: SDPA under foveal's mask rules, and the O(N) count form,
and the one rule that chooses among them and the plain path (:func:`_choose`).

Each returns what the plain path would, to float rounding; ``tests/attention/test_kernels.py`` holds
them to it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from foveal._checks import tracing, work_dtype

KERNELS = ("fused", "count_linear", "plain")
"""What :func:`foveal.attention.attend` may run: torch's ``scaled_dot_product_attention`` under foveal's mask
rules, the O(N) form of the count normaliser, or the plain path, which follows the equation and builds the
weights."""


class KernelChoice(NamedTuple):
    """The kernel :func:`foveal.attention.attend` runs for a call (one of :data:`KERNELS`), and why it is not
    the fused one (``reason``; None when the fused kernel runs)."""

    kernel: str
    reason: str | None


def _choose(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    score: str | Callable[[Tensor, Tensor], Tensor],
    normalize: str,
    need_weights: bool,
    masked: bool,
    fused: bool | None,
    enabled: bool,
) -> KernelChoice:
    """The one rule: the fused kernel unless the first of these holds, each with the reason it gives."""
    if fused is False:
        reason = "fused=False was passed"
    elif fused is None and not enabled:
        reason = "the fused path is turned off (set_fused_attention(False) or fused_attention(False))"
    elif need_weights:
        reason = "need_weights=True: the fused kernel never builds the weights (record_maps asks for them)"
    elif callable(score):
        reason = "score is a callable: the fused kernel computes only 'dot', 'scaled_dot' and 'cosine'"
    elif normalize != "softmax":
        reason = f"normalize={normalize!r}: the fused kernel computes only the softmax"
    elif min(query.numel(), key.numel(), value.numel()) == 0:
        # SDPA cannot fold an empty tensor into its (batch, heads, n, d) layout; the plain path can.
        shapes = ", ".join(str(tuple(t.shape)) for t in (query, key, value))
        reason = f"the query, key or value is empty ({shapes}): SDPA takes no empty sequence"
    else:
        return KernelChoice("fused", None)
    linear = normalize == "count" and not need_weights and not callable(score) and not masked
    return KernelChoice("count_linear" if linear else "plain", reason)


def _drop_unreachable(key: Tensor, value: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    # A key no query may attend is padding. Its weight is zero, but 0 * NaN = NaN in the weighted
    # sum, in a cosine's norm and in every backward that reads it; a zero key and value are inert.
    # A key that some query attends is data, and a NaN in it is the caller's to see.
    mask = mask.reshape(*([1] * max(2 - mask.dim(), 0)), *mask.shape)
    reachable = mask.any(dim=-2).unsqueeze(-1)  # (..., m, 1)
    return torch.where(reachable, key, 0), torch.where(reachable, value, 0)


def _fused(
    query: Tensor, key: Tensor, value: Tensor, score: str, mask: Tensor | None, temperature: float, dropout: float
) -> Tensor:
    scale = None if score == "scaled_dot" and temperature == 1 else _scale(score, query.shape[-1]) / temperature
    has_key = None
    if mask is not None:
        key, value, has_key = _guard_padding(key, value, mask)
    if score == "cosine":
        query, key = _unit(query), _unit(key)
    lead = query.shape[:-2]
    if query.dim() == 4 and key.shape[:-2] == lead and value.shape[:-2] == lead:
        # Already SDPA's (batch, heads, n, d); a mask goes in as it is, broadcast by the kernel.
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout, scale=scale)
        return out if has_key is None else torch.where(has_key, out, 0)
    # SDPA's memory-efficient kernels take only (batch, heads, n, d) with equal batch and heads; any
    # other layout silently runs its O(n m)-memory math kernel. So fold the broadcast leading dims
    # into one batch dim with a single head (a view when nothing is broadcast) and unfold the output.
    if key.shape[:-2] != lead or value.shape[:-2] != lead:
        lead = torch.broadcast_shapes(lead, key.shape[:-2], value.shape[:-2])
    if mask is not None:
        mask = mask.reshape(*([1] * max(2 - mask.dim(), 0)), *mask.shape)
        lead = torch.broadcast_shapes(lead, mask.shape[:-2])
        if any(size != 1 for size in mask.shape[:-2]):
            mask = mask.expand(*lead, *mask.shape[-2:]).reshape(-1, 1, *mask.shape[-2:])
        else:  # one mask for every batch element: no copy
            mask = mask.reshape(1, 1, *mask.shape[-2:])

    def fold(x: Tensor) -> Tensor:
        x = x if x.shape[:-2] == lead else x.expand(*lead, *x.shape[-2:])
        return x.reshape(-1, 1, *x.shape[-2:])

    out = F.scaled_dot_product_attention(
        fold(query), fold(key), fold(value), attn_mask=mask, dropout_p=dropout, scale=scale
    )
    out = out.reshape(*lead, query.shape[-2], value.shape[-1])
    return out if has_key is None else torch.where(has_key, out, 0)


def _guard_padding(key: Tensor, value: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
    """The keys and values SDPA may be given under ``mask``, and where rows have a key (None: all do).

    The kernel gives a masked key weight 0, but ``0 * NaN`` is NaN, in the output and in every
    gradient: padding must hold finite numbers. A row with no key is set to zero afterwards, since
    SDPA's CUDA kernels give it the mean of the values in 16 bits. Both need to know the values:
    on the CPU, where reading a value costs nothing, the sums of the keys and values are read (no
    copy) and the padding is zeroed only where one is not finite. On an accelerator a read would
    stall the host until the device has caught up, every call, so there (and while traced, where
    values cannot be read) the padding is always zeroed and the rows always set, on the device.
    """
    has_key = mask.any(dim=-1, keepdim=True)
    if key.device.type != "cpu" or tracing():
        return (*_drop_unreachable(key, value, mask), has_key)
    # One sum holds any NaN or Inf of either (inf - inf is NaN); float32, so that 16-bit sums do not overflow.
    if not math.isfinite(key.sum(dtype=torch.float32).add_(value.sum(dtype=torch.float32)).item()):
        key, value = _drop_unreachable(key, value, mask)
    return key, value, None if has_key.all().item() else has_key


def _count_linear(query: Tensor, key: Tensor, value: Tensor, score: str, temperature: float) -> Tensor:
    """The count normaliser without weights in O(N): ``f = s(q) . s(k)`` is linear in ``s(q)``, so
    ``sum_i f(q, k_i) v_i / m = s(q) (s(K)^T V) / m`` (the non-local paper's dot form, reassociated)."""
    work = work_dtype(query.dtype, key.dtype, value.dtype)  # k^T v sums m products: float32 in 16 bits
    dtype = value.dtype
    query, key, value = query.to(work), key.to(work), value.to(work)
    factor = _scale(score, query.shape[-1]) / (max(key.shape[-2], 1) * temperature)
    if score == "cosine":
        query, key = _unit(query), _unit(key)
    return ((query * factor) @ (key.transpose(-2, -1) @ value)).to(dtype)


def _scale(score: str, size: int) -> float:
    """The factor a built-in score puts on ``q . k`` (of unit vectors, for the cosine)."""
    return 1.0 / math.sqrt(size) if score == "scaled_dot" else 1.0


def _unit(x: Tensor, eps: float = 1e-8) -> Tensor:
    # The epsilon keeps a zero vector at zero instead of 0/0 = NaN, in value and gradient.
    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps)
