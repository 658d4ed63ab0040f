"""The general attention operator of seed 001, its score functions and its one mask rule.

Seed 001 writes vectors as columns: ``Q`` is ``d x n`` and the softmax normalises each column of
``(W_k K)^T W_q Q`` (``m x n``). We store vectors as rows (``n x d``, batch first, as torch does),
so the same matrix is our ``(n, m)`` logits and its column softmax is our softmax over the last
axis. Output row ``j`` is seed 001's eq. (1)::

    o_j = (1 / C_j) sum_i f(q_j, k_i) g(v_i),   C_j = sum_i f(q_j, k_i),   f = exp(score)

Masks are bool with ``True`` = "may be attended" (the ``F.scaled_dot_product_attention``
convention). A query row whose keys are all masked gets zero weights and a zero output, never NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from foveal._checks import check_shape

ScoreFn = Callable[[Tensor, Tensor], Tensor]
BUILTIN_SCORES = ("dot", "scaled_dot", "cosine")

_fused_enabled = True


class AttentionOutput(NamedTuple):
    """What every attention module returns: unpacks like seed 000's ``(v_hat, alpha)``."""

    output: Tensor
    weights: Tensor | None


def set_fused_attention(enabled: bool) -> None:
    """Turn the fused ``scaled_dot_product_attention`` path on or off for the whole library."""
    global _fused_enabled
    _fused_enabled = bool(enabled)


def fused_attention_enabled() -> bool:
    """Whether :func:`attend` may use the fused path (see :func:`set_fused_attention`)."""
    return _fused_enabled


@contextmanager
def fused_attention(enabled: bool) -> Iterator[None]:
    """Context manager form of :func:`set_fused_attention`, restoring the previous value."""
    previous = _fused_enabled
    set_fused_attention(enabled)
    try:
        yield
    finally:
        set_fused_attention(previous)


def score_logits(query: Tensor, key: Tensor, score: str | ScoreFn, temperature: float = 1.0) -> Tensor:
    """Attention logits ``(..., n, m)`` for queries ``(..., n, d)`` and keys ``(..., m, d)``.

    ``"dot"`` is ``q . k``; ``"scaled_dot"`` is ``q . k / sqrt(d)``; ``"cosine"`` is
    ``cos(q, k) / temperature``. A callable is called as ``score(query, key)``.
    """
    if callable(score):
        return score(query, key)
    if score == "dot":
        return query @ key.transpose(-2, -1)
    if score == "scaled_dot":
        return query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if score == "cosine":
        return _unit(query) @ _unit(key).transpose(-2, -1) / temperature
    raise ValueError(f"unknown score {score!r}; choose from: {', '.join(BUILTIN_SCORES)} or a callable")


def masked_softmax(logits: Tensor, mask: Tensor | None = None) -> Tensor:
    """Softmax over the last axis that gives exactly zero weight where ``mask`` is False.

    A row with no True entry gets all-zero weights (not NaN, not uniform), with finite gradients.

    Shape:
        - logits: ``(..., n, m)``
        - mask: bool, broadcastable to ``(..., n, m)``; True = may be attended
        - output: ``(..., n, m)``
    """
    if mask is None:
        return logits.softmax(dim=-1)
    _check_mask(mask, logits.shape)
    # A finite fill keeps every softmax input finite (no inf - inf = NaN in all-masked rows); the
    # product with the mask then zeroes masked entries, and with them whole all-masked rows.
    filled = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
    return filled.softmax(dim=-1) * mask


def attend(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    score: str | ScoreFn = "scaled_dot",
    mask: Tensor | None = None,
    need_weights: bool = True,
    temperature: float = 1.0,
    fused: bool | None = None,
) -> AttentionOutput:
    """Seed 001's attention operator: each query takes a softmax-weighted sum of the values.

    Args:
        query: the vectors that ask, ``q_j``.
        key: the vectors they are compared with, ``k_i``.
        value: the vectors that are summed, ``v_i`` (already transformed by ``g``, if any).
        score: ``"dot"``, ``"scaled_dot"``, ``"cosine"``, or a callable/module
            ``(query, key) -> logits (..., n, m)`` such as :class:`Additive` or :class:`Bilinear`.
        mask: bool, True where query ``j`` may attend to key ``i``.
        need_weights: return the weights; False allows the fused kernel.
        temperature: divides the cosine score (ignored by the other scores).
        fused: force the fused path on (True) or off (False); None follows
            :func:`set_fused_attention`. The fused path needs ``need_weights=False`` and a
            built-in score; otherwise the plain path runs.

    Shape:
        - query: ``(..., n, d)``
        - key: ``(..., m, d)``
        - value: ``(..., m, p)``
        - mask: ``(..., n, m)``, broadcastable
        - output: ``(..., n, p)``; leading dims broadcast (batch, heads, ...)
        - weights: ``(..., n, m)`` or None

    Example:
        >>> q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 4)
        >>> out, w = attend(q, k, v)
        >>> out.shape, w.shape
        (torch.Size([2, 3, 4]), torch.Size([2, 3, 5]))
        >>> torch.allclose(w.sum(-1), torch.ones(2, 3))
        True
    """
    sizes = check_shape("query", query, ("n", "d"), leading=True)
    # A callable score may compare vectors of different sizes (Additive, Bilinear).
    key_dims = ("m", None) if callable(score) else ("m", "d")
    check_shape("key", key, key_dims, sizes, leading=True)
    # After the key, so that a value with the wrong number of vectors is the one named in the error.
    check_shape("value", value, ("m", "p"), sizes, leading=True)
    use_fused = _fused_enabled if fused is None else fused
    if use_fused and not need_weights and not callable(score):
        return AttentionOutput(_fused(query, key, value, score, mask, temperature), None)
    weights = masked_softmax(score_logits(query, key, score, temperature), mask)
    return AttentionOutput(weights @ value, weights if need_weights else None)


def _fused(query: Tensor, key: Tensor, value: Tensor, score: str, mask: Tensor | None, temperature: float) -> Tensor:
    if score not in BUILTIN_SCORES:
        raise ValueError(f"unknown score {score!r}; choose from: {', '.join(BUILTIN_SCORES)} or a callable")
    if mask is not None:
        _check_mask(mask, (*query.shape[:-1], key.shape[-2]))
    scale = {"dot": 1.0, "scaled_dot": None, "cosine": 1.0 / temperature}[score]
    if score == "cosine":
        query, key = _unit(query), _unit(key)
    # SDPA's memory-efficient kernels take only (batch, heads, n, d) with equal batch and heads; any
    # other layout silently runs its O(n m)-memory math kernel. So fold the broadcast leading dims
    # into one batch dim with a single head (a view when nothing is broadcast) and unfold the output.
    lead = query.shape[:-2]
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

    # Since torch 2.5 SDPA returns zeros (not NaN) for all-masked rows, matching masked_softmax.
    out = F.scaled_dot_product_attention(fold(query), fold(key), fold(value), attn_mask=mask, scale=scale)
    return out.reshape(*lead, query.shape[-2], value.shape[-1])


def _unit(x: Tensor, eps: float = 1e-8) -> Tensor:
    # The epsilon keeps a zero vector at zero instead of 0/0 = NaN, in value and gradient.
    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps)


def _check_mask(mask: Tensor, shape: torch.Size | tuple[int, ...]) -> None:
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be bool (True = may be attended), got {mask.dtype}")
    try:
        torch.broadcast_shapes(mask.shape, tuple(shape))
    except RuntimeError:
        raise ValueError(f"mask: expected a shape broadcastable to {tuple(shape)}, got {tuple(mask.shape)}") from None


class Additive(nn.Module):
    """Additive (MLP) score of seeds 000 and 002: ``w_a^T tanh(W_k k_i + W_q q_j + b) + b_a``.

    Args:
        query_dim: size of the query vectors.
        key_dim: size of the key vectors.
        hidden: size ``k`` of the joint embedding.
        activation: the nonlinearity; ``nn.Identity()`` gives seed 002's parametric form
            without tanh.

    Shape:
        - query: ``(..., n, query_dim)``, key: ``(..., m, key_dim)``
        - output: logits ``(..., n, m)``

    Example:
        >>> score = Additive(16, 8, hidden=32)
        >>> attend(torch.randn(2, 1, 16), torch.randn(2, 49, 8), torch.randn(2, 49, 8), score=score).weights.shape
        torch.Size([2, 1, 49])
    """

    def __init__(self, query_dim: int, key_dim: int, hidden: int, *, activation: nn.Module | None = None) -> None:
        super().__init__()
        self.W_k = nn.Linear(key_dim, hidden, bias=False)
        self.W_q = nn.Linear(query_dim, hidden, bias=True)  # holds b (seed 000's b_z)
        self.w_a = nn.Linear(hidden, 1, bias=True)
        self.activation = nn.Tanh() if activation is None else activation

    def forward(self, query: Tensor, key: Tensor) -> Tensor:
        check_shape("query", query, (None, self.W_q.in_features), leading=True)
        check_shape("key", key, (None, self.W_k.in_features), leading=True)
        return additive_logits(self.W_q(query), self.W_k(key), self.w_a, self.activation)


def additive_logits(query_proj: Tensor, key_proj: Tensor, w_a: nn.Linear, activation: nn.Module) -> Tensor:
    """``w_a(activation(query_proj_j + key_proj_i))`` for every pair: ``(..., n, h), (..., m, h) -> (..., n, m)``."""
    joint = activation(query_proj.unsqueeze(-2) + key_proj.unsqueeze(-3))  # (..., n, m, h)
    return w_a(joint).squeeze(-1)


class Bilinear(nn.Module):
    """Bilinear score ``q_j^T W k_i`` (seed 002's affinity before its tanh).

    Shape:
        - query: ``(..., n, query_dim)``, key: ``(..., m, key_dim)``
        - output: logits ``(..., n, m)``

    Example:
        >>> Bilinear(16, 8)(torch.randn(2, 3, 16), torch.randn(2, 5, 8)).shape
        torch.Size([2, 3, 5])
    """

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(query_dim, key_dim))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, query: Tensor, key: Tensor) -> Tensor:
        check_shape("query", query, (None, self.weight.shape[0]), leading=True)
        check_shape("key", key, (None, self.weight.shape[1]), leading=True)
        return (query @ self.weight) @ key.transpose(-2, -1)
