"""The ``draw`` recipe end to end: its ``ci`` preset (train, evaluate, show) and, slow, its ``quick`` preset."""

from __future__ import annotations

import json
import math

import pytest
from PIL import Image

from foveal.recipes import load_all
from foveal.runs import RunRequest, eval_run, load_run, show_run, start_run


def test_ci_preset_trains_evaluates_and_draws(tmp_path):
    load_all()
    run, final = start_run(RunRequest("draw", "ci", out=tmp_path / "run"))
    assert all(math.isfinite(v) for v in final.values())
    metrics = eval_run(run.dir)
    assert metrics == final  # evaluation noise is seeded: the same weights give the same numbers
    # the IWAE estimate is never above the average of its own samples' -log w
    assert metrics["iwae_nll"] <= metrics["iwae_sample_elbo"]
    assert 0 < metrics["neg_elbo"] < 28 * 28 * math.log(2) + 10
    paths = show_run(load_run(run.dir))
    names = sorted(p.name for p in paths)
    assert names == ["generation.gif", "generation.png", "reconstruction.png"]
    with Image.open(run.dir / "figures" / "generation.gif") as gif:
        assert gif.n_frames == 4  # one frame per drawing step (T = 4 in ci)


def test_ci_preset_without_attention(tmp_path):
    load_all()
    _, final = start_run(
        RunRequest("draw", "ci", sets={"model.attention": "false", "loop.steps": "3"}, out=tmp_path / "run")
    )
    assert math.isfinite(final["neg_elbo"]) and math.isfinite(final["iwae_nll"])


@pytest.mark.slow
def test_quick_preset_trains_without_nan(tmp_path):
    # The quick preset end to end (1,500 steps, attention, read and write 12 x 12): every logged number
    # finite, and the test -ELBO well below its first steps' ~240 nats (five seeds gave 109.8-117.4).
    load_all()
    sets = {"iwae_images": "100", "iwae_k": "10"}
    run, final = start_run(RunRequest("draw", "quick", sets=sets, threads=1, out=tmp_path / "run"))
    logged = [json.loads(line) for line in (run.dir / "metrics.jsonl").read_text().splitlines()]
    numbers = [v for entry in logged for v in entry.values() if isinstance(v, float)]
    assert numbers and all(math.isfinite(v) for v in numbers)
    assert final["neg_elbo"] < 130 and final["iwae_nll"] <= final["iwae_sample_elbo"]
