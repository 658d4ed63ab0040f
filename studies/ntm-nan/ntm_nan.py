"""Count NaN (non-finite loss, gradient or parameter) over many seeds of every NTM recipe.

Each seed trains ``--steps`` steps exactly as ``foveal train RECIPE --preset PRESET`` does (the
recipe's task and the loop's step, :meth:`foveal.train.Trainer.step`, which refuses a non-finite
loss or gradient with :class:`foveal.errors.NonFiniteError`), checks every parameter after every
step, then runs the model on the recipe's evaluation set and checks its outputs. Public NTM ports
are known to hit NaN (zero memory, unguarded sharpening); this checks ours does not.

    python studies/ntm-nan/ntm_nan.py --seeds 0 1 2 3 4 5 6 7 8 9 --steps 100
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from foveal.errors import NonFiniteError
from foveal.recipes.config import resolve_config
from foveal.runs import get_recipe
from foveal.train import StepBatchSampler, Trainer, seed_everything

RECIPES = ("ntm-copy", "ntm-repeat-copy", "ntm-recall", "ntm-sort")


def finite(tensors) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors if t is not None)


def run_seed(name: str, seed: int, preset: str | None, steps: int, threads: int) -> dict:
    recipe = get_recipe(name)
    config = resolve_config(recipe, preset, None, {}, seed, threads)
    seed_everything(config.seed)
    task = recipe.build(config)
    model = task.model
    config.loop.nonfinite = "stop"  # counting NaN means seeing them, not skipping the steps that make them
    trainer = Trainer(task, config)
    batches = iter(StepBatchSampler(len(task.train_set), config.loop.batch_size, config.seed))
    first_nan, bits = None, []
    for step in range(1, steps + 1):
        try:
            metrics = trainer.step(task.collate(next(batches)))
        except NonFiniteError:
            first_nan = step
            break
        bits.append(metrics["bits"])
        if not finite(model.parameters()):
            first_nan = step
            break
    if first_nan is None:  # and the trained model's outputs on the evaluation set
        with torch.no_grad():
            outputs = [model(batch.inputs).logits for batch in task.eval_set.main.batches()]
        if not finite(outputs):
            first_nan = steps + 1
    return {
        "recipe": name,
        "seed": seed,
        "nan": first_nan is not None,
        "nan_step": first_nan,
        "train_bits_last50": round(sum(bits[-50:]) / len(bits[-50:]), 3) if bits else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipes", nargs="+", default=list(RECIPES))
    p.add_argument("--preset", default="quick")
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    p.add_argument("--steps", type=int, default=100, help="training steps per seed")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", help="append one JSON line per seed to this file")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.recipes:
        nans, w0, c0 = 0, time.perf_counter(), time.process_time()
        for seed in args.seeds:
            result = run_seed(name, seed, args.preset, args.steps, args.threads)
            nans += result["nan"]
            print(json.dumps(result), flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(result) + "\n")
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        print(
            f"{name}: {nans} NaN in {len(args.seeds)} seeds x {args.steps} steps (wall {wall:.0f} s, CPU {cpu:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
