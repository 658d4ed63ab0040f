"""Which glimpse trains more easily, end to end? STN vs Gaussian reads on cluttered canvases.

The ``stn`` recipe's ST-CNN with the 3-parameter ``attention`` transform (zoom and shift) on 60 x 60
cluttered Fashion-MNIST, its CNN reading a 28 x 28 glimpse. The two arms share everything (the
localisation net, its identity start, the CNN, Adam at lr 1e-3, batches, seeds) except the read:
``model.read=bilinear`` samples the glimpse with the STN's bilinear sampler, ``model.read=gaussian``
puts one Gaussian (std ``model.gaussian_std`` strides) on each of the same sampling points
(:func:`foveal.glimpse.gaussian_params`). Train the runs first (one per arm and seed), then summarise:

    for read in bilinear gaussian; do for seed in 0 1 2; do
      foveal train stn --preset quick --seed $seed --threads 1 --set distortion=cluttered \\
        --set model.name=stcnn --set model.transform=attention --set model.out_size=28 \\
        --set model.read=$read --set loop.steps=3000 --set loop.eval_every=250 --out runs/e2e/$read-s$seed
    done; done
    python studies/glimpse-end-to-end/glimpse_end_to_end.py runs/e2e --figure docs/figures/glimpse-end-to-end.png

It prints, per arm (mean over seeds, with the range): the test error (first 2,000 test images) at
each evaluation, the steps each seed needs to reach a given error, where the glimpse lands (IoU of
the box the transform selects with the garment's tight box, and the distance between their
centres, from the canvases' known placements), and the CPU (process) time of one training step
(the loop's, :meth:`foveal.train.Trainer.step`, on each arm's task rebuilt from its run's
``config.json``), measured here by alternating the arms so both see the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch.utils.data import default_collate

from foveal.recipes.config import load_run_config
from foveal.train import Trainer, seed_everything

THRESHOLDS = (45.0, 35.0, 30.0, 25.0)


def load_runs(root: Path) -> dict[str, dict[int, list[dict]]]:
    """``{arm: {seed: eval events}}`` from ``root/ARM-sSEED/metrics.jsonl``."""
    arms: dict[str, dict[int, list[dict]]] = defaultdict(dict)
    for metrics in sorted(root.glob("*-s*/metrics.jsonl")):
        match = re.fullmatch(r"(.+)-s(\d+)", metrics.parent.name)
        if match is None:
            continue
        events = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        evals = [e for e in events if e["split"] == "eval"]
        if evals:
            arms[match[1]][int(match[2])] = evals
    return dict(arms)


def at(evals: list[dict], step: int, key: str) -> float | None:
    return next((e[key] for e in evals if e["step"] == step and key in e), None)


def summary(values: list[float], digits: int = 1, expected: int = 0) -> str:
    """``mean (min-max)``; says so when fewer than ``expected`` seeds reached this point."""
    if not values:
        return "-"
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.{digits}f}" + (" (1 seed)" if expected > 1 else "")
    spread = f"{mean:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"
    return spread + (f" ({len(values)} seeds)" if len(values) < expected else "")


def tables(arms: dict[str, dict[int, list[dict]]]) -> None:
    steps = sorted({e["step"] for seeds in arms.values() for evals in seeds.values() for e in evals})
    for key, title, digits in (
        ("error", "test error %", 1),
        ("iou", "IoU of the glimpse box with the garment's box", 2),
        ("centre_px", "distance between the glimpse's and the garment's centres, px", 1),
    ):
        print(f"\n{title}, mean (range) over seeds\n")
        print("| arm | seeds | " + " | ".join(str(s) for s in steps) + " |")
        print("|---|---|" + "---|" * len(steps))
        for arm, seeds in arms.items():
            cells = []
            for step in steps:
                values = [v for evals in seeds.values() if (v := at(evals, step, key)) is not None]
                cells.append(summary(values, digits, len(seeds)))
            print(f"| {arm} | {len(seeds)} | " + " | ".join(cells) + " |")
    print("\nsteps to reach a test error (first evaluation at or below it; '>N' never), per seed\n")
    print("| arm | " + " | ".join(f"<= {t:g}%" for t in THRESHOLDS) + " |")
    print("|---|" + "---|" * len(THRESHOLDS))
    for arm, seeds in arms.items():
        cells = []
        for threshold in THRESHOLDS:
            per_seed = []
            for _, evals in sorted(seeds.items()):
                hit = next((e["step"] for e in evals if e["error"] <= threshold), None)
                per_seed.append(str(hit) if hit is not None else f">{evals[-1]['step']}")
            cells.append(" / ".join(per_seed))
        print(f"| {arm} | " + " | ".join(cells) + " |")


def step_times(root: Path, arms: dict[str, dict[int, list[dict]]], steps: int, rounds: int) -> None:
    """CPU and wall ms per training step (:meth:`foveal.train.Trainer.step`) of each arm, alternating arms."""
    trainers, batches = {}, {}
    for arm, seeds in arms.items():
        recipe, _, config = load_run_config(root / f"{arm}-s{min(seeds)}")
        config.data.n_train = steps * config.loop.batch_size  # build only the images the timing reads
        seed_everything(0)
        task = recipe.build(config)
        trainers[arm] = Trainer(task, config)
        collate, n = task.collate or default_collate, config.loop.batch_size
        batches[arm] = [collate([task.train_set[i] for i in range(k * n, (k + 1) * n)]) for k in range(steps)]
    cpu: dict[str, list[float]] = defaultdict(list)
    wall: dict[str, list[float]] = defaultdict(list)
    for _ in range(rounds + 1):  # the first round warms up and is dropped
        for arm, trainer in trainers.items():
            c0, w0 = time.process_time(), time.perf_counter()
            for batch in batches[arm]:
                trainer.step(batch)
            cpu[arm].append(1e3 * (time.process_time() - c0) / steps)
            wall[arm].append(1e3 * (time.perf_counter() - w0) / steps)
    sizes = sorted({trainer.config.loop.batch_size for trainer in trainers.values()})
    print(
        f"\none training step (batch {' / '.join(map(str, sizes))}), median of {rounds} rounds of {steps} steps, "
        f"load average {os.getloadavg()}\n"
    )
    print("| arm | CPU ms / step | wall ms / step |")
    print("|---|---|---|")
    for arm in trainers:
        print(f"| {arm} | {statistics.median(cpu[arm][1:]):.1f} | {statistics.median(wall[arm][1:]):.1f} |")


def figure(arms: dict[str, dict[int, list[dict]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    for (arm, seeds), colour in zip(arms.items(), ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=False):
        for ax, key in zip(axes, ("error", "iou", "centre_px"), strict=True):
            curves = [[(e["step"], e[key]) for e in evals if key in e] for evals in seeds.values()]
            for curve in curves:
                ax.plot(*zip(*curve, strict=True), color=colour, alpha=0.3, linewidth=0.8)
            # The mean only where every seed has a value (a longer seed goes on as its own thin line).
            steps = sorted(set.intersection(*({s for s, _ in curve} for curve in curves)))
            mean = [statistics.fmean([v for curve in curves for s, v in curve if s == step]) for step in steps]
            ax.plot(
                steps,
                mean,
                color=colour,
                linewidth=2,
                label=f"{arm} ({len(curves)} seed{'s' if len(curves) > 1 else ''})",
            )
    for ax, label in zip(axes, ("test error %", "IoU with the garment's box", "centre distance, px"), strict=True):
        ax.set_xlabel("step")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle("ST-CNN on cluttered 60 x 60 Fashion-MNIST: bilinear (STN) vs Gaussian read, same localisation net")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(f"\nwrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, help="a folder of ARM-sSEED run directories")
    parser.add_argument("--figure", type=Path, help="write the curves here")
    parser.add_argument("--time-steps", type=int, default=20, help="steps per timing round (0: no timing)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    arms = load_runs(args.runs)
    if not arms:
        raise SystemExit(f"no ARM-sSEED/metrics.jsonl with evaluations under {args.runs}")
    tables(arms)
    if args.figure:
        figure(arms, args.figure)
    if args.time_steps:
        step_times(args.runs, arms, args.time_steps, args.rounds)


if __name__ == "__main__":
    main()
