"""DRAW with attention against DRAW without, at equal training time (the paper's Table 3, shrunk).

    python studies/draw-equal-time/draw_equal_time.py --budget 420 --preset quick --arms attention none \\
        [--dataset mnist] [--seed 0] [--out runs/draw-equal-time] [--set key=value ...]

Each arm is the ``draw`` recipe's config (``--preset``, ``model.attention`` set per arm) trained through
the loop's step (:meth:`foveal.train.Trainer.step`: the recipe's loss, Adam settings and gradient
clipping) for ``--budget`` seconds of this process's CPU time (``time.process_time``: on a shared
machine, waiting for a core is not counted, so both arms get the same compute whatever the load).
Periodic test evaluations are not counted in the budget. With ``--stop-file F``, creating ``F``
cuts the budget to each arm's next evaluation point, so arms that run side by side on a machine
busier than planned still stop at the same CPU time. Each arm's run directory holds
``config.json`` (with the steps actually taken), ``checkpoint.pt``, ``eval.json`` and
``curve.jsonl``, so ``foveal eval DIR`` and ``foveal show DIR`` work on it.

Prints one row per arm: steps, CPU and wall seconds, the test negative ELBO and the IWAE NLL
(nats per image). The paper (Gregor et al. 2015, MNIST, long training): <= 80.97 nats with
attention, <= 87.40 without.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from foveal.recipes import load_all
from foveal.recipes.config import parse_sets, resolve_config, save_run_config
from foveal.registry import RECIPES
from foveal.train import RunDir, Trainer, evaluate, save_atomic, seed_everything


def train_arm(arm: str, args: argparse.Namespace) -> dict[str, float]:
    recipe = RECIPES.get("draw")
    sets = {**parse_sets(args.set), "model.attention": str(arm == "attention"), "dataset": args.dataset}
    config = resolve_config(recipe, args.preset, None, sets, args.seed, 1)
    torch.set_num_threads(1)
    run_dir = Path(args.out) / f"{args.dataset}-{arm}-seed{args.seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    seed_everything(config.seed)
    task = recipe.build(config)
    model = task.model
    trainer = Trainer(task, config)
    images = task.train_set.images
    order = torch.Generator().manual_seed(config.seed)
    batch_size = config.loop.batch_size
    checks = [args.budget * (i + 1) / args.evals for i in range(args.evals)]
    curve = (run_dir / "curve.jsonl").open("w")
    step, used, window = 0, 0.0, []
    wall0 = time.perf_counter()
    perm, cursor = torch.randperm(len(images), generator=order), 0
    model.train()
    budget = args.budget
    while used < budget:
        if args.stop_file and budget == args.budget and Path(args.stop_file).exists():
            budget = checks[0]  # stop at the next evaluation: every arm stops at the same CPU time
        c0 = time.process_time()
        if cursor + batch_size > len(perm):
            perm, cursor = torch.randperm(len(images), generator=order), 0
        batch = images[perm[cursor : cursor + batch_size]]
        cursor += batch_size
        window.append(trainer.step(batch)["loss"])  # a non-finite loss or gradient raises NonFiniteError
        step += 1
        used += time.process_time() - c0
        if used >= min(checks[0], budget):
            checks.pop(0)
            record = {"step": step, "cpu_s": round(used, 1), "wall_s": round(time.perf_counter() - wall0, 1)}
            record.update(train_loss=sum(window) / len(window), **_elbo_only(task, model))
            window = []
            curve.write(json.dumps(record) + "\n")
            curve.flush()
            print(arm, json.dumps(record), flush=True)
    curve.close()
    metrics = evaluate(task, model)  # the full evaluation, IWAE included, seeded
    record.update(metrics)
    config.loop.steps = step
    save_run_config(run_dir, "draw", args.preset, config)
    save_atomic({"step": step, "model": model.state_dict()}, RunDir(run_dir).checkpoint)
    RunDir(run_dir).eval.write_text(json.dumps(metrics, indent=2) + "\n")
    return record


def _elbo_only(task, model) -> dict[str, float]:
    """The test negative ELBO alone (IWAE costs k forward passes per image; it runs at the end)."""
    was = model.training
    model.eval()
    with torch.no_grad():
        total = 0.0
        for x in task.eval_set.images.split(250):
            out = model(x)
            total += (out.nll + out.kl).sum().item()
    model.train(was)
    return {"neg_elbo": total / len(task.eval_set)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=420.0, help="CPU seconds of training per arm")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--dataset", default="mnist", choices=["mnist", "fashion-mnist"])
    parser.add_argument("--arms", nargs="+", default=["attention", "none"], choices=["attention", "none"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--evals", type=int, default=6, help="test -ELBO evaluations along the way (IWAE at the end)")
    parser.add_argument("--out", default="runs/draw-equal-time")
    parser.add_argument(
        "--stop-file",
        help="when this file exists, each arm stops at its next evaluation (an earlier common budget on a busy box)",
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="recipe overrides")
    args = parser.parse_args()
    load_all()
    rows = {arm: train_arm(arm, args) for arm in args.arms}
    print(f"\n{'arm':>10} {'steps':>6} {'CPU s':>7} {'wall s':>7} {'-ELBO':>8} {'IWAE NLL':>9} (nats, test)")
    for arm, r in rows.items():
        nats = f"{r['neg_elbo']:8.2f} {r['iwae_nll']:9.2f}"
        print(f"{arm:>10} {r['step']:6d} {r['cpu_s']:7.0f} {r['wall_s']:7.0f} {nats}")


if __name__ == "__main__":
    main()
