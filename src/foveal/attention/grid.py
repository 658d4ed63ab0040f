"""Feature maps as sets: seed 001's mode-3 unfolding, attention over 1-, 2- and 3-D maps, non-local blocks.

Seed 001 unfolds an ``h x w x c`` tensor along mode 3 into a ``c x hw`` matrix whose columns are the
mode-3 fibres (the ``c``-vector at each position). We store a map as ``(B, C, *S)`` and a set as
rows, so the unfolding is ``(B, C, *S) -> (B, prod S, C)``: row ``i`` is the fibre at position ``i``.

Convention:
    Positions are numbered row-major (the last spatial axis fastest, as ``torch.flatten`` does);
    Kolda & Bader's unfolding numbers them column-major. Attention is equivariant to any
    renumbering of the positions, so only :func:`unflatten_grid` needs to know, and it inverts
    :func:`flatten_grid` exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

import torch
from torch import Tensor, nn

from foveal._checks import check_int, check_ints, check_module_dtype, check_shape, check_tensor
from foveal._torch_private import exportable_output
from foveal.attention.core import Concatenation, ScoreFn
from foveal.attention.maps import register_map_module
from foveal.attention.multihead import Attention
from foveal.errors import FovealError
from foveal.registry import ATTENTION


def flatten_grid(x: Tensor) -> Tensor:
    """Unfold a map along its channel mode into a set of position vectors (seed 001's mode-3 unfolding).

    Shape:
        - x: ``(B, C, *S)``, any number of spatial dims
        - output: ``(B, prod S, C)``

    Example:
        >>> flatten_grid(torch.zeros(2, 8, 4, 5)).shape
        torch.Size([2, 20, 8])
    """
    if check_tensor("x", x).dim() < 3:
        raise FovealError(f"x: expected shape (B, C, *S) with at least one spatial dim, got {tuple(x.shape)}")
    return x.flatten(2).transpose(1, 2)


def unflatten_grid(x: Tensor, spatial: Sequence[int]) -> Tensor:
    """Fold a set of position vectors back into a map: the inverse of :func:`flatten_grid`.

    Shape:
        - x: ``(B, prod S, C)``
        - spatial: ``S``
        - output: ``(B, C, *S)``

    Example:
        >>> x = torch.randn(2, 8, 4, 5)
        >>> torch.equal(unflatten_grid(flatten_grid(x), (4, 5)), x)
        True
    """
    spatial = tuple(check_int(f"spatial[{i}]", s, minimum=0) for i, s in enumerate(spatial))
    if not spatial:
        raise FovealError("spatial: expected at least one spatial size, got ()")
    check_shape("x", check_tensor("x", x), (None, math.prod(spatial), None))
    return x.transpose(1, 2).unflatten(2, spatial)


@exportable_output
class MapAttentionOutput(NamedTuple):
    """``(output map, weights)``."""

    output: Tensor
    weights: Tensor | None


@ATTENTION.register("map_attention")
@register_map_module
class MapAttention(nn.Module):
    """Attention between feature maps of 1, 2 or 3 spatial dims; the output has the query map's size.

    The maps are unfolded (:func:`flatten_grid`), attended with :class:`Attention`, and the output
    set is folded back on the query's grid. So, as seed 001 says, a smaller (larger) query map gives
    a smaller (larger) output map; key and value maps may have any spatial size of their own.

    Args:
        dim: channels of the query map.
        **options: any keyword-only option of :class:`Attention` (``key_dim``, ``value_dim``, ``out_dim``,
            ``heads``, ``score``, ...), which holds their defaults and checks; the inner module is
            ``self.attention``.

    Shape:
        - query_map: ``(B, dim, *S_q)``, ``1 <= len(S_q) <= 3``
        - key_map: ``(B, key_dim, *S_k)``; None for self-attention (key = value = query)
        - value_map: ``(B, value_dim, *S_k)``; None means value = key
        - mask: bool ``(B, n_q, m)`` with ``n_q = prod S_q``, ``m = prod S_k``, or broadcastable
        - output: ``(B, out_dim, *S_q)``
        - weights: ``(B, heads, n_q, m)`` if ``need_weights`` (or recording), else None

    Example:
        >>> attn = MapAttention(8, heads=2)
        >>> out, w = attn(torch.randn(1, 8, 3, 4), torch.randn(1, 8, 6, 8), need_weights=True)
        >>> out.shape, w.shape
        (torch.Size([1, 8, 3, 4]), torch.Size([1, 2, 12, 48]))
    """

    def __init__(self, dim: int, **options: Any) -> None:
        super().__init__()
        self.attention = Attention(dim, **options)

    def forward(
        self,
        query_map: Tensor,
        key_map: Tensor | None = None,
        value_map: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> MapAttentionOutput:
        key_map = query_map if key_map is None else key_map
        value_map = key_map if value_map is None else value_map
        inner = self.attention
        check_module_dtype(inner, query_map=query_map, key_map=key_map, value_map=value_map)
        for name, x, channels in (
            ("query_map", query_map, inner.dim),
            ("key_map", key_map, inner.key_dim),
            ("value_map", value_map, inner.value_dim),
        ):
            _check_map(name, x, channels, None if x is query_map else query_map.shape[0])
        if key_map.shape[2:] != value_map.shape[2:]:
            raise FovealError(
                f"value_map: expected spatial size {tuple(key_map.shape[2:])} (the key map's), "
                f"got {tuple(value_map.shape[2:])}"
            )
        out, weights = self.attention(
            flatten_grid(query_map), flatten_grid(key_map), flatten_grid(value_map), mask, need_weights
        )
        return MapAttentionOutput(unflatten_grid(out, query_map.shape[2:]), weights)

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        inner = self.attention
        query = torch.randn(batch, inner.dim, 3, 2, generator=generator)
        key = torch.randn(batch, inner.key_dim, 2, 4, generator=generator)
        value = torch.randn(batch, inner.value_dim, 2, 4, generator=generator)
        return query, key, value


NON_LOCAL_SIMILARITIES = ("gaussian", "embedded_gaussian", "dot", "concatenation")


@ATTENTION.register("non_local")
@register_map_module
class NonLocalBlock(nn.Module):
    """Residual non-local block (Wang et al., seed 001's [5]): ``x + W_z(attention(x))``, starting as the identity.

    The non-local operation is seed 001's eq. (1) over every position ``i`` of the map,
    ``y_j = (1 / C_j) sum_i f(x_j, x_i) g(x_i)``, with the paper's four choices of ``f`` and ``C``
    (theta, phi and g map ``channels -> inner``)::

        "gaussian"            f = exp(x_j^T x_i)                      C_j = sum_i f    (no theta, phi)
        "embedded_gaussian"   f = exp(theta(x_j)^T phi(x_i))          C_j = sum_i f    (seed 001's)
        "dot"                 f = theta(x_j)^T phi(x_i)               C_j = N          (no softmax)
        "concatenation"       f = ReLU(w^T [theta(x_j), phi(x_i)])    C_j = N

    ``W_z`` maps ``inner -> channels`` and starts at zero, so at initialisation the block returns
    its input exactly and can be dropped into a trained network.

    Without a request for maps, the two softmax forms run the fused kernel (O(N) memory, O(N^2)
    time) and ``"dot"`` runs in O(N) time and memory, as ``y = (1/N) theta (phi^T g)`` (no softmax,
    so the product reassociates exactly). ``"concatenation"`` builds the N x N scores whatever is
    asked: its ReLU does not factor over the pairs.

    Args:
        channels: channels ``C`` of the map (in and out).
        inner: width of theta, phi, g (default ``channels // 2``, as in the non-local paper).
        heads: number of heads (divides ``inner``; with ``"gaussian"``, also ``channels``).
        f: the similarity and its normaliser, one of the four above.
        score: replaces the dot product ``q^T k`` of the first three forms (``"scaled_dot"``,
            ``"cosine"`` or a callable, as in :class:`Attention`); ``"concatenation"`` has its own.

    Shape:
        - x: ``(B, C, *S)``, ``1 <= len(S) <= 3``
        - output: ``(B, C, *S)``
        - weights: ``(B, heads, prod S, prod S)`` if ``need_weights`` (or recording), else None;
          ``f / C`` (negative ones too, for ``"dot"``)

    Example:
        >>> block = NonLocalBlock(8)
        >>> x = torch.randn(2, 8, 4, 4)
        >>> out, w = block(x, need_weights=True)
        >>> torch.equal(out, x), w.shape
        (True, torch.Size([2, 1, 16, 16]))
        >>> NonLocalBlock(8, f="concatenation")(x, need_weights=True).weights.sum(-1).shape
        torch.Size([2, 1, 16])
    """

    def __init__(
        self,
        channels: int,
        *,
        inner: int | None = None,
        heads: int = 1,
        f: str = "embedded_gaussian",
        score: str | ScoreFn | None = None,
    ) -> None:
        super().__init__()
        check_int("channels", channels)
        inner = max(channels // 2, 1) if inner is None else inner
        check_ints(inner=inner, heads=heads)
        if f not in NON_LOCAL_SIMILARITIES:
            raise FovealError(f"unknown f {f!r}; choose from: {', '.join(NON_LOCAL_SIMILARITIES)}")
        if f == "concatenation" and score is not None:
            raise FovealError("score: f='concatenation' has its own score, ReLU(w^T [theta(x_j), phi(x_i)])")
        self.f = f
        options: dict[str, Any] = dict(out_dim=inner, heads=heads, normalize="softmax" if "gaussian" in f else "count")
        if f == "gaussian":
            options.update(embed=False, score="dot" if score is None else score)
        elif f == "concatenation":
            if inner % heads:
                raise FovealError(f"inner={inner} is not divisible by heads={heads}")
            options.update(qk_dim=inner, score=Concatenation(inner // heads, inner // heads))
        else:
            options.update(qk_dim=inner, score="dot" if score is None else score)
        self.attention = MapAttention(channels, **options)
        self.W_z = nn.Conv1d(inner, channels, kernel_size=1)
        nn.init.zeros_(self.W_z.weight)
        nn.init.zeros_(cast(Tensor, self.W_z.bias))

    def forward(self, x: Tensor, need_weights: bool = False) -> MapAttentionOutput:
        check_module_dtype(self, x=x)
        _check_map("x", x, self.W_z.out_channels)
        y, weights = self.attention(x, need_weights=need_weights)
        if math.prod(x.shape[2:]) == 0:  # no positions: nothing to add (and Conv1d refuses a length-0 input)
            return MapAttentionOutput(x + 0, weights)
        return MapAttentionOutput(x + self.W_z(y.flatten(2)).view_as(x), weights)

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        return (torch.randn(batch, self.W_z.out_channels, 3, 4, generator=generator),)


def _check_map(name: str, x: Tensor, channels: int, batch: int | None = None) -> None:
    ok = 3 <= x.dim() <= 5 and x.shape[1] == channels and (batch is None or x.shape[0] == batch)
    if not ok:
        b = "B" if batch is None else f"B={batch}"
        raise FovealError(
            f"{name}: expected shape ({b}, {channels}, *S) with 1 to 3 spatial dims, got {tuple(x.shape)}"
        )
