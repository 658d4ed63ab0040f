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
  hop's query.

The attention modules come from :mod:`foveal.attention`; a head here only adapts their outputs.
New heads are added to :data:`VQA_HEADS` (see ``docs/vqa.md``).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence

from foveal._checks import check_shape
from foveal.attention import SpatialAttention, StackedAttention
from foveal.attention.coords import AddCoords
from foveal.attention.grid import flatten_grid
from foveal.registry import MODELS, Registry


class HeadOutput(NamedTuple):
    """What a VQA head returns: the fused vector and one attention map per hop (None: no attention).

    Shape:
        - phi: ``(B, d)``
        - weights: ``(B, hops, N)`` or None
    """

    phi: Tensor
    weights: Tensor | None


class HeadFactory(Protocol):
    def __call__(self, dim: int, *, k_dim: int, hops: int) -> nn.Module: ...


VQA_HEADS: Registry[HeadFactory] = Registry("VQA attention head")
"""Head name -> ``factory(dim, *, k_dim, hops) -> module``; the module maps ``(V (B, N, d), v_Q (B, d))``
to a :class:`HeadOutput`."""


class PoolHead(nn.Module):
    """The vanilla baseline: ``phi = mean_i v_i + v_Q`` (no attention)."""

    def forward(self, V: Tensor, v_Q: Tensor) -> HeadOutput:
        return HeadOutput(V.mean(dim=1) + v_Q, None)


class SingleHopHead(nn.Module):
    """One attention hop, ``phi = v_filt + v_Q`` (seed 002), around any ``(V, query) -> (v_filt, alpha)`` module."""

    def __init__(self, attention: nn.Module) -> None:
        super().__init__()
        self.attention = attention

    def forward(self, V: Tensor, v_Q: Tensor) -> HeadOutput:
        v_filt, alpha = self.attention(V, v_Q)
        return HeadOutput(v_filt + v_Q, alpha.unsqueeze(1))


class StackedHead(nn.Module):
    """K hops of :class:`foveal.attention.StackedAttention`, which already returns the final ``phi``."""

    def __init__(self, attention: nn.Module) -> None:
        super().__init__()
        self.attention = attention

    def forward(self, V: Tensor, v_Q: Tensor) -> HeadOutput:
        phi, weights = self.attention(V, v_Q)
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


class GridEncoder(nn.Module):
    """A small CNN from image to feature map: 3x3 conv, BatchNorm, ReLU blocks, 2x2 max-pooling after
    each block until the map is ``grid`` cells wide.

    Args:
        channels: output channels of each block.
        image_size: input height and width.
        grid: height and width of the output map (``image_size / grid`` must be a power of 2 reached
            within ``len(channels)`` pools).
        coords: append the pixel ``(x, y)`` coordinates to the input (CoordConv).

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
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [AddCoords()] if coords else []
        size, c_in = image_size, 3 + 2 * coords
        for i, c_out in enumerate(channels):
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


class VQAOutput(NamedTuple):
    """``(logits, attention)``.

    Shape:
        - logits: ``(B, num_answers)``
        - attention: ``(B, hops, N)`` (one map per hop over the ``N = h w`` grid cells, row-major),
          or None for the ``none`` head
    """

    logits: Tensor
    attention: Tensor | None


@MODELS.register("vqa")
class VQA(nn.Module):
    """CNN grid + LSTM question + attention head + answer MLP (seeds 000 and 002).

    Args:
        vocab_size: question vocabulary size (token 0 is padding).
        num_answers: number of answer classes.
        head: a name in :data:`VQA_HEADS`: ``none``, ``spatial``, ``dot``, ``cosine``, ``stacked``.
        hops: attention hops of the ``stacked`` head.
        dim: ``d``, the size of region vectors, ``v_Q`` and ``phi``.
        k_dim: joint-embedding size of the additive score.
        channels: CNN block widths (see :class:`GridEncoder`).
        grid: the CNN output map is ``grid x grid`` regions.
        coords: CoordConv input channels.
        embed_dim: word-embedding size.
        bidirectional: BiLSTM question encoder (seed 002) or one-way LSTM (seed 000).
        mlp_hidden: hidden width of the answer MLP.
        image_size: input height and width.

    Shape:
        - image: ``(B, 3, image_size, image_size)``
        - question: int64 ``(B, L)`` padded with 0; length: int64 ``(B,)``
        - image_index: optional int64 ``(B,)``; then ``image`` is ``(I, 3, size, size)`` and question
          ``b`` is about ``image[image_index[b]]``
        - output: :class:`VQAOutput`, logits ``(B, num_answers)``, attention ``(B, hops, grid * grid)``

    Convention:
        Attention weights index the grid row-major (``i = row * grid + col``), row 0 at the top of
        the image, as :func:`foveal.attention.grid.flatten_grid` unfolds it.

    Example:
        >>> model = VQA(20, 13, head="stacked", hops=2, dim=16, k_dim=8, channels=(4, 4), grid=16)
        >>> out = model(torch.randn(2, 3, 64, 64), torch.tensor([[3, 4, 0], [5, 6, 7]]), torch.tensor([2, 3]))
        >>> out.logits.shape, out.attention.shape
        (torch.Size([2, 13]), torch.Size([2, 2, 256]))
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
        stem_stride: int = 1,
        embed_dim: int = 32,
        bidirectional: bool = True,
        mlp_hidden: int = 64,
        image_size: int = 64,
    ) -> None:
        super().__init__()
        self.head_name, self.grid = head, grid
        self.image_encoder = GridEncoder(
            tuple(channels), image_size=image_size, grid=grid, coords=coords, stem_stride=stem_stride
        )
        self.project = nn.Linear(channels[-1], dim)
        self.question_encoder = QuestionEncoder(vocab_size, dim, embed_dim=embed_dim, bidirectional=bidirectional)
        self.head = VQA_HEADS.get(head)(dim, k_dim=k_dim, hops=hops)
        self.classifier = nn.Sequential(nn.Linear(dim, mlp_hidden), nn.ReLU(), nn.Linear(mlp_hidden, num_answers))

    def forward(self, image: Tensor, question: Tensor, length: Tensor, image_index: Tensor | None = None) -> VQAOutput:
        V = self.project(flatten_grid(self.image_encoder(image)))  # (I, N, d)
        if image_index is not None:  # several questions per picture: encode each picture once
            V = V[image_index]  # (B, N, d)
        v_Q = self.question_encoder(question, length)  # (B, d)
        phi, weights = self.head(V, v_Q)
        return VQAOutput(self.classifier(phi), weights)
