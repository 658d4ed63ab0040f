"""Atomic checkpoints, safe loading, RNG states as plain values, the seeded batch order."""

import pickle
import random

import numpy as np
import pytest
import torch

from foveal.errors import CheckpointError
from foveal.train import StepBatchSampler, load, save_atomic
from foveal.train.checkpoint import load_model_state, rng_state, set_rng_state


class NotAllowed:
    def __reduce__(self):
        raise pickle.PicklingError("cannot pickle")


class Custom:
    pass


def test_save_is_atomic_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "c.pt"
    save_atomic({"step": 1, "w": torch.ones(2)}, path)
    with pytest.raises(pickle.PicklingError):
        save_atomic({"step": 2, "bad": NotAllowed()}, path)
    assert load(path)["step"] == 1  # the failed write left the old checkpoint intact
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]


def test_load_refuses_arbitrary_objects(tmp_path):
    torch.save({"obj": Custom()}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError, match="objects other than tensors"):
        load(tmp_path / "evil.pt")


class Payload:
    """Unpickling this would run a shell command: a malicious checkpoint."""

    def __reduce__(self):
        import os

        return (os.system, ("touch pwned",))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "truncated, empty or not a torch file"),
        (b"\x00" * 100, "truncated, empty or not a torch file"),
        (bytes(range(256)) * 4, "truncated, empty or not a torch file"),
        ("truncated", "truncated, empty or not a torch file"),
        ("tensor", "not a foveal checkpoint"),
        ("malicious", "objects other than tensors"),
    ],
)
def test_load_names_what_is_wrong_with_a_bad_file(tmp_path, monkeypatch, content, message):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "checkpoint.pt"
    if content == "truncated":
        save_atomic({"model": {"w": torch.ones(1000)}}, path)
        path.write_bytes(path.read_bytes()[:500])
    elif content == "tensor":
        torch.save(torch.ones(3), path)
    elif content == "malicious":
        torch.save({"model": Payload()}, path)
    else:
        path.write_bytes(content)
    with pytest.raises(CheckpointError, match=message):
        load(path)
    assert not (tmp_path / "pwned").exists()  # nothing in the file ran


def test_a_state_that_does_not_fit_the_model_is_named():
    model = torch.nn.Linear(3, 2)
    state = torch.nn.Linear(4, 2).state_dict() | {"extra": torch.zeros(1)}
    with pytest.raises(CheckpointError, match=r"unexpected extra.*weight \(2, 4\) vs \(2, 3\)"):
        load_model_state(model, state, "c.pt")
    with pytest.raises(CheckpointError, match="missing bias"):
        load_model_state(model, {"weight": torch.zeros(2, 3)}, "c.pt")
    load_model_state(model, torch.nn.Linear(3, 2).state_dict(), "c.pt")  # a fitting one loads


def test_rng_states_round_trip_through_a_safe_checkpoint(tmp_path):
    torch.manual_seed(1)
    np.random.seed(2)
    random.seed(3)
    np.random.standard_normal()  # leaves a cached gaussian in numpy's state
    save_atomic({"rng": rng_state()}, tmp_path / "r.pt")
    expected = (torch.rand(3), np.random.standard_normal(3), random.random())
    torch.manual_seed(99), np.random.seed(99), random.seed(99)
    set_rng_state(load(tmp_path / "r.pt")["rng"])
    torch.testing.assert_close(torch.rand(3), expected[0])
    np.testing.assert_array_equal(np.random.standard_normal(3), expected[1])
    assert random.random() == expected[2]


def _take(sampler, k):
    it = iter(sampler)
    return [next(it) for _ in range(k)]


def test_batch_order_depends_only_on_seed_and_step():
    full = _take(StepBatchSampler(20, 6, seed=3), 9)  # 3 batches per epoch, 2 left over each epoch
    assert all(len(b) == 6 for b in full)
    assert len({i for b in full[:3] for i in b}) == 18  # no repeats within an epoch
    assert full[:3] != full[3:6]  # a new order each epoch
    assert _take(StepBatchSampler(20, 6, seed=3, start_step=4), 5) == full[4:]
    assert _take(StepBatchSampler(20, 6, seed=4), 3) != full[:3]


def test_ranks_split_each_global_batch():
    full = _take(StepBatchSampler(20, 6, seed=3), 4)
    ranks = [_take(StepBatchSampler(20, 6, seed=3, rank=r, world_size=2), 4) for r in range(2)]
    assert [a + b for a, b in zip(*ranks, strict=True)] == full
    with pytest.raises(ValueError, match="divisible"):
        StepBatchSampler(20, 5, seed=0, world_size=2)
    with pytest.raises(ValueError, match=r"fewer than loop\.batch_size"):
        StepBatchSampler(4, 5, seed=0)
