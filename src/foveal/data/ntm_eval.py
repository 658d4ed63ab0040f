"""The evaluation of the NTM tasks (:mod:`foveal.data.ntm_tasks`): a task's evaluation sets, within
its training range and beyond it, and what a model scores on them."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from foveal.data.ntm_tasks import (
    AssociativeRecall,
    Copy,
    NTMBatch,
    NTMTask,
    RepeatCopy,
    SequenceSet,
    output_phase,
    wrong_bits,
)


class NTMEvalSet(Dataset):
    """The evaluation sets of a task: ``main`` (the task's full range) and named extras.

    Indexing reaches ``main``; :func:`evaluate` scores every set.
    """

    def __init__(self, main: SequenceSet, extras: dict[str, SequenceSet] | None = None) -> None:
        self.main, self.extras = main, extras or {}

    def __len__(self) -> int:
        return len(self.main)

    def __getitem__(self, index: int) -> NTMBatch:
        return self.main[index]

    def examples(self) -> dict[str, NTMBatch]:
        """One sequence to draw per set: ``example``, the longest of the main set, and the first of each extra."""
        task = self.main.task
        kwargs: dict[str, dict[str, int]] = {
            "Copy": {"length": getattr(task, "max_len", 0)},
            "RepeatCopy": {"length": getattr(task, "max_len", 0) // 2 or 1, "repeats": 3},
            "AssociativeRecall": {"n_items": getattr(task, "max_items", 0)},
            "PrioritySort": {},
        }
        generator = torch.Generator().manual_seed(self.main.seed)
        examples = {"example": task.sample(1, generator, **kwargs[type(task).__name__])}
        for name, sequences in self.extras.items():
            examples[name] = sequences[0]
        return examples


def generalisation_sets(
    top: NTMTask,
    size: int,
    seed: int,
    *,
    generalise_lengths: Sequence[int] = (),
    generalise_repeats: Sequence[int] = (),
    generalise_at: int = 0,
    generalise_items: Sequence[int] = (),
) -> dict[str, SequenceSet]:
    """The evaluation sets beyond the training range of ``top``, by the name their metrics carry.

    Copy: ``len{L}`` for each of ``generalise_lengths``. Repeat copy: ``len{L}_rep{N}``, the longer
    sequences repeated ``generalise_at`` times and ``generalise_at`` vectors repeated each of
    ``generalise_repeats`` times. Recall: ``items{n}`` for each of ``generalise_items``. Each set has
    ``size`` sequences drawn from ``top``, so what is not fixed (the bits, recall's query) comes from
    the training distribution and a repeat count is normalised as in training.
    """
    sets: dict[str, SequenceSet] = {}
    if isinstance(top, Copy):
        for length in generalise_lengths:
            sets[f"len{length}"] = SequenceSet(top, size, seed + length, length=length)
    elif isinstance(top, RepeatCopy):
        pairs = [(length, generalise_at) for length in generalise_lengths]
        pairs += [(generalise_at, repeats) for repeats in generalise_repeats]
        for length, repeats in dict.fromkeys(pairs):
            name = f"len{length}_rep{repeats}"
            sets[name] = SequenceSet(top, size, seed + 1000 * length + repeats, length=length, repeats=repeats)
    elif isinstance(top, AssociativeRecall):
        for items in generalise_items:
            sets[f"items{items}"] = SequenceSet(top, size, seed + items, n_items=items)
    return sets


def score(model: nn.Module, sequences: SequenceSet) -> dict[str, float]:
    """Wrong bits per sequence, BCE per bit (nats) and cost per sequence (bits) over ``sequences``.

    Repeat copy also scores its two parts apart: ``bit_error``, the fraction of the repeated vectors'
    bits that are wrong, and ``marker_bits``, the wrong bits per sequence of the end marker (its
    channel at every step and the blank vector of the last step), as the paper reads its fig. 7.
    """
    device = next(model.parameters()).device
    wrong, bce, count, n_bits = 0.0, 0.0, 0, 0
    vector_wrong, n_vector_bits = 0.0, 0
    repeats = isinstance(sequences.task, RepeatCopy)
    for batch in sequences.batches():
        inputs, targets = batch.inputs.to(device), batch.targets.to(device)
        logits = output_phase(model(inputs).logits, targets)
        wrong += wrong_bits(logits, targets).sum().item()
        bce += F.binary_cross_entropy_with_logits(logits, targets, reduction="sum").item()
        count += targets.shape[0]
        n_bits += targets.numel()
        if repeats:  # the vectors are every step but the last, every channel but the marker's (the last)
            vectors = targets[:, :-1, :-1]
            vector_wrong += wrong_bits(logits[:, :-1, :-1], vectors).sum().item()
            n_vector_bits += vectors.numel()
    metrics = {"bits": wrong / count, "bce": bce / n_bits, "cost": bce / count / torch.log(torch.tensor(2.0)).item()}
    if repeats:
        metrics |= {"bit_error": vector_wrong / max(n_vector_bits, 1), "marker_bits": (wrong - vector_wrong) / count}
    return metrics


def evaluate(model: nn.Module, dataset: NTMEvalSet) -> dict[str, float]:
    """:func:`score` on the main set, and its scores but ``bce`` on each extra set ``NAME`` (``bits_NAME``, ...)."""
    metrics = score(model, dataset.main)
    for name, sequences in dataset.extras.items():
        metrics |= {f"{k}_{name}": v for k, v in score(model, sequences).items() if k != "bce"}
    return metrics
