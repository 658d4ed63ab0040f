"""Every failure a user can cause or meet on the command line: one stderr line, exit 2, no traceback.

Each case runs ``foveal`` in a subprocess, as a user would, and checks that nothing is left
half-written in the run directory.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

TOY = ["--set", "loop.steps=4", "--set", "loop.ckpt_every=2", "--set", "loop.eval_every=0", "--set", "model.hidden=8"]


def foveal(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "FOVEAL_DEBUG"} | (env or {})
    command = [sys.executable, "-m", "foveal", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=environment, timeout=300)


def assert_one_line_error(result: subprocess.CompletedProcess, *words: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(lines) == 1, result.stderr
    assert lines[0].startswith("foveal: error: "), lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def no_temp_files(folder: Path) -> bool:
    return not [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


@pytest.fixture(scope="module")
def good_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("good")
    result = foveal("train", "toy", *TOY, "--out", "run", cwd=root)
    assert result.returncode == 0, result.stderr
    return root / "run"


@pytest.fixture
def run(tmp_path, good_run) -> Path:
    """A fresh copy of a trained toy run, to break."""
    return Path(shutil.copytree(good_run, tmp_path / "run"))


class Malicious:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def break_checkpoint(path: Path, how: str) -> None:
    if how == "truncated":
        path.write_bytes(path.read_bytes()[:300])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "random":
        path.write_bytes(bytes(torch.randint(0, 256, (4096,), generator=torch.Generator().manual_seed(0)).tolist()))
    elif how == "tensor":
        torch.save(torch.ones(3), path)
    elif how == "malicious":
        torch.save({"model": Malicious()}, path)


CHECKPOINT_CASES = {
    "truncated": "truncated, empty or not a torch file",
    "empty": "truncated, empty or not a torch file",
    "random": "truncated, empty or not a torch file",
    "tensor": "not a foveal checkpoint",
    "malicious": "objects other than tensors",
}


# Each way of breaking a checkpoint through `eval`, and each command on a truncated one, in the default run;
# the other pairs (each a few seconds of a new process) in `make test-slow`.
BROKEN_CHECKPOINTS = [
    pytest.param(command, how, marks=[] if command == "eval" or how == "truncated" else pytest.mark.slow)
    for how in CHECKPOINT_CASES
    for command in ("eval", "resume", "show")
]


@pytest.mark.parametrize(("command", "how"), BROKEN_CHECKPOINTS)
def test_a_broken_checkpoint_is_named(run, command, how):
    break_checkpoint(run / "checkpoint.pt", how)
    before = (run / "checkpoint.pt").read_bytes()
    if command == "resume":
        args = ["train", "toy", *TOY, "--set", "loop.steps=6", "--out", "run", "--resume"]
    else:
        args = [command, "run"]
    assert_one_line_error(foveal(*args, cwd=run.parent), CHECKPOINT_CASES[how])
    assert (run / "checkpoint.pt").read_bytes() == before  # left as it was, for the user to look at
    assert not (run.parent / "pwned").exists()


def test_another_models_checkpoint_is_named(run, tmp_path):
    other = foveal("train", "toy", *TOY, "--set", "model.hidden=16", "--out", "other", cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    shutil.copy(tmp_path / "other" / "checkpoint.pt", run / "checkpoint.pt")
    assert_one_line_error(foveal("eval", "run", cwd=tmp_path), "does not fit this model", "shapes differ")
    resume = foveal("train", "toy", *TOY, "--set", "loop.steps=6", "--out", "run", "--resume", cwd=tmp_path)
    assert_one_line_error(resume, "does not fit this model")


def test_another_recipes_checkpoint_is_named(run, tmp_path):
    ntm = ["--set", "loop.steps=1", "--set", "model.controller_size=8", "--set", "model.n_rows=8"]
    ntm += ["--set", "n_eval=4", "--set", "generalise_lengths=", "--set", "loop.batch_size=2"]
    other = foveal("train", "ntm-copy", *ntm, "--out", "ntm", cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    shutil.copy(tmp_path / "ntm" / "checkpoint.pt", run / "checkpoint.pt")
    assert_one_line_error(foveal("eval", "run", cwd=tmp_path), "does not fit this model", "missing")


def test_an_older_checkpoint_format_is_named(run):
    state = torch.load(run / "checkpoint.pt", weights_only=True)
    torch.save({**state, "format": 0}, run / "checkpoint.pt")
    resume = foveal("train", "toy", *TOY, "--set", "loop.steps=6", "--out", "run", "--resume", cwd=run.parent)
    assert_one_line_error(resume, "checkpoint format 0")


@pytest.mark.parametrize(
    ("content", "words"),
    [('{"config": {}}', ["names no recipe"]), ("{not json", ["not valid JSON"]), ("[1, 2]", ["names no recipe"])],
)
def test_a_broken_config_json_is_named(run, content, words):
    (run / "config.json").write_text(content)
    assert_one_line_error(foveal("eval", "run", cwd=run.parent), *words)


def test_out_under_a_regular_file(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    result = foveal("train", "toy", *TOY, "--out", "file/run", cwd=tmp_path)
    assert_one_line_error(result, "cannot use", "file/run")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_out_in_a_read_only_directory(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        assert_one_line_error(foveal("train", "toy", *TOY, "--out", "locked/run", cwd=tmp_path), "permission denied")
    finally:
        locked.chmod(0o700)


def test_out_on_a_file_system_that_refuses_it(tmp_path):
    assert_one_line_error(foveal("train", "toy", *TOY, "--out", "/proc/foveal-run", cwd=tmp_path), "cannot use")


def test_a_start_that_fails_leaves_the_run_directory_as_it_was(tmp_path, run):
    """A data set that is not there fails the start before training: no config.json of a run that never
    began, and an --overwrite that fails keeps the run it was to replace."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "easy_vqa.py").write_text('raise ImportError("not installed here")\n')
    env = {
        "PYTHONPATH": os.pathsep.join([str(hidden), os.environ.get("PYTHONPATH", "")]),
        "FOVEAL_CACHE": str(tmp_path / "cache"),
    }
    result = foveal("train", "easy-vqa", "--preset", "quick", "--out", "new", cwd=tmp_path, env=env)
    assert_one_line_error(result, "pip install easy-vqa")
    assert not (tmp_path / "new").exists()
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    result = foveal("train", "easy-vqa", "--preset", "quick", "--overwrite", "--out", "run", cwd=tmp_path, env=env)
    assert_one_line_error(result, "pip install easy-vqa")
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_a_missing_run_directory_is_named(tmp_path):
    assert_one_line_error(foveal("eval", "nowhere", cwd=tmp_path), "does not exist")


def test_a_diverging_run_stops_and_keeps_its_last_good_checkpoint(tmp_path):
    args = ["train", "toy", "--set", "loop.lr=1e30", "--set", "loop.ckpt_every=1", "--set", "loop.steps=50"]
    line = assert_one_line_error(foveal(*args, "--out", "run", cwd=tmp_path), "not finite", "step")
    stopped_at = int(line.split("step ")[1].split(":")[0])
    state = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    assert state["step"] == stopped_at - 1  # the last good step, not the one that diverged
    assert all(torch.isfinite(t).all() for t in state["model"].values())
    assert no_temp_files(tmp_path)


def test_skipping_non_finite_steps_is_counted(tmp_path):
    args = ["train", "toy", "--set", "loop.lr=1e30", "--set", "loop.nonfinite=skip", "--set", "loop.steps=20"]
    result = foveal(*args, "--set", "loop.log_every=20", "--set", "loop.eval_every=0", "--out", "run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert logged[-2]["skipped"] > 0
    state = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    assert all(torch.isfinite(t).all() for t in state["model"].values())


def test_a_missing_package_is_named(tmp_path):
    # easy_vqa shadowed by a module that cannot be imported, as on a machine without the extra
    (tmp_path / "easy_vqa.py").write_text("raise ModuleNotFoundError('no easy_vqa', name='easy_vqa')\n")
    env = {"PYTHONPATH": str(tmp_path), "FOVEAL_CACHE": str(tmp_path / "cache")}  # nothing cached to fall back on
    result = foveal("train", "easy-vqa", "--set", "loop.steps=1", "--out", "run", cwd=tmp_path, env=env)
    assert_one_line_error(result, "easy-vqa")


def test_debug_shows_the_traceback(tmp_path):
    result = foveal("eval", "nowhere", cwd=tmp_path, env={"FOVEAL_DEBUG": "1"})
    assert result.returncode != 0 and "Traceback" in result.stderr
