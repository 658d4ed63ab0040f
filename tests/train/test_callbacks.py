"""Callbacks: the loop calls them, saves their state, and a resumed run continues them exactly."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

from foveal.train import Anneal, Callback, Curriculum, LoopConfig, RunConfig, Task, Trainer, load, train


class Recorder(Callback):
    """Counts steps, halves the rate after step 3, and reports a value at evaluation."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def on_step_end(self, step, metrics):
        self.seen.append(step)
        metrics["seen"] = float(len(self.seen))

    def lr_scale(self):
        return 0.5 if len(self.seen) >= 3 else 1.0

    def eval_metrics(self):
        return {"seen": float(len(self.seen))}

    def state_dict(self):
        return {"seen": list(self.seen)}

    def load_state_dict(self, state):
        self.seen = list(state["seen"])


def task(callback: Callback) -> Task:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32, 2), torch.randn(32, 1))

    def loss(model, batch):
        return F.mse_loss(model(batch[0]), batch[1]), {}

    def evaluate(model, dataset):
        return {"mse": F.mse_loss(model(dataset.tensors[0]), dataset.tensors[1]).item()}

    return Task(nn.Linear(2, 1), data, loss, eval_set=data, evaluate=evaluate, callbacks=[callback])


def config(steps: int) -> RunConfig:
    return RunConfig(loop=LoopConfig(steps=steps, batch_size=8, lr=0.1, log_every=1, ckpt_every=0))


def test_the_step_calls_callbacks_and_applies_their_lr_scale():
    recorder = Recorder()
    trainer = Trainer(task(recorder), config(10))
    data = trainer.task.train_set
    rates = []
    for _ in range(4):
        rates.append(trainer.optimizer.param_groups[0]["lr"])
        metrics = trainer.step(data[:8])
    assert recorder.seen == [1, 2, 3, 4] and metrics["seen"] == 4.0
    assert rates == [0.1, 0.1, 0.1, 0.05]  # the rate after step 3 sees the callback's new scale


def test_callback_state_is_checkpointed_and_resumed(tmp_path):
    final = train(task(recorder := Recorder()), config(6), tmp_path / "whole")
    assert recorder.seen == [1, 2, 3, 4, 5, 6] and final["seen"] == 6.0
    assert load(tmp_path / "whole" / "checkpoint.pt")["callbacks"] == [{"seen": [1, 2, 3, 4, 5, 6]}]

    train(task(Recorder()), config(4), tmp_path / "part")
    resumed = Recorder()
    again = train(task(resumed), config(6), tmp_path / "part", resume=True)
    assert resumed.seen == recorder.seen and again == final


def test_curriculum_rises_on_the_metric_and_needs_it():
    curriculum = Curriculum(2, metric="error", threshold=0.1, decay=0.0, anneal=0.5)
    metrics = {"error": 0.05}
    curriculum.on_step_end(1, metrics)
    assert curriculum.level == 1 and metrics["level"] == 1.0 and curriculum.lr_scale() == 1.0
    curriculum.on_step_end(2, {"error": 0.0})
    assert curriculum.mastered and curriculum.lr_scale() == 0.5
    restored = Curriculum(2, metric="error", threshold=0.1)
    restored.load_state_dict(curriculum.state_dict())
    assert (restored.level, restored.mastered) == (1, True)
    with pytest.raises(ValueError, match="'error'"):
        Curriculum(2, metric="error").on_step_end(1, {"loss": 1.0})


@pytest.mark.parametrize("bad", [{"n_levels": 0}, {"n_levels": 2, "decay": 1.0}])
def test_curriculum_refuses_bad_arguments(bad):
    with pytest.raises(ValueError):
        Curriculum(**bad)


def test_anneal_is_geometric_then_holds_and_is_seen_by_each_step():
    applied: list[float] = []
    anneal = Anneal(applied.append, start=27.0, end=1.0, steps=3, name="temperature")
    assert applied == []  # building it changes nothing: a model loaded to evaluate keeps its own value
    trainer = Trainer(task(anneal), config(10))
    seen = []
    for _ in range(5):
        seen.append(trainer.step(trainer.task.train_set[:8])["temperature"])
    # the value each step ran with: 27 * (1/27) ** (done / 3), done = steps before it
    assert seen == pytest.approx([27.0, 9.0, 3.0, 1.0, 1.0])
    assert applied[-1] == 1.0  # a finished warm-up leaves the end value in place
    rising = Anneal(applied.append, start=0.5, end=2.0, steps=2)
    assert [rising.value(done) for done in (0, 1, 2, 9)] == pytest.approx([0.5, 1.0, 2.0, 2.0])


def test_anneal_resumes_at_the_value_of_its_step(tmp_path):
    whole: list[float] = []
    train(task(Anneal(whole.append, start=8.0, end=1.0, steps=4)), config(6), tmp_path / "whole")
    train(task(Anneal(list().append, start=8.0, end=1.0, steps=4)), config(2), tmp_path / "part")
    resumed: list[float] = []
    train(task(Anneal(resumed.append, start=8.0, end=1.0, steps=4)), config(6), tmp_path / "part", resume=True)
    # before and after each step: steps 3-6 of the resumed run see what the whole run's steps 3-6 saw
    assert resumed == whole[4:]


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"start": 0.0, "end": 1.0, "steps": 3}, "start and end > 0"),
        ({"start": 2.0, "end": -1.0, "steps": 3}, "start and end > 0"),
        ({"start": 2.0, "end": 1.0, "steps": 0}, "at least one step"),
    ],
)
def test_anneal_refuses_bad_arguments(bad, message):
    with pytest.raises(ValueError, match=message):
        Anneal(print, **bad)
