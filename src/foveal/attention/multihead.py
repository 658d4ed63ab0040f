"""Seed 001's attention module: learned theta, phi, g projections around :func:`attend`, multi-head.

Seed 001 eq. (2), in its column notation (vectors are columns)::

    O = W_v V softmax((W_k K)^T W_q Q)        softmax over each column

We store vectors as rows (``Q`` is ``(n, d)``), so this is ``O^T = softmax(theta(Q) phi(K)^T) g(V)``
with the softmax over the last axis: the seed's ``(m, n)`` score matrix, transposed. With ``heads``
heads, theta, phi and g each produce ``heads`` slices of their output and every head attends on
its own slice; the head outputs are concatenated. Seed 001 has no output projection; a transformer
layer has one (``proj=True``), and one fused projection ``qkv`` for theta, phi and g (``qkv=True``,
timm's and ``nn.MultiheadAttention``'s layout), which :meth:`Attention.from_timm` and
:meth:`Attention.from_multihead` fill from those layers' state dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from foveal._checks import check_ints, check_module_dtype, check_number, check_shape
from foveal.attention import maps
from foveal.attention._masks import check_flags, check_mask, drop_padding
from foveal.attention.core import (
    BUILTIN_SCORES,
    NORMALIZERS,
    Additive,
    AttentionOutput,
    Bilinear,
    Concatenation,
    ScoreFn,
    attend,
)
from foveal.attention.maps import register_map_module
from foveal.errors import FovealError

if TYPE_CHECKING:
    from foveal.attention.dropin import MultiheadAttention, TimmAttention
from foveal.registry import ATTENTION


@ATTENTION.register("attention")
@register_map_module
class Attention(nn.Module):
    """Multi-head attention with seed 001's learned projections theta (``W_q``), phi (``W_k``), g (``W_v``).

    Without a request for maps it runs the fused kernel (``F.scaled_dot_product_attention``, or the
    O(N) form of ``normalize="count"``); ``need_weights=True``, or :func:`foveal.attention.record_maps`
    around the model, makes it build and return the ``(B, heads, n, m)`` maps.

    Args:
        dim: size ``d`` of the query vectors.
        key_dim: size of the key vectors (default ``dim``).
        value_dim: size ``p`` of the value vectors (default ``key_dim``).
        out_dim: size ``q`` of ``g(v)`` and of the output (default ``value_dim``); divisible by ``heads``.
        qk_dim: size of ``theta(q)`` and ``phi(k)`` (default ``dim``); divisible by ``heads``.
        heads: number of heads.
        score: ``"dot"`` (seed 001's embedded Gaussian), ``"scaled_dot"``, ``"cosine"``, or a
            module/callable ``(query, key) -> logits`` applied per head to ``(B, heads, n, qk_dim/heads)``.
        bias: give theta, phi and g a bias (seed 001's are purely linear: False).
        temperature: divides the score before it is normalised (> 0).
        normalize: ``"softmax"`` (seed 001's ``C = sum_i f``, ``f = exp(score)``) or ``"count"``
            (``f = score``, ``C`` = the number of keys a query may attend); see :func:`attend`.
        embed: learn theta and phi (True, seed 001). False compares the queries and keys as given,
            the non-local paper's Gaussian ``f = exp(q^T k)``: ``W_q`` and ``W_k`` are identities,
            and ``qk_dim`` is ``dim`` (which, for a built-in score, ``key_dim`` must equal).
        qkv: hold theta, phi and g as one linear layer ``qkv`` (``dim -> 2 qk_dim + out_dim``, in
            that order), so self-attention projects with one matrix product; needs ``key_dim ==
            value_dim == dim`` and ``embed``. Cross-attention uses the slices of the same weight.
        proj: add the output projection ``proj`` (``out_dim -> out_dim``) that mixes the heads.
        proj_bias: give ``proj`` a bias.
        attn_drop: dropout probability on the attention weights, in training.
        proj_drop: dropout probability after ``proj``, in training (needs ``proj``).
        device, dtype: where and in what dtype to create the parameters.

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
        - weights: ``(B, heads, n, m)`` if ``need_weights`` (or recording), else None

    Example:
        >>> attn = Attention(16, heads=2)
        >>> out, w = attn(torch.randn(3, 10, 16), need_weights=True)
        >>> out.shape, w.shape
        (torch.Size([3, 10, 16]), torch.Size([3, 2, 10, 10]))
        >>> vit_layer = Attention(768, heads=12, qkv=True, proj=True, bias=True)  # timm's layout
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
        qkv: bool = False,
        proj: bool = False,
        proj_bias: bool = True,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        key_dim = dim if key_dim is None else key_dim
        value_dim = key_dim if value_dim is None else value_dim
        out_dim = value_dim if out_dim is None else out_dim
        if not embed and qk_dim not in (None, dim):
            raise FovealError(f"qk_dim: without theta and phi (embed=False) it is dim={dim}, got {qk_dim}")
        check_flags(bias=bias, embed=embed, qkv=qkv, proj=proj, proj_bias=proj_bias)
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
        check_number("temperature", temperature, why="it divides the score")
        head_size = (qk_dim // heads) if embed else dim // heads
        if (sizes := _score_sizes(score)) is not None and sizes != (head_size, head_size):
            raise FovealError(
                f"score: {type(score).__name__} compares vectors of sizes {sizes}, but each head's queries and "
                f"keys have {head_size} (qk_dim / heads)"
            )
        if normalize not in NORMALIZERS:
            raise FovealError(f"unknown normalize {normalize!r}; choose from: {', '.join(NORMALIZERS)}")
        if qkv and not (embed and key_dim == value_dim == dim):
            raise FovealError(
                f"qkv: one fused projection needs embed=True and key_dim == value_dim == dim, got "
                f"embed={embed}, key_dim={key_dim}, value_dim={value_dim}, dim={dim}"
            )
        for name, p in (("attn_drop", attn_drop), ("proj_drop", proj_drop)):
            if check_number(name, p, bound=">= 0", why="a dropout probability") >= 1:
                raise FovealError(f"{name}: expected a dropout probability in [0, 1), got {p!r}")
        if proj_drop and not proj:
            raise FovealError(f"proj_drop={proj_drop} drops the output projection's output: needs proj=True")
        self.dim, self.key_dim, self.value_dim = dim, key_dim, value_dim
        self.qk_dim, self.out_dim = qk_dim, out_dim
        self.heads = heads
        self.temperature = temperature
        self.score = score
        self.normalize = normalize
        factory = {"device": device, "dtype": dtype}
        if qkv:
            self.qkv = nn.Linear(dim, 2 * qk_dim + out_dim, bias=bias, **factory)
        else:
            # Identities without embed keep one forward for both forms, and add no parameters.
            self.W_q = nn.Linear(dim, qk_dim, bias=bias, **factory) if embed else nn.Identity()  # theta
            self.W_k = nn.Linear(key_dim, qk_dim, bias=bias, **factory) if embed else nn.Identity()  # phi
            self.W_v = nn.Linear(value_dim, out_dim, bias=bias, **factory)  # g
        self.attn_drop = nn.Dropout(attn_drop)  # its p goes to the kernel; a module, as in timm
        self.proj = nn.Linear(out_dim, out_dim, bias=proj_bias, **factory) if proj else None
        self.proj_drop = nn.Dropout(proj_drop) if proj else None

    def extra_repr(self) -> str:
        score = self.score if isinstance(self.score, str) else type(self.score).__name__
        return (
            f"dim={self.dim}, heads={self.heads}, key_dim={self.key_dim}, value_dim={self.value_dim}, "
            f"qk_dim={self.qk_dim}, out_dim={self.out_dim}, score={score!r}, normalize={self.normalize!r}"
        )

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = False,
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
            clean_key = drop_padding(key, reachable)
            value = clean_key if value is key else drop_padding(value, reachable)
            key = clean_key
            mask = mask.unsqueeze(-3)  # one mask for every head
        return self._attend(query, key, value, mask, need_weights, self.score)

    def _attend(
        self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, need_weights: bool, score: str | ScoreFn
    ) -> AttentionOutput:
        """Project, attend per head with ``score`` and ``mask`` (``(B or 1, heads or 1, n, m)``), merge, ``proj``."""
        q, k, v = self._project(query, key, value)
        out, weights = attend(
            q,
            k,
            v,
            score=score,
            mask=mask,
            need_weights=need_weights or maps.wants_maps(self),
            temperature=self.temperature,
            normalize=self.normalize,
            dropout=self.attn_drop.p if self.training else 0.0,
        )
        out = out.transpose(1, 2).reshape(*query.shape[:-1], self.out_dim)
        if self.proj is not None and self.proj_drop is not None:
            out = self.proj_drop(self.proj(out))
        return AttentionOutput(out, weights)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """theta(query), phi(key), g(value), each split into heads: ``(B, heads, n or m, size / heads)``."""
        sizes = (self.qk_dim, self.qk_dim, self.out_dim)
        if not hasattr(self, "qkv"):
            q, k, v = self.W_q(query), self.W_k(key), self.W_v(value)
        elif key is query and value is query:  # self-attention: one product
            q, k, v = self.qkv(query).split(sizes, dim=-1)
        else:
            w, b = self.qkv.weight.split(sizes), (None,) * 3 if self.qkv.bias is None else self.qkv.bias.split(sizes)
            q = F.linear(query, w[0], b[0])
            if value is key:
                k, v = F.linear(key, torch.cat(w[1:]), None if b[1] is None else torch.cat(b[1:])).split(sizes[1:], -1)
            else:
                k, v = F.linear(key, w[1], b[1]), F.linear(value, w[2], b[2])
        return tuple(x.unflatten(-1, (self.heads, -1)).transpose(1, 2) for x in (q, k, v))

    @classmethod
    def from_timm(
        cls, layer: nn.Module | Mapping[str, Tensor], heads: int | None = None, **options: object
    ) -> TimmAttention:
        """timm's ViT ``Attention`` ``layer`` (or its state dict, with ``heads``) as foveal's, with its weights.

        Returns a :class:`~foveal.attention.TimmAttention`: this module with timm's forward
        (``x, attn_mask=None, is_causal=False``, returning a tensor), so ``block.attn =
        Attention.from_timm(block.attn)`` swaps it into a timm ``Block``. See
        :meth:`TimmAttention.from_timm <foveal.attention.TimmAttention.from_timm>`.
        """
        from foveal.attention.dropin import TimmAttention  # the drop-in forms are built on this class

        return TimmAttention.from_timm(layer, heads, **options)

    @classmethod
    def from_multihead(
        cls, layer: nn.Module | Mapping[str, Tensor], heads: int | None = None, **options: object
    ) -> MultiheadAttention:
        """An ``nn.MultiheadAttention`` ``layer`` (or its state dict, with ``heads``) as foveal's, with its weights.

        Returns a :class:`~foveal.attention.MultiheadAttention`: this module with torch's forward,
        attributes and mask conventions, so ``encoder_layer.self_attn = Attention.from_multihead(...)``
        swaps it into ``nn.TransformerEncoderLayer``. See :meth:`MultiheadAttention.from_multihead
        <foveal.attention.MultiheadAttention.from_multihead>`.
        """
        from foveal.attention.dropin import MultiheadAttention

        return MultiheadAttention.from_multihead(layer, heads, **options)

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        query = torch.randn(batch, 5, self.dim, generator=generator)
        key = torch.randn(batch, 7, self.key_dim, generator=generator)
        value = torch.randn(batch, 7, self.value_dim, generator=generator)
        return query, key, value


def _score_sizes(score: object) -> tuple[int, int] | None:
    """The (query, key) vector sizes a built-in score module takes, or None where it does not say."""
    if isinstance(score, Additive):
        return score.W_q.in_features, score.W_k.in_features
    if isinstance(score, Bilinear):
        return tuple(score.weight.shape)  # type: ignore[return-value]
    if isinstance(score, Concatenation):
        return score.query_dim, score.w.in_features - score.query_dim
    return None
