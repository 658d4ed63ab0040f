"""The eager training step of one benchmark case, served to ``benchmarks/compile.py --base COMMIT``.

Runs in a child process whose ``foveal`` is the source of an earlier commit (a git worktree on
``PYTHONPATH``), so it uses only what every commit since the loop's redesign has: a recipe, its
config, the loop's ``Trainer``. It builds the case exactly as ``compile.py`` builds its eager step (the
same seed, weights and batch), prints the first step's loss, then times one step for each line it
reads and prints the seconds. ``compile.py`` interleaves these rounds with its own.

    python benchmarks/_base_eager.py '{"recipe": "draw", "preset": null, "sets": {...}, "threads": 1}'
"""

from __future__ import annotations

import json
import sys
import time

import torch
from torch.utils.data import DataLoader

from foveal.recipes.config import resolve_config
from foveal.runs import get_recipe
from foveal.train import Trainer, seed_everything


def main() -> None:
    case = json.loads(sys.argv[1])
    torch.set_num_threads(case["threads"])
    recipe = get_recipe(case["recipe"])
    sets = {**case["sets"], "loop.lr": "0", "loop.warmup_steps": "0"}
    config = resolve_config(recipe, preset=case["preset"], sets=sets, seed=0, threads=case["threads"])
    seed_everything(config.seed)
    task = recipe.build(config)
    loader = DataLoader(
        task.train_set,
        batch_size=config.loop.batch_size,
        shuffle=True,
        collate_fn=task.collate,
        generator=torch.Generator().manual_seed(0),
    )
    batch = next(iter(loader))
    trainer = Trainer(task, config, torch.device("cpu"))
    torch.manual_seed(0)  # the noise compile.py draws for its steps
    print(json.dumps({"loss": trainer.step(batch)["loss"]}), flush=True)
    for _ in sys.stdin:
        start = time.perf_counter()
        trainer.step(batch)
        print(time.perf_counter() - start, flush=True)


if __name__ == "__main__":
    main()
