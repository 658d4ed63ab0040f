"""The loop end to end on the `toy` recipe: exact resume after Ctrl-C and after SIGKILL, and DDP."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from foveal.recipes.config import resolve_config
from foveal.runs import RunRequest, get_recipe, start_run
from foveal.train import Interrupted, RunDir, load, read_metrics, seed_everything, train

# Small and quick; dropout stays on so that restoring the RNG state matters.
SETS = {
    "loop.steps": "60",
    "loop.log_every": "7",
    "loop.eval_every": "25",
    "loop.ckpt_every": "20",
    "model.hidden": "16",
}


def _toy(sets=SETS):
    recipe = get_recipe("toy")
    config = resolve_config(recipe, sets=sets)
    seed_everything(config.seed)
    return recipe.build(config), config


def _events(run_dir):
    return [{k: v for k, v in e.items() if k != "time"} for e in read_metrics(run_dir)]


def _assert_same_run(a: Path, b: Path):
    sa, sb = load(RunDir(a).checkpoint), load(RunDir(b).checkpoint)
    assert sa["step"] == sb["step"]
    for name, tensor in sa["model"].items():
        assert torch.equal(tensor, sb["model"][name]), name
    assert _events(a) == _events(b)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted run of the toy task with SETS."""
    run_dir = tmp_path_factory.mktemp("reference")
    task, config = _toy()
    return run_dir, train(task, config, run_dir)


def test_logs_evaluates_and_checkpoints(reference):
    run_dir, final = reference
    events = read_metrics(run_dir)
    train_steps = [e["step"] for e in events if e["split"] == "train"]
    eval_steps = [e["step"] for e in events if e["split"] == "eval"]
    assert train_steps == [7, 14, 21, 28, 35, 42, 49, 56, 60]
    assert eval_steps == [25, 50, 60]
    assert {"loss", "acc", "lr"} <= events[0].keys() and "time" in events[0]
    assert final == {k: v for k, v in events[-1].items() if k not in ("step", "time", "split")}
    assert load(RunDir(run_dir).checkpoint)["step"] == 60


def test_evaluation_does_not_disturb_training(reference, tmp_path):
    task, config = _toy({**SETS, "loop.eval_every": "0"})
    train(task, config, tmp_path)
    ref = load(RunDir(reference[0]).checkpoint)["model"]
    for name, tensor in load(RunDir(tmp_path).checkpoint)["model"].items():
        assert torch.equal(tensor, ref[name]), name


def test_ctrl_c_writes_a_checkpoint_and_resume_is_exact(reference, tmp_path):
    task, config = _toy()
    loss, calls = task.loss, []

    def interrupting_loss(model, batch):
        calls.append(1)
        if len(calls) == 33:  # mid-way between checkpoints and log events
            os.kill(os.getpid(), signal.SIGINT)
        return loss(model, batch)

    task.loss = interrupting_loss
    with pytest.raises(Interrupted) as info:
        train(task, config, tmp_path)
    assert info.value.step == 33 and load(RunDir(tmp_path).checkpoint)["step"] == 33
    task, config = _toy()
    final = train(task, config, tmp_path, resume=True)
    assert final == reference[1]
    _assert_same_run(reference[0], tmp_path)


def test_sigkill_then_resume_ends_like_an_uninterrupted_run(tmp_path):
    # Long enough that the kill lands well before the end, and (usually) after a log event that
    # follows the last checkpoint, so the resumed run must also drop stale metrics.
    sets = ["loop.steps=800", "loop.ckpt_every=50", "loop.log_every=10", "loop.eval_every=0", "model.hidden=16"]
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    cmd = [sys.executable, "-m", "foveal", "train", "toy", "--out", str(killed)]
    cmd += [arg for s in sets for arg in ("--set", s)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not RunDir(killed).checkpoint.exists() or max((e["step"] for e in read_metrics(killed)), default=0) < 60:
            assert proc.poll() is None, "training ended before its first checkpoint"
            assert time.monotonic() < deadline, "no checkpoint after 120 s"
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    killed_at = load(RunDir(killed).checkpoint)["step"]
    assert 0 < killed_at < 800, "the kill did not interrupt training"

    parsed = dict(s.split("=") for s in sets)
    _, resumed = start_run(RunRequest("toy", sets=parsed, out=killed, resume=True))
    _, uninterrupted = start_run(RunRequest("toy", sets=parsed, out=whole))
    assert resumed == uninterrupted
    _assert_same_run(whole, killed)
    assert json.loads((killed / "config.json").read_text())["recipe"] == "toy"


def test_two_processes_equal_one_on_the_same_global_batch(tmp_path):
    sets = [
        "loop.steps=6",
        "loop.batch_size=64",
        "model.dropout=0",
        "loop.log_every=3",
        "loop.ckpt_every=0",
        "model.hidden=16",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # On a loaded machine gloo now and then aborts a rank as it exits, after the training ("terminate called
    # without an active exception"), and torchrun stops the other: such a launch is tried once more.
    for _ in range(2):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--nnodes=1"]
        cmd += ["--master_addr=127.0.0.1", f"--master_port={_free_port()}", "-m", "foveal", "train", "toy"]
        cmd += ["--out", str(tmp_path / "two"), "--overwrite"] + [arg for s in sets for arg in ("--set", s)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        if done.returncode == 0 or "terminate called without an active exception" not in done.stderr:
            break
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "two" / "metrics.jsonl").is_file()

    start_run(RunRequest("toy", sets=dict(s.split("=") for s in sets), out=tmp_path / "one"))
    one, two = load(RunDir(tmp_path / "one").checkpoint), load(RunDir(tmp_path / "two").checkpoint)
    assert two["world_size"] == 2 and two["step"] == one["step"] == 6
    for name, tensor in one["model"].items():
        torch.testing.assert_close(two["model"][name], tensor)
    # The two-process run logged the mean over ranks of the same losses.
    loss_one = [e["loss"] for e in read_metrics(tmp_path / "one") if e["split"] == "train"]
    loss_two = [e["loss"] for e in read_metrics(tmp_path / "two") if e["split"] == "train"]
    torch.testing.assert_close(torch.tensor(loss_two), torch.tensor(loss_one))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_resumed_log_drops_events_after_the_checkpoint(tmp_path):
    from foveal.train.metrics import MetricsLog

    lines = [{"step": s, "time": 0.0, "split": "train", "loss": 1.0} for s in (10, 20, 30)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    MetricsLog(tmp_path, total_steps=40, start_step=20).close()
    assert [e["step"] for e in read_metrics(tmp_path)] == [10, 20]


def test_progress_lines_give_the_time_so_far_and_the_time_left(tmp_path, capsys, monkeypatch):
    from foveal.train import metrics

    now = [100.0]
    monkeypatch.setattr(metrics.time, "monotonic", lambda: now[0])
    log = metrics.MetricsLog(tmp_path / "fresh", total_steps=100, start_step=0)
    now[0] = 130.0  # 10 steps in 30 s: 3 s a step, 90 to go
    log.event(10, "train", {"loss": 0.5})
    now[0] = 400.0
    log.event(100, "eval", {"acc": 0.9})
    log.close()
    resumed = metrics.MetricsLog(tmp_path / "resumed", total_steps=100, start_step=50)
    now[0] = 420.0  # this part's 10 steps in 20 s, 40 to go
    resumed.event(60, "train", {"loss": 0.25})
    resumed.close()
    assert capsys.readouterr().err.splitlines() == [
        "step 10/100 train: loss=0.5 [30s, ~4m30s left]",
        "step 100/100 eval: acc=0.9 [5m00s]",
        "step 60/100 train: loss=0.25 [20s, ~1m20s left]",
    ]


def test_evaluations_during_training_read_the_interim_set_and_the_last_reads_the_whole(tmp_path):
    from torch import nn
    from torch.utils.data import TensorDataset

    from foveal.train import LoopConfig, RunConfig, Task

    data = TensorDataset(torch.randn(32, 2), torch.randn(32, 1))
    slice_, whole = TensorDataset(*data[:8]), TensorDataset(*data[:])

    def loss(model, batch):
        return torch.nn.functional.mse_loss(model(batch[0]), batch[1]), {}

    def evaluate(model, dataset):
        return {"count": float(len(dataset))}

    task = Task(nn.Linear(2, 1), data, loss, eval_set=whole, evaluate=evaluate, interim_eval_set=slice_)
    config = RunConfig(loop=LoopConfig(steps=6, batch_size=8, eval_every=2, ckpt_every=0, device="cpu"))
    final = train(task, config, tmp_path / "run")
    evals = [r for r in read_metrics(tmp_path / "run") if r["split"] == "eval"]
    assert [(r["step"], r["count"]) for r in evals] == [(2, 8.0), (4, 8.0), (6, 32.0)]
    assert final["count"] == 32.0
