"""A run directory's life: start or resume training, rebuild it, evaluate, draw, report.

The CLI is a thin shell over these functions; :func:`run_pipeline` is ``foveal demo`` for any
recipe. :class:`foveal.train.RunDir` names every file a run directory holds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foveal.errors import DataUnavailableError, FovealError
from foveal.recipes import load_all
from foveal.recipes.base import Recipe, RunConfig, Task
from foveal.recipes.config import (
    apply_overrides,
    config_to_dict,
    load_run_config,
    read_config_file,
    resolve_config,
    save_run_config,
    validate,
)
from foveal.registry import RECIPES
from foveal.train import Interrupted, RunDir, cpu_threads, evaluate, load, seed_everything, train, use_threads
from foveal.train.checkpoint import load_model_state, write_text_atomic
from foveal.train.distributed import is_main

# Keys a resumed run may change: they steer logging and stopping, not the numbers already made.
RESUMABLE_CHANGES = {"threads", "loop.steps", "loop.eval_every", "loop.ckpt_every", "loop.log_every"}


def default_run_dir(recipe: str, preset: str | None) -> Path:
    """``runs/RECIPE-PRESET`` (``runs/RECIPE-default`` without a preset)."""
    return Path("runs") / f"{recipe}-{preset or 'default'}"


def get_recipe(name: str) -> Recipe:
    load_all()
    return RECIPES.get(name)


@dataclass
class Run:
    """A rebuilt run: its recipe, preset, config, and task (model weights loaded if trained)."""

    dir: Path
    recipe: Recipe
    preset: str | None
    config: RunConfig
    task: Task

    def __fspath__(self) -> str:
        return str(self.dir)


def _diff(saved: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for k in sorted(saved.keys() | new.keys()):
        a, b = saved.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            keys += _diff(a, b, f"{prefix}{k}.")
        elif a != b:
            keys.append(f"{prefix}{k}")
    return keys


def holds_this_run(
    run_dir: str | Path,
    recipe_name: str,
    preset: str | None,
    sets: dict[str, Any] | None = None,
    seed: int | None = None,
) -> bool:
    """Whether ``run_dir`` holds a checkpoint of the very run these arguments resolve to today (the thread
    count aside), so that resuming it ends as a fresh run would. A run of other settings, or of defaults
    that have changed since, does not count."""
    if not RunDir(run_dir).checkpoint.is_file():
        return False
    try:
        saved_recipe, saved_preset, saved = load_run_config(run_dir)
        today = resolve_config(get_recipe(recipe_name), preset, None, sets, seed, saved.threads)
        # As written (JSON), not as rebuilt: a key the run predates would read as today's default.
        written = json.loads(RunDir(run_dir).config.read_text())["config"]
    except (ValueError, OSError):  # a config from an older foveal, or none: not this run
        return False
    return (
        saved_recipe.name == recipe_name
        and saved_preset == preset
        and not _diff(written, json.loads(json.dumps(config_to_dict(today))))
    )


@dataclass(frozen=True)
class RunRequest:
    """What ``foveal train`` asks for: a recipe, the layers of its config, and where the run goes.

    Example:
        >>> request = RunRequest("toy", "quick", sets={"loop.steps": "20"}, out="runs/toy-short")
        >>> request.run_dir, request.resume
        (PosixPath('runs/toy-short'), False)
    """

    recipe: str  # the recipe's name (`foveal list`)
    preset: str | None = None  # one of the recipe's presets; None: its defaults
    config_file: str | Path | None = None  # a .toml or .json file of overrides (`--config`)
    sets: Mapping[str, Any] | None = None  # {dotted key: value} overrides (`--set`), applied after the file
    seed: int | None = None  # `--seed`, applied last; None: the config's
    threads: int | None = None  # `--threads` (0: every core); None: the config's
    out: str | Path | None = None  # the run directory; None: runs/RECIPE-PRESET
    resume: bool = False  # continue the run in `out` from its checkpoint
    overwrite: bool = False  # train afresh over a run already in `out`

    @property
    def run_dir(self) -> Path:
        """``out``, or :func:`default_run_dir`."""
        return Path(self.out) if self.out is not None else default_run_dir(self.recipe, self.preset)


def prepare_run(request: RunRequest, save: bool = True) -> tuple[Path, Recipe, str | None, RunConfig]:
    """Resolve and save the config of a new or resumed run; returns ``(run_dir, recipe, preset, config)``.

    A resumed run starts from its saved config, then applies the request's ``config_file``, ``sets``,
    ``seed`` and ``threads``; the result may differ from the saved one only in :data:`RESUMABLE_CHANGES`.
    With ``save=False`` nothing is written (nor an overwritten run cleared): :func:`begin_run` does it.
    """
    recipe, preset, run_dir = get_recipe(request.recipe), request.preset, request.run_dir
    if request.resume:
        if not RunDir(run_dir).checkpoint.is_file():
            raise FovealError(f"cannot resume: {RunDir(run_dir).checkpoint} does not exist")
        saved_recipe, saved_preset, config = load_run_config(run_dir)
        if saved_recipe.name != recipe.name:
            raise FovealError(f"cannot resume: {run_dir} is a run of recipe {saved_recipe.name!r}, not {recipe.name!r}")
        if preset is not None and preset != saved_preset:
            raise FovealError(f"cannot resume: {run_dir} was trained with preset {saved_preset!r}, not {preset!r}")
        saved = config_to_dict(config)
        if request.config_file is not None:
            apply_overrides(config, read_config_file(request.config_file), str(request.config_file))
        if request.sets:
            apply_overrides(config, request.sets, "--set")
        config.seed = config.seed if request.seed is None else request.seed
        config.threads = config.threads if request.threads is None else request.threads
        validate(config)
        changed = set(_diff(saved, config_to_dict(config))) - RESUMABLE_CHANGES
        if changed:
            raise FovealError(
                f"cannot resume {run_dir}: only {', '.join(sorted(RESUMABLE_CHANGES))} may change, "
                f"not {', '.join(sorted(changed))}"
            )
        preset = saved_preset
    else:
        config = resolve_config(recipe, preset, request.config_file, request.sets, request.seed, request.threads)
        if RunDir(run_dir).checkpoint.is_file() and not request.overwrite:
            raise FovealError(f"{run_dir} already holds a run; pass --resume to continue it, --overwrite, or --out NEW")
    if save:
        begin_run(run_dir, recipe.name, preset, config, clear=request.overwrite and not request.resume)
    return run_dir, recipe, preset, config


def begin_run(run_dir: Path, recipe_name: str, preset: str | None, config: RunConfig, clear: bool = False) -> None:
    """Write the run's ``config.json`` (after removing what an earlier run wrote there, with ``clear``)."""
    if is_main():
        if clear:
            RunDir(run_dir).clear()
        save_run_config(run_dir, recipe_name, preset, config)


def start_run(request: RunRequest, command: str = "python API") -> tuple[Run, dict[str, float]]:
    """Resolve and save the config, build the task, train: the one way a run is trained.

    Returns the trained :class:`Run` (task and model in memory) and the final metrics. See
    :func:`prepare_run` for what a resumed run may change. ``command`` is recorded in ``run.json``
    as what made the run (the command line does it; a resumed run keeps its first command).
    """
    run_dir, recipe, preset, config = prepare_run(request, save=False)
    resume = request.resume
    seed_everything(config.seed)
    task = recipe.build(config)
    # Only a task that was built makes a run: a start that failed (missing data, an option the model
    # refuses) leaves the directory as it found it.
    begin_run(run_dir, recipe.name, preset, config, clear=request.overwrite and not resume)
    started, cpu = time.time(), _cpu_seconds()
    try:
        metrics = train(task, config, run_dir, resume=resume)
    except Interrupted:  # the checkpoint holds this part's steps, so run.json counts its time too
        if is_main():
            record_run_info(RunDir(run_dir), config, started, resume, command, cpu)
        raise
    if is_main():
        record_run_info(RunDir(run_dir), config, started, resume, command, cpu)
    return Run(run_dir, recipe, preset, config, task), metrics


def _cpu_seconds() -> float:
    """User CPU time of this process so far, every thread's (what a run costs on a shared machine)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_utime


def commit_id() -> str:
    """The commit of foveal's source checkout (with ``+`` if it has uncommitted changes), or ``unknown``."""
    import subprocess

    source = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=source, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=source, capture_output=True, text=True)
    except OSError:
        return "unknown"
    if head.returncode:
        return "unknown"
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def record_run_info(
    run: RunDir, config: RunConfig, started: float, resumed: bool, command: str, cpu_started: float | None = None
) -> None:
    """Write ``run.json``: the command, when, how long in wall and CPU seconds (every resumed part added),
    commit and versions. ``cpu_started`` is :func:`_cpu_seconds` when this part began (None: not measured)."""
    import platform

    import torch

    import foveal

    info = json.loads(run.info.read_text()) if resumed and run.info.is_file() else {}
    seconds = time.time() - started
    info.update(
        {
            "command": info.get("command") or command,
            "started": info.get("started") or time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)),
            "seconds": round(info.get("seconds", 0.0) + seconds, 1),
            "cpu_seconds": round(info.get("cpu_seconds", 0.0) + _cpu_seconds() - (cpu_started or _cpu_seconds()), 1),
            "parts": info.get("parts", 0) + 1,
            "seed": config.seed,
            "threads": cpu_threads(config.threads),
            "commit": commit_id(),
            "foveal": foveal.__version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
        }
    )
    write_text_atomic(json.dumps(info, indent=2) + "\n", run.info)


def load_run(run_dir: str | Path) -> Run:
    """Rebuild a run's task from ``RUN/config.json`` and load the trained weights."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FovealError(f"run directory {str(run_dir)!r} does not exist")
    recipe, preset, config = load_run_config(run_dir)
    seed_everything(config.seed)
    task = recipe.build(config)
    path = RunDir(run_dir).checkpoint
    if not path.is_file():
        raise FovealError(f"{run_dir} has no {path.name}; train it first (foveal train {recipe.name} --out {run_dir})")
    state = load(path)
    load_model_state(task.model, state.get("model"), path)
    for callback, saved in zip(task.callbacks, state.get("callbacks", []), strict=False):
        callback.load_state_dict(saved)
    return Run(run_dir, recipe, preset, config, task)


def eval_run(run: str | Path | Run, threads: int | None = None) -> dict[str, float]:
    """Evaluate a trained run on its eval set and write ``RUN/eval.json`` (``threads``: default the run's)."""
    run = run if isinstance(run, Run) else load_run(run)
    use_threads(threads or run.config.threads)
    if run.task.evaluate is None or run.task.eval_set is None:
        raise FovealError(f"recipe {run.recipe.name!r} defines no evaluation")
    metrics = evaluate(run.task, run.task.model)
    write_text_atomic(json.dumps(metrics, indent=2) + "\n", RunDir(run.dir).eval)
    return metrics


def show_run(run: str | Path | Run, threads: int | None = None, out: str | Path | None = None) -> list[Path]:
    """Draw a trained run's figures into ``RUN/figures/``, or into ``out`` (``threads``: default the run's)."""
    import torch

    run = run if isinstance(run, Run) else load_run(run)
    use_threads(threads or run.config.threads)
    if run.task.show is None or run.task.eval_set is None:
        raise FovealError(f"recipe {run.recipe.name!r} draws no figures")
    model = run.task.model.eval()
    with torch.no_grad():
        paths = list(run.task.show(model, run.task.eval_set, Path(out) if out is not None else RunDir(run.dir).figures))
    log_figures(RunDir(run.dir), paths, run.config.loop.steps)
    return paths


def report_run(run_dir: str | Path, out: str | Path | None = None, threads: int | None = None) -> Path:
    """Write the run's page (:func:`foveal.viz.report.write_report`), first drawing its figures into
    ``RUN/figures/`` if it has none and can: a trained run of a recipe that draws, whose data are on this
    machine. Where it cannot, the page says why and how to draw them."""
    from foveal.viz.report import IMAGE_SUFFIXES, write_report

    run = RunDir(run_dir)
    note = None
    drawn = run.figures.is_dir() and any(p.suffix.lower() in IMAGE_SUFFIXES for p in run.figures.glob("**/*"))
    if not drawn and run.config.is_file():
        if not run.checkpoint.is_file():
            note = "The run has no checkpoint to draw from"
        else:
            try:
                show_run(run.path, threads=threads)
            except DataUnavailableError as e:
                note = f"Its data are not on this machine ({e})"
            except FovealError as e:
                note = str(e)[:1].upper() + str(e)[1:]
    return write_report(run.path, out=out, figures_note=note)


def export_run(run: str | Path | Run, path: str | Path) -> Path:
    """Save a trained run's model as a directory :func:`foveal.from_pretrained` loads; returns it.

    The card holds the recipe's preprocessing and labels (a VQA model's vocabulary and answers, a
    classifier's class names) and the run's recipe, preset and config.
    """
    from foveal.artifact import save_pretrained

    run = run if isinstance(run, Run) else load_run(run)
    described = run.recipe.describe(run.config, run.task) if run.recipe.describe else {}
    card = {"recipe": run.recipe.name, "preset": run.preset, "config": config_to_dict(run.config)}
    return save_pretrained(run.task.model, path, card=card, **described)


def log_figures(run: RunDir, paths: list[Path], step: int) -> None:
    """Add the figures to the run's TensorBoard log as images, when tensorboard is installed."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return
    import numpy as np
    from PIL import Image

    writer = SummaryWriter(str(run.tensorboard))
    try:
        for path in paths:
            if path.suffix.lower() == ".png":
                image = np.asarray(Image.open(path).convert("RGB"))
                writer.add_image(f"figures/{path.stem}", image, step, dataformats="HWC")
    finally:
        writer.close()


def run_pipeline(
    recipe: str,
    preset: str | None = "quick",
    out: str | Path | None = None,
    threads: int | None = None,
    sets: dict[str, Any] | None = None,
    seed: int | None = None,
    command: str = "python API",
) -> dict[str, Any]:
    """Train from scratch, evaluate, draw and write the report: ``foveal demo`` for any recipe.

    Returns ``{"run_dir", "report", "metrics", "figures", "seconds"}``.
    """
    from foveal.viz.report import write_report

    start = time.monotonic()
    request = RunRequest(recipe, preset, sets=sets, seed=seed, threads=threads, out=out, overwrite=True)
    run, metrics = start_run(request, command=command)
    # The loop's final evaluation is of this very model: keep it rather than evaluate again.
    if run.task.evaluate is not None and run.task.eval_set is not None:
        write_text_atomic(json.dumps(metrics, indent=2) + "\n", RunDir(run.dir).eval)
    figures = show_run(run) if run.task.show is not None else []
    report = write_report(run.dir)
    return {
        "run_dir": run.dir,
        "report": report,
        "metrics": metrics,
        "figures": figures,
        "seconds": time.monotonic() - start,
    }
