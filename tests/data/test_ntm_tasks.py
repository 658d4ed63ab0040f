"""The NTM paper's tasks: formats, determinism, one length per batch, the metric."""

import pytest
import torch
from torch.utils.data import DataLoader

from foveal.data.ntm_tasks import (
    TASKS,
    AssociativeRecall,
    Copy,
    PrioritySort,
    RepeatCopy,
    SequenceSet,
    TaskDataset,
    wrong_bits,
)
from foveal.errors import FovealError


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_deterministic_and_binary(name):
    task = TASKS[name]()
    a, b = task.sample(4, gen(3)), task.sample(4, gen(3))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.inputs, task.sample(4, gen(4)).inputs)
    assert a.inputs.shape[-1] == task.input_size and a.targets.shape[-1] == task.output_size
    assert set(a.targets.unique().tolist()) <= {0.0, 1.0}


def test_copy_format():
    b = Copy().sample(3, gen(), length=5)
    assert b.inputs.shape == (3, 11, 9) and b.targets.shape == (3, 5, 8)
    assert torch.equal(b.inputs[:, :5, :8], b.targets)
    assert (b.inputs[:, 5] == torch.tensor([0.0] * 8 + [1.0])).all()  # the delimiter step
    assert (b.inputs[:, :5, 8] == 0).all() and (b.inputs[:, 6:] == 0).all()  # blank output phase


def test_copy_blank_rate_blanks_whole_vectors_and_leaves_the_paper_task_alone():
    plain, zero_rate = Copy().sample(64, gen(5), length=20), Copy(blank_rate=0.0).sample(64, gen(5), length=20)
    assert torch.equal(plain.inputs, zero_rate.inputs)  # the paper's task draws the same stream
    blanked = Copy(blank_rate=0.3).sample(64, gen(5), length=20)
    blank = blanked.targets.sum(-1) == 0
    assert 0.25 < blank.float().mean() < 0.35
    assert torch.equal(blanked.inputs[:, :20, :8], blanked.targets)  # the input is still the target
    kept = ~blank & (plain.targets.sum(-1) != 0)
    assert torch.equal(blanked.targets[kept], plain.targets[kept])  # the other vectors are the paper's


def test_copy_lengths_cover_the_range():
    task = Copy(min_len=1, max_len=20)
    lengths = {task.sample(1, gen(s)).targets.shape[1] for s in range(400)}
    assert lengths == set(range(1, 21))


def test_repeat_copy_format():
    task = RepeatCopy()
    b = task.sample(2, gen(), length=3, repeats=4)
    assert b.inputs.shape == (2, 3 + 1 + 12 + 1, 10) and b.targets.shape == (2, 13, 9)
    for r in range(4):
        assert torch.equal(b.targets[:, 3 * r : 3 * r + 3, :8], b.inputs[:, :3, :8])
    assert (b.targets[:, :-1, 8] == 0).all() and (b.targets[:, -1] == torch.tensor([0.0] * 8 + [1.0])).all()
    assert b.inputs[0, 3, 8] == 1 and b.inputs[0, 3, 9] == pytest.approx(task.normalise_repeats(4))
    counts = torch.tensor([task.normalise_repeats(n) for n in range(1, 11)])
    assert counts.mean().abs() < 1e-6 and counts.var(unbiased=False) == pytest.approx(1.0)


def test_associative_recall_answer_follows_the_query():
    task = AssociativeRecall()
    b = task.sample(16, gen(), n_items=4)
    k, W = task.item_len, task.width
    items = b.inputs[:, : 4 * (k + 1)].reshape(16, 4, k + 1, W + 2)
    assert (items[:, :, 0, W] == 1).all()  # each item follows an item delimiter
    q0 = 4 * (k + 1)
    query = b.inputs[:, q0 + 1 : q0 + 1 + k, :W]
    assert (b.inputs[:, q0, W + 1] == 1).all() and (b.inputs[:, q0 + 1 + k, W + 1] == 1).all()
    for s in range(16):
        position = next(i for i in range(4) if torch.equal(items[s, i, 1:, :W], query[s]))
        assert position < 3 and torch.equal(b.targets[s], items[s, position + 1, 1:, :W])
    assert (b.inputs[:, -k:] == 0).all()


def test_priority_sort_is_sorted_by_priority():
    task = PrioritySort()
    b = task.sample(8, gen())
    assert b.inputs.shape == (8, 20 + 1 + 16, 10) and b.targets.shape == (8, 16, 8)
    for s in range(8):
        ranked = sorted(range(20), key=lambda i: -b.inputs[s, i, 8].item())[:16]
        assert torch.equal(b.targets[s], b.inputs[s, ranked, :8])
    assert (b.inputs[:, :20, 8].abs() <= 1).all() and (b.inputs[:, 20, 9] == 1).all()


def test_task_dataset_batches_share_a_length_and_replay():
    ds = TaskDataset(Copy(), size=1000, seed=5)
    loader = DataLoader(ds, batch_size=8, shuffle=True, collate_fn=ds.collate, generator=gen())
    lengths = set()
    for i, batch in enumerate(loader):
        assert batch.inputs.shape[0] == 8
        lengths.add(batch.targets.shape[1])
        if i == 20:
            break
    assert len(lengths) > 3  # batches differ in length (each one has a single length)
    assert torch.equal(ds.collate([7, 3]).inputs, ds.collate([3, 7]).inputs)
    assert not torch.equal(ds.collate([7, 3]).inputs, TaskDataset(Copy(), 1000, seed=6).collate([7, 3]).inputs)


def test_sequence_set_groups_equal_shapes():
    s = SequenceSet(Copy(max_len=4), size=30, seed=1)
    batches = s.batches(max_batch=5)
    assert sum(b.inputs.shape[0] for b in batches) == 30
    assert all(b.inputs.shape[0] <= 5 for b in batches)
    assert torch.equal(s[3].inputs, SequenceSet(Copy(max_len=4), size=30, seed=1)[3].inputs)
    assert SequenceSet(Copy(), size=2, length=40)[1].targets.shape == (1, 40, 8)


def test_wrong_bits_counts_only_the_output_phase():
    targets = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    perfect = torch.cat([torch.full((1, 3, 2), 9.0), (targets * 2 - 1) * 5], dim=1)  # garbage input phase
    assert wrong_bits(perfect, targets).tolist() == [0.0]
    assert wrong_bits(-perfect, targets).tolist() == [4.0]
    half = perfect.clone()
    half[0, -1, 0] = 1.0  # one wrong bit: predicted 1 where the target is 0
    assert wrong_bits(half, targets).tolist() == [1.0]


def test_curricula_grow_to_the_task_and_end_on_it():
    copy = Copy(max_len=10)
    assert [t.max_len for t in copy.levels(4, 2)] == [4, 6, 8, 10] and copy.levels(4, 2)[-1] is copy
    repeat = RepeatCopy(max_len=5, max_repeats=3)
    assert [(t.max_len, t.max_repeats) for t in repeat.levels(2)] == [(2, 2), (3, 3), (4, 3), (5, 3)]
    assert repeat.levels(2)[0].normalise_repeats(2) == 1.0  # each level normalises the count over its own range
    assert [t.max_items for t in AssociativeRecall(min_items=2, max_items=5).levels(1)] == [2, 3, 4, 5]
    sort = PrioritySort(n_in=8, n_out=6)
    assert [(t.n_in, t.n_out) for t in sort.levels(4, 4)] == [(4, 3), (8, 6)]
    assert [(t.n_in, t.n_out) for t in sort.levels(2, 3, over="outputs")] == [(8, 2), (8, 5), (8, 6)]
    with pytest.raises(FovealError, match="curriculum_over must be 'inputs' or 'outputs', got 'rows'"):
        sort.levels(4, 4, over="rows")
