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

from foveal._checks import check_ints, check_module_dtype, check_shape
from foveal._torch_private import exportable_output
from foveal.attention import maps
from foveal.attention._masks import check_mask, drop_padding
from foveal.attention.core import attend
from foveal.attention.maps import register_map_module
from foveal.errors import FovealError
from foveal.registry import ATTENTION


@exportable_output
class ContextOutput(NamedTuple):
    """``output`` (B, N, C): the contextualised regions; ``weights`` (B, N, N) for self-attention, else None."""

    output: Tensor
    weights: Tensor | None


@ATTENTION.register("context-bilstm")
@register_map_module
class GridBiLSTM(nn.Module):
    """A bidirectional LSTM over the grid's regions in row-major order; each output concatenates both directions.

    Args:
        dim: size ``C`` of each region vector (even: each direction has ``C / 2`` hidden units, so the
            output has the input's size).
        layers: stacked LSTM layers.

    Shape:
        - V: ``(B, N, C)``, a map flattened row-major (``flatten_grid``): region ``i = row * W + col``;
          ``N = 0`` gives an empty output
        - output: ``(B, N, C)``: forward hidden state, then backward, at each region
        - weights: None

    Example:
        >>> lstm = GridBiLSTM(16)
        >>> lstm(torch.randn(2, 49, 16)).output.shape
        torch.Size([2, 49, 16])
    """

    def __init__(self, dim: int, *, layers: int = 1) -> None:
        super().__init__()
        check_ints(dim=dim, layers=layers)
        if dim % 2:
            raise FovealError(f"dim must be even (half per direction), got {dim}")
        self.dim = dim
        self.lstm = nn.LSTM(dim, dim // 2, num_layers=layers, batch_first=True, bidirectional=True)

    def forward(self, V: Tensor) -> ContextOutput:
        check_module_dtype(self, V=V)
        check_shape("V", V, ("B", "N", self.dim))
        if V.shape[1] == 0:  # an LSTM refuses a sequence of length 0; its output would be empty anyway
            return ContextOutput(V + 0, None)
        return ContextOutput(self.lstm(V)[0], None)

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        return (torch.randn(batch, 9, self.dim, generator=generator),)


@ATTENTION.register("context-self")
@register_map_module
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
        - mask: bool ``(B, N)``, True = a real region (for padded sets of objects); None = all real.
          Padded regions enter the attention as zeros: what they hold (NaN or Inf included) reaches
          no other region's output, no weight and no gradient. A padded region's own output is its
          vector plus the mean of the real regions (its zero query weighs them equally)
        - output: ``(B, N, C)``
        - weights: ``(B, N, N)``, row ``i`` is region ``i``'s attention over the set, if
          ``need_weights`` (or recording); else None, and the fused kernel runs

    Example:
        >>> attn = ResidualSelfAttention(16, k_dim=8)
        >>> out, w = attn(torch.randn(2, 49, 16), need_weights=True)
        >>> out.shape, w.shape
        (torch.Size([2, 49, 16]), torch.Size([2, 49, 49]))
    """

    def __init__(self, dim: int, *, k_dim: int | None = None) -> None:
        super().__init__()
        k_dim = dim if k_dim is None else k_dim
        check_ints(dim=dim, k_dim=k_dim)
        self.dim = dim
        self.W_q = nn.Linear(dim, k_dim, bias=False)
        self.W_k = nn.Linear(dim, k_dim, bias=False)

    def forward(self, V: Tensor, mask: Tensor | None = None, need_weights: bool = False) -> ContextOutput:
        check_module_dtype(self, V=V)
        sizes = check_shape("V", V, ("B", "N", self.dim))
        if mask is not None:
            check_shape("mask", mask, ("B", "N"), sizes)
            check_mask(mask, mask.shape)
            # Zeroed before W_q and W_k, whose backward reads their inputs: a NaN in a padded region
            # would otherwise reach their gradients through 0 * NaN, though its weights are zero.
            real = drop_padding(V, mask)
            mask = mask.unsqueeze(1)  # every region may attend to the real ones
        else:
            real = V
        need_weights = need_weights or maps.wants_maps(self)
        filtered, weights = attend(
            self.W_q(real), self.W_k(real), real, score="scaled_dot", mask=mask, need_weights=need_weights
        )
        return ContextOutput(V + filtered, weights)

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        return (torch.randn(batch, 9, self.dim, generator=generator),)
