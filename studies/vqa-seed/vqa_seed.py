"""Which decides an easy-vqa seed's map: the model's initial weights or the order of the training data?

    python studies/vqa-seed/vqa_seed.py --init-seed 3 --order-seed 0 --out runs/vqa-seed/i3-o0
    python studies/vqa-seed/vqa_seed.py --init-seed 0 --order-seed 3 --set loop.eval_every=250 --out runs/vqa-seed/i0-o3

Builds the ``easy-vqa`` task (``--preset``, default ``quick``, and ``--set`` overrides) with torch seeded by
``--init-seed``, so the model starts from that seed's weights, then trains it with ``seed`` = ``--order-seed``,
which draws the batches (and every other random draw of training), through the one loop. A run with
both seeds equal is ``foveal train easy-vqa --seed S``. Appends a row (both seeds, the final metrics and
the interim evaluations' curve) to ``--results``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from foveal.recipes.config import parse_sets, resolve_config
from foveal.runs import commit_id, get_recipe
from foveal.sweep import eval_curve
from foveal.train import RunDir, seed_everything, train, use_threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--init-seed", type=int, required=True)
    parser.add_argument("--order-seed", type=int, required=True)
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", required=True)
    parser.add_argument("--results", default="results/vqa-seed.jsonl")
    args = parser.parse_args()
    recipe = get_recipe("easy-vqa")
    sets = parse_sets(args.set)
    config = resolve_config(recipe, args.preset, sets=sets, seed=args.order_seed, threads=1)
    use_threads(config.threads)
    seed_everything(args.init_seed)
    task = recipe.build(config)
    started = time.process_time()
    metrics = train(task, config, args.out)
    row = {
        "recipe": "easy-vqa",
        "preset": args.preset,
        "sets": {"init_seed": str(args.init_seed), **sets},
        "seed": args.order_seed,
        "metrics": metrics,
        "cpu_s": round(time.process_time() - started, 1),
        "commit": commit_id(),
        "command": " ".join(
            ["python studies/vqa-seed/vqa_seed.py", f"--init-seed {args.init_seed}", f"--order-seed {args.order_seed}"]
            + [f"--set {s}" for s in args.set]
            + ([f"--preset {args.preset}"] if args.preset != "quick" else [])
        ),
        "curve": eval_curve(RunDir(args.out).metrics),
    }
    with Path(args.results).open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row["metrics"]))


if __name__ == "__main__":
    main()
