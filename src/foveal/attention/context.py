"""Contextualised image embeddings (seed 002): give each region vector some of the rest of the image.

Two ways, both ``(B, N, C) -> (B, N, C)`` so either drops in before any attention over regions:

- :class:`GridBiLSTM`: a bidirectional LSTM run over the regions in row-major order (the order of
  :func:`foveal.attention.grid.flatten_grid`), as is done with the words of a question.
- :class:`ResidualSelfAttention`: each region vector is a conditioning vector that attends over
  the set, and the result is added to it: ``v_i' = v_i + sum_j softmax_j(s(v_i, v_j)) v_j``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from foveal._checks import check_shape
from foveal.attention.core import attend
from foveal.registry import ATTENTION


class ContextOutput(NamedTuple):
    """``output`` (B, N, C): the contextualised regions; ``weights`` (B, N, N) for self-attention, else None."""

    output: Tensor
    weights: Tensor | None


@ATTENTION.register("context-bilstm")
class GridBiLSTM(nn.Module):
    """A bidirectional LSTM over the grid's regions in row-major order; each output concatenates both directions.

    Args:
        dim: size ``C`` of each region vector (even: each direction has ``C / 2`` hidden units, so the
            output has the input's size).
        layers: stacked LSTM layers.

    Shape:
        - V: ``(B, N, C)``, a map flattened row-major (``flatten_grid``): region ``i = row * W + col``
        - output: ``(B, N, C)``: forward hidden state, then backward, at each region
        - weights: None

    Example:
        >>> lstm = GridBiLSTM(16)
        >>> lstm(torch.randn(2, 49, 16)).output.shape
        torch.Size([2, 49, 16])
    """

    def __init__(self, dim: int, *, layers: int = 1) -> None:
        super().__init__()
        if dim % 2:
            raise ValueError(f"dim must be even (half per direction), got {dim}")
        self.dim = dim
        self.lstm = nn.LSTM(dim, dim // 2, num_layers=layers, batch_first=True, bidirectional=True)

    def forward(self, V: Tensor) -> ContextOutput:
        check_shape("V", V, ("B", "N", self.dim))
        return ContextOutput(self.lstm(V)[0], None)

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        return (torch.randn(batch, 9, self.dim, generator=generator),)


@ATTENTION.register("context-self")
class ResidualSelfAttention(nn.Module):
    """Residual self-attention over the regions (seed 002): ``v_i' = v_i + sum_j alpha_ij v_j``.

    The score is learned, ``s(v_i, v_j) = (W_q v_i) . (W_k v_j) / sqrt(k)``: with a plain dot
    product every region would mostly attend to itself. The values are the region vectors
    themselves, as the seed describes ("the sum of the original embedding and the filtered embedding").

    Args:
        dim: size ``C`` of each region vector.
        k_dim: size ``k`` of the query and key projections (default ``dim``).

    Shape:
        - V: ``(B, N, C)``
        - mask: bool ``(B, N)``, True = a real region (for padded sets of objects); None = all real
        - output: ``(B, N, C)``
        - weights: ``(B, N, N)``, row ``i`` is region ``i``'s attention over the set

    Example:
        >>> attn = ResidualSelfAttention(16, k_dim=8)
        >>> out, w = attn(torch.randn(2, 49, 16))
        >>> out.shape, w.shape
        (torch.Size([2, 49, 16]), torch.Size([2, 49, 49]))
    """

    def __init__(self, dim: int, *, k_dim: int | None = None) -> None:
        super().__init__()
        k_dim = dim if k_dim is None else k_dim
        self.dim = dim
        self.W_q = nn.Linear(dim, k_dim, bias=False)
        self.W_k = nn.Linear(dim, k_dim, bias=False)

    def forward(self, V: Tensor, mask: Tensor | None = None) -> ContextOutput:
        sizes = check_shape("V", V, ("B", "N", self.dim))
        if mask is not None:
            check_shape("mask", mask, ("B", "N"), sizes)
            mask = mask.unsqueeze(1)  # every region may attend to the real ones
        filtered, weights = attend(self.W_q(V), self.W_k(V), V, score="scaled_dot", mask=mask)
        return ContextOutput(V + filtered, weights)

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        return (torch.randn(batch, 9, self.dim, generator=generator),)
