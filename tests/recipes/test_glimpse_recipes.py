"""The ``stn`` and ``ram`` recipes end to end on their ``ci`` presets, on IDX files the test writes."""

from __future__ import annotations

import gzip
import math
import struct

import pytest
import torch

from foveal.data.images import FASHION_FILES
from foveal.recipes import load_all
from foveal.runs import RunRequest, eval_run, load_run, show_run, start_run


def write_idx(path, tensor: torch.Tensor) -> None:
    header = bytes([0, 0, 0x08, tensor.ndim]) + b"".join(struct.pack(">i", d) for d in tensor.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + bytes(tensor.flatten().tolist()))


@pytest.fixture
def data_sets(tmp_path):
    """Dotted config keys pointing the recipes at 48 fake Fashion-MNIST images and a private cache."""
    g = torch.Generator().manual_seed(0)
    root = tmp_path / "idx"
    root.mkdir()
    for split in ("train", "test"):
        images, labels = FASHION_FILES[split]
        write_idx(root / images, torch.randint(0, 256, (48, 28, 28), generator=g, dtype=torch.uint8))
        write_idx(root / labels, torch.randint(0, 10, (48,), generator=g, dtype=torch.uint8))
    return {"data.data_dir": str(root), "data.cache_dir": str(tmp_path / "cache")}


@pytest.mark.parametrize(
    ("recipe", "sets", "figure"),
    [
        ("stn", {"distortion": "RTS", "model.name": "stcnn", "model.transform": "attention"}, "transformer.png"),
        ("stn", {"distortion": "R", "model.name": "cnn"}, "transformer.png"),
        (
            "stn",
            {"distortion": "cluttered", "model.transform": "attention", "model.read": "gaussian"},
            "transformer.png",
        ),
        ("ram", {"distortion": "cluttered", "model.read": "hard"}, "glimpses.png"),
        ("ram", {"distortion": "translated", "model.read": "gaussian"}, "glimpses.png"),
        ("ram", {"distortion": "cluttered", "model.name": "glimpse-cnn"}, None),
    ],
)
def test_ci_preset_trains_evaluates_and_draws(tmp_path, data_sets, recipe, sets, figure):
    load_all()
    run, final = start_run(RunRequest(recipe, "ci", sets={**data_sets, **sets}, out=tmp_path / "run"))
    assert 0 <= final["error"] <= 100 and math.isfinite(final["loss"])
    assert eval_run(run.dir) == final  # evaluation is deterministic (RAM looks at its mean locations)
    # Where the transformer looks is measured when the data knows where the object is.
    located = recipe == "stn" and sets.get("model.name", "stcnn") == "stcnn" and sets["distortion"] == "cluttered"
    assert ("iou" in final and "centre_px" in final) == located
    if located:
        assert 0 <= final["iou"] <= 1 and final["centre_px"] >= 0
    # and where RAM's glimpses land, for either read
    looked = recipe == "ram" and sets.get("model.name", "ram") == "ram"
    assert ("on_object" in final) == looked
    if looked:
        assert 0 <= final["on_object"] <= 1
    if figure is None:
        with pytest.raises(ValueError, match="draws no figures"):
            show_run(load_run(run.dir))
    else:
        assert [p.name for p in show_run(load_run(run.dir))] == [figure]


def test_the_policy_lr_scale_sets_the_location_network_s_rate(data_sets):
    from foveal.recipes.config import resolve_config
    from foveal.runs import get_recipe
    from foveal.train import Trainer

    load_all()
    recipe = get_recipe("ram")
    config = resolve_config(recipe, "ci", sets={**data_sets, "policy_lr_scale": "0.25"})
    trainer = Trainer(recipe.build(config), config)
    locator = {id(p) for p in trainer.model.locator.parameters()}
    # each group's peak rate (the schedule's warm-up scales both alike)
    rates = {frozenset(id(p) for p in g["params"]) == locator: g["initial_lr"] for g in trainer.optimizer.param_groups}
    assert rates == {False: config.loop.lr, True: pytest.approx(config.loop.lr / 4)}
