"""Seed 001's attention module: learned theta, phi, g projections around :func:`attend`, multi-head.

Seed 001 eq. (2), in its column notation (vectors are columns)::

    O = W_v V softmax((W_k K)^T W_q Q)        softmax over each column

We store vectors as rows (``Q`` is ``(n, d)``), so this is ``O^T = softmax(theta(Q) phi(K)^T) g(V)``
with the softmax over the last axis: the seed's ``(m, n)`` score matrix, transposed. With ``heads``
heads, theta, phi and g each produce ``heads`` slices of their output and every head attends on
its own slice; the head outputs are concatenated (seed 001 has no output projection, and neither
does this module: add one outside if you want heads mixed).
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import Tensor, nn

from foveal._checks import check_ints, check_module_dtype, check_number, check_shape
from foveal.attention._masks import check_mask, drop_padding
from foveal.attention.core import BUILTIN_SCORES, NORMALIZERS, AttentionOutput, ScoreFn, attend
from foveal.errors import FovealError
from foveal.registry import ATTENTION


@ATTENTION.register("attention")
class Attention(nn.Module):
    """Multi-head attention with seed 001's learned projections theta (``W_q``), phi (``W_k``), g (``W_v``).

    Args:
        dim: size ``d`` of the query vectors.
        key_dim: size of the key vectors (default ``dim``).
        value_dim: size ``p`` of the value vectors (default ``key_dim``).
        out_dim: size ``q`` of ``g(v)`` and of the output (default ``value_dim``); divisible by ``heads``.
        qk_dim: size of ``theta(q)`` and ``phi(k)`` (default ``dim``); divisible by ``heads``.
        heads: number of heads.
        score: ``"dot"`` (seed 001's embedded Gaussian), ``"scaled_dot"``, ``"cosine"``, or a
            module/callable ``(query, key) -> logits`` applied per head to ``(B, heads, n, qk_dim/heads)``.
        bias: give the projections a bias (seed 001's are purely linear: False).
        temperature: divides the cosine score (> 0).
        normalize: ``"softmax"`` (seed 001's ``C = sum_i f``, ``f = exp(score)``) or ``"count"``
            (``f = score``, ``C`` = the number of keys a query may attend); see :func:`attend`.
        embed: learn theta and phi (True, seed 001). False compares the queries and keys as given,
            the non-local paper's Gaussian ``f = exp(q^T k)``: ``W_q`` and ``W_k`` are identities,
            and ``qk_dim`` is ``dim`` (which, for a built-in score, ``key_dim`` must equal).

    Shape:
        - query: ``(B, n, dim)``
        - key: ``(B, m, key_dim)``; None for self-attention (key = query)
        - value: ``(B, m, value_dim)``; None means value = key
        - mask: bool ``(B, n, m)`` or broadcastable to it, True = may be attended; shared by the heads.
          A key that no query may attend (padding) enters as zeros, with its value, so a NaN or Inf
          there reaches neither the output nor any gradient (of the inputs or the parameters). The
          queries are used as given: in self-attention over a padded set, zero the padded rows first
          (as :class:`foveal.attention.TransformerFusion` does) if they may hold NaN
        - output: ``(B, n, out_dim)``
        - weights: ``(B, heads, n, m)`` or None

    Example:
        >>> attn = Attention(16, heads=2)
        >>> out, w = attn(torch.randn(3, 10, 16))
        >>> out.shape, w.shape
        (torch.Size([3, 10, 16]), torch.Size([3, 2, 10, 10]))
    """

    def __init__(
        self,
        dim: int,
        *,
        key_dim: int | None = None,
        value_dim: int | None = None,
        out_dim: int | None = None,
        qk_dim: int | None = None,
        heads: int = 1,
        score: str | ScoreFn = "scaled_dot",
        bias: bool = False,
        temperature: float = 1.0,
        normalize: str = "softmax",
        embed: bool = True,
    ) -> None:
        super().__init__()
        key_dim = dim if key_dim is None else key_dim
        value_dim = key_dim if value_dim is None else value_dim
        out_dim = value_dim if out_dim is None else out_dim
        if not embed and qk_dim not in (None, dim):
            raise FovealError(f"qk_dim: without theta and phi (embed=False) it is dim={dim}, got {qk_dim}")
        qk_dim = dim if qk_dim is None else qk_dim
        check_ints(dim=dim, key_dim=key_dim, value_dim=value_dim, out_dim=out_dim, qk_dim=qk_dim, heads=heads)
        for name, size in (("qk_dim", qk_dim), ("out_dim", out_dim)):
            if size % heads:
                raise FovealError(f"{name}={size} is not divisible by heads={heads}")
        if not callable(score) and score not in BUILTIN_SCORES:
            raise FovealError(f"unknown score {score!r}; choose from: {', '.join(BUILTIN_SCORES)} or a callable")
        if not embed and not callable(score) and key_dim != dim:
            raise FovealError(
                f"key_dim: score={score!r} compares queries and keys as given (embed=False): needs "
                f"key_dim == dim, got {key_dim} != {dim}"
            )
        if score == "cosine":
            check_number("temperature", temperature, why="it divides the cosine score")
        if normalize not in NORMALIZERS:
            raise FovealError(f"unknown normalize {normalize!r}; choose from: {', '.join(NORMALIZERS)}")
        self.dim, self.key_dim, self.value_dim = dim, key_dim, value_dim
        self.heads = heads
        self.temperature = temperature
        self.score = score
        self.normalize = normalize
        # Identities without embed keep one forward for both forms, and add no parameters.
        self.W_q = nn.Linear(dim, qk_dim, bias=bias) if embed else nn.Identity()  # theta
        self.W_k = nn.Linear(key_dim, qk_dim, bias=bias) if embed else nn.Identity()  # phi
        self.W_v = nn.Linear(value_dim, out_dim, bias=bias)  # g

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = True,
    ) -> AttentionOutput:
        key = query if key is None else key
        value = key if value is None else value
        check_module_dtype(self, query=query, key=key, value=value)
        sizes = check_shape("query", query, ("B", "n", self.dim))
        check_shape("key", key, ("B", "m", self.key_dim), sizes)
        check_shape("value", value, ("B", "m", self.value_dim), sizes)
        if mask is not None:
            check_mask(mask, (sizes["B"], sizes["n"], sizes["m"]), symbols="(B, n, m)")
            mask = mask.reshape(*([1] * (3 - mask.dim())), *mask.shape)
            # Padding must be zero before the projections: attend would zero the projected keys, but
            # the backward of W_k and W_v would still read the raw ones (0 * NaN in their gradients).
            reachable = mask.any(dim=-2)  # (B or 1, m)
            key, value = drop_padding(key, reachable), drop_padding(value, reachable)
            mask = mask.unsqueeze(-3)  # one mask for every head
        q, k, v = (
            rearrange(x, "b n (h d) -> b h n d", h=self.heads)
            for x in (self.W_q(query), self.W_k(key), self.W_v(value))
        )
        out, weights = attend(
            q,
            k,
            v,
            score=self.score,
            mask=mask,
            need_weights=need_weights,
            temperature=self.temperature,
            normalize=self.normalize,
        )
        return AttentionOutput(rearrange(out, "b h n d -> b n (h d)"), weights)

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        query = torch.randn(batch, 5, self.dim, generator=generator)
        key = torch.randn(batch, 7, self.key_dim, generator=generator)
        value = torch.randn(batch, 7, self.value_dim, generator=generator)
        return query, key, value
