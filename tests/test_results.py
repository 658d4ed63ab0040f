"""Results as data: a sweep writes one row per run, resumes, and every docs table matches its file."""

import json
import os
import signal
from pathlib import Path

import pytest

from foveal.cli import main
from foveal.errors import FovealError
from foveal.runs import holds_this_run
from foveal.sweep import clopper_pearson, docs_tables, markdown_table, read_results, results_table, run_sweep
from foveal.train import Interrupted, RunDir

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
TINY = {"loop.steps": "3", "loop.eval_every": "0", "loop.ckpt_every": "0", "model.hidden": "4"}


def test_a_sweep_writes_a_row_per_run_and_skips_what_it_has(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = run_sweep("toy-grid", "toy", None, {"model.dropout": ["0", "0.5"]}, [0, 1], sets=TINY)
    rows = read_results(path)
    assert len(rows) == 4 and {r["seed"] for r in rows} == {0, 1}
    assert {"metrics", "wall_s", "cpu_s", "commit", "torch"} <= rows[0].keys()
    assert rows[0]["sets"] == {**TINY, "model.dropout": "0"}
    before = path.read_text()
    run_sweep("toy-grid", "toy", None, {"model.dropout": ["0", "0.5"]}, [0, 1], sets=TINY)
    assert path.read_text() == before  # nothing trained again
    table = markdown_table(rows, "acc")
    assert table.splitlines()[0] == "| dropout | acc (mean) | min-max | seeds |" and len(table.splitlines()) == 4
    two = markdown_table(rows, "acc,loss").splitlines()
    assert two[0] == "| dropout | acc (mean) | min-max | loss (mean) | min-max | seeds |"
    assert [line.split(" | ")[:3] for line in two[2:]] == [line.split(" | ")[:3] for line in table.splitlines()[2:]]


def test_a_sweep_skips_a_row_another_sweep_wrote_while_it_ran(tmp_path, monkeypatch):
    import foveal.runs

    monkeypatch.chdir(tmp_path)
    real, trained = foveal.runs.start_run, []
    other = {"recipe": "toy", "preset": None, "sets": TINY, "seed": 1, "metrics": {"acc": 0.5}}

    def start_run(request, **kwargs):
        trained.append(request.seed)
        result = real(request, **kwargs)
        (tmp_path / "results").mkdir(exist_ok=True)
        with open(tmp_path / "results" / "toy-two.jsonl", "a") as f:  # a second sweep finishes seed 1 meanwhile
            f.write(json.dumps(other) + "\n")
        return result

    monkeypatch.setattr(foveal.runs, "start_run", start_run)
    path = run_sweep("toy-two", "toy", None, {}, [0, 1], sets=TINY)
    assert trained == [0]
    assert sorted(r["seed"] for r in read_results(path)) == [0, 1]


def test_runs_with_other_fixed_settings_get_their_own_directories(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_sweep("toy-sets", "toy", None, {}, [0], sets=TINY)
    run_sweep("toy-sets", "toy", None, {}, [0], sets={**TINY, "model.dropout": "0.5"})
    runs = sorted(p.name for p in (tmp_path / "runs" / "sweeps" / "toy-sets" / "toy" / "defaults").iterdir())
    assert len(runs) == 2 and all(r.endswith("-seed0") for r in runs) and any("dropout=0.5" in r for r in runs)


def test_two_recipes_or_presets_swept_into_one_file_never_share_a_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_sweep("paper", "toy", None, {}, [0], sets=TINY)
    run_sweep("paper", "toy", "quick", {}, [0], sets=TINY)
    copy = {"loop.steps": "2", "n_eval": "4", "n_eval_long": "2", "model.controller_size": "4", "model.n_rows": "8"}
    run_sweep("paper", "ntm-copy", "quick", {}, [0], sets=copy)
    runs = sorted(str(p.parent.relative_to(tmp_path / "runs" / "sweeps" / "paper")) for p in tmp_path.rglob("run.json"))
    assert runs == [
        "ntm-copy/quick/" + "-".join(f"{k.split('.')[-1]}={v}" for k, v in copy.items()) + "-seed0",
        "toy/defaults/" + "-".join(f"{k.split('.')[-1]}={v}" for k, v in TINY.items()) + "-seed0",
        "toy/quick/" + "-".join(f"{k.split('.')[-1]}={v}" for k, v in TINY.items()) + "-seed0",
    ]
    assert len(read_results(tmp_path / "results" / "paper.jsonl")) == 3


def test_the_command_line_sweeps_and_tabulates(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    sets = [arg for key, value in TINY.items() for arg in ("--set", f"{key}={value}")]
    assert main(["sweep", "cli", "toy", "--grid", "model.dropout=0", "--seeds", "0", *sets]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 1
    assert main(["results", "cli", "--metric", "acc"]) == 0
    assert "| acc (mean) |" in capsys.readouterr().out
    assert main(["results", "cli", "--metric", "nope"]) == 2


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_table_in_the_docs_matches_its_results_file(page):
    for name, metric, table in docs_tables(page.read_text()):
        rows = read_results(ROOT / "results" / f"{name}.jsonl")
        assert rows, f"{page.name}: no results/{name}.jsonl for its table"
        assert table == results_table(rows, metric), f"{page.name}: the {name} table differs from its results file"


def test_a_setting_without_the_metric_shows_a_dash_and_a_missing_seed_is_an_error():
    rows = [
        {"sets": {"head": h}, "seed": s, "metrics": {"acc": 0.5, **({"mass": 0.25} if h == "map" else {})}}
        for h in ("none", "map")
        for s in (0, 1)
    ]
    assert markdown_table(rows, "acc,mass").splitlines()[2:] == [
        "| none | 0.500 | 0.500-0.500 | - | - | 0, 1 |",
        "| map | 0.500 | 0.500-0.500 | 0.250 | 0.250-0.250 | 0, 1 |",
    ]
    del rows[3]["metrics"]["mass"]
    with pytest.raises(FovealError, match="missing from some seeds"):
        markdown_table(rows, "mass")
    with pytest.raises(FovealError, match="'typo' is not in the results"):
        markdown_table(rows, "typo")


def test_the_docs_check_can_fail():
    page = "<!-- results: x metric=acc -->\n| a | b |\n| --- | --- |\n| 1 | 2 |\n\ntext\n"
    assert docs_tables(page) == [("x", "acc", "| a | b |\n| --- | --- |\n| 1 | 2 |")]


def test_an_interrupted_sweep_goes_on_from_the_run_s_checkpoint(tmp_path, monkeypatch):
    import foveal.runs

    monkeypatch.chdir(tmp_path)
    sets = {**TINY, "loop.steps": "40", "loop.ckpt_every": "10"}
    real_train, losses = foveal.runs.train, []

    def train_stopped_at_step_25(task, config, run_dir, resume=False):
        loss = task.loss

        def interrupting_loss(model, batch):
            losses.append(resume)
            if len(losses) == 25:
                os.kill(os.getpid(), signal.SIGINT)
            return loss(model, batch)

        task.loss = interrupting_loss
        return real_train(task, config, run_dir, resume=resume)

    monkeypatch.setattr(foveal.runs, "train", train_stopped_at_step_25)
    with pytest.raises(Interrupted):
        run_sweep("toy-stop", "toy", None, {}, [0], sets=sets)
    assert read_results(tmp_path / "results" / "toy-stop.jsonl") == []
    (run_dir,) = (RunDir(path) for path in (tmp_path / "runs" / "sweeps" / "toy-stop" / "toy" / "defaults").iterdir())
    assert json.loads(run_dir.info.read_text())["parts"] == 1  # the stopped part's time is on record
    path = run_sweep("toy-stop", "toy", None, {}, [0], sets=sets)
    assert losses == [False] * 25 + [True] * 15  # steps 26-40 only: nothing trained twice
    (row,) = read_results(path)
    info = json.loads(run_dir.info.read_text())  # both parts, added up
    assert row["parts"] == info["parts"] == 2
    assert (row["wall_s"], row["cpu_s"]) == (info["seconds"], info["cpu_seconds"])
    # a finished run of other settings (here: a model of another size, as when a default changes) is not
    # taken for this cell's: it is trained afresh over
    other = RunDir(str(run_dir.path).replace("seed0", "seed1"))
    other.path.mkdir(parents=True)
    other.checkpoint.write_bytes(run_dir.checkpoint.read_bytes())
    saved = json.loads(run_dir.config.read_text())
    saved["config"]["model"]["hidden"] = 8
    saved["config"]["seed"] = 1
    other.config.write_text(json.dumps(saved))
    assert holds_this_run(run_dir.path, "toy", None, sets, 0) and not holds_this_run(other.path, "toy", None, sets, 1)
    # nor is a run from before a config key existed, though rebuilt it would read the key's default
    older = RunDir(str(run_dir.path).replace("seed0", "seed2"))
    older.path.mkdir(parents=True)
    older.checkpoint.write_bytes(run_dir.checkpoint.read_bytes())
    before = json.loads(run_dir.config.read_text())
    before["config"]["seed"] = 2
    written_then = json.loads(json.dumps(before))
    del written_then["config"]["loop"]["compile"]
    older.config.write_text(json.dumps(before))
    assert holds_this_run(older.path, "toy", None, sets, 2)
    older.config.write_text(json.dumps(written_then))
    assert not holds_this_run(older.path, "toy", None, sets, 2)
    losses.clear()
    with pytest.raises(Interrupted):
        run_sweep("toy-stop", "toy", None, {}, [1], sets=sets)
    assert losses == [False] * 25  # from step 0 (the stop at step 25 again): not resumed
    assert json.loads(other.config.read_text())["config"]["model"]["hidden"] == 4


@pytest.mark.parametrize(
    "path",
    [p for p in sorted((ROOT / "results").rglob("*.jsonl")) if not p.name.endswith(".metrics.jsonl")],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_every_results_row_says_how_to_make_it_again(path):
    """A row carries its seed, the commit that made it and the command (``*.metrics.jsonl`` files are a GPU run's
    training log, copied by ``benchmarks/cuda.sh``, not results rows)."""
    for number, row in enumerate(read_results(path), 1):
        missing = [key for key in ("seed", "commit", "command") if key not in row]
        assert not missing, f"{path.name}, row {number}: no {', '.join(missing)}"


def test_a_preset_s_own_rows_are_kept_apart_from_its_variations():
    rows = [
        {"sets": {}, "seed": 0, "metrics": {"cpu_s": 100.0}},
        {"sets": {}, "seed": 1, "metrics": {"cpu_s": 120.0}},
        {"sets": {"loop.lr": "0.1"}, "seed": 0, "metrics": {"cpu_s": 900.0}},
    ]
    table = results_table(rows, "cpu_s@preset")
    assert "110.000 | 100.000-120.000 | 0, 1" in table and "900" not in table


def test_a_seed_table_gives_every_run_its_own_line_and_the_settings_that_vary():
    rows = [
        {"sets": {"model.read_gamma_bias": "1"}, "seed": 3, "metrics": {"bits": 0.0}},
        {"sets": {"model.read_gamma_bias": "2"}, "seed": 3, "metrics": {"bits": 12.5}},
        {"sets": {"model.read_gamma_bias": "2"}, "seed": 4, "metrics": {}},
    ]
    lines = results_table(rows, "bits@seed").splitlines()
    assert lines[0] == "| read_gamma_bias | seed | bits |"
    assert lines[2:] == ["| 1 | 3 | 0.000 |", "| 2 | 3 | 12.500 |", "| 2 | 4 | - |"]
    two = [{"recipe": name, "sets": {}, "seed": 0, "metrics": {"bits": 1.0}} for name in ("ntm-recall", "ntm-copy")]
    assert results_table(two, "bits@seed").splitlines()[2:] == [
        "| ntm-recall | 0 | 1.000 |",
        "| ntm-copy | 0 | 1.000 |",
    ]
    presets = [
        {"recipe": "ram", "preset": name, "sets": {}, "seed": 0, "metrics": {"error": 1.0}} for name in ("a", "b")
    ]
    assert results_table(presets, "error@seed").splitlines()[:3] == [
        "| preset | seed | error |",
        "| --- | --- | --- |",
        "| a | 0 | 1.000 |",
    ]


def test_a_pass_table_counts_the_runs_that_meet_every_criterion_with_the_exact_interval():
    rows = [{"sets": {}, "seed": 300 + i, "metrics": {"acc": 1.0, "mask_mass_shape": 0.9}} for i in range(8)] + [
        {"sets": {}, "seed": 308, "metrics": {"acc": 1.0, "mask_mass_shape": 0.2}},  # its map off the shape
        {"sets": {}, "seed": 309, "metrics": {"acc": 0.98}},  # a run without a metric fails
    ]
    lines = results_table(rows, "pass:acc>=0.99,mask_mass_shape>=0.8").splitlines()
    assert lines[0] == "| runs | pass | rate | 95% interval | fail (seeds) | criteria |"
    # 8 of 10: Clopper-Pearson 0.444-0.975 (the binomial tables' values)
    assert lines[2] == "| 10 | 8 | 0.80 | 0.44-0.97 | 308, 309 | acc >= 0.99, mask_mass_shape >= 0.8 |"
    assert results_table(rows[:8], "pass:acc>=0.99").splitlines()[2].startswith("| 8 | 8 | 1.00 | 0.63-1.00 | none")
    assert [round(x, 4) for x in clopper_pearson(9, 10)] == [0.555, 0.9975]
    with pytest.raises(FovealError, match="METRIC>=VALUE"):
        results_table(rows, "pass:acc>0.99")
