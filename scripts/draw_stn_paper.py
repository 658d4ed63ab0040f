"""Draw the STN paper's comparison from its results: the test-error curves and where each transformer looks.

    python scripts/draw_stn_paper.py [--results results/stn-paper.jsonl] [--runs runs/sweeps/stn-paper/stn/paper] \\
        [--out docs/figures]

- ``stn-paper-curves.png``: test error against training steps (the rows' ``curve``), one panel per data set
  and distortion, CNN and ST-CNN, one thin line per seed; the last fifth of training is shaded.
- ``stn-paper-boxes-DATASET.png``: for each distortion, six test images spread over the test set with the
  box the seed-0 ST-CNN's transform selects (orange) and the object's outline (cyan; on a cluttered canvas
  the object's box, dashed), and under them what its CNN sees. The runs are found under ``--runs`` by their
  saved config; a cell without one is left out and named.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from foveal.models.stn_classifier import transform_box
from foveal.runs import holds_this_run, load_run
from foveal.sweep import read_results
from foveal.viz import pyplot
from foveal.viz._mpl import save_figure
from foveal.viz.stn import OBJECT_COLOUR, OBJECT_LEVEL

DISTORTIONS = ("R", "RTS", "P", "E", "cluttered")
DATASETS = ("fashion-mnist", "mnist")
COLOURS = {"cnn": "tab:blue", "stcnn": "tab:orange"}
LABELS = {"cnn": "CNN", "stcnn": "ST-CNN"}


def draw_curves(rows: list[dict], out: Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(len(DATASETS), len(DISTORTIONS), figsize=(13, 5.2), squeeze=False)
    for i, dataset in enumerate(DATASETS):
        for j, distortion in enumerate(DISTORTIONS):
            ax = axes[i, j]
            cell = [r for r in rows if r["sets"]["data.dataset"] == dataset and r["sets"]["distortion"] == distortion]
            steps = 0
            for row in cell:
                name = row["sets"]["model.name"]
                points = [(p["step"], p["error"]) for p in row.get("curve", [])]
                if points:
                    xs, ys = zip(*points, strict=True)
                    steps = max(steps, xs[-1])
                    ax.plot(xs, ys, color=COLOURS[name], linewidth=0.9, alpha=0.8, marker=".", markersize=2)
            if steps:
                ax.axvspan(0.8 * steps, steps, color="0.9", zorder=0)
            finals = [r["metrics"]["error"] for r in cell]
            if finals:
                ax.set_ylim(0, min(100, 2.5 * max(finals)))
            ax.set_title(f"{dataset}, {distortion}", fontsize=8)
            ax.tick_params(labelsize=6)
            if i == len(DATASETS) - 1:
                ax.set_xlabel("step", fontsize=7)
            if j == 0:
                ax.set_ylabel("test error %", fontsize=7)
    handles = [plt.Line2D([], [], color=c, label=LABELS[n]) for n, c in COLOURS.items()]
    handles.append(plt.Rectangle((0, 0), 1, 1, color="0.9", label="last fifth of training"))
    fig.legend(handles=handles, loc="upper right", fontsize=7, ncol=3)
    fig.suptitle("stn paper preset: test error during training, one line per seed", fontsize=9, x=0.3)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return save_figure(fig, out / "stn-paper-curves.png", dpi=110)


def find_run(runs: Path, dataset: str, distortion: str, seed: int) -> Path | None:
    settings = {"data.dataset": dataset, "distortion": distortion, "model.name": "stcnn"}
    for path in sorted(runs.glob("*")):
        if path.is_dir() and holds_this_run(path, "stn", "paper", settings, seed):
            return path
    return None


def draw_boxes(runs: Path, dataset: str, out: Path, count: int = 6) -> Path | None:
    plt = pyplot()
    found = {d: find_run(runs, dataset, d, 0) for d in DISTORTIONS}
    missing = [d for d, path in found.items() if path is None]
    if missing:
        print(f"{dataset}: no seed-0 ST-CNN run under {runs} for {', '.join(missing)}; left out")
    cells = [(d, path) for d, path in found.items() if path is not None]
    if not cells:
        return None
    fig, axes = plt.subplots(2 * len(cells), count, figsize=(1.35 * count, 2.5 * len(cells)), squeeze=False)
    for k, (distortion, path) in enumerate(cells):
        run = load_run(path)
        model, test = run.task.model.eval(), run.task.evaluation_set()
        # spread over the test set: MNIST 5k's test split is ordered by digit
        picks = torch.linspace(0, len(test) - 1, count).long()
        images = test.images[picks].float() / 255.0
        with torch.no_grad():
            logits, theta, seen = model(images)
        H, W = images.shape[-2:]
        boxes = transform_box(theta, (H, W))
        right = (logits.argmax(-1) == test.labels[picks]).tolist()
        for j in range(count):
            top, bottom = axes[2 * k, j], axes[2 * k + 1, j]
            picture = images[j, 0].numpy()
            top.imshow(picture, cmap="gray", vmin=0, vmax=1)
            if getattr(test, "boxes", None) is not None:  # a canvas knows where its garment is, among the clutter
                x0, y0, x1, y1 = test.boxes[picks[j]].tolist()
                top.plot([x0, x1, x1, x0, x0], [y0, y0, y1, y1, y0], color=OBJECT_COLOUR, linewidth=0.7, linestyle="--")
            else:
                top.contour(picture > OBJECT_LEVEL, levels=[0.5], colors=OBJECT_COLOUR, linewidths=0.5)
            box = boxes[j].numpy()
            top.plot(box[:, 0], box[:, 1], color="orange", linewidth=1.1)
            top.set_xlim(-2.5, W + 1.5)
            top.set_ylim(H + 1.5, -2.5)
            top.set_title("right" if right[j] else "wrong", fontsize=6, color="limegreen" if right[j] else "red")
            bottom.imshow(seen[j, 0].numpy(), cmap="gray", vmin=0, vmax=1)
        axes[2 * k, 0].set_ylabel(f"{distortion}\ninput", fontsize=7)
        axes[2 * k + 1, 0].set_ylabel("ST output", fontsize=7)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(
        f"ST-CNN (seed 0) on {dataset}: the box its transform selects (orange),\n"
        "the object's outline (cyan; dashed: its box on a cluttered canvas), and what its CNN sees",
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return save_figure(fig, out / f"stn-paper-boxes-{dataset}.png", dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="results/stn-paper.jsonl")
    parser.add_argument("--runs", default="runs/sweeps/stn-paper/stn/paper")
    parser.add_argument("--out", default="docs/figures")
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    print(draw_curves(read_results(args.results), out))
    for dataset in DATASETS:
        if (path := draw_boxes(Path(args.runs), dataset, out)) is not None:
            print(path)


if __name__ == "__main__":
    main()
