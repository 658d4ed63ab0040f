"""The seed 002 family of VQA heads: channels, CNN layers, question words, context, fusion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from foveal.attention import (
    AlternatingCoAttention,
    ChannelAttention,
    CrossLayerAttention,
    GridBiLSTM,
    HopCoAttention,
    ParallelCoAttention,
    ResidualSelfAttention,
    SpatialAttention,
    StackedAttention,
    TransformerFusion,
)
from foveal.attention.coattention import masked_mean
from foveal.attention.grid import flatten_grid
from foveal.errors import FovealError
from foveal.models.vqa.heads.base import (
    NO_INPUTS,
    HeadInputs,
    HeadOutput,
    HeadSizes,
    HopsOptions,
    NoOptions,
    VQAHead,
    register_head,
)


class ChannelHead(VQAHead):
    """SCA-CNN's channel-then-spatial order: question-conditioned channel weights, then ``hops`` stacked
    hops with the dot score (see ``stacked-dot``)."""

    def __init__(self, dim: int, *, k_dim: int, hops: int) -> None:
        super().__init__()
        self.channel = ChannelAttention(dim, k_dim=k_dim)
        self.spatial = StackedAttention(dim, k_dim=k_dim, hops=hops, score="dot")

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        V_c, beta = self.channel(V, v_Q)
        phi, weights = self.spatial(V_c, v_Q)
        return HeadOutput(phi, weights, channel_weights=beta, regions=V_c)


class CrossLayerHead(VQAHead):
    """Attention across the CNN's layers, ``phi = output + v_Q``; one map per layer, resampled to the grid.

    Each layer's map ``alpha_l`` is area-resampled onto the last layer's grid and renormalised, so
    ``weights[:, l]`` is where layer ``l`` looked; ``layer_weights`` holds ``gamma_l``.
    """

    reads = frozenset({"layers"})

    def __init__(self, dim: int, *, k_dim: int, layer_dims: Sequence[int]) -> None:
        super().__init__()
        self.attention = CrossLayerAttention(dim, layer_dims=layer_dims, k_dim=k_dim)

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        layers = inputs.layers
        output, gamma, alphas = self.attention([flatten_grid(layer) for layer in layers], v_Q)
        grid = (int(layers[-1].shape[-2]), int(layers[-1].shape[-1]))
        maps = []
        for alpha, layer in zip(alphas, layers, strict=True):
            resampled = F.adaptive_avg_pool2d(alpha.view(-1, 1, *layer.shape[-2:]), grid).flatten(1)
            maps.append(resampled / resampled.sum(-1, keepdim=True).clamp_min(torch.finfo(alpha.dtype).tiny))
        return HeadOutput(output + v_Q, torch.stack(maps, 1), layer_weights=gamma)


class HopCoAttentionHead(VQAHead):
    """``hops`` hops of attention over regions and words (:class:`foveal.attention.HopCoAttention`)."""

    reads = frozenset({"words"})
    joint = False

    def __init__(self, dim: int, *, k_dim: int, hops: int) -> None:
        super().__init__()
        self.attention = HopCoAttention(dim, hops=hops, k_dim=k_dim, joint=self.joint)

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        out = self.attention(V, inputs.words, inputs.word_mask, v_Q)
        return HeadOutput(out.output, out.weights, word_weights=out.word_weights)


class IndependentCoAttentionHead(HopCoAttentionHead):
    """Independent conditioning: per hop the question attends to the regions, the image to the words."""


class JointCoAttentionHead(HopCoAttentionHead):
    """Joint conditioning: both attentions of a hop are conditioned on the sum of the two states."""

    joint = True


class OneStepCoAttentionHead(VQAHead):
    """A one-step co-attention module, ``phi = image + question + v_Q`` (seed 002's ``+ v_Q`` residual)."""

    reads = frozenset({"words"})

    def __init__(self, attention: nn.Module) -> None:
        super().__init__()
        self.attention = attention

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        out = self.attention(V, inputs.words, inputs.word_mask)
        return HeadOutput(out.output + v_Q, out.weights, word_weights=out.word_weights)


class ParallelMaxHead(OneStepCoAttentionHead):
    """Parallel co-attention, affinity pooled by a max (parameter-free)."""

    def __init__(self, dim: int, *, k_dim: int) -> None:
        super().__init__(ParallelCoAttention(dim, pool="max", k_dim=k_dim))


class ParallelLearnedHead(OneStepCoAttentionHead):
    """Parallel co-attention, affinity pooled by Lu et al.'s small network."""

    def __init__(self, dim: int, *, k_dim: int) -> None:
        super().__init__(ParallelCoAttention(dim, pool="learned", k_dim=k_dim))


class AlternatingHead(OneStepCoAttentionHead):
    """Alternating co-attention: summarise the question, attend to the image, attend to the question."""

    def __init__(self, dim: int, *, k_dim: int) -> None:
        super().__init__(AlternatingCoAttention(dim, k_dim=k_dim))


class ContextStackedHead(VQAHead):
    """Contextualise the regions (every region sees the rest of the image), then ``hops`` stacked hops.

    The context does not depend on the question, so it runs once per picture and the hops answer all
    of a picture's questions together (``grouped``). The hops use the dot score for the reason given
    at ``stacked-dot``; their scores read the contextualised regions, not separate keys.
    """

    grouped = True

    def __init__(self, context: nn.Module, dim: int, *, k_dim: int, hops: int) -> None:
        super().__init__()
        self.attention = StackedAttention(dim, k_dim=k_dim, hops=hops, score="dot")
        self.context = context

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        V_c = self.context(V).output
        phi, weights = self.attention(V_c, v_Q)
        return HeadOutput(phi, weights, regions=V_c)


class BiLSTMContextHead(ContextStackedHead):
    """A BiLSTM over the grid (row-major), then stacked attention."""

    def __init__(self, dim: int, *, k_dim: int, hops: int) -> None:
        super().__init__(GridBiLSTM(dim), dim, k_dim=k_dim, hops=hops)


class SelfContextHead(ContextStackedHead):
    """Residual self-attention over the regions, then stacked attention."""

    def __init__(self, dim: int, *, k_dim: int, hops: int) -> None:
        super().__init__(ResidualSelfAttention(dim, k_dim=k_dim), dim, k_dim=k_dim, hops=hops)


class TransformerHead(VQAHead):
    """``hops`` :class:`foveal.attention.TransformerFusion` blocks, then one additive hop, ``final_hop``.

    The final hop's query is the mean of the fused real words ``q``; ``phi = v_filt + q``. Maps: block
    ``k``'s words -> image weights averaged over heads and real words, then the final hop's map
    (``hops + 1`` maps); word weights: block ``k``'s image -> words weights averaged over heads
    and regions.
    """

    reads = frozenset({"words"})

    def __init__(self, dim: int, *, k_dim: int, hops: int, heads: int = 4) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(TransformerFusion(dim, heads=heads) for _ in range(hops))
        self.final_hop = SpatialAttention(dim, dim, k_dim)

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        word_mask, y = inputs.word_mask, inputs.words
        if y is None or word_mask is None:
            raise FovealError(f"{type(self).__name__}: expected inputs.words and inputs.word_mask, got None")
        x = V
        real = word_mask.to(V.dtype)
        image_maps, word_maps = [], []
        for block in self.blocks:
            out = block(x, y, word_mask)
            x, y = out.output, out.question
            per_word = out.weights.mean(1)  # (B, T, N)
            image_maps.append((real.unsqueeze(-1) * per_word).sum(1) / real.sum(1, keepdim=True).clamp_min(1.0))
            word_maps.append(out.image_to_words.mean((1, 2)))  # (B, T)
        q = masked_mean(y, word_mask)
        v_filt, alpha = self.final_hop(x, q)
        weights = torch.stack([*image_maps, alpha], 1)
        return HeadOutput(v_filt + q, weights, word_weights=torch.stack(word_maps, 1), regions=x)


@dataclass
class TransformerOptions:
    """The options of the ``transformer`` head (:class:`TransformerHead`)."""

    hops: int = 2  # TransformerFusion blocks, each one map, before the final hop
    heads: int = 4  # attention heads of each block (must divide the model's dim)


@register_head("channel", HopsOptions)
def _channel_head(sizes: HeadSizes, options: HopsOptions) -> VQAHead:
    return ChannelHead(sizes.dim, k_dim=sizes.k_dim, hops=options.hops)


@register_head("cross-layer", NoOptions)
def _cross_layer_head(sizes: HeadSizes, options: NoOptions) -> VQAHead:
    return CrossLayerHead(sizes.dim, k_dim=sizes.k_dim, layer_dims=sizes.layer_dims)


@register_head("coattention-independent", HopsOptions)
def _independent_head(sizes: HeadSizes, options: HopsOptions) -> VQAHead:
    return IndependentCoAttentionHead(sizes.dim, k_dim=sizes.k_dim, hops=options.hops)


@register_head("coattention-joint", HopsOptions)
def _joint_head(sizes: HeadSizes, options: HopsOptions) -> VQAHead:
    return JointCoAttentionHead(sizes.dim, k_dim=sizes.k_dim, hops=options.hops)


@register_head("coattention-parallel", NoOptions)
def _parallel_head(sizes: HeadSizes, options: NoOptions) -> VQAHead:
    return ParallelMaxHead(sizes.dim, k_dim=sizes.k_dim)


@register_head("coattention-parallel-learned", NoOptions)
def _parallel_learned_head(sizes: HeadSizes, options: NoOptions) -> VQAHead:
    return ParallelLearnedHead(sizes.dim, k_dim=sizes.k_dim)


@register_head("coattention-alternating", NoOptions)
def _alternating_head(sizes: HeadSizes, options: NoOptions) -> VQAHead:
    return AlternatingHead(sizes.dim, k_dim=sizes.k_dim)


@register_head("context-bilstm", HopsOptions)
def _bilstm_context_head(sizes: HeadSizes, options: HopsOptions) -> VQAHead:
    return BiLSTMContextHead(sizes.dim, k_dim=sizes.k_dim, hops=options.hops)


@register_head("context-self", HopsOptions)
def _self_context_head(sizes: HeadSizes, options: HopsOptions) -> VQAHead:
    return SelfContextHead(sizes.dim, k_dim=sizes.k_dim, hops=options.hops)


@register_head("transformer", TransformerOptions)
def _transformer_head(sizes: HeadSizes, options: TransformerOptions) -> VQAHead:
    return TransformerHead(sizes.dim, k_dim=sizes.k_dim, hops=options.hops, heads=options.heads)
