"""The shipped models: each loads by name and scores what its card recorded on a small test subset."""

import math

import pytest
import torch

import foveal
from foveal.errors import DataUnavailableError, FovealError
from foveal.train import evaluate
from foveal.zoo import available, build, card

EXPECTED = {"easy-vqa", "shapes-vqa", "stn", "ram", "draw", "ntm-copy"}


def test_every_family_ships_a_model():
    assert set(available()) >= EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_shipped_model_reproduces_its_recorded_check(name):
    entry = card(name)
    assert entry.command.startswith(f"foveal train {entry.recipe} ") and entry.commit and entry.metrics
    try:
        _, _, task = build(name, entry.check["sets"])
    except DataUnavailableError as e:
        pytest.skip(str(e))
    measured = evaluate(task, task.model)
    for metric, recorded in entry.check["metrics"].items():
        assert math.isclose(measured[metric], recorded, rel_tol=1e-4, abs_tol=1e-6), (metric, measured, recorded)


def test_pretrained_returns_the_model_in_eval_mode():
    model = foveal.pretrained("ntm-copy")
    assert not model.training and type(model).__name__ == "NTM"
    inputs = torch.zeros(1, 6, model.input_size)
    inputs[0, :4, :8] = torch.randint(0, 2, (4, 8), generator=torch.Generator().manual_seed(0)).float()
    inputs[0, 4, 8] = 1.0  # the delimiter
    assert model(inputs).logits.shape == (1, 6, model.output_size)


def test_an_unknown_name_lists_the_shipped_ones():
    with pytest.raises(FovealError, match=r"choose from: .*ntm-copy"):
        card("no-such-model")
