"""The `foveal` command line on the `toy` recipe: list, train, eval, show, demo, bench, errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from foveal.cli import main
from foveal.registry import FIGURES

QUICK = [
    "--set",
    "loop.steps=30",
    "--set",
    "loop.eval_every=0",
    "--set",
    "loop.ckpt_every=10",
    "--set",
    "model.hidden=8",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "toy-run"
    assert main(["train", "toy", "--preset", "quick", *QUICK, "--seed", "3", "--out", str(out)]) == 0
    return out


def test_list_names_recipes_with_presets(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "toy" in out and "[presets: quick, full]" in out
    assert "attention modules:" in out and "models:" in out and "figures:" in out


def test_train_prints_one_json_document(tmp_path, capsys):
    assert main(["train", "toy", *QUICK, "--set", "loop.steps=2", "--out", str(tmp_path / "run")]) == 0
    printed = json.loads(capsys.readouterr().out)  # the whole of stdout
    assert printed["run"] == str(tmp_path / "run") and set(printed["metrics"]) == {"loss", "acc"}


def test_version(capsys):
    import foveal

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"foveal {foveal.__version__}"


def test_train_saves_the_resolved_config(run_dir):
    record = json.loads((run_dir / "config.json").read_text())
    assert (record["recipe"], record["preset"]) == ("toy", "quick")
    assert record["config"]["seed"] == 3 and record["config"]["model"]["hidden"] == 8
    assert record["config"]["loop"]["steps"] == 30
    assert (run_dir / "checkpoint.pt").is_file() and (run_dir / "metrics.jsonl").is_file()


def test_eval_prints_and_writes_metrics(run_dir, capsys):
    assert main(["eval", str(run_dir)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((run_dir / "eval.json").read_text())
    assert set(printed) == {"loss", "acc"}
    # The rebuilt model is the trained one: its eval matches what the loop measured at the end.
    last_eval = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()][-1]
    assert last_eval["split"] == "eval" and last_eval["acc"] == printed["acc"]


def test_show_run_and_named_figure(run_dir, tmp_path, monkeypatch, capsys):
    assert main(["show", str(run_dir)]) == 0
    assert (run_dir / "figures" / "regions.png").stat().st_size > 0

    def dot(out_dir):
        path = out_dir / "dot.txt"
        path.write_text("a figure")
        return [path]

    monkeypatch.setitem(FIGURES._entries, "test-dot", dot)
    assert main(["show", "test-dot", "--out", str(tmp_path / "figs")]) == 0
    assert (tmp_path / "figs" / "dot.txt").is_file()


def test_resume_continues_and_refuses_a_changed_config(run_dir, capsys):
    resume = ["train", "toy", "--out", str(run_dir), "--resume"]
    assert main([*resume, "--set", "model.hidden=9"]) == 2
    assert "only loop.ckpt_every, loop.eval_every" in capsys.readouterr().err
    assert main([*resume, "--preset", "full"]) == 2
    assert "was trained with preset 'quick', not 'full'" in capsys.readouterr().err
    assert main(["train", "toy", "--preset", "quick", "--out", str(run_dir)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert main([*resume, "--set", "loop.steps=40"]) == 0  # the saved config, extended
    record = json.loads((run_dir / "config.json").read_text())
    assert (record["preset"], record["config"]["loop"]["steps"], record["config"]["model"]["hidden"]) == (
        "quick",
        40,
        8,
    )


def test_demo_train_writes_a_report(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--train", "--recipe", "toy", "--out", str(out), *QUICK]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["run"] == str(out)
    assert f"report: {out / 'report.html'}" in captured.err and "wall time:" in captured.err
    page = (out / "report.html").read_text()
    assert 'src="curves.png"' in page and 'src="figures/regions.png"' in page  # relative paths only
    assert str(tmp_path) not in page.replace(f"--out {out}", "")  # no path of this machine but the command
    assert "Final metrics" in page and "loop.steps" in page and "Run</h2>" in page


def test_show_out_is_honoured_for_a_run(run_dir, tmp_path, capsys):
    out = tmp_path / "elsewhere"
    assert main(["show", str(run_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / "regions.png")] and (out / "regions.png").stat().st_size > 0


def test_report_writes_the_run_page_in_the_run_or_in_out(run_dir, tmp_path, capsys):
    import re

    assert main(["show", str(run_dir)]) == 0
    capsys.readouterr()
    assert main(["report", str(run_dir)]) == 0
    assert capsys.readouterr().out.strip() == str(run_dir / "report.html")
    page = (run_dir / "report.html").read_text()
    assert 'src="curves.png"' in page and "<td>finished: " in page and "Unfinished" not in page
    out = tmp_path / "pages"
    assert main(["report", str(run_dir), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out / "report.html")
    page = (out / "report.html").read_text()
    assert (out / "curves.png").is_file() and 'src="curves.png"' in page
    sources = re.findall(r'src="([^"]+)"', page)  # the run's figures, linked from the page's folder
    assert any(src.endswith("figures/regions.png") for src in sources)
    assert all((out / src).is_file() for src in sources) and str(tmp_path) not in page
    assert main(["report", str(tmp_path)]) == 2
    assert "is not a run directory: it has no config.json or metrics.jsonl" in capsys.readouterr().err


def test_report_draws_the_figures_of_a_run_that_has_none(tmp_path):
    out = tmp_path / "run"
    assert main(["train", "toy", *QUICK, "--out", str(out)]) == 0
    assert not (out / "figures").exists()
    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert (out / "figures" / "regions.png").is_file() and 'src="figures/regions.png"' in page
    assert "The classes the network gives each point of the plane" in page  # a caption in words
    (out / "figures" / "regions.png").unlink()
    (out / "checkpoint.pt").unlink()  # nothing to draw from: the page says so, and how
    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert "No figures yet. The run has no checkpoint to draw from." in page and "foveal show RUN" in page


def test_report_marks_an_interrupted_run(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "toy", *QUICK, "--set", "loop.steps=4", "--set", "loop.log_every=2", "--out", str(out)]) == 0
    record = json.loads((out / "config.json").read_text())
    record["config"]["loop"]["steps"] = 10  # as a run stopped at step 4 of 10 leaves its directory
    (out / "config.json").write_text(json.dumps(record))
    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert "Unfinished run" in page and "interrupted at step 4 of 10" in page and "Last metrics" in page


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--recipe", "toy"], "--recipe is used only with --train"),
        (["demo", "--preset", "quick", "--set", "a=b"], "--preset, --set are used only with --train"),
        (["show", "test-dot", "--threads", "2"], "--threads is not used by the figure 'test-dot': it runs no model"),
        (["train", "toy", "--resume", "--overwrite"], "pass one of them"),
    ],
)
def test_an_option_the_command_does_not_use_is_refused(argv, message, capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(FIGURES._entries, "test-dot", lambda out: [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("foveal: error: ")
    assert not list(tmp_path.iterdir())  # refused before anything was written


@pytest.mark.parametrize("command", ["list", "config toy", "eval RUN", "results x --metric acc"])
def test_an_option_a_command_does_not_take_is_an_error(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*command.split(), "--out", "x"])
    assert exit_.value.code == 2 and "unrecognized arguments: --out x" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "nope"], "unknown recipe 'nope'; choose from:"),
        (["train", "toy", "--preset", "medium"], "unknown preset 'medium' for recipe 'toy'; choose from: full, quick"),
        (["train", "toy", "--set", "loop.lrr=1"], "did you mean 'loop.lr'?"),
        (["train", "toy", "--set", "loop.optimizer=sgd"], "choose from: adam, adamw, rmsprop"),
        (["eval", "no/such/run"], "run directory 'no/such/run' does not exist"),
        (["show", "no-such-figure"], "is neither a run directory, a shipped model"),
        (["bench", "no-such-bench"], "unknown benchmark 'no-such-bench'"),
    ],
)
def test_user_errors_are_one_line(argv, message, capsys, tmp_path):
    out = ["--out", str(tmp_path / "r")] if argv[0] == "train" else []
    assert main(argv + out) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("foveal: error: ")


def test_console_error_has_no_traceback(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "foveal", "train", "toy", "--set", "loop.lr=fast", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr == "foveal: error: bad value 'fast' for loop.lr (--set); expected float\n"


def test_eval_threads_flag_sets_torch_threads(run_dir, capsys, monkeypatch):
    import torch

    seen = []
    monkeypatch.setattr(torch, "set_num_threads", seen.append)
    assert main(["eval", str(run_dir), "--threads", "2"]) == 0
    assert main(["show", str(run_dir), "--threads", "3"]) == 0
    assert seen == [2, 3]


def test_config_lists_every_key_with_its_value_and_doc(capsys):
    assert main(["config", "ntm-copy", "--preset", "quick", "--set", "model.n_rows=64"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split(" = ")[0]: line for line in lines[1:]}
    assert rows["model.n_rows"].startswith("model.n_rows = 64 ") and "memory locations" in rows["model.n_rows"]
    assert "loop.steps = 1200 " in rows["loop.steps"]  # the preset's value
    assert {"seed", "loop.lr", "model.controller", "curriculum"} <= rows.keys()


def test_config_refuses_an_unknown_key(capsys):
    assert main(["config", "toy", "--set", "model.hiden=3"]) == 2
    assert "did you mean 'model.hidden'" in capsys.readouterr().err


def test_show_draws_a_shipped_model_without_training(tmp_path, capsys):
    assert main(["show", "ntm-copy", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed and all(Path(p).is_file() and Path(p).stat().st_size > 1000 for p in printed)
    assert not (tmp_path / "index.html").exists()  # only the figures; the gallery is `foveal demo`
    assert all(Path(p).parent == tmp_path / "ntm-copy" for p in printed)


def test_demo_draws_what_it_can_and_names_a_model_whose_data_are_missing(tmp_path, monkeypatch):
    from foveal import demo
    from foveal.errors import DataUnavailableError

    def build(name, sets):
        if name == "stn":
            raise DataUnavailableError(
                "Fashion-MNIST not found; install it with `apt-get install dataset-fashion-mnist`"
            )
        return real_build(name, sets)

    real_build, real_sample = demo.build, demo.sample
    monkeypatch.setattr(demo, "build", build)
    monkeypatch.setattr(demo, "sample", lambda name: {} if name == "stn" else real_sample(name))  # as if none shipped
    result = demo.run_demo(tmp_path / "demo", names=["stn", "ntm-copy"])
    assert list(result["figures"]) == ["ntm-copy"] and "apt-get install" in result["skipped"]["stn"]
    page = result["page"].read_text()
    assert "Not drawn" in page and "dataset-fashion-mnist" in page and 'src="figures/ntm-copy/' in page


def test_demo_draws_the_gallery_of_shipped_models(tmp_path, capsys):
    from foveal.demo import run_demo

    result = run_demo(tmp_path / "demo", names=["ntm-copy"])
    page = result["page"].read_text()
    assert "ntm-copy" in page and 'src="figures/ntm-copy/' in page and str(tmp_path) not in page
    assert "foveal train ntm-copy" in page  # how the model was made
