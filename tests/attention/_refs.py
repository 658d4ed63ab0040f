"""Reference implementations written literally from the seeds' equations, for the attention tests."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from foveal.attention.core import Additive, Bilinear

SCORE_NAMES = ("dot", "scaled_dot", "cosine", "additive", "bilinear")


def make_score(name: str, query_dim: int, key_dim: int, generator: torch.Generator):
    """``(score argument for attend, f-score of one pair (q_j, k_i) -> scalar)`` in float64."""
    if name == "dot":
        return name, lambda q, k: q @ k
    if name == "scaled_dot":
        return name, lambda q, k: q @ k / math.sqrt(q.shape[0])
    if name == "cosine":
        return name, lambda q, k: q @ k / (q.norm() * k.norm())
    if name == "additive":
        module = Additive(query_dim, key_dim, hidden=6).double()
        _randomise(module, generator)

        def additive(q: Tensor, k: Tensor) -> Tensor:
            # seed 000: w_a^T tanh(W_v v_i + W_q h_Q + b_z) + b_a
            z = torch.tanh(module.W_k.weight @ k + module.W_q.weight @ q + module.W_q.bias)
            return module.w_a.weight[0] @ z + module.w_a.bias[0]

        return module, additive
    if name == "bilinear":
        module = Bilinear(query_dim, key_dim).double()
        _randomise(module, generator)
        return module, lambda q, k: q @ module.weight @ k
    raise ValueError(name)


def _randomise(module: torch.nn.Module, generator: torch.Generator) -> None:
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.5)


def eq1(query: Tensor, key: Tensor, value: Tensor, pair_score, mask: Tensor | None = None) -> Tensor:
    """Seed 001 eq. (1): ``o_j = (1/C) sum_i f(q_j, k_i) g(v_i)``, ``f = exp(score)``, ``C = sum_i f``.

    ``g`` is the identity here (the modules apply their own ``W_v``). Masked pairs are left out of both
    sums; a query with no key left has ``C = 0`` and, by our rule, ``o_j = 0``.
    """
    B, n, m = query.shape[0], query.shape[1], key.shape[1]
    out = torch.zeros(B, n, value.shape[-1], dtype=value.dtype)
    for b in range(B):
        for j in range(n):
            C = torch.zeros((), dtype=value.dtype)
            total = torch.zeros(value.shape[-1], dtype=value.dtype)
            for i in range(m):
                if mask is not None and not mask[b, j, i]:
                    continue
                f = torch.exp(pair_score(query[b, j], key[b, i]))
                C = C + f
                total = total + f * value[b, i]
            out[b, j] = total / C if C > 0 else total
    return out


def eq2(query: Tensor, key: Tensor, value: Tensor, score, pair_score) -> Tensor:
    """Seed 001 eq. (2) in its column notation: ``O = V softmax(S)``, ``S[i, j] = score(q_j, k_i)``, column softmax.

    Seed 001 stacks vectors as columns: ``Q`` is ``d x n``, ``K`` is ``d x m``, ``V`` is ``p x m``, and
    ``S = K^T Q`` is ``m x n`` (for the dot score). Its softmax normalises each column (over the keys
    ``i``), so ``S`` is our ``(n, m)`` logits transposed and its column softmax is our softmax over the
    last axis; ``O`` (``p x n``) is our output transposed.
    """
    outputs = []
    for b in range(query.shape[0]):
        Q, K, V = query[b].T, key[b].T, value[b].T  # columns are vectors
        if score == "dot":
            S = K.T @ Q
        elif score == "scaled_dot":
            S = K.T @ Q / math.sqrt(Q.shape[0])
        elif score == "cosine":
            S = (K / K.norm(dim=0)).T @ (Q / Q.norm(dim=0))
        elif isinstance(score, Bilinear):
            S = K.T @ score.weight.T @ Q  # q^T W k = k^T W^T q
        else:  # Additive: no matrix product, one entry per (i, j) column pair
            S = torch.stack(
                [torch.stack([pair_score(Q[:, j], K[:, i]) for j in range(Q.shape[1])]) for i in range(K.shape[1])]
            )
        A = torch.softmax(S, dim=0)  # each column sums to one
        outputs.append((V @ A).T)
    return torch.stack(outputs)
