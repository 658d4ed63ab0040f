"""Multi-hop (stacked) attention, seed 002 / stacked attention networks.

Hop 1 is single-hop attention with the question as query; each hop adds what it found to its
query, ``phi = v_filt + u``, and ``phi`` is the next hop's query (an "augmented question")::

    u_1 = v_Q,   v_filt_t, p_t = SpatialAttention_t(V, u_t),   u_{t+1} = phi_t = v_filt_t + u_t

The image regions ``V`` are the same at every hop; each hop has its own parameters.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from foveal._checks import check_ints, check_module_dtype, check_shape
from foveal.attention.spatial import SpatialAttention
from foveal.errors import FovealError
from foveal.registry import ATTENTION


class StackedOutput(NamedTuple):
    """``(output, weights)``: the last hop's ``phi`` and one attention map per hop."""

    output: Tensor
    weights: Tensor


@ATTENTION.register("stacked")
class StackedAttention(nn.Module):
    """Stacked attention: ``hops`` rounds of :class:`SpatialAttention`, each refining the query.

    Args:
        dim: size ``d`` of the region vectors and of the question (``phi = v_filt + v_Q`` needs both equal).
        k_dim: joint-embedding size of each hop's attention.
        hops: number of attention hops (1 is single-hop attention plus the residual ``+ v_Q``).
        score: each hop's score, as in :class:`SpatialAttention`.
        normalize: each hop's ``"softmax"`` or ``"sparsemax"``, as in :class:`SpatialAttention`.

    Shape:
        - V: ``(B, N, d)``
        - v_Q: ``(B, d)``, or ``(B, n, d)``: ``n`` questions about the same regions, each with its own hops
        - mask: bool ``(B, N)``, True = region may be attended
        - keys: ``(B, N, d)``, what every hop's score reads (default: ``V``; see :class:`SpatialAttention`)
        - output: ``(B, d)``, the final ``phi`` (``(B, n, d)``)
        - weights: ``(B, hops, N)``, hop ``t``'s attention map at ``[:, t]`` (``(B, n, hops, N)`` for ``n`` questions)

    Example:
        >>> san = StackedAttention(32, k_dim=16, hops=2)
        >>> phi, maps = san(torch.randn(4, 49, 32), torch.randn(4, 32))
        >>> phi.shape, maps.shape
        (torch.Size([4, 32]), torch.Size([4, 2, 49]))
    """

    def __init__(
        self, dim: int, *, k_dim: int = 128, hops: int = 2, score: str = "additive", normalize: str = "softmax"
    ) -> None:
        super().__init__()
        check_ints(dim=dim, k_dim=k_dim, hops=hops)
        self.dim, self.normalize = dim, normalize
        self.hops = nn.ModuleList(
            SpatialAttention(dim, dim, k_dim, score=score, normalize=normalize) for _ in range(hops)
        )

    def forward(self, V: Tensor, v_Q: Tensor, mask: Tensor | None = None, keys: Tensor | None = None) -> StackedOutput:
        check_module_dtype(self, V=V, v_Q=v_Q)
        sizes = check_shape("V", V, ("B", "N", self.dim))
        if v_Q.dim() not in (2, 3):
            raise FovealError(
                f"v_Q: expected shape (B={sizes['B']}, {self.dim}) or (B={sizes['B']}, n, {self.dim}), "
                f"got {tuple(v_Q.shape)}"
            )
        check_shape("v_Q", v_Q, ("B", self.dim) if v_Q.dim() == 2 else ("B", None, self.dim), sizes)
        query, maps = v_Q, []
        for hop in self.hops:
            v_filt, weights = hop(V, query, mask, keys)
            query = v_filt + query  # phi, the next hop's query
            maps.append(weights)
        return StackedOutput(query, torch.stack(maps, dim=-2))

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        return torch.randn(batch, 6, self.dim, generator=generator), torch.randn(batch, self.dim, generator=generator)
