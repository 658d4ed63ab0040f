"""TensorBoard gets every scalar (across a resume too), the hparams and the figures."""

import pytest

pytest.importorskip("tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from foveal.runs import RunRequest, show_run, start_run

SETS = {"loop.steps": "40", "loop.log_every": "10", "loop.eval_every": "0", "loop.ckpt_every": "20"}


def scalars(run_dir, tag):
    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0, "images": 0})
    events.Reload()
    return [event.step for event in events.Scalars(tag)], events


def test_a_resumed_run_keeps_every_point(tmp_path):
    start_run(RunRequest("toy", sets={**SETS, "loop.steps": "20"}, out=tmp_path / "run"))
    start_run(RunRequest("toy", sets=SETS, out=tmp_path / "run", resume=True))
    steps, _ = scalars(tmp_path / "run", "train/loss")
    assert steps == [10, 20, 30, 40]


def test_hparams_and_figures_are_logged(tmp_path):
    run, _ = start_run(RunRequest("toy", sets=SETS, out=tmp_path / "run"))
    show_run(run)
    _, events = scalars(tmp_path / "run", "train/loss")
    assert "figures/regions" in events.Tags()["images"]
    hparams = [p for p in (tmp_path / "run" / "tensorboard").rglob("events*")]
    assert any(b"hparams" in p.read_bytes() for p in hparams)
