"""The general attention operator of seed 001, its score functions and its one mask rule.

Seed 001 writes vectors as columns: ``Q`` is ``d x n`` and the softmax normalises each column of
``(W_k K)^T W_q Q`` (``m x n``). We store vectors as rows (``n x d``, batch first, as torch does),
so the same matrix is our ``(n, m)`` logits and its column softmax is our softmax over the last
axis. Output row ``j`` is seed 001's eq. (1)::

    o_j = (1 / C_j) sum_i f(q_j, k_i) g(v_i)

with one of two normalisers (``normalize=``), as in the non-local networks paper (Wang et al. 2018)::

    "softmax":  f = exp(score),  C_j = sum_i f(q_j, k_i)       (the weights are a softmax of the scores)
    "count":    f = score,       C_j = N_j, the number of keys query j may attend

and a third, sparsemax (Martins and Astudillo 2016), which is no ``f / C`` but the Euclidean
projection of the scores onto the simplex: weights that sum to 1 and are exactly 0 below a
threshold ``tau``::

    "sparsemax": w_ji = max(s_ji - tau_j, 0),  tau_j such that sum_i w_ji = 1

The paper's four similarities are a score and a normaliser each; theta and phi are the learned
projections of :class:`foveal.attention.Attention` (``W_q``, ``W_k``)::

    Gaussian            f = exp(q^T k)                   score="dot" on the raw vectors, "softmax"
    embedded Gaussian   f = exp(theta(q)^T phi(k))       score="dot", "softmax" (seed 001's choice)
    dot product         f = theta(q)^T phi(k)            score="dot", "count"
    concatenation       f = ReLU(w^T [theta(q), phi(k)])  score=Concatenation(...), "count"

Masks are bool with ``True`` = "may be attended" (the ``F.scaled_dot_product_attention``
convention). A query row whose keys are all masked gets zero weights and a zero output, never NaN;
under the softmax and the sparsemax a score of ``-inf`` is a masked key too (its weight is 0 either
way), so a row of them is zero as well. A key that no query may attend is padding, and what it holds
(NaN or Inf included) reaches neither the output nor any gradient.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from foveal._checks import check_floating, check_ints, check_module_dtype, check_number, check_shape, work_dtype
from foveal._torch_private import exportable_output
from foveal.attention._kernels import KernelChoice, _choose, _count_linear, _drop_unreachable, _fused, _unit
from foveal.attention._masks import check_broadcast, check_mask
from foveal.attention.normalizers import _count_normalized, _masked_softmax, sparsemax
from foveal.errors import FovealError

ScoreFn = Callable[[Tensor, Tensor], Tensor]
BUILTIN_SCORES = ("dot", "scaled_dot", "cosine")
NORMALIZERS = ("softmax", "count", "sparsemax")

_fused_enabled = True


@exportable_output
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

    ``"dot"`` is ``q . k``; ``"scaled_dot"`` is ``q . k / sqrt(d)``; ``"cosine"`` is ``cos(q, k)``; a
    callable is called as ``score(query, key)``. Every score is divided by ``temperature`` (> 0).
    Leading dims broadcast.
    """
    _check_score(score, temperature)
    _check_operands(query, key, None, score)
    return _logits(query, key, score, temperature).to(query.dtype)


def _logits(query: Tensor, key: Tensor, score: str | ScoreFn, temperature: float) -> Tensor:
    """The logits, in float32 for 16-bit inputs: ``q . k`` can pass float16's 65504 where the scaled
    score is small, so the product is formed in float32 and scaled before it, as SDPA does."""
    if callable(score):
        logits = score(query, key)
    else:
        work = work_dtype(query.dtype, key.dtype)
        query, key = query.to(work), key.to(work)
        if score == "dot":
            logits = query @ key.transpose(-2, -1)
        elif score == "scaled_dot":
            logits = (query / math.sqrt(query.shape[-1])) @ key.transpose(-2, -1)
        else:
            logits = _unit(query) @ _unit(key).transpose(-2, -1)
    return logits if temperature == 1 else logits / temperature


def _check_score(score: object, temperature: object, normalize: object = "softmax") -> None:
    if not callable(score) and score not in BUILTIN_SCORES:
        raise FovealError(f"unknown score {score!r}; choose from: {', '.join(BUILTIN_SCORES)} or a callable")
    check_number("temperature", temperature, why="it divides the score")
    if normalize not in NORMALIZERS:
        raise FovealError(f"unknown normalize {normalize!r}; choose from: {', '.join(NORMALIZERS)}")


def _check_operands(query: Tensor, key: Tensor, value: Tensor | None, score: str | ScoreFn) -> torch.Size:
    """Shapes, dtypes and leading-dim agreement of attend's tensors; returns the broadcast leading dims."""
    tensors = {"query": query, "key": key} if value is None else {"query": query, "key": key, "value": value}
    check_floating(**tensors)
    sizes = check_shape("query", query, ("n", "d"), leading=True)
    # A callable score may compare vectors of different sizes (Additive, Bilinear).
    key_dims = ("m", None) if callable(score) else ("m", "d")
    check_shape("key", key, key_dims, sizes, leading=True)
    if not callable(score) and sizes["d"] == 0:
        raise FovealError(f"query: expected vectors of at least one feature (d >= 1), got shape {tuple(query.shape)}")
    lead = check_broadcast("key", key, query.shape[:-2], "the query's")
    if value is not None:
        # After the key, so that a value with the wrong number of vectors is the one named in the error.
        check_shape("value", value, ("m", "p"), sizes, leading=True)
        lead = check_broadcast("value", value, lead, "the query's and key's")
    return lead


def attend(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    score: str | ScoreFn = "scaled_dot",
    mask: Tensor | None = None,
    need_weights: bool = False,
    temperature: float = 1.0,
    fused: bool | None = None,
    normalize: str = "softmax",
    dropout: float = 0.0,
) -> AttentionOutput:
    """Seed 001's attention operator ``o_j = (1/C_j) sum_i f(q_j, k_i) v_i``: a weighted sum of the values.

    Args:
        query: the vectors that ask, ``q_j``.
        key: the vectors they are compared with, ``k_i``.
        value: the vectors that are summed, ``v_i`` (already transformed by ``g``, if any).
        score: ``"dot"``, ``"scaled_dot"``, ``"cosine"``, or a callable/module
            ``(query, key) -> logits (..., n, m)`` such as :class:`Additive`, :class:`Bilinear` or
            :class:`Concatenation`.
        mask: bool, True where query ``j`` may attend to key ``i``. A key that no query may
            attend (padding) counts as a zero key and value, so a NaN or Inf there reaches neither
            the output nor any gradient.
        need_weights: return the weights ``(..., n, m)``. False (the default) runs the fused
            kernel where it can (and the O(N) form of the count normaliser), which never builds them.
        temperature: divides the score, whichever it is, before it is normalised
            (``softmax(e / T)``); must be > 0.
        fused: force the fused path on (True) or off (False); None follows
            :func:`set_fused_attention`. The fused path needs ``need_weights=False``, a
            built-in score and the softmax; otherwise the plain path runs. :func:`choose_kernel`
            says which kernel a call runs, and why not the fused one.
        normalize: ``"softmax"`` (``f = exp(score)``, ``C_j = sum_i f``: weights sum to 1) or
            ``"count"`` (``f = score``, ``C_j`` = the number of keys query ``j`` may attend: the
            non-local paper's dot-product and concatenation forms; weights may be negative), or
            ``"sparsemax"`` (the scores' projection onto the simplex: weights sum to 1, and keys
            scoring more than 1 below the best get exactly 0, where a softmax leaves a haze).
        dropout: probability of zeroing each weight before the sum (attention dropout; pass 0 in
            evaluation). The returned weights are the ones before dropout.

    Shape:
        - query: ``(..., n, d)``
        - key: ``(..., m, d)``
        - value: ``(..., m, p)``
        - mask: ``(..., n, m)``, broadcastable (it may not add dims to the result)
        - output: ``(..., n, p)``; leading dims broadcast (batch, heads, ...)
        - weights: ``(..., n, m)`` or None

    Query, key and value share one floating dtype; a wrong shape, a leading dim that does not
    broadcast, or a mixed dtype raises ``ValueError``. An empty set of keys (``m = 0``) is a set with
    nothing to attend: zero output. So is a fully masked row, under every normaliser and on every
    kernel, and, under the softmax and the sparsemax, a row whose every score is ``-inf`` (a callable
    may rule keys out so): there a ``-inf`` score weighs 0, as a masked key does, with finite
    gradients. Under ``"count"`` a score is the weight itself, so ``-inf`` stays ``-inf``. With 16-bit
    inputs the scores and weights are computed in float32 (the product ``q . k`` can pass float16's
    65504 before any scale), and the output is cast back.

    Example:
        >>> q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 4)
        >>> out, w = attend(q, k, v, need_weights=True)
        >>> out.shape, w.shape
        (torch.Size([2, 3, 4]), torch.Size([2, 3, 5]))
        >>> torch.allclose(w.sum(-1), torch.ones(2, 3))
        True
        >>> out, w = attend(q, k, v, score="dot", normalize="count", need_weights=True)  # f = q . k, C = m = 5
        >>> torch.allclose(w, q @ k.mT / 5)
        True
    """
    # The checks read shapes, dtypes and options only, so a signature that passed once passes again:
    # remembered, it costs one lookup (the kernel itself takes a few microseconds at small sizes).
    # A compiled graph checks once when it is traced, and never sees the cache.
    signature, plan = None, None
    if not torch.compiler.is_dynamo_compiling():
        try:
            signature = (
                query.shape,
                key.shape,
                value.shape,
                query.dtype,
                key.dtype,
                value.dtype,
                score,
                normalize,
                temperature,
                need_weights,
                dropout,
                None if mask is None else (mask.shape, mask.dtype),
                fused,
                _fused_enabled,
            )
            plan = _CHECKED.get(signature)
        except (AttributeError, TypeError):  # not tensors, or an unhashable option: the checks will say
            signature = None
    if plan is None:
        plan = _check(query, key, value, score, mask, temperature, normalize, need_weights, dropout, fused, signature)
    (kernel, _), direct = plan
    if direct:
        # The common call, already checked for this signature: straight to the kernel, with no more
        # Python around it than it needs (at small sizes each microsecond shows).
        if score == "scaled_dot" and not dropout:
            out = F.scaled_dot_product_attention(query, key, value)
        else:
            out = F.scaled_dot_product_attention(query, key, value, dropout_p=dropout, scale=_SCALES[cast(str, score)])
        return _new_output(AttentionOutput, (out, None))
    if kernel == "fused":
        return AttentionOutput(_fused(query, key, value, cast(str, score), mask, temperature, dropout), None)
    if mask is not None:
        key, value = _drop_unreachable(key, value, mask)
    if kernel == "count_linear":
        return AttentionOutput(_count_linear(query, key, value, cast(str, score), temperature), None)
    logits = _logits(query, key, score, temperature)
    if normalize == "count":
        weights = _count_normalized(logits, mask)
    elif normalize == "sparsemax":
        weights = sparsemax(logits, mask)
    elif mask is None and not callable(score):
        weights = logits.softmax(dim=-1)  # a built-in score is finite: no row of -inf to guard
    else:
        weights = _masked_softmax(logits, mask)
    weights = weights.to(value.dtype)
    summed = weights if dropout == 0 else F.dropout(weights, dropout)
    return AttentionOutput(summed @ value, weights if need_weights else None)


def choose_kernel(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    score: str | ScoreFn = "scaled_dot",
    mask: Tensor | None = None,
    need_weights: bool = False,
    temperature: float = 1.0,
    fused: bool | None = None,
    normalize: str = "softmax",
    dropout: float = 0.0,
) -> KernelChoice:
    """The kernel :func:`attend` runs for these arguments, and why it is not the fused one (None when it is).

    Takes :func:`attend`'s arguments, checks them as it does (a wrong call raises the same error) and
    applies the one rule it applies. ``kernel`` is one of :data:`KERNELS`: ``"fused"`` (torch's
    ``scaled_dot_product_attention``), ``"count_linear"`` (the count normaliser's O(N) form) or ``"plain"``
    (the equation, building the weights). Whatever it says, the outputs agree to float rounding.

    Example:
        >>> q = k = v = torch.randn(2, 4, 16, 8)
        >>> choose_kernel(q, k, v)
        KernelChoice(kernel='fused', reason=None)
        >>> choose_kernel(q, k, v, need_weights=True).reason
        'need_weights=True: the fused kernel never builds the weights (record_maps asks for them)'
    """
    args = (query, key, value, score, mask, temperature, normalize, need_weights, dropout, fused, None)
    return _check(*args)[0]


# What a checked signature runs, and whether the fused kernel takes its inputs directly (4-D, of one
# leading shape, no mask, nothing to fold or rescale).
_SCALES = {"dot": 1.0, "scaled_dot": None}
_CHECKED: dict[tuple, tuple[KernelChoice, bool]] = {}
_CHECKED_MAX = 512
_new_output = tuple.__new__  # a NamedTuple's own __new__ is a Python function: a third of a microsecond more


def _check(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    score: str | ScoreFn,
    mask: Tensor | None,
    temperature: float,
    normalize: str,
    need_weights: bool,
    dropout: float,
    fused: bool | None,
    signature: tuple | None,
) -> tuple[KernelChoice, bool]:
    """Check attend's arguments, choose its kernel, and remember the signature that passed.

    A callable score is never remembered (it may be made anew for every call), and neither is a mix
    of dtypes, which only autocast lets through.
    """
    _check_score(score, temperature, normalize)
    check_number("dropout", dropout, bound=">= 0", why="a probability")
    if dropout >= 1:
        raise FovealError(f"dropout: expected a probability in [0, 1), got {dropout!r}")
    lead = _check_operands(query, key, value, score)
    if mask is not None:
        check_mask(mask, (*lead, query.shape[-2], key.shape[-2]))
    choice = _choose(query, key, value, score, normalize, need_weights, mask is not None, fused, _fused_enabled)
    direct = (
        choice.kernel == "fused"
        and mask is None
        and query.dim() == 4
        and query.shape[:-2] == key.shape[:-2] == value.shape[:-2]
        and score in _SCALES
        and temperature == 1
    )
    plan = (choice, direct)
    if signature is not None and not callable(score) and query.dtype == key.dtype == value.dtype:
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED[signature] = plan
    return plan


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
        >>> attend(torch.randn(2, 1, 16), torch.randn(2, 49, 8), torch.randn(2, 49, 8), score=score,
        ...        need_weights=True).weights.shape
        torch.Size([2, 1, 49])
    """

    def __init__(self, query_dim: int, key_dim: int, hidden: int, *, activation: nn.Module | None = None) -> None:
        super().__init__()
        check_ints(query_dim=query_dim, key_dim=key_dim, hidden=hidden)
        self.W_k = nn.Linear(key_dim, hidden, bias=False)
        self.W_q = nn.Linear(query_dim, hidden, bias=True)  # holds b (seed 000's b_z)
        self.w_a = nn.Linear(hidden, 1, bias=True)
        self.activation = nn.Tanh() if activation is None else activation

    def forward(self, query: Tensor, key: Tensor) -> Tensor:
        _check_pair(self, query, key, self.W_q.in_features, self.W_k.in_features)
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
        check_ints(query_dim=query_dim, key_dim=key_dim)
        self.weight = nn.Parameter(torch.empty(query_dim, key_dim))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, query: Tensor, key: Tensor) -> Tensor:
        _check_pair(self, query, key, self.weight.shape[0], self.weight.shape[1])
        return (query @ self.weight) @ key.transpose(-2, -1)


class Concatenation(nn.Module):
    """The non-local paper's concatenation score ``ReLU(w^T [q_j, k_i])`` (Wang et al. 2018, eq. 4).

    ``w^T [q, k] = w_q^T q + w_k^T k`` splits into a query term and a key term, so the ``(n, m, d_q + d_k)``
    concatenations are never built. Pair it with ``normalize="count"``, as the paper does: under a
    softmax the query term would cancel wherever the ReLU is not zero.

    Args:
        query_dim: size of the query vectors (``theta(x)`` in the paper).
        key_dim: size of the key vectors (``phi(x)``).

    Shape:
        - query: ``(..., n, query_dim)``, key: ``(..., m, key_dim)``
        - output: ``(..., n, m)``, non-negative

    Example:
        >>> score = Concatenation(16, 8)
        >>> out, w = attend(torch.randn(2, 3, 16), torch.randn(2, 5, 8), torch.randn(2, 5, 4), score=score,
        ...                 normalize="count", need_weights=True)
        >>> out.shape, bool((w >= 0).all())
        (torch.Size([2, 3, 4]), True)
    """

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        check_ints(query_dim=query_dim, key_dim=key_dim)
        self.query_dim = query_dim
        self.w = nn.Linear(query_dim + key_dim, 1, bias=False)  # w_f, over [theta(x_i), phi(x_j)]

    def forward(self, query: Tensor, key: Tensor) -> Tensor:
        _check_pair(self, query, key, self.query_dim, self.w.in_features - self.query_dim)
        w_q, w_k = self.w.weight[0, : self.query_dim], self.w.weight[0, self.query_dim :]
        return torch.relu((query @ w_q).unsqueeze(-1) + (key @ w_k).unsqueeze(-2))


def _check_pair(score: nn.Module, query: Tensor, key: Tensor, query_dim: int, key_dim: int) -> None:
    check_module_dtype(score, query=query, key=key)
    check_shape("query", query, (None, query_dim), leading=True)
    check_shape("key", key, (None, key_dim), leading=True)
    check_broadcast("key", key, query.shape[:-2], "the query's")
