"""Draw DRAW's attention-against-none comparison from its results: test NLL against CPU seconds.

    python scripts/draw_draw_attention.py [--results results/draw-attention.jsonl] \\
        [--unseen results/draw-attention-unseen.jsonl] [--out docs/figures]

Writes ``draw-attention-DATASET.png`` per data set: every evaluation of every run (the rows' ``curve``),
test IWAE NLL against the CPU seconds the run had spent by then, attention and none, one line per seed
(the unseen seeds dashed). A run's CPU time is known at its end only; each evaluation is placed at the
run's CPU seconds times the share of its steps done, which holds because every step and every
evaluation of a run costs the same.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from foveal.sweep import read_results
from foveal.viz import pyplot
from foveal.viz._mpl import FIGURE_DPI, FONT, save_figure

ARMS = {"true": ("attention (12 x 12 read and write)", "tab:orange"), "false": ("none (whole image)", "tab:blue")}
TITLES = {"mnist": "MNIST 5k (binarised)", "fashion-mnist": "Fashion-MNIST (binarised)"}
METRIC = "iwae_nll"


def draw(rows: list[dict], unseen: list[dict], dataset: str, out: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    finals = []
    for style, group in (("-", rows), ("--", unseen)):
        for row in group:
            if row["sets"]["dataset"] != dataset or not row.get("curve"):
                continue
            steps = row["curve"][-1]["step"]
            xs = [row["cpu_s"] * point["step"] / steps for point in row["curve"]]
            ys = [point[METRIC] for point in row["curve"]]
            ax.plot(xs, ys, style, color=ARMS[row["sets"]["model.attention"]][1], linewidth=1.2, marker=".")
            finals.append(ys[-1])
    if finals:
        ax.set_ylim(min(finals) - 5, max(finals) + 35)
    ax.set_xlabel("CPU seconds of training and evaluation (one thread)", fontsize=FONT)
    ax.set_ylabel(f"test NLL, nats ({METRIC}, k = 20)", fontsize=FONT)
    ax.set_title(f"DRAW on {TITLES[dataset]}: attention against none, seeds as lines", fontsize=FONT + 1)
    ax.tick_params(labelsize=FONT)
    ax.grid(alpha=0.3)
    handles = [plt.Line2D([], [], color=colour, label=label) for label, colour in ARMS.values()]
    if any(r["sets"]["dataset"] == dataset for r in unseen):
        handles.append(plt.Line2D([], [], color="0.4", linestyle="--", label="a seed no tuning used"))
    ax.legend(handles=handles, fontsize=FONT, loc="upper right")
    fig.tight_layout()
    return save_figure(fig, out / f"draw-attention-{dataset}.png", dpi=FIGURE_DPI)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results/draw-attention.jsonl"))
    parser.add_argument("--unseen", type=Path, default=Path("results/draw-attention-unseen.jsonl"))
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    args = parser.parse_args()
    rows, unseen = read_results(args.results), read_results(args.unseen)
    for dataset in TITLES:
        print(draw(rows, unseen, dataset, args.out))


if __name__ == "__main__":
    main()
