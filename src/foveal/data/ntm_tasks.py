"""The algorithmic tasks of the Neural Turing Machine paper (Graves et al. 2014, sec. 4).

Every task makes batches of binary sequences in which all sequences share one length, so a batch
is two dense tensors and the model runs the time loop once for the whole batch. The targets are
the last ``T_out`` steps of the model's output (everything before is input phase and not scored).

========================  ==========================================  =================================
task                      input (per step)                             target (last ``T_out`` steps)
========================  ==========================================  =================================
:class:`Copy`             ``L`` random ``W``-bit vectors, then one     the ``L`` vectors
                          delimiter step (own channel), then ``L``
                          blank steps
:class:`RepeatCopy`       ``L`` vectors, then a delimiter step that    the ``L`` vectors ``N`` times, then
                          also carries ``N`` (normalised) on its own   an end marker on its own channel
                          channel, then ``L N + 1`` blank steps
:class:`AssociativeRecall`  ``n`` items of ``item_len`` ``W``-bit      the item that followed the query
                          vectors, each after an item-delimiter step;
                          then a query-delimiter step, one of the
                          first ``n - 1`` items, a query-delimiter
                          step, and ``item_len`` blank steps
:class:`PrioritySort`     ``n_in`` vectors, each with a priority in    the ``n_out`` highest-priority
                          ``[-1, 1]`` on its own channel, then a       vectors, highest first
                          delimiter step, then ``n_out`` blank steps
========================  ==========================================  =================================

A batch is drawn from a :class:`torch.Generator`; :class:`TaskDataset` turns indices into
batches with a per-batch seed (so a ``DataLoader`` may shuffle and still every batch is
reproducible), and :class:`SequenceSet` is a fixed set of single sequences for evaluation.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import torch
from torch import Tensor
from torch.utils.data import Dataset

from foveal.errors import FovealError


class NTMBatch(NamedTuple):
    """Inputs of every step and the targets of the last ``T_out`` steps; one length per batch."""

    inputs: Tensor  # (B, T, input_size), float 0/1 (and the normalised count or priority channels)
    targets: Tensor  # (B, T_out, output_size), float 0/1


def _bits(shape: tuple[int, ...], generator: torch.Generator) -> Tensor:
    return torch.randint(0, 2, shape, generator=generator).float()


def _randint(low: int, high: int, generator: torch.Generator) -> int:
    """A uniform integer in ``[low, high]`` (both ends included)."""
    return int(torch.randint(low, high + 1, (1,), generator=generator))


@dataclass
class Copy:
    """Copy task: read ``L`` vectors, then write them out again (paper sec. 4.1).

    Args:
        width: bits per vector (8 in the paper).
        min_len, max_len: the training range of ``L`` (1-20 in the paper).
        blank_rate: the chance that a vector is all zeros, beyond the ``2^-width`` of random bits.
            An all-zero vector, once written, reads like a row never written: training on more of
            them teaches a model to tell the two apart (the paper's task is ``blank_rate=0``).

    Shape:
        - inputs: ``(B, 2L + 1, width + 1)``; channel ``width`` is the delimiter
        - targets: ``(B, L, width)``

    Example:
        >>> b = Copy(width=3).sample(2, torch.Generator().manual_seed(0), length=4)
        >>> b.inputs.shape, b.targets.shape
        (torch.Size([2, 9, 4]), torch.Size([2, 4, 3]))
        >>> bool((b.inputs[:, :4, :3] == b.targets).all()), b.inputs[0, 4].tolist()
        (True, [0.0, 0.0, 0.0, 1.0])
    """

    width: int = 8
    min_len: int = 1
    max_len: int = 20
    blank_rate: float = 0.0

    @property
    def input_size(self) -> int:
        return self.width + 1

    @property
    def output_size(self) -> int:
        return self.width

    def sample(self, batch_size: int, generator: torch.Generator, *, length: int | None = None) -> NTMBatch:
        L = _randint(self.min_len, self.max_len, generator) if length is None else length
        seq = _bits((batch_size, L, self.width), generator)
        if self.blank_rate:  # drawn only when asked for, so the paper's task keeps its random stream
            blank = torch.rand(batch_size, L, 1, generator=generator) < self.blank_rate
            seq = seq.masked_fill(blank, 0.0)
        inputs = torch.zeros(batch_size, 2 * L + 1, self.width + 1)
        inputs[:, :L, : self.width] = seq
        inputs[:, L, self.width] = 1.0
        return NTMBatch(inputs, seq)

    def levels(self, start: int, step: int) -> list[Copy]:
        """A curriculum ending on this task: maximum lengths ``start``, ``start + step``, ... below ``max_len``."""
        return [replace(self, max_len=m) for m in range(min(start, self.max_len), self.max_len, step)] + [self]


@dataclass
class RepeatCopy:
    """Repeat copy: read ``L`` vectors and a count ``N``, write them ``N`` times, then an end mark.

    The count is given on its own channel, normalised to mean 0 and variance 1 over the training
    range of ``N`` (as in the paper, sec. 4.2). Paper ranges: ``L`` and ``N`` in 1-10.

    Shape:
        - inputs: ``(B, L + 1 + L N + 1, width + 2)``; channel ``width`` is the delimiter,
          ``width + 1`` the count
        - targets: ``(B, L N + 1, width + 1)``; channel ``width`` is the end marker

    Example:
        >>> b = RepeatCopy(width=3).sample(2, torch.Generator().manual_seed(0), length=2, repeats=3)
        >>> b.inputs.shape, b.targets.shape
        (torch.Size([2, 10, 5]), torch.Size([2, 7, 4]))
        >>> bool((b.targets[:, 4:6, :3] == b.inputs[:, :2, :3]).all()), b.targets[0, -1].tolist()
        (True, [0.0, 0.0, 0.0, 1.0])
    """

    width: int = 8
    min_len: int = 1
    max_len: int = 10
    min_repeats: int = 1
    max_repeats: int = 10

    @property
    def input_size(self) -> int:
        return self.width + 2

    @property
    def output_size(self) -> int:
        return self.width + 1

    def normalise_repeats(self, repeats: int) -> float:
        """The count channel's value: ``(N - mean) / std`` of the uniform training range of ``N``."""
        n = self.max_repeats - self.min_repeats + 1
        mean = (self.min_repeats + self.max_repeats) / 2
        std = ((n * n - 1) / 12) ** 0.5 if n > 1 else 1.0
        return (repeats - mean) / std

    def sample(
        self, batch_size: int, generator: torch.Generator, *, length: int | None = None, repeats: int | None = None
    ) -> NTMBatch:
        L = _randint(self.min_len, self.max_len, generator) if length is None else length
        N = _randint(self.min_repeats, self.max_repeats, generator) if repeats is None else repeats
        seq = _bits((batch_size, L, self.width), generator)
        out_len = L * N + 1
        inputs = torch.zeros(batch_size, L + 1 + out_len, self.width + 2)
        inputs[:, :L, : self.width] = seq
        inputs[:, L, self.width] = 1.0
        inputs[:, L, self.width + 1] = self.normalise_repeats(N)
        targets = torch.zeros(batch_size, out_len, self.width + 1)
        targets[:, : L * N, : self.width] = seq.repeat(1, N, 1)
        targets[:, -1, self.width] = 1.0
        return NTMBatch(inputs, targets)

    def levels(self, start: int) -> list[RepeatCopy]:
        """A curriculum ending on this task: lengths and repeats up to ``start``, ``start + 1``, ... (each
        capped at its own maximum); every level normalises the count over its own range."""
        grow = range(start, max(self.max_len, self.max_repeats))
        return [replace(self, max_len=min(n, self.max_len), max_repeats=min(n, self.max_repeats)) for n in grow] + [
            self
        ]


@dataclass
class AssociativeRecall:
    """Associative recall: after a list of items and a query item, output the item that followed it.

    Paper sec. 4.3: items of 3 six-bit vectors, 2-6 items per episode.

    Shape:
        - inputs: ``(B, n (item_len + 1) + item_len + 2 + item_len, width + 2)``; channel ``width``
          marks the step before each item, ``width + 1`` the steps around the query
        - targets: ``(B, item_len, width)``

    Example:
        >>> b = AssociativeRecall(width=4).sample(2, torch.Generator().manual_seed(0), n_items=3)
        >>> b.inputs.shape, b.targets.shape
        (torch.Size([2, 20, 6]), torch.Size([2, 3, 4]))
    """

    width: int = 6
    item_len: int = 3
    min_items: int = 2
    max_items: int = 6

    @property
    def input_size(self) -> int:
        return self.width + 2

    @property
    def output_size(self) -> int:
        return self.width

    def sample(self, batch_size: int, generator: torch.Generator, *, n_items: int | None = None) -> NTMBatch:
        n = _randint(self.min_items, self.max_items, generator) if n_items is None else n_items
        if n < 2:
            raise FovealError(f"associative recall needs at least 2 items, got {n}")
        k, W = self.item_len, self.width
        items = _bits((batch_size, n, k, W), generator)
        query = torch.randint(0, n - 1, (batch_size,), generator=generator)
        rows = torch.arange(batch_size)
        T = n * (k + 1) + k + 2 + k
        inputs = torch.zeros(batch_size, T, W + 2)
        blocks = torch.zeros(batch_size, n, k + 1, W + 2)
        blocks[:, :, 0, W] = 1.0
        blocks[:, :, 1:, :W] = items
        inputs[:, : n * (k + 1)] = blocks.flatten(1, 2)
        q0 = n * (k + 1)
        inputs[:, q0, W + 1] = 1.0
        inputs[:, q0 + 1 : q0 + 1 + k, :W] = items[rows, query]
        inputs[:, q0 + 1 + k, W + 1] = 1.0
        return NTMBatch(inputs, items[rows, query + 1])

    def levels(self, start: int) -> list[AssociativeRecall]:
        """A curriculum ending on this task: up to ``start``, ``start + 1``, ... items."""
        return [replace(self, max_items=n) for n in range(max(start, self.min_items), self.max_items)] + [self]


@dataclass
class PrioritySort:
    """Priority sort: output the ``n_out`` vectors of highest priority, highest first (paper sec. 4.5).

    Paper: 20 eight-bit vectors with priorities uniform in ``[-1, 1]``, the top 16 as target.

    Shape:
        - inputs: ``(B, n_in + 1 + n_out, width + 2)``; channel ``width`` is the priority,
          ``width + 1`` the delimiter
        - targets: ``(B, n_out, width)``

    Example:
        >>> b = PrioritySort(width=3, n_in=5, n_out=2).sample(1, torch.Generator().manual_seed(0))
        >>> b.inputs.shape, b.targets.shape
        (torch.Size([1, 8, 5]), torch.Size([1, 2, 3]))
        >>> top = b.inputs[0, :5, 3].argmax()
        >>> bool((b.targets[0, 0] == b.inputs[0, top, :3]).all())
        True
    """

    width: int = 8
    n_in: int = 20
    n_out: int = 16

    @property
    def input_size(self) -> int:
        return self.width + 2

    @property
    def output_size(self) -> int:
        return self.width

    def sample(self, batch_size: int, generator: torch.Generator) -> NTMBatch:
        if not 1 <= self.n_out <= self.n_in:
            raise FovealError(f"priority sort needs 1 <= n_out <= n_in, got n_out={self.n_out}, n_in={self.n_in}")
        seq = _bits((batch_size, self.n_in, self.width), generator)
        priority = torch.rand(batch_size, self.n_in, generator=generator) * 2 - 1
        inputs = torch.zeros(batch_size, self.n_in + 1 + self.n_out, self.width + 2)
        inputs[:, : self.n_in, : self.width] = seq
        inputs[:, : self.n_in, self.width] = priority
        inputs[:, self.n_in, self.width + 1] = 1.0
        order = priority.argsort(dim=1, descending=True)[:, : self.n_out]
        targets = seq.gather(1, order.unsqueeze(-1).expand(-1, -1, self.width))
        return NTMBatch(inputs, targets)

    def levels(self, start: int, step: int, over: str = "inputs") -> list[PrioritySort]:
        """A curriculum ending on this task. Over ``"inputs"``: sort ``start``, ``start + step``, ... of the
        ``n_in`` vectors (``n_out`` keeps its ratio to ``n_in``); over ``"outputs"``: all ``n_in``, asking
        for the top ``start``, ``start + step``, ..."""
        if over == "outputs":
            return [replace(self, n_out=k) for k in range(start, self.n_out, step)] + [self]
        if over != "inputs":
            raise FovealError(f"curriculum_over must be 'inputs' or 'outputs', got {over!r}")
        grow = range(start, self.n_in, step)
        return [replace(self, n_in=n, n_out=max(1, round(n * self.n_out / self.n_in))) for n in grow] + [self]


NTMTask = Copy | RepeatCopy | AssociativeRecall | PrioritySort
TASKS: dict[str, type] = {
    "copy": Copy,
    "repeat-copy": RepeatCopy,
    "recall": AssociativeRecall,
    "sort": PrioritySort,
}


def batch_seed(seed: int, indices: Sequence[int]) -> int:
    """A seed for the batch made of ``indices``: the same indices give the same batch, in any order.

    Example:
        >>> batch_seed(0, [3, 1, 2]) == batch_seed(0, [1, 2, 3]) != batch_seed(1, [1, 2, 3])
        True
    """
    key = f"{seed}:" + ",".join(str(int(i)) for i in sorted(indices))
    return zlib.crc32(key.encode())


class TaskDataset(Dataset):
    """Training data: item ``i`` is just ``i``; :meth:`collate` draws the whole batch from its seed.

    So a ``DataLoader(ds, batch_size, collate_fn=ds.collate)`` yields :class:`NTMBatch` es whose
    sequences share one length, reproducibly for the same indices, with or without shuffling.
    ``task`` may be a function returning the task to draw from now (a curriculum's current level).

    Example:
        >>> ds = TaskDataset(Copy(), size=64, seed=0)
        >>> b = ds.collate([0, 1, 2])
        >>> b.inputs.shape[0], bool((b.inputs == ds.collate([2, 1, 0]).inputs).all())
        (3, True)
    """

    def __init__(self, task: NTMTask | Callable[[], NTMTask], size: int, seed: int = 0) -> None:
        self.task, self.size, self.seed = task, size, seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:
        if not 0 <= index < self.size:
            raise IndexError(index)
        return index

    def collate(self, indices: Sequence[int]) -> NTMBatch:
        generator = torch.Generator().manual_seed(batch_seed(self.seed, indices))
        task = self.task() if callable(self.task) else self.task
        return task.sample(len(indices), generator)


class SequenceSet(Dataset):
    """A fixed evaluation set: item ``i`` is one sequence (batch of 1) drawn from seed ``(seed, i)``.

    ``sample_kwargs`` fix the length (e.g. ``{"length": 40}``) for generalisation tests; without
    them each sequence draws its own length from the task's training range.

    Example:
        >>> s = SequenceSet(Copy(), size=5, seed=1, length=3)
        >>> len(s), s[0].inputs.shape
        (5, torch.Size([1, 7, 9]))
    """

    def __init__(self, task: NTMTask, size: int, seed: int = 0, **sample_kwargs: int) -> None:
        self.task, self.size, self.seed, self.sample_kwargs = task, size, seed, sample_kwargs
        self._batches: dict[int, list[NTMBatch]] = {}

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> NTMBatch:
        if not 0 <= index < self.size:
            raise IndexError(index)
        generator = torch.Generator().manual_seed(batch_seed(self.seed, [index]))
        return self.task.sample(1, generator, **self.sample_kwargs)

    def batches(self, max_batch: int = 250) -> list[NTMBatch]:
        """All sequences, grouped into batches of equal shape (at most ``max_batch`` each); cached."""
        if max_batch in self._batches:
            return self._batches[max_batch]
        groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[NTMBatch]] = {}
        for i in range(self.size):
            item = self[i]
            groups.setdefault((tuple(item.inputs.shape), tuple(item.targets.shape)), []).append(item)
        out = []
        for items in groups.values():
            for start in range(0, len(items), max_batch):
                chunk = items[start : start + max_batch]
                out.append(NTMBatch(torch.cat([b.inputs for b in chunk]), torch.cat([b.targets for b in chunk])))
        self._batches[max_batch] = out
        return out


def output_phase(logits: Tensor, targets: Tensor) -> Tensor:
    """The last ``T_out`` steps of the model's logits, aligned with ``targets``.

    Shape:
        - logits: ``(B, T, O)``
        - targets: ``(B, T_out, O)``
        - output: ``(B, T_out, O)``
    """
    return logits[:, logits.shape[1] - targets.shape[1] :]


def wrong_bits(logits: Tensor, targets: Tensor) -> Tensor:
    """Wrong bits per sequence after thresholding the output at 0.5 (``logit > 0``).

    Shape:
        - logits: ``(B, T, O)``, the model's whole output
        - targets: ``(B, T_out, O)``
        - output: ``(B,)``

    Example:
        >>> wrong_bits(torch.tensor([[[5.0, -5.0], [3.0, 3.0]]]), torch.tensor([[[1.0, 0.0]]]))
        tensor([1.])
    """
    predicted = (output_phase(logits, targets) > 0).float()
    return (predicted != targets).float().sum(dim=(1, 2))
