"""Multi-hop (stacked) attention, seed 002 / stacked attention networks.

Hop 1 is single-hop attention with the question as query; each hop adds what it found to its
query, ``phi = v_filt + u``, and ``phi`` is the next hop's query (an "augmented question")::

    u_1 = v_Q,   v_filt_t, p_t = SpatialAttention_t(V, u_t),   u_{t+1} = phi_t = v_filt_t + u_t

The image regions ``V`` are the same at every hop; each hop has its own parameters.

``relate=True`` (foveal's addition, not the paper's) lets a hop find an object *relative to* the one
the hop before it found, as "the object closest to the red one" needs: hop ``t > 1`` adds to its
scores a term in each cell's distance from where hop ``t - 1`` looked, toward or away as its query
says, and a penalty on the cells hop ``t - 1`` looked at (so "closest" does not return the same
object)::

    c_{t-1} = sum_i alpha_{t-1,i} x_i                   (where hop t - 1 looked; x_i = cell i's centre)
    e_{t,i} += -toward_t ||x_i - c_{t-1}||^2 - softplus(avoid_t) alpha_{t-1,i} / max_j alpha_{t-1,j}
    (toward_t, avoid_t) = W_r,t u_t + b_r,t              (toward_t > 0: near, < 0: far)

Without it a second hop can only move its query by what the first hop saw, not by where it saw it.

``prior=True`` (foveal's addition too) adds to every hop's score a term that reads the cell alone, the same
for every question, divided by the temperature as the score is::

    e_{t,i} += w_p^T tanh(W_p k_i + b_p)              (k_i: what the scores read, the keys or V)

It is where to look whatever the question: with one object per picture, every question's loss teaches it
where objects are, and a question that names nothing in the picture ("is there a red shape?" about a blue
one) still finds the object through it, where its own term alone ties the object with the background.
"""

from __future__ import annotations

from typing import NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from foveal._checks import check_ints, check_module_dtype, check_shape
from foveal._torch_private import exportable_output
from foveal.attention._masks import check_flags
from foveal.attention.coords import grid_coords
from foveal.attention.maps import register_map_module
from foveal.attention.spatial import SpatialAttention
from foveal.errors import FovealError
from foveal.registry import ATTENTION


@exportable_output
class StackedOutput(NamedTuple):
    """``(output, weights)``: the last hop's ``phi`` and one attention map per hop."""

    output: Tensor
    weights: Tensor


@ATTENTION.register("stacked")
@register_map_module
class StackedAttention(nn.Module):
    """Stacked attention: ``hops`` rounds of :class:`SpatialAttention`, each refining the query.

    Args:
        dim: size ``d`` of the region vectors and of the question (``phi = v_filt + v_Q`` needs both equal).
        k_dim: joint-embedding size of each hop's attention.
        hops: number of attention hops (1 is single-hop attention plus the residual ``+ v_Q``).
        score: each hop's score, as in :class:`SpatialAttention`.
        normalize: each hop's ``"softmax"`` or ``"sparsemax"``, as in :class:`SpatialAttention`; settable after
            construction (every hop's changes: a schedule may train with a softmax first).
        temperature: divides each hop's score before it is normalised, as in :class:`SpatialAttention`;
            settable after construction (every hop's changes).
        relate: every hop after the first also scores cells by their distance from where the hop
            before it looked, and avoids the cells it looked at (see the module docstring).
        prior: add a question-independent term of each cell to every hop's score (see the module docstring).

    Shape:
        - V: ``(B, N, d)``
        - v_Q: ``(B, d)``, or ``(B, n, d)``: ``n`` questions about the same regions, each with its own hops
        - mask: bool ``(B, N)``, True = region may be attended
        - keys: ``(B, N, d)``, what every hop's score reads (default: ``V``; see :class:`SpatialAttention`)
        - positions: ``(N, 2)``, each cell's centre for ``relate`` (default: a square grid's
          :func:`foveal.attention.grid_coords`, row-major as :func:`foveal.flatten_grid` lays it out)
        - output: ``(B, d)``, the final ``phi`` (``(B, n, d)``)
        - weights: ``(B, hops, N)``, hop ``t``'s attention map at ``[:, t]`` (``(B, n, hops, N)`` for ``n`` questions)

    Example:
        >>> san = StackedAttention(32, k_dim=16, hops=2)
        >>> phi, maps = san(torch.randn(4, 49, 32), torch.randn(4, 32))
        >>> phi.shape, maps.shape
        (torch.Size([4, 32]), torch.Size([4, 2, 49]))
    """

    def __init__(
        self,
        dim: int,
        *,
        k_dim: int = 128,
        hops: int = 2,
        score: str = "additive",
        normalize: str = "softmax",
        relate: bool = False,
        temperature: float = 1.0,
        prior: bool = False,
    ) -> None:
        super().__init__()
        check_ints(dim=dim, k_dim=k_dim, hops=hops)
        check_flags(relate=relate, prior=prior)
        self.dim = dim
        self.hops = nn.ModuleList(
            SpatialAttention(dim, dim, k_dim, score=score, temperature=temperature, normalize=normalize)
            for _ in range(hops)
        )
        # (toward, avoid) of every hop after the first, read from its query
        self.relations = nn.ModuleList(nn.Linear(dim, 2) for _ in range(hops - 1)) if relate else None
        # w_p^T tanh(W_p k_i + b_p), shared by every hop and every question
        self.prior = nn.Sequential(nn.Linear(dim, k_dim), nn.Tanh(), nn.Linear(k_dim, 1)) if prior else None

    @property
    def relate(self) -> bool:
        return self.relations is not None

    @property
    def temperature(self) -> float:
        """What every hop's score is divided by; setting it (a schedule in training) changes every hop's."""
        return cast(SpatialAttention, self.hops[0]).temperature

    @temperature.setter
    def temperature(self, value: float) -> None:
        for hop in self.hops:
            cast(SpatialAttention, hop).temperature = value

    @property
    def normalize(self) -> str:
        """How every hop's scores become its map; setting it changes every hop's."""
        return cast(SpatialAttention, self.hops[0]).normalize

    @normalize.setter
    def normalize(self, value: str) -> None:
        for hop in self.hops:
            cast(SpatialAttention, hop).normalize = value

    def forward(
        self,
        V: Tensor,
        v_Q: Tensor,
        mask: Tensor | None = None,
        keys: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> StackedOutput:
        glimpses, maps = self.trace(V, v_Q, mask, keys, positions)
        return StackedOutput(v_Q + sum(glimpses), torch.stack(maps, dim=-2))

    def trace(
        self,
        V: Tensor,
        v_Q: Tensor,
        mask: Tensor | None = None,
        keys: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> tuple[list[Tensor], list[Tensor]]:
        """Every hop's glimpse ``v_filt_t`` and map ``alpha_t``, in order (shaped as ``output`` and
        ``weights[..., t, :]``)."""
        check_module_dtype(self, V=V, v_Q=v_Q)
        sizes = check_shape("V", V, ("B", "N", self.dim))
        if v_Q.dim() not in (2, 3):
            raise FovealError(
                f"v_Q: expected shape (B={sizes['B']}, {self.dim}) or (B={sizes['B']}, n, {self.dim}), "
                f"got {tuple(v_Q.shape)}"
            )
        check_shape("v_Q", v_Q, ("B", self.dim) if v_Q.dim() == 2 else ("B", None, self.dim), sizes)
        cells = None if self.relations is None else self._positions(V, positions)
        prior = None
        if self.prior is not None:
            prior = self.prior(V if keys is None else keys).squeeze(-1)  # (B, N)
            prior = prior if v_Q.dim() == 2 else prior.unsqueeze(1).expand(-1, v_Q.shape[1], -1)
        query = v_Q
        glimpses: list[Tensor] = []
        maps: list[Tensor] = []
        for t, hop in enumerate(self.hops):
            bias = None if t == 0 or cells is None else self.relation_bias(t, query, maps[-1], cells)
            if prior is not None:  # the hop adds a bias after its temperature: divide this term as its score is
                tempered = prior / cast(SpatialAttention, hop).divisor
                bias = tempered if bias is None else bias + tempered
            v_filt, weights = hop(V, query, mask, keys, bias=bias)
            query = v_filt + query  # phi, the next hop's query
            glimpses.append(v_filt)
            maps.append(weights)
        return glimpses, maps

    def relation_bias(self, t: int, query: Tensor, previous: Tensor, positions: Tensor) -> Tensor:
        """Hop ``t``'s (from 0; ``t >= 1``) added scores: its distance term and its penalty on hop ``t - 1``'s cells.

        Shape:
            - query: ``(..., d)``, hop ``t``'s query ``u_t``; previous: ``(..., N)``, hop ``t - 1``'s map
            - positions: ``(N, 2)``; output: ``(..., N)``
        """
        if self.relations is None:
            raise FovealError("relation_bias: this StackedAttention was built with relate=False")
        toward, avoid = self.relations[t - 1](query).unbind(-1)
        centre = previous @ positions  # (..., 2): where hop t - 1 looked
        distance2 = ((positions - centre.unsqueeze(-2)) ** 2).sum(-1)  # (..., N)
        seen = previous / previous.amax(-1, keepdim=True).clamp_min(torch.finfo(previous.dtype).tiny)
        return -toward.unsqueeze(-1) * distance2 - F.softplus(avoid).unsqueeze(-1) * seen

    @staticmethod
    def _positions(V: Tensor, positions: Tensor | None) -> Tensor:
        cells = V.shape[-2]
        if positions is None:
            side = round(cells**0.5)
            if side * side != cells:
                raise FovealError(
                    f"relate needs the cells' positions: {cells} cells are not a square grid; pass positions"
                )
            return grid_coords(side, side, dtype=V.dtype, device=V.device).flatten(1).T
        check_shape("positions", positions, (cells, 2))
        return positions.to(V.dtype)

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        return torch.randn(batch, 6, self.dim, generator=generator), torch.randn(batch, self.dim, generator=generator)
