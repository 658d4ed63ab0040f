"""The two encoders of :class:`foveal.models.vqa.VQA`: a CNN from image to a grid of regions, an LSTM
from question to a vector (and a state per word)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple, cast, overload

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from foveal._checks import check_choice, check_index, check_int, check_ints, check_shape, tracing
from foveal.attention.coords import AddCoords
from foveal.errors import FovealError


def _first(size: Any) -> int:
    """A layer's stride along the rows: the int, or the first of its pair."""
    return int(size if isinstance(size, int) else size[0])


class GridEncoder(nn.Module):
    """A small CNN from image to feature map: 3x3 conv, BatchNorm, ReLU blocks, 2x2 max-pooling after
    each block until the map is ``grid`` cells wide.

    Args:
        channels: output channels of each block.
        image_size: input height and width.
        grid: height and width of the output map (``image_size / grid`` must be a power of 2 reached
            within ``len(channels)`` pools; for ``"patch"`` and ``"pixels"``, cells of ``image_size // grid``
            pixels must make ``grid`` cells, the last ``image_size mod grid`` rows and columns left over as
            pooling leaves them).
        coords: append the pixel ``(x, y)`` coordinates to the input (CoordConv).
        stem: ``"conv"`` (3x3 blocks and pooling, receptive fields wider than a cell) or ``"patch"``:
            one ``cell x cell`` convolution with stride ``cell`` (a patch embedding), then 1x1 blocks,
            so each region vector sees only its own cell's pixels. With ``"patch"`` nothing about an
            object leaks into the cells around it, so attention that reads the object must fall on it.
            ``"pixels"``: 1x1 blocks on every pixel, then each cell's mean: a region vector says what
            its cell holds (how much of it is red, how much is background) but not where in the cell,
            so no score can prefer one edge of an object to its inside. Give it ``coords=False``: a
            pixel's coordinates would tell the blocks where in the cell it lies.

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
        check_choice("stem", stem, ("conv", "patch", "pixels"))
        check_ints(image_size=image_size, grid=grid, stem_stride=stem_stride)
        if not channels:
            raise FovealError("channels: expected at least one block's width, got ()")
        for c in channels:
            check_int("channels", c)
        layers: list[nn.Module] = [AddCoords()] if coords else []
        size, c_in = image_size, 3 + 2 * coords
        if stem in ("patch", "pixels"):
            cell = image_size // grid
            # like the pooling of the conv stem, the cells cover the top-left grid * cell pixels
            if cell < 1 or image_size // cell != grid:
                raise FovealError(
                    f"a {stem} stem cannot cut {image_size} px into {grid} cells of whole pixels: "
                    f"{image_size} // {grid} = {cell} px cells make {image_size // max(cell, 1)}"
                )
            for i, c_out in enumerate(channels):
                kernel = cell if i == 0 and stem == "patch" else 1
                layers += [nn.Conv2d(c_in, c_out, kernel, kernel, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]
                c_in = c_out
            if stem == "pixels":
                layers.append(nn.AvgPool2d(cell))
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
            raise FovealError(f"cannot pool {image_size} px down to a {grid}-cell grid with {len(channels)} blocks")
        self.net = nn.Sequential(*layers)
        self.image_size, self.grid = image_size, grid

    def forward(self, image: Tensor) -> Tensor:
        check_shape("image", image, (None, 3, self.image_size, self.image_size))
        return self.net(image)

    @property
    def cell_size(self) -> int:
        """Pixels per grid cell: the grid covers the top-left ``grid * cell_size`` pixels (pooling floors)."""
        stem = self.net[int(isinstance(self.net[0], AddCoords))]
        size = _first(cast(nn.Conv2d, stem).stride)
        for module in self.net:
            if isinstance(module, (nn.MaxPool2d, nn.AvgPool2d)):
                size *= _first(module.stride)
        return size

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


class QuestionStates(NamedTuple):
    """The question as one vector (``v_Q``) and as one state per word, with the real-word mask.

    Shape:
        - vector: ``(B, dim)``; words: ``(B, L, dim)``; mask: bool ``(B, L)``, True = real word
    """

    vector: Tensor
    words: Tensor
    mask: Tensor


class QuestionEncoder(nn.Module):
    """Word embeddings and an LSTM; the question vector is the final state(s).

    ``bidirectional=True`` is seed 002's BiLSTM: the final forward and final backward states are
    concatenated, each of size ``dim / 2``. Otherwise one LSTM of size ``dim`` (seed 000's ``h_Q``).
    Padding (token 0) after ``length`` is skipped (packed sequences; a traced graph masks it instead, with
    the same results), so it never changes the result.

    Shape:
        - question: int64 ``(B, L)``; length: int64 ``(B,)``, each in ``[1, L]``
        - output: ``(B, dim)``
    """

    def __init__(self, vocab_size: int, dim: int, *, embed_dim: int = 32, bidirectional: bool = True) -> None:
        super().__init__()
        check_ints(vocab_size=vocab_size, dim=dim, embed_dim=embed_dim)
        if bidirectional and dim % 2:
            raise FovealError(f"a BiLSTM question vector needs an even dim, got {dim}")
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        hidden = dim // 2 if bidirectional else dim
        self.lstm = nn.LSTM(embed_dim, hidden, batch_first=True, bidirectional=bidirectional)
        self._lstm_weights = dict(self.lstm.named_parameters())

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> QuestionEncoder:
        # A conversion (.to, .double) may give the LSTM new parameters: the masked loop reads them
        # from here, since torch.compile cannot look inside an nn.LSTM.
        module = super()._apply(fn, recurse)
        self._lstm_weights = dict(self.lstm.named_parameters())
        return module

    def _check(self, question: Tensor, length: Tensor) -> None:
        """Shapes, token ids within the vocabulary, and lengths from 1 to the padded length."""
        sizes = check_shape("question", question, ("B", "L"))
        check_shape("length", length, ("B",), sizes)
        check_index("question", question, 0, self.embed.num_embeddings - 1)
        check_index("length", length, 1, question.shape[1])

    def forward(self, question: Tensor, length: Tensor) -> Tensor:
        self._check(question, length)
        _, h_n = self._run(question, length, words=False)  # h_n: (directions, B, hidden); [0] forward, [1] backward
        return torch.cat(list(h_n), dim=-1)

    @overload
    def _run(self, question: Tensor, length: Tensor, words: Literal[True]) -> tuple[Tensor, Tensor]: ...

    @overload
    def _run(self, question: Tensor, length: Tensor, words: bool) -> tuple[Tensor | None, Tensor]: ...

    def _run(self, question: Tensor, length: Tensor, words: bool) -> tuple[Tensor | None, Tensor]:
        """The LSTM's state at every word ``(B, L, directions * hidden)``, zero after ``length`` (None
        unless ``words``), and its final states ``(directions, B, hidden)``."""
        if tracing() or question.shape[0] == 0:  # packing takes neither a traced graph nor an empty batch
            return self._masked(question, length)
        embedded = self.embed(question)
        # Packed sequences skip the padding; packing reads the lengths on the host, so a traced graph
        # takes the masked loop instead.
        packed = pack_padded_sequence(embedded, length.cpu(), batch_first=True, enforce_sorted=False)
        outputs, (h_n, _) = self.lstm(packed)
        if not words:
            return None, h_n
        return pad_packed_sequence(outputs, batch_first=True, total_length=question.shape[1])[0], h_n

    def _masked(self, question: Tensor, length: Tensor) -> tuple[Tensor, Tensor]:
        """The packed LSTM's results from a loop over every position, with the lengths as a mask.

        A state stops changing at its question's end; the backward direction reads each question's
        words last to first (``length - 1 - t``), then its states are put back in word order. One
        graph for every batch of lengths, with the same weights (and results) as the packed path.
        The input gates ``W_ih e_w + b`` are computed once per vocabulary word and looked up per token:
        the vocabulary is far smaller than a batch's tokens.
        """
        batch, words = question.shape
        position = torch.arange(words, device=question.device)
        real = position < length.unsqueeze(1)  # (B, L)
        # word t of the reversed question; padding stays where it is (the index is its own inverse)
        reverse = torch.where(real, length.unsqueeze(1) - 1 - position, position)
        weights = self._lstm_weights
        outputs, finals = [], []
        for direction in range(2 if "weight_ih_l0_reverse" in weights else 1):
            suffix = "_reverse" if direction else ""
            weight_ih, weight_hh = weights[f"weight_ih_l0{suffix}"], weights[f"weight_hh_l0{suffix}"]
            bias = weights[f"bias_ih_l0{suffix}"] + weights[f"bias_hh_l0{suffix}"]
            tokens = question.gather(1, reverse) if direction else question
            gates_in = torch.addmm(bias, self.embed.weight, weight_ih.t())  # (vocabulary, 4 hidden)
            h = c = gates_in.new_zeros(batch, weight_hh.shape[1])
            states = []
            for t in range(words):
                # The look-up is read inside the gates' fused kernel: no (B, L, 4 hidden) copy is written
                gates = F.embedding(tokens[:, t], gates_in) + h @ weight_hh.t()
                i, f, g, o = gates.chunk(4, dim=1)  # nn.LSTM's order
                c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h_next = torch.sigmoid(o) * torch.tanh(c_next)
                keep = real[:, t : t + 1]
                h, c = torch.where(keep, h_next, h), torch.where(keep, c_next, c)
                states.append(torch.where(keep, h_next, 0.0))
            state_seq = torch.stack(states, dim=1)  # (B, L, hidden), in reading order
            if direction:
                state_seq = state_seq.gather(1, reverse.unsqueeze(-1).expand_as(state_seq))
            outputs.append(state_seq)
            finals.append(h)
        return torch.cat(outputs, dim=-1), torch.stack(finals)

    def states(self, question: Tensor, length: Tensor) -> QuestionStates:
        """The question vector of :meth:`forward` and the LSTM's state at every word.

        Shape:
            - question: int64 ``(B, L)``; length: int64 ``(B,)``
            - output: :class:`QuestionStates`, vector ``(B, dim)``, words ``(B, L, dim)`` (zero after
              ``length``; BiLSTM: forward then backward state), mask bool ``(B, L)``
        """
        self._check(question, length)
        words, h_n = self._run(question, length, words=True)
        mask = torch.arange(question.shape[1], device=question.device) < length.unsqueeze(1)
        return QuestionStates(torch.cat(list(h_n), dim=-1), words, mask)
