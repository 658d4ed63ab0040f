"""Plot test -ELBO against training CPU seconds from ``draw_equal_time.py`` runs.

    python studies/draw-equal-time/draw_curves.py runs/draw-race/mnist-attention-seed0 \\
        runs/draw-race/mnist-none-seed0 --out docs/figures/draw_equal_time.png

Each run directory holds ``curve.jsonl`` (one line per evaluation: ``cpu_s``, ``step``,
``train_loss``, ``neg_elbo``); the label is the directory's name. Solid lines are the test
negative ELBO, dashed the training loss over the window before each evaluation (same colour).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def load(run_dir: Path) -> list[dict[str, float]]:
    """The records of ``run_dir/curve.jsonl``, in order."""
    lines = (run_dir / "curve.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("docs/figures/draw_equal_time.png"))
    parser.add_argument("--title", default="DRAW on binarised MNIST 5k, equal CPU time")
    args = parser.parse_args()
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for i, run in enumerate(args.runs):
        records = load(run)
        cpu = [r["cpu_s"] for r in records]
        colour = f"C{i}"
        ax.plot(cpu, [r["neg_elbo"] for r in records], "o-", color=colour, label=f"{run.name}: test -ELBO")
        ax.plot(cpu, [r["train_loss"] for r in records], "--", color=colour, alpha=0.6, label=f"{run.name}: train")
    ax.set_xlabel("training CPU seconds (one thread)")
    ax.set_ylabel("nats per image")
    ax.set_title(args.title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(args.out)
    print(args.out)


if __name__ == "__main__":
    main()
