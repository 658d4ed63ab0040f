"""Draw the last attention map of every VQA head's seed-0 run on four easy-VQA test questions.

    python scripts/draw_vqa_family.py [--results results/vqa-family-easy.jsonl] \\
        [--runs runs/sweeps/vqa-family-easy] [--out docs/figures/vqa-family-easy-maps.png]

One row per question, one column per head (in the order heads first appear in the results file):
at the left the picture, its question and the truth; under each map the head's answer and the
map's mass on the object (``m``, :func:`foveal.viz.heatmap.mass_in_mask`); the object's outline in
cyan. For each head the run used is the one under ``--runs`` with seed 0 whose resolved config
equals its own with the results row's ``sets`` applied; heads without one are listed and skipped.
"""

from __future__ import annotations

import argparse
import copy
import json
import textwrap
import time
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor

from foveal.data.easy_vqa import EasyVQA, VQASample, denormalize
from foveal.recipes.config import apply_overrides, config_to_dict, load_run_config
from foveal.train import RunConfig, RunDir, load
from foveal.train.checkpoint import load_model_state
from foveal.viz import pyplot
from foveal.viz.heatmap import mass_in_mask, overlay_heatmap, weights_to_grid

# Test questions: 44 "what shape is present" (circle), 19 "what is the color of the triangle" (blue),
# 7 "is there a blue shape in the image" (no), 40 "is a yellow shape present" (yes).
QUESTIONS = (44, 19, 7, 40)


class HeadMaps(NamedTuple):
    head: str
    predictions: list[int]  # answer ids, one per question
    maps: Tensor | None  # (questions, grid * grid): the last map, None for a head without attention
    grid: int


def heads_and_sets(results: Path) -> dict[str, dict[str, Any]]:
    """Heads in the order they first appear, each with its last seed-0 row (its latest budget; else its first row)."""
    rows: dict[str, dict[str, Any]] = {}
    for line in results.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            head = row["sets"]["model.head"]
            if head not in rows or row["seed"] == 0:
                rows[head] = row
    return rows


def _agrees(written: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether ``wanted`` holds every value of ``written`` (nested), whatever else it holds."""
    for key, value in written.items():
        if isinstance(value, dict):
            if not isinstance(wanted.get(key), dict) or not _agrees(value, wanted[key]):
                return False
        elif wanted.get(key) != value:
            return False
    return True


def find_run(runs: Path, row: dict[str, Any]) -> tuple[Path | None, RunConfig | None, str]:
    """The fully trained seed-0 run whose written config the row's sets leave unchanged (the row's head and
    settings), with that config and the row's sets applied (a key the run predates takes the row's value, not
    today's default), or None and why not: no such run, or its checkpoint is short of its steps (still training)."""
    why = "no seed-0 run"
    for run_dir in sorted(p for p in runs.iterdir() if RunDir(p).config.is_file()):
        recipe, preset, config = load_run_config(run_dir)
        if recipe.name != row["recipe"] or preset != row.get("preset") or config.seed != 0:
            continue
        wanted = apply_overrides(copy.deepcopy(config), row["sets"], str(run_dir))
        # Over the keys the run wrote: a key added since reads as its default here, and the row states its value.
        written = json.loads(RunDir(run_dir).config.read_text())["config"]
        if not _agrees(written, json.loads(json.dumps(config_to_dict(wanted)))):
            continue
        checkpoint = RunDir(run_dir).checkpoint
        step = load(checkpoint).get("step", 0) if checkpoint.is_file() else 0
        if step < config.loop.steps:
            why = f"{run_dir.name} has trained {step} of {config.loop.steps} steps"
            continue
        return run_dir, wanted, ""
    return None, None, why


def last_maps(head: str, run_dir: Path, config: RunConfig, batch: VQASample) -> HeadMaps:
    recipe, _, _ = load_run_config(run_dir)
    model = recipe.build(config).model
    load_model_state(model, load(RunDir(run_dir).checkpoint)["model"], RunDir(run_dir).checkpoint)
    model.eval()
    with torch.no_grad():
        out = model(batch.image, batch.question, batch.length)
    maps = None if out.attention is None else out.attention[:, -1]
    return HeadMaps(head, out.logits.argmax(-1).tolist(), maps, model.grid)


def draw(test: EasyVQA, columns: list[HeadMaps], path: Path) -> None:
    plt = pyplot()
    samples = [test[q] for q in QUESTIONS]
    fig, axes = plt.subplots(len(QUESTIONS), 1 + len(columns), figsize=(1.3 * (1 + len(columns)), 2.0 * len(QUESTIONS)))
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.spines[:].set_visible(False)
    for r, (q, sample) in enumerate(zip(QUESTIONS, samples, strict=True)):
        picture = denormalize(sample.image).clamp(0, 1).permute(1, 2, 0).numpy()
        truth = int(sample.answer)
        axes[r, 0].imshow(picture)
        axes[r, 0].set_title(textwrap.fill(test.question_text(q), 24), fontsize=6)
        axes[r, 0].set_xlabel(f"truth: {test.answers[truth]}", fontsize=6)
        for c, column in enumerate(columns, start=1):
            ax = axes[r, c]
            if r == 0:
                name = column.head.replace("-", "-\n", 1) if len(column.head) > 14 else column.head
                ax.set_title(name, fontsize=7, pad=18 if "\n" not in name else 8)
            predicted = column.predictions[r]
            mark = "ok" if predicted == truth else "WRONG"
            if column.maps is None:
                ax.imshow(picture.mean(-1), cmap="gray", vmin=0, vmax=1)  # the picture in grey
                ax.set_xlabel(f"{test.answers[predicted]} ({mark}, no map)", fontsize=5)
                continue
            grid = (column.grid, column.grid)
            mass = float(mass_in_mask(column.maps[r : r + 1], sample.mask[None], grid)[0])
            ax.imshow(overlay_heatmap(picture, weights_to_grid(column.maps[r], grid)))
            ax.contour(sample.mask.float().numpy(), levels=[0.5], colors="#00e5ff", linewidths=0.8)
            ax.set_xlabel(f"{test.answers[predicted]} ({mark}, m={mass:.2f})", fontsize=5)
    fig.tight_layout(h_pad=2.0, w_pad=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results/vqa-family-easy.jsonl"))
    parser.add_argument("--runs", type=Path, default=Path("runs/sweeps/vqa-family-easy"))
    parser.add_argument("--out", type=Path, default=Path("docs/figures/vqa-family-easy-maps.png"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    started = time.perf_counter()
    test = EasyVQA("test")
    batch = VQASample(*(torch.stack(parts) for parts in zip(*(test[q] for q in QUESTIONS), strict=True)))
    columns: list[HeadMaps] = []
    skipped: list[str] = []
    for head, row in heads_and_sets(args.results).items():
        run_dir, config, why = find_run(args.runs, row)
        if run_dir is None or config is None:
            skipped.append(f"{head} ({why})")
            continue
        columns.append(last_maps(head, run_dir, config, batch))
        print(f"{head}: {run_dir}", flush=True)
    if skipped:
        print(f"skipped, no trained seed-0 run under {args.runs}: {', '.join(skipped)}")
    if not columns:
        raise SystemExit(f"no head of {args.results} has a trained seed-0 run under {args.runs}")
    draw(test, columns, args.out)
    print(f"{args.out}: {len(columns)} heads, {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
