"""Visual question answering with a CNN grid, an LSTM question and a choice of attention head (seeds 000, 002).

The image goes through a small CNN trained from scratch; its last feature map ``(B, C, h, w)`` is
unfolded into ``N = h w`` region vectors and projected to ``d`` (seed 002's ``v_I``, stored as rows
``(B, N, d)``). The question goes through an embedding and a BiLSTM whose final forward and
backward states are concatenated (seed 002's ``v_Q``), or a one-way LSTM's final state (seed 000's
``h_Q``). A head combines them into ``phi`` and an MLP maps ``phi`` to answer logits:

- ``none``: the vanilla baseline, ``phi = mean_i v_i + v_Q`` (global average pooling);
- ``spatial``: one additive hop (seed 000), ``phi = v_filt + v_Q``;
- ``dot`` / ``cosine``: one parameter-free hop (seed 002), ``phi = v_filt + v_Q``;
- ``stacked``: K hops (seed 002, stacked attention networks); each hop's ``phi`` is the next
  hop's query; ``stacked-dot``: the same with the parameter-free dot score in every hop.

The attention modules come from :mod:`foveal.attention`; a head here only adapts their outputs.
New heads are added to :data:`VQA_HEADS` (see ``docs/vqa.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from foveal._checks import check_shape
from foveal.attention import (
    Additive,
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
    box_weights,
)
from foveal.attention.coattention import masked_mean
from foveal.attention.coords import AddCoords, add_coords
from foveal.attention.grid import flatten_grid
from foveal.registry import MODELS, Registry


class HeadOutput(NamedTuple):
    """What a VQA head returns: the fused vector and one attention map per hop (None: no attention).

    The heads of the seed 002 family (:class:`FamilyHead`) fill the optional maps too.

    Shape:
        - phi: ``(B, d)``
        - weights: ``(B, hops, N)`` or None
        - word_weights: ``(B, S, T)``, the question-word weights of each step, or None
        - channel_weights: ``(B, d)``, channel attention's weights, or None
        - layer_weights: ``(B, L)``, cross-layer attention's weight of each CNN layer, or None
        - regions: ``(B, N, d)``, the region vectors as the head saw them (contextualised,
          channel-scaled...), pooled inside the candidate boxes of pointing questions; None = ``V``
    """

    phi: Tensor
    weights: Tensor | None
    word_weights: Tensor | None = None
    channel_weights: Tensor | None = None
    layer_weights: Tensor | None = None
    regions: Tensor | None = None


class HeadFactory(Protocol):
    def __call__(self, dim: int, *, k_dim: int, hops: int) -> nn.Module: ...


VQA_HEADS: Registry[HeadFactory] = Registry("VQA attention head")
"""Head name -> ``factory(dim, *, k_dim, hops) -> module``; the module maps ``(V (B, N, d), v_Q (B, d))``
to a :class:`HeadOutput`."""


class PoolHead(nn.Module):
    """The vanilla baseline: ``phi = mean_i v_i + v_Q`` (no attention)."""

    def forward(self, V: Tensor, v_Q: Tensor, keys: Tensor | None = None) -> HeadOutput:
        pooled = V.mean(dim=1)
        return HeadOutput((pooled if v_Q.dim() == 2 else pooled.unsqueeze(1)) + v_Q, None)


class SingleHopHead(nn.Module):
    """One attention hop, ``phi = v_filt + v_Q`` (seed 002), around any ``(V, query) -> (v_filt, alpha)`` module."""

    def __init__(self, attention: nn.Module) -> None:
        super().__init__()
        self.attention = attention

    def forward(self, V: Tensor, v_Q: Tensor, keys: Tensor | None = None) -> HeadOutput:
        v_filt, alpha = self.attention(V, v_Q, keys=keys)
        return HeadOutput(v_filt + v_Q, alpha.unsqueeze(-2))


class StackedHead(nn.Module):
    """K hops of :class:`foveal.attention.StackedAttention`, which already returns the final ``phi``."""

    def __init__(self, attention: nn.Module) -> None:
        super().__init__()
        self.attention = attention

    def forward(self, V: Tensor, v_Q: Tensor, keys: Tensor | None = None) -> HeadOutput:
        phi, weights = self.attention(V, v_Q, keys=keys)
        return HeadOutput(phi, weights)


@VQA_HEADS.register("none")
def _none_head(dim: int, *, k_dim: int, hops: int) -> nn.Module:
    return PoolHead()


@VQA_HEADS.register("spatial")
def _spatial_head(dim: int, *, k_dim: int, hops: int) -> nn.Module:
    return SingleHopHead(SpatialAttention(dim, dim, k_dim, score="additive"))


@VQA_HEADS.register("dot")
def _dot_head(dim: int, *, k_dim: int, hops: int) -> nn.Module:
    return SingleHopHead(SpatialAttention(dim, dim, k_dim, score="dot"))


@VQA_HEADS.register("cosine")
def _cosine_head(dim: int, *, k_dim: int, hops: int) -> nn.Module:
    return SingleHopHead(SpatialAttention(dim, dim, k_dim, score="cosine"))


@VQA_HEADS.register("stacked")
def _stacked_head(dim: int, *, k_dim: int, hops: int) -> nn.Module:
    return StackedHead(StackedAttention(dim, k_dim=k_dim, hops=hops))


@VQA_HEADS.register("stacked-dot")
def _stacked_dot_head(dim: int, *, k_dim: int, hops: int) -> nn.Module:
    # Seed 002's parameter-free score in every hop. The additive (tanh) score is nearly linear at
    # initialisation, so the question barely changes which region wins and the hops learn to look
    # for a named colour very slowly; the product v_i * v_Q compares them from the first step.
    return StackedHead(StackedAttention(dim, k_dim=k_dim, hops=hops, score="dot"))


# --- The seed 002 family: heads that also read the question's words or the CNN's layers -------------


class FamilyHead(nn.Module):
    """Base of the heads that read more than ``(V, v_Q)``: the question's words and the CNN's layers.

    :class:`VQA` calls them as ``head(V, v_Q, words, word_mask, layers)``; a subclass registered in
    :data:`VQA_HEADS` is built as ``cls(dim, k_dim=..., hops=..., layer_dims=..., heads=...)``.

    Shape:
        - V: ``(B, N, d)``; v_Q: ``(B, d)``
        - words: ``(B, T, d)``, the question encoder's state at every word; word_mask: bool ``(B, T)``
        - layers: each CNN block's output map ``(B, C_l, h_l, w_l)``, the last one the grid of ``V``
        - output: :class:`HeadOutput`
    """

    def forward(self, V: Tensor, v_Q: Tensor, words: Tensor, word_mask: Tensor, layers: Sequence[Tensor]) -> HeadOutput:
        raise NotImplementedError


@VQA_HEADS.register("channel")
class ChannelHead(FamilyHead):
    """SCA-CNN's channel-then-spatial order: question-conditioned channel weights, then ``hops`` stacked
    hops with the dot score (see ``stacked-dot``)."""

    def __init__(self, dim: int, *, k_dim: int, hops: int, **_: object) -> None:
        super().__init__()
        self.channel = ChannelAttention(dim, k_dim=k_dim)
        self.spatial = StackedAttention(dim, k_dim=k_dim, hops=hops, score="dot")

    def forward(self, V, v_Q, words, word_mask, layers) -> HeadOutput:
        V_c, beta = self.channel(V, v_Q)
        phi, weights = self.spatial(V_c, v_Q)
        return HeadOutput(phi, weights, channel_weights=beta, regions=V_c)


@VQA_HEADS.register("cross-layer")
class CrossLayerHead(FamilyHead):
    """Attention across the CNN's layers, ``phi = output + v_Q``; one map per layer, resampled to the grid.

    Each layer's map ``alpha_l`` is area-resampled onto the last layer's grid and renormalised, so
    ``weights[:, l]`` is where layer ``l`` looked; ``layer_weights`` holds ``gamma_l``.
    """

    def __init__(self, dim: int, *, k_dim: int, hops: int, layer_dims: Sequence[int], **_: object) -> None:
        super().__init__()
        self.attention = CrossLayerAttention(dim, layer_dims=layer_dims, k_dim=k_dim)

    def forward(self, V, v_Q, words, word_mask, layers) -> HeadOutput:
        output, gamma, alphas = self.attention([flatten_grid(layer) for layer in layers], v_Q)
        grid = layers[-1].shape[-2:]
        maps = []
        for alpha, layer in zip(alphas, layers, strict=True):
            resampled = F.adaptive_avg_pool2d(alpha.view(-1, 1, *layer.shape[-2:]), grid).flatten(1)
            maps.append(resampled / resampled.sum(-1, keepdim=True).clamp_min(torch.finfo(alpha.dtype).tiny))
        return HeadOutput(output + v_Q, torch.stack(maps, 1), layer_weights=gamma)


class HopCoAttentionHead(FamilyHead):
    """``hops`` hops of attention over regions and words (:class:`foveal.attention.HopCoAttention`)."""

    joint = False

    def __init__(self, dim: int, *, k_dim: int, hops: int, **_: object) -> None:
        super().__init__()
        self.attention = HopCoAttention(dim, hops=hops, k_dim=k_dim, joint=self.joint)

    def forward(self, V, v_Q, words, word_mask, layers) -> HeadOutput:
        out = self.attention(V, words, word_mask, v_Q)
        return HeadOutput(out.output, out.weights, word_weights=out.word_weights)


@VQA_HEADS.register("coattention-independent")
class IndependentCoAttentionHead(HopCoAttentionHead):
    """Independent conditioning: per hop the question attends to the regions, the image to the words."""


@VQA_HEADS.register("coattention-joint")
class JointCoAttentionHead(HopCoAttentionHead):
    """Joint conditioning: both attentions of a hop are conditioned on the sum of the two states."""

    joint = True


class OneStepCoAttentionHead(FamilyHead):
    """A one-step co-attention module, ``phi = image + question + v_Q`` (seed 002's ``+ v_Q`` residual)."""

    def __init__(self, attention: nn.Module) -> None:
        super().__init__()
        self.attention = attention

    def forward(self, V, v_Q, words, word_mask, layers) -> HeadOutput:
        out = self.attention(V, words, word_mask)
        return HeadOutput(out.output + v_Q, out.weights, word_weights=out.word_weights)


@VQA_HEADS.register("coattention-parallel")
class ParallelMaxHead(OneStepCoAttentionHead):
    """Parallel co-attention, affinity pooled by a max (parameter-free)."""

    def __init__(self, dim: int, *, k_dim: int, hops: int, **_: object) -> None:
        super().__init__(ParallelCoAttention(dim, pool="max", k_dim=k_dim))


@VQA_HEADS.register("coattention-parallel-learned")
class ParallelLearnedHead(OneStepCoAttentionHead):
    """Parallel co-attention, affinity pooled by Lu et al.'s small network."""

    def __init__(self, dim: int, *, k_dim: int, hops: int, **_: object) -> None:
        super().__init__(ParallelCoAttention(dim, pool="learned", k_dim=k_dim))


@VQA_HEADS.register("coattention-alternating")
class AlternatingHead(OneStepCoAttentionHead):
    """Alternating co-attention: summarise the question, attend to the image, attend to the question."""

    def __init__(self, dim: int, *, k_dim: int, hops: int, **_: object) -> None:
        super().__init__(AlternatingCoAttention(dim, k_dim=k_dim))


class ContextStackedHead(StackedHead):
    """Contextualise the regions (every region sees the rest of the image), then ``hops`` stacked hops.

    The context does not depend on the question, so it runs once per picture and the hops answer all
    of a picture's questions together (the grouped layout of :class:`StackedHead`). The hops use the
    dot score for the reason given at ``stacked-dot``.
    """

    def __init__(self, context: nn.Module, dim: int, *, k_dim: int, hops: int) -> None:
        super().__init__(StackedAttention(dim, k_dim=k_dim, hops=hops, score="dot"))
        self.context = context

    def forward(self, V: Tensor, v_Q: Tensor, keys: Tensor | None = None) -> HeadOutput:
        V_c = self.context(V).output
        phi, weights = self.attention(V_c, v_Q)
        return HeadOutput(phi, weights, regions=V_c)


@VQA_HEADS.register("context-bilstm")
class BiLSTMContextHead(ContextStackedHead):
    """A BiLSTM over the grid (row-major), then stacked attention."""

    def __init__(self, dim: int, *, k_dim: int, hops: int) -> None:
        super().__init__(GridBiLSTM(dim), dim, k_dim=k_dim, hops=hops)


@VQA_HEADS.register("context-self")
class SelfContextHead(ContextStackedHead):
    """Residual self-attention over the regions, then stacked attention."""

    def __init__(self, dim: int, *, k_dim: int, hops: int) -> None:
        super().__init__(ResidualSelfAttention(dim, k_dim=k_dim), dim, k_dim=k_dim, hops=hops)


@VQA_HEADS.register("transformer")
class TransformerHead(FamilyHead):
    """``hops`` :class:`foveal.attention.TransformerFusion` blocks, then one additive read-out hop.

    The read-out query is the mean of the fused real words ``q``; ``phi = v_filt + q``. Maps: block
    ``k``'s words -> image weights averaged over heads and real words, then the read-out's map
    (``hops + 1`` maps); word weights: block ``k``'s image -> words weights averaged over heads
    and regions.
    """

    def __init__(self, dim: int, *, k_dim: int, hops: int, heads: int = 4, **_: object) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(TransformerFusion(dim, heads=heads) for _ in range(hops))
        self.readout = SpatialAttention(dim, dim, k_dim)

    def forward(self, V, v_Q, words, word_mask, layers) -> HeadOutput:
        x, y = V, words
        real = word_mask.to(V.dtype)
        image_maps, word_maps = [], []
        for block in self.blocks:
            out = block(x, y, word_mask)
            x, y = out.output, out.question
            per_word = out.weights.mean(1)  # (B, T, N)
            image_maps.append((real.unsqueeze(-1) * per_word).sum(1) / real.sum(1, keepdim=True).clamp_min(1.0))
            word_maps.append(out.image_to_words.mean((1, 2)))  # (B, T)
        q = masked_mean(y, word_mask)
        v_filt, alpha = self.readout(x, q)
        weights = torch.stack([*image_maps, alpha], 1)
        return HeadOutput(v_filt + q, weights, word_weights=torch.stack(word_maps, 1), regions=x)


class GridEncoder(nn.Module):
    """A small CNN from image to feature map: 3x3 conv, BatchNorm, ReLU blocks, 2x2 max-pooling after
    each block until the map is ``grid`` cells wide.

    Args:
        channels: output channels of each block.
        image_size: input height and width.
        grid: height and width of the output map (``image_size / grid`` must be a power of 2 reached
            within ``len(channels)`` pools).
        coords: append the pixel ``(x, y)`` coordinates to the input (CoordConv).
        stem: ``"conv"`` (3x3 blocks and pooling, receptive fields wider than a cell) or ``"patch"``:
            one ``cell x cell`` convolution with stride ``cell`` (a patch embedding), then 1x1 blocks,
            so each region vector sees only its own cell's pixels. With ``"patch"`` nothing about an
            object leaks into the cells around it, so attention that reads the object must fall on it.

    Shape:
        - image: ``(B, 3, image_size, image_size)``
        - output: ``(B, channels[-1], grid, grid)``
    """

    def __init__(
        self,
        channels: tuple[int, ...],
        *,
        image_size: int = 64,
        grid: int = 16,
        coords: bool = True,
        stem_stride: int = 1,
        stem: str = "conv",
    ) -> None:
        super().__init__()
        if stem not in ("conv", "patch"):
            raise ValueError(f"stem must be 'conv' or 'patch', got {stem!r}")
        layers: list[nn.Module] = [AddCoords()] if coords else []
        size, c_in = image_size, 3 + 2 * coords
        if stem == "patch":
            if image_size % grid:
                raise ValueError(f"a patch stem needs image_size ({image_size}) divisible by grid ({grid})")
            cell = image_size // grid
            for i, c_out in enumerate(channels):
                kernel = cell if i == 0 else 1
                layers += [nn.Conv2d(c_in, c_out, kernel, kernel, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]
                c_in = c_out
            size = grid
        for i, c_out in enumerate(channels if stem == "conv" else ()):
            stride = stem_stride if i == 0 else 1
            layers += [nn.Conv2d(c_in, c_out, 3, stride, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]
            size //= stride
            if size > grid:
                layers.append(nn.MaxPool2d(2))
                size //= 2
            c_in = c_out
        if size != grid:
            raise ValueError(f"cannot pool {image_size} px down to a {grid}-cell grid with {len(channels)} blocks")
        self.net = nn.Sequential(*layers)
        self.image_size, self.grid = image_size, grid

    def forward(self, image: Tensor) -> Tensor:
        check_shape("image", image, (None, 3, self.image_size, self.image_size))
        return self.net(image)

    @property
    def cell_size(self) -> int:
        """Pixels per grid cell: the grid covers the top-left ``grid * cell_size`` pixels (pooling floors)."""
        pools = sum(isinstance(m, nn.MaxPool2d) for m in self.net)
        return self.net[int(isinstance(self.net[0], AddCoords))].stride[0] * 2**pools

    def block_outputs(self, image: Tensor) -> list[Tensor]:
        """The output map of every block (after its pooling); the last one is :meth:`forward`'s output.

        Shape:
            - image: ``(B, 3, image_size, image_size)``
            - output: ``len(channels)`` maps ``(B, channels[l], h_l, w_l)``
        """
        check_shape("image", image, (None, 3, self.image_size, self.image_size))
        outputs, x, modules = [], image, list(self.net)
        for i, module in enumerate(modules):
            x = module(x)
            block_ends = isinstance(module, nn.MaxPool2d) or (
                isinstance(module, nn.ReLU) and not (i + 1 < len(modules) and isinstance(modules[i + 1], nn.MaxPool2d))
            )
            if block_ends:
                outputs.append(x)
        return outputs


class QuestionEncoder(nn.Module):
    """Word embeddings and an LSTM; the question vector is the final state(s).

    ``bidirectional=True`` is seed 002's BiLSTM: the final forward and final backward states are
    concatenated, each of size ``dim / 2``. Otherwise one LSTM of size ``dim`` (seed 000's ``h_Q``).
    Padding (token 0) after ``length`` is skipped (packed sequences), so it never changes the result.

    Shape:
        - question: int64 ``(B, L)``; length: int64 ``(B,)``, each in ``[1, L]``
        - output: ``(B, dim)``
    """

    def __init__(self, vocab_size: int, dim: int, *, embed_dim: int = 32, bidirectional: bool = True) -> None:
        super().__init__()
        if bidirectional and dim % 2:
            raise ValueError(f"a BiLSTM question vector needs an even dim, got {dim}")
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        hidden = dim // 2 if bidirectional else dim
        self.lstm = nn.LSTM(embed_dim, hidden, batch_first=True, bidirectional=bidirectional)

    def forward(self, question: Tensor, length: Tensor) -> Tensor:
        sizes = check_shape("question", question, ("B", "L"))
        check_shape("length", length, ("B",), sizes)
        packed = pack_padded_sequence(self.embed(question), length.cpu(), batch_first=True, enforce_sorted=False)
        _, (h_n, _) = self.lstm(packed)  # h_n: (directions, B, hidden); [0] forward, [1] backward
        return torch.cat(list(h_n), dim=-1)

    def states(self, question: Tensor, length: Tensor) -> QuestionStates:
        """The question vector of :meth:`forward` and the LSTM's state at every word.

        Shape:
            - question: int64 ``(B, L)``; length: int64 ``(B,)``
            - output: :class:`QuestionStates`, vector ``(B, dim)``, words ``(B, L, dim)`` (zero after
              ``length``; BiLSTM: forward then backward state), mask bool ``(B, L)``
        """
        sizes = check_shape("question", question, ("B", "L"))
        check_shape("length", length, ("B",), sizes)
        packed = pack_padded_sequence(self.embed(question), length.cpu(), batch_first=True, enforce_sorted=False)
        outputs, (h_n, _) = self.lstm(packed)
        words, _ = pad_packed_sequence(outputs, batch_first=True, total_length=question.shape[1])
        mask = torch.arange(question.shape[1], device=question.device) < length.unsqueeze(1)
        return QuestionStates(torch.cat(list(h_n), dim=-1), words, mask)


class QuestionStates(NamedTuple):
    """The question as one vector (``v_Q``) and as one state per word, with the real-word mask.

    Shape:
        - vector: ``(B, dim)``; words: ``(B, L, dim)``; mask: bool ``(B, L)``, True = real word
    """

    vector: Tensor
    words: Tensor
    mask: Tensor


class VQAOutput(NamedTuple):
    """The answer logits and every map the head computed.

    Shape:
        - logits: ``(B, num_answers)``
        - attention: ``(B, hops, N)`` (one map per hop over the ``N = h w`` grid cells, row-major),
          or None for the ``none`` head
        - word_weights: ``(B, S, T)``, weights over the question's words per step, or None
        - channel_weights: ``(B, dim)`` for the ``channel`` head, else None
        - layer_weights: ``(B, L)`` for the ``cross-layer`` head, else None
        - candidate_logits: ``(B, K)``, a score per candidate box when ``boxes`` were given, else None
    """

    logits: Tensor
    attention: Tensor | None
    word_weights: Tensor | None = None
    channel_weights: Tensor | None = None
    layer_weights: Tensor | None = None
    candidate_logits: Tensor | None = None


GROUPED_HEADS = (PoolHead, SingleHopHead, StackedHead)
"""Heads that accept ``v_Q`` as ``(I, n, d)``: ``n`` questions about each of ``I`` pictures."""


def _slot_in_picture(image_index: Tensor, pictures: int) -> Tensor:
    """Each question's position among its picture's questions: ``[0, 0, 1, 1, 0] -> [0, 1, 0, 1, 2]``."""
    order = torch.argsort(image_index, stable=True)
    counts = torch.bincount(image_index, minlength=pictures)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.empty_like(image_index)
    slot[order] = torch.arange(len(image_index), device=image_index.device) - starts[image_index[order]]
    return slot


@MODELS.register("vqa")
class VQA(nn.Module):
    """CNN grid + LSTM question + attention head + answer MLP (seeds 000 and 002).

    Args:
        vocab_size: question vocabulary size (token 0 is padding).
        num_answers: number of answer classes.
        head: a name in :data:`VQA_HEADS`: ``none``, ``spatial``, ``dot``, ``cosine``, ``stacked``, and
            the seed 002 family: ``channel``, ``cross-layer``, ``coattention-independent``,
            ``coattention-joint``, ``coattention-parallel``, ``coattention-parallel-learned``,
            ``coattention-alternating``, ``context-bilstm``, ``context-self``, ``transformer``.
        hops: attention hops of the ``stacked`` head (and of ``channel``, ``coattention-independent``
            and ``-joint``, ``context-*``); transformer blocks of ``transformer``.
        dim: ``d``, the size of region vectors, ``v_Q`` and ``phi``.
        k_dim: joint-embedding size of the additive score.
        channels: CNN block widths (see :class:`GridEncoder`).
        grid: the CNN output map is ``grid x grid`` regions.
        stem: the CNN's first layers, ``"conv"`` or ``"patch"`` (see :class:`GridEncoder`).
        keys: what the attention scores read for each region (seed 001's operator lets keys differ
            from values): ``"values"`` (the seed's model: the region vectors themselves) or
            ``"patch"``: a separate per-cell encoder (:class:`GridEncoder` with ``stem="patch"`` and
            widths ``key_channels``) that sees only the cell's own pixels, so the score can say
            *what is in this cell* but not what is near it, while the values keep the CNN's wider
            receptive field. Heads ``spatial``, ``dot``, ``cosine``, ``stacked``.
        key_channels: block widths of the ``"patch"`` key encoder.
        embed_dim: word-embedding size.
        bidirectional: BiLSTM question encoder (seed 002) or one-way LSTM (seed 000).
        mlp_hidden: hidden width of the answer MLP.
        image_size: input height and width.
        pointing: add the candidate-box scorer (pass ``boxes`` to :meth:`forward`).
        heads: attention heads of the ``transformer`` head.
        point_by_attention: add to each candidate's score the log of the last attention map's mean
            weight inside its box (heads with attention only), so a pointing answer is where the model
            looked and its loss trains the attention directly.

    Pointing (Visual7W "which" answers): each candidate box pools the regions the head saw with
    :func:`foveal.attention.box_weights`, and an additive score compares it with ``phi``:
    ``s_k = w^T tanh(W_c c_k + W_p phi + b)``; the loss is a cross-entropy over the ``K`` candidates.
    With ``point_by_attention``, ``s_k + log(sum_i B_ki alpha_i)`` where ``B_k`` are the box's pooling
    weights and ``alpha`` the last map: without it the attention learns only through the answer, and
    from scratch it never found the named object on ``shapes`` (docs/vqa.md).

    Shape:
        - image: ``(B, 3, image_size, image_size)``
        - question: int64 ``(B, L)`` padded with 0; length: int64 ``(B,)``
        - image_index: optional int64 ``(B,)``; then ``image`` is ``(I, 3, size, size)`` and question
          ``b`` is about ``image[image_index[b]]``
        - boxes: optional float ``(B, K, 4)``, candidate boxes ``(x0, y0, x1, y1)`` in pixels
        - output: :class:`VQAOutput`, logits ``(B, num_answers)``, attention ``(B, hops, grid * grid)``

    Convention:
        Attention weights index the grid row-major (``i = row * grid + col``), row 0 at the top of
        the image, as :func:`foveal.attention.grid.flatten_grid` unfolds it. Boxes are pixels,
        half-open, ``x`` right and ``y`` down; the grid covers the top-left ``grid * cell_size``
        pixels of the image (max-pooling floors odd sizes), and boxes are pooled on that extent.

    Example:
        >>> model = VQA(20, 13, head="stacked", hops=2, dim=16, k_dim=8, channels=(4, 4), grid=16)
        >>> out = model(torch.randn(2, 3, 64, 64), torch.tensor([[3, 4, 0], [5, 6, 7]]), torch.tensor([2, 3]))
        >>> out.logits.shape, out.attention.shape
        (torch.Size([2, 13]), torch.Size([2, 2, 256]))
        >>> model = VQA(20, 12, head="coattention-alternating", dim=16, k_dim=8, channels=(4, 4), pointing=True)
        >>> out = model(torch.randn(2, 3, 64, 64), torch.tensor([[3, 4, 0], [5, 6, 7]]), torch.tensor([2, 3]),
        ...             boxes=torch.tensor([[[0.0, 0, 8, 8], [8, 8, 16, 16], [0, 8, 8, 16], [40, 40, 50, 50]]] * 2))
        >>> out.candidate_logits.shape, out.word_weights.shape
        (torch.Size([2, 4]), torch.Size([2, 2, 3]))
    """

    def __init__(
        self,
        vocab_size: int,
        num_answers: int,
        *,
        head: str = "stacked",
        hops: int = 2,
        dim: int = 64,
        k_dim: int = 64,
        channels: tuple[int, ...] = (16, 32, 32, 32),
        grid: int = 16,
        coords: bool = True,
        grid_coords: bool = False,
        stem_stride: int = 1,
        stem: str = "conv",
        keys: str = "values",
        key_channels: tuple[int, ...] = (32, 32),
        embed_dim: int = 32,
        bidirectional: bool = True,
        mlp_hidden: int = 64,
        image_size: int = 64,
        pointing: bool = False,
        heads: int = 4,
        point_by_attention: bool = False,
    ) -> None:
        super().__init__()
        self.head_name, self.grid, self.grid_coords = head, grid, grid_coords
        self.image_encoder = GridEncoder(
            tuple(channels), image_size=image_size, grid=grid, coords=coords, stem_stride=stem_stride, stem=stem
        )
        self.project = nn.Linear(channels[-1] + 2 * grid_coords, dim)
        self.question_encoder = QuestionEncoder(vocab_size, dim, embed_dim=embed_dim, bidirectional=bidirectional)
        factory = VQA_HEADS.get(head)
        if isinstance(factory, type) and issubclass(factory, FamilyHead):
            self.head = factory(dim, k_dim=k_dim, hops=hops, layer_dims=tuple(channels), heads=heads)
        else:
            self.head = factory(dim, k_dim=k_dim, hops=hops)
        if keys not in ("values", "patch"):
            raise ValueError(f"keys must be 'values' or 'patch', got {keys!r}")
        self.key_encoder: GridEncoder | None = None
        if keys == "patch":
            if isinstance(self.head, FamilyHead | PoolHead | ContextStackedHead):
                raise ValueError(f"keys='patch' is not supported by the {head!r} head")
            key_channels = tuple(key_channels)
            self.key_encoder = GridEncoder(key_channels, image_size=image_size, grid=grid, coords=coords, stem="patch")
            self.key_project = nn.Linear(key_channels[-1], dim)
        self.classifier = nn.Sequential(nn.Linear(dim, mlp_hidden), nn.ReLU(), nn.Linear(mlp_hidden, num_answers))
        self.pointer = Additive(dim, dim, k_dim) if pointing else None
        self.point_by_attention = point_by_attention
        self.covered = grid * self.image_encoder.cell_size  # pixels the grid covers, per side

    def forward(
        self,
        image: Tensor,
        question: Tensor,
        length: Tensor,
        image_index: Tensor | None = None,
        boxes: Tensor | None = None,
    ) -> VQAOutput:
        family = isinstance(self.head, FamilyHead)
        layers = self.image_encoder.block_outputs(image) if family else [self.image_encoder(image)]
        grid_map = add_coords(layers[-1]) if self.grid_coords else layers[-1]
        V = self.project(flatten_grid(grid_map))  # (I, N, d)
        keys = None if self.key_encoder is None else self.key_project(flatten_grid(self.key_encoder(image)))
        v_Q = None
        if image_index is not None and isinstance(self.head, GROUPED_HEADS):
            # Several questions per picture: the head answers them all against the picture's regions in
            # one pass, on a (pictures, questions per picture) layout, instead of copying the regions
            # once per question.
            slot = _slot_in_picture(image_index, V.shape[0])
            questions = self.question_encoder(question, length)
            v_Q = questions.new_zeros(V.shape[0], int(slot.max()) + 1, questions.shape[-1])
            v_Q[image_index, slot] = questions
            out = self.head(V, v_Q) if keys is None else self.head(V, v_Q, keys)
            weights = None if out.weights is None else out.weights[image_index, slot]
            regions = None if out.regions is None or boxes is None else out.regions[image_index]
            out = HeadOutput(out.phi[image_index, slot], weights, regions=regions)
            V = V[image_index] if boxes is not None else V  # pointing pools each question's regions
        elif image_index is not None:  # heads that take one question per row: copy the regions
            V = V[image_index]  # (B, N, d)
            keys = None if keys is None else keys[image_index]
            layers = [layer[image_index] for layer in layers] if family else layers
        if family:
            v_Q, words, word_mask = self.question_encoder.states(question, length)
            out = self.head(V, v_Q, words, word_mask, layers)
        elif v_Q is None:
            v_Q = self.question_encoder(question, length)
            out = self.head(V, v_Q) if keys is None else self.head(V, v_Q, keys)
        candidate_logits = None
        if boxes is not None:
            if self.pointer is None:
                raise ValueError("boxes given to a VQA model built without pointing=True")
            check_shape("boxes", boxes, (V.shape[0], None, 4))
            regions = V if out.regions is None else out.regions
            pool = box_weights(boxes, (self.covered, self.covered), (self.grid, self.grid))  # (B, K, N)
            candidate_logits = self.pointer(out.phi.unsqueeze(1), pool @ regions).squeeze(1)  # (B, K)
            if self.point_by_attention and out.weights is not None:
                mass = (pool * out.weights[:, -1:]).sum(-1)  # (B, K): the last map's mean weight in each box
                candidate_logits = candidate_logits + mass.clamp_min(torch.finfo(mass.dtype).tiny).log()
        return VQAOutput(
            self.classifier(out.phi),
            out.weights,
            out.word_weights,
            out.channel_weights,
            out.layer_weights,
            candidate_logits,
        )
