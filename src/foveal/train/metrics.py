"""Where the loop's numbers go: ``RUN/metrics.jsonl``, TensorBoard (if installed), the terminal."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from foveal.train.run_dir import RunDir

if TYPE_CHECKING:
    from tqdm import tqdm


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every event in ``RUN/metrics.jsonl`` (an empty list if there is none)."""
    path = RunDir(run_dir).metrics
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _fmt(values: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4g}" for k, v in values.items())


def duration(seconds: float) -> str:
    """A short wall time: ``45s``, ``4m05s``, ``2h03m``.

    Example:
        >>> duration(45.2), duration(245), duration(7390)
        ('45s', '4m05s', '2h03m')
    """
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class MetricsLog:
    """One log for one run; only rank 0 makes one with ``enabled=True``.

    Each event is one JSON object ``{"step", "time", "split", **metrics}`` appended to
    ``metrics.jsonl``; ``time`` is seconds since the run (or the resumed part) started. Without a
    terminal (a log file, CI) each event is also a line ``step N/TOTAL SPLIT: metrics [elapsed, ~left]``,
    the time left being the mean wall time per step so far, evaluations included, times the steps to go.
    """

    def __init__(self, run: RunDir | str | Path, total_steps: int, start_step: int, enabled: bool = True) -> None:
        run = RunDir(run)
        self.enabled = enabled
        self.start = time.monotonic()
        self.total_steps, self.start_step = total_steps, start_step
        self.path = run.metrics
        self.tty = sys.stderr.isatty()
        self.bar: tqdm | None = None
        self.writer: Any = None
        if not enabled:
            return
        run.path.mkdir(parents=True, exist_ok=True)
        self._truncate_after(start_step)
        if self.tty:
            from tqdm import tqdm  # a recipes extra: only a terminal gets the bar

            self.bar = tqdm(total=total_steps, initial=start_step, dynamic_ncols=True, unit="step")
        try:  # TensorBoard is an optional extra
            from torch.utils.tensorboard import SummaryWriter

            # The checkpoint's own step was logged before it was saved: keep it, redo only what follows.
            self.writer = SummaryWriter(str(run.tensorboard), purge_step=start_step + 1 if start_step else None)
        except ImportError:
            self.writer = None

    def _truncate_after(self, step: int) -> None:
        """A resumed run redoes the steps after its checkpoint: drop their stale events."""
        if not self.path.is_file():
            return
        keep = [e for e in read_metrics(self.path.parent) if e["step"] <= step]
        self.path.write_text("".join(json.dumps(e) + "\n" for e in keep))

    def event(self, step: int, split: str, values: dict[str, float]) -> None:
        if not self.enabled:
            return
        record = {"step": step, "time": round(time.monotonic() - self.start, 3), "split": split, **values}
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        if self.writer is not None:
            for k, v in values.items():
                self.writer.add_scalar(f"{split}/{k}", v, step)
        if self.bar is not None:
            if split == "train":
                self.bar.set_postfix_str(_fmt(values), refresh=False)
            else:
                self.bar.write(f"step {step} {split}: {_fmt(values)}")
        else:
            print(
                f"step {step}/{self.total_steps} {split}: {_fmt(values)} {self.clock(step)}",
                file=sys.stderr,
                flush=True,
            )

    def clock(self, step: int) -> str:
        """``[elapsed, ~left]`` at ``step``: the time left from the mean wall time of this part's steps."""
        elapsed = time.monotonic() - self.start
        done = step - self.start_step
        if done <= 0 or step >= self.total_steps:
            return f"[{duration(elapsed)}]"
        return f"[{duration(elapsed)}, ~{duration(elapsed / done * (self.total_steps - step))} left]"

    def hparams(self, config: dict[str, Any], metrics: dict[str, float]) -> None:
        """Record the run's settings beside its final metrics (TensorBoard's HParams tab)."""
        if self.writer is None or not metrics:
            return
        plain = {k: v if isinstance(v, int | float | str | bool) else str(v) for k, v in config.items()}
        self.writer.add_hparams(plain, {f"final/{k}": v for k, v in metrics.items()}, run_name=".")

    def advance(self, n: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.writer is not None:
            self.writer.close()
