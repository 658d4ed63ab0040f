"""The run directory: one type that names every file a run writes."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunDir:
    """The files of one run, all under ``path``.

    Example:
        >>> run = RunDir("runs/toy-quick")
        >>> run.checkpoint.name, run.metrics.name, run.figures.name
        ('checkpoint.pt', 'metrics.jsonl', 'figures')
    """

    path: Path

    def __init__(self, path: str | Path | RunDir) -> None:
        object.__setattr__(self, "path", path.path if isinstance(path, RunDir) else Path(path))

    @property
    def config(self) -> Path:
        """``config.json``: the recipe, the preset and the resolved config."""
        return self.path / "config.json"

    @property
    def checkpoint(self) -> Path:
        """``checkpoint.pt``: model, optimiser, scheduler, callbacks and RNG states."""
        return self.path / "checkpoint.pt"

    @property
    def metrics(self) -> Path:
        """``metrics.jsonl``: one JSON object per logged training window or evaluation."""
        return self.path / "metrics.jsonl"

    @property
    def eval(self) -> Path:
        """``eval.json``: the metrics of the last ``foveal eval``."""
        return self.path / "eval.json"

    @property
    def figures(self) -> Path:
        """``figures/``: what ``foveal show`` draws."""
        return self.path / "figures"

    @property
    def report(self) -> Path:
        """``report.html``: the run's page."""
        return self.path / "report.html"

    @property
    def info(self) -> Path:
        """``run.json``: how the run was made (command, dates, duration, commit, versions)."""
        return self.path / "run.json"

    @property
    def curves(self) -> Path:
        """``curves.png``: every logged metric against the step, drawn for the report."""
        return self.path / "curves.png"

    @property
    def tensorboard(self) -> Path:
        """``tensorboard/``: event files, when tensorboard is installed."""
        return self.path / "tensorboard"

    def clear(self) -> None:
        """Remove what a run writes (not anything else the directory may hold)."""
        for file in (self.checkpoint, self.metrics, self.eval, self.config, self.report, self.info, self.curves):
            file.unlink(missing_ok=True)
        for folder in (self.figures, self.tensorboard):
            shutil.rmtree(folder, ignore_errors=True)

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)
