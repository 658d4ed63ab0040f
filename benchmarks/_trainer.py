"""One recipe's training step, built one way for ``compile.py`` and for ``_base_eager.py``, which runs it against
an earlier commit's source: it uses only what the loop has had since its redesign."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch
from torch.utils.data import DataLoader

from foveal.recipes.config import resolve_config
from foveal.runs import get_recipe
from foveal.train import Trainer, seed_everything


def build_trainer(
    recipe_name: str, preset: str | None, sets: dict[str, str], threads: int, device: str = "cpu"
) -> tuple[Trainer, object]:
    """A trainer for the recipe with ``loop.lr=0`` (every step times the same model), seed 0, on ``device``, and
    one training batch of the recipe's size."""
    recipe = get_recipe(recipe_name)
    sets = {**sets, "loop.lr": "0", "loop.warmup_steps": "0"}
    config = resolve_config(recipe, preset=preset, sets=sets, seed=0, threads=threads)
    seed_everything(config.seed)
    task = recipe.build(config)
    loader = DataLoader(
        task.train_set,
        batch_size=config.loop.batch_size,
        shuffle=True,
        collate_fn=task.collate,
        generator=torch.Generator().manual_seed(0),
    )
    return Trainer(task, config, torch.device(device)), next(iter(loader))


def compare_interleaved(
    steps: dict[str, Callable[[], float]], rounds: int, baseline: str, candidate: str
) -> dict[str, list[float]]:
    """Run each of ``steps`` (each returns its own seconds) in ``rounds`` rounds whose order alternates, so a
    burst of load hits all alike, print each one's fastest and median time and ``baseline / candidate``, and
    return every round's seconds by name."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    order = list(steps)
    for round_ in range(rounds):
        for name in order if round_ % 2 else order[::-1]:
            times[name].append(steps[name]())
    width = max(map(len, steps))
    for name, values in times.items():
        print(f"{name:>{width}}: fastest {min(values) * 1e3:.2f} ms, median {statistics.median(values) * 1e3:.2f} ms")
    slow, fast = times[baseline], times[candidate]
    print(
        f"{baseline} / {candidate}: {min(slow) / min(fast):.3f} (fastest), "
        f"{statistics.median(slow) / statistics.median(fast):.3f} (median)"
    )
    return times


def append_fast_path_row(
    path: str, mechanism: str, fast_path: str, case: str, threads: int, fast: list[float], reference: list[float]
) -> None:
    """Append one row to ``results/compile-fast-paths.jsonl``: a compile-only reformulation's step times against
    the reference path's (each round's seconds, from :func:`compare_interleaved`), with the seed, commit and command."""
    import json
    import sys

    from foveal.runs import commit_id

    row = {
        "mechanism": mechanism,
        "fast_path": fast_path,
        "case": case,
        "threads": threads,
        "rounds": len(fast),
        "fast_path_ms": round(min(fast) * 1e3, 2),
        "reference_ms": round(min(reference) * 1e3, 2),
        "gain_fastest": round(min(reference) / min(fast), 3),
        "gain_median": round(statistics.median(reference) / statistics.median(fast), 3),
        "torch": torch.__version__,
        "seed": 0,
        "commit": commit_id(),
        "command": "python " + " ".join(sys.argv),
        "kept": True,  # measured on the code that has it; a path taken out is marked false by hand
    }
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
