"""Draw the RAM paper's comparison from its results: test error and glimpses on the object during training.

    python scripts/draw_ram_paper.py [--results results/ram-paper.jsonl] [--out docs/figures]

``ram-paper-curves.png``: for translated and cluttered canvases, the test error of RAM and of the
convolutional baseline against training steps (the rows' ``curve``, one line per seed), and RAM's
``on_object``, the fraction of its glimpses centred on the object; the last fifth of training is shaded.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from foveal.sweep import read_results
from foveal.viz import pyplot
from foveal.viz._mpl import save_figure

DISTORTIONS = ("translated", "cluttered")
COLOURS = {"glimpse-cnn": "tab:blue", "ram": "tab:orange"}
LABELS = {"glimpse-cnn": "conv net (GlimpseCNN)", "ram": "RAM"}
PANELS = (("error", "test error %"), ("on_object", "RAM: glimpses on the object"))


def draw_curves(rows: list[dict], out: Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(len(PANELS), len(DISTORTIONS), figsize=(9, 5.2), squeeze=False)
    for j, distortion in enumerate(DISTORTIONS):
        cell = [r for r in rows if r["sets"]["distortion"] == distortion]
        steps = max((p["step"] for r in cell for p in r.get("curve", [])), default=0)
        for i, (metric, label) in enumerate(PANELS):
            ax = axes[i, j]
            for row in cell:
                points = [(p["step"], p[metric]) for p in row.get("curve", []) if metric in p]
                if points:
                    xs, ys = zip(*points, strict=True)
                    name = row["sets"]["model.name"]
                    ax.plot(xs, ys, color=COLOURS[name], linewidth=0.9, alpha=0.8, marker=".", markersize=3)
            if steps:
                ax.axvspan(0.8 * steps, steps, color="0.9", zorder=0)
            if metric == "on_object":
                ax.set_ylim(0, 1)
                ax.axhline(4 / 6, color="0.5", linewidth=0.7, linestyle="--")
            ax.set_title(f"{distortion}: {label}", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.set_xlabel("step", fontsize=7)
    handles = [plt.Line2D([], [], color=c, label=LABELS[n]) for n, c in COLOURS.items()]
    handles.append(plt.Rectangle((0, 0), 1, 1, color="0.9", label="last fifth of training"))
    handles.append(plt.Line2D([], [], color="0.5", linestyle="--", linewidth=0.7, label="4 of 6 glimpses"))
    fig.legend(handles=handles, loc="upper right", fontsize=7, ncol=2)
    fig.suptitle("ram paper preset, Fashion-MNIST: one line per seed", fontsize=9, x=0.25)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    return save_figure(fig, out / "ram-paper-curves.png", dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=Path("results/ram-paper.jsonl"))
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    args = parser.parse_args()
    print(draw_curves(read_results(args.results), args.out))


if __name__ == "__main__":
    main()
