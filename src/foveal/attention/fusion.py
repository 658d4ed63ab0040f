"""A transformer block that fuses image regions and question words (seed 002; Vaswani et al. 2017).

Self-attention within each modality, then cross-attention both ways (the image attends to the
words, the words attend to the image), then a position-wise MLP; every sub-layer is pre-norm and
residual. With ``x`` the regions and ``y`` the words::

    x1 = x + SA_x(LN(x)),                  y1 = y + SA_y(LN(y))                      padded words: keys masked
    x2 = x1 + CA_x(LN(x1), LN'(y1)),       y2 = y1 + CA_y(LN(y1), LN'(x1))           both read x1 and y1
    x3 = x2 + MLP_x(LN(x2)),               y3 = y2 + MLP_y(LN(y2))

Each attention is multi-head scaled dot-product attention (:class:`foveal.attention.Attention`)
followed by an output projection that mixes the heads. Stack blocks for depth.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from foveal._checks import check_ints, check_module_dtype, check_number, check_shape
from foveal._torch_private import exportable_output
from foveal.attention._masks import check_mask, drop_padding
from foveal.attention.maps import register_map_module
from foveal.attention.multihead import Attention
from foveal.errors import FovealError
from foveal.registry import ATTENTION


@exportable_output
class FusionOutput(NamedTuple):
    """The fused regions (``output``) and words (``question``), and the four attention maps of the block.

    Shape:
        - output: ``(B, N, d)``, the regions
        - weights: ``(B, heads, T, N)``, each word's weights over the regions (words -> image: the
          image heatmaps)
        - question: ``(B, T, d)``, the words
        - image_to_words: ``(B, heads, N, T)``, each region's weights over the words (0 on padding)
        - image_self: ``(B, heads, N, N)``; question_self: ``(B, heads, T, T)``
    """

    output: Tensor
    weights: Tensor
    question: Tensor
    image_to_words: Tensor
    image_self: Tensor
    question_self: Tensor


@register_map_module
class _ProjectedAttention(nn.Module):
    """Multi-head attention plus the output projection ``W_o`` of Vaswani et al."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.attention = Attention(dim, heads=heads)
        self.W_o = nn.Linear(dim, dim)

    def forward(self, query: Tensor, key: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
        out, weights = self.attention(query, key, mask=mask, need_weights=True)  # FusionOutput returns all four maps
        return self.W_o(out), weights


@ATTENTION.register("transformer-fusion")
@register_map_module
class TransformerFusion(nn.Module):
    """One pre-norm transformer block over two modalities: self-attention, cross-attention both ways, MLP.

    Args:
        dim: size ``d`` of the regions and the words (divisible by ``heads``).
        heads: attention heads.
        mlp_ratio: hidden size of the MLP as a multiple of ``dim``.

    Shape:
        - V: ``(B, N, d)``, the regions; Q: ``(B, T, d)``, the words
        - mask: bool ``(B, T)``, True = real word; None = all real
        - output: :class:`FusionOutput`. Padded words enter as zeros, so what they held (NaN or Inf
          included) reaches no output and no gradient. Outputs at padded word positions are finite
          but meaningless; they never reach the regions or the real words.

    Example:
        >>> block = TransformerFusion(16, heads=2)
        >>> out = block(torch.randn(2, 49, 16), torch.randn(2, 7, 16), torch.ones(2, 7, dtype=torch.bool))
        >>> out.output.shape, out.question.shape, out.image_to_words.shape
        (torch.Size([2, 49, 16]), torch.Size([2, 7, 16]), torch.Size([2, 2, 49, 7]))
    """

    def __init__(self, dim: int, *, heads: int = 4, mlp_ratio: float = 2.0) -> None:
        super().__init__()
        check_ints(dim=dim, heads=heads)
        if dim % heads:
            raise FovealError(f"dim={dim} is not divisible by heads={heads}")
        check_number("mlp_ratio", mlp_ratio, why="the MLP's hidden size is mlp_ratio * dim")
        hidden = int(dim * mlp_ratio)
        if hidden < 1:
            raise FovealError(f"mlp_ratio: dim * mlp_ratio must be at least 1, got {dim} * {mlp_ratio}")
        self.dim = dim
        self.norms = nn.ModuleDict({name: nn.LayerNorm(dim) for name in ("v1", "q1", "v2", "q2", "v3", "q3")})
        self.self_image = _ProjectedAttention(dim, heads)
        self.self_question = _ProjectedAttention(dim, heads)
        self.image_to_words = _ProjectedAttention(dim, heads)
        self.words_to_image = _ProjectedAttention(dim, heads)
        self.mlp_image = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
        self.mlp_question = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, V: Tensor, Q: Tensor, mask: Tensor | None = None) -> FusionOutput:
        check_module_dtype(self, V=V, Q=Q)
        sizes = check_shape("V", V, ("B", "N", self.dim))
        check_shape("Q", Q, ("B", "T", self.dim), sizes)
        key_mask = None
        if mask is not None:
            check_shape("mask", mask, ("B", "T"), sizes)
            check_mask(mask, mask.shape)
            # Zero before the first LayerNorm: a NaN word would otherwise reach the norms' and the
            # projections' parameter gradients through 0 * NaN, though its weights are zero.
            Q = drop_padding(Q, mask)
            key_mask = mask.unsqueeze(1)  # (B, 1, T): every query may attend to the real words
        n = self.norms
        x, y = V, Q
        h, image_self = self.self_image(n["v1"](x), n["v1"](x), None)
        g, question_self = self.self_question(n["q1"](y), n["q1"](y), key_mask)
        x, y = x + h, y + g
        nx, ny = n["v2"](x), n["q2"](y)
        h, image_to_words = self.image_to_words(nx, ny, key_mask)
        g, words_to_image = self.words_to_image(ny, nx, None)
        x, y = x + h, y + g
        x = x + self.mlp_image(n["v3"](x))
        y = y + self.mlp_question(n["q3"](y))
        return FusionOutput(x, words_to_image, y, image_to_words, image_self, question_self)

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        mask = torch.ones(batch, 5, dtype=torch.bool)
        mask[0, 3:] = False
        V = torch.randn(batch, 9, self.dim, generator=generator)
        return V, torch.randn(batch, 5, self.dim, generator=generator), mask
