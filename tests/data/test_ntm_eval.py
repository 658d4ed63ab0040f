"""The NTM tasks' evaluation: the sets beyond training are named by what they change; the scores by hand."""

import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from foveal.data.ntm_eval import NTMEvalSet, evaluate, generalisation_sets
from foveal.data.ntm_tasks import AssociativeRecall, Copy, PrioritySort, RepeatCopy, SequenceSet


class Unsure(nn.Module):
    """Logit 0 for every bit: it predicts 0 everywhere and pays exactly one bit of cost per target bit."""

    def __init__(self, outputs: int) -> None:
        super().__init__()
        self.outputs, self.scale = outputs, nn.Parameter(torch.zeros(()))

    def forward(self, inputs: torch.Tensor) -> SimpleNamespace:
        return SimpleNamespace(logits=self.scale * inputs.new_ones(*inputs.shape[:2], self.outputs))


def test_the_sets_beyond_training_are_named_by_what_they_change():
    assert list(generalisation_sets(Copy(), 2, 0, generalise_lengths=(40, 60))) == ["len40", "len60"]
    repeat = generalisation_sets(
        RepeatCopy(), 2, 0, generalise_lengths=(20, 10), generalise_repeats=(10, 20), generalise_at=10
    )
    assert list(repeat) == ["len20_rep10", "len10_rep10", "len10_rep20"]  # (10, 10) asked twice, made once
    assert repeat["len20_rep10"][0].targets.shape[1] == 20 * 10 + 1
    assert list(generalisation_sets(AssociativeRecall(), 2, 0, generalise_items=(8,))) == ["items8"]
    assert generalisation_sets(PrioritySort(), 2, 0, generalise_lengths=(40,)) == {}


def test_evaluate_scores_the_main_set_and_each_extra_by_hand():
    task = Copy(width=8, min_len=3, max_len=3)
    data = NTMEvalSet(SequenceSet(task, 4, 0), generalisation_sets(task, 2, 0, generalise_lengths=(5,)))
    metrics = evaluate(Unsure(8), data)
    assert set(metrics) == {"bits", "bce", "cost", "bits_len5", "cost_len5"}
    ones = sum(float(data[i].targets.sum()) for i in range(len(data)))  # predicting 0 gets exactly the ones wrong
    assert metrics["bits"] == pytest.approx(ones / 4)
    assert metrics["bce"] == pytest.approx(math.log(2)) and metrics["cost"] == pytest.approx(3 * 8)
    assert metrics["cost_len5"] == pytest.approx(5 * 8)
    examples = data.examples()
    assert list(examples) == ["example", "len5"] and examples["len5"].targets.shape == (1, 5, 8)


def test_repeat_copy_scores_the_vectors_and_the_end_marker_apart():
    task = RepeatCopy(width=4, min_len=2, max_len=2, min_repeats=3, max_repeats=3)
    data = NTMEvalSet(
        SequenceSet(task, 3, 0), generalisation_sets(task, 2, 0, generalise_lengths=(4,), generalise_at=2)
    )
    metrics = evaluate(Unsure(5), data)  # predicts 0: every one is wrong, the end marker's among them
    vector_ones = sum(float(data[i].targets[:, :-1, :-1].sum()) for i in range(len(data)))
    assert metrics["bit_error"] == pytest.approx(vector_ones / (3 * 2 * 3 * 4))
    assert metrics["marker_bits"] == pytest.approx(1.0)  # the one marker bit of each sequence
    assert metrics["bits"] == pytest.approx(vector_ones / 3 + 1.0)
    assert {"bit_error_len4_rep2", "marker_bits_len4_rep2"} <= set(metrics)
    assert "bit_error" not in evaluate(Unsure(8), NTMEvalSet(SequenceSet(Copy(), 2, 0)))
