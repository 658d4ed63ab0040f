"""Sequences and time until an NTM recipe's model is below a wrong-bits target, for several seeds.

Trains exactly as ``foveal train RECIPE`` does (the recipe's task: loss, collate, curriculum; the
loop's step, :meth:`foveal.train.Trainer.step`), but checks the evaluation set (the task's full
range, 1,000 sequences by default) every ``--check-every`` steps once the curriculum has reached
its last level, and stops at the first check below ``--target`` wrong bits per sequence.

Reported per seed: steps, sequences seen, training wall time and CPU time (checks excluded; the
checks' own time is printed too), and the final evaluation (with generalisation lengths). Wall
time depends on how busy the machine is; CPU time (one thread) much less so.

    python studies/ntm-convergence/ntm_convergence.py ntm-copy --seeds 0 1 2 3 4 --budget 180
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch

from foveal.errors import NonFiniteError
from foveal.recipes.config import resolve_config
from foveal.runs import get_recipe
from foveal.sweep import script_provenance
from foveal.train import Callback, Curriculum, StepBatchSampler, Trainer, evaluate, seed_everything


class AfterRate(Callback):
    """Holds the learning rate at ``loop.lr * factor`` once :attr:`factor` is set (the ``--after`` steps).

    The rate is ``loop.lr`` times every callback's scale, so this one divides out the others' (the
    curriculum's anneal), whatever they become later.
    """

    def __init__(self, others: list[Callback]) -> None:
        self.others, self.factor = others, None

    def lr_scale(self) -> float:
        if self.factor is None:
            return 1.0
        return self.factor / math.prod(other.lr_scale() for other in self.others)


def converge(recipe_name: str, seed: int, preset: str | None, sets: dict[str, str], args: argparse.Namespace) -> dict:
    recipe = get_recipe(recipe_name)
    config = resolve_config(recipe, preset, None, sets, seed, args.threads)
    seed_everything(config.seed)
    task = recipe.build(config)
    model, loop = task.model, config.loop
    after_rate = AfterRate(list(task.callbacks))
    task.callbacks.append(after_rate)
    trainer = Trainer(task, config)
    batches = iter(StepBatchSampler(len(task.train_set), loop.batch_size, config.seed))
    curriculum = next((c for c in task.callbacks if isinstance(c, Curriculum)), None)
    extras, task.eval_set.extras = task.eval_set.extras, {}  # checks score the main set only
    seed_everything(config.seed)
    train_wall = train_cpu = check_wall = 0.0
    step, metrics, nan = 0, {}, False
    while step < args.max_steps and train_wall < args.budget:
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            train = trainer.step(task.collate(next(batches)))
        except NonFiniteError:
            nan = True
            break
        step += 1
        train_wall += time.perf_counter() - w0
        train_cpu += time.process_time() - c0
        if args.verbose and step % 100 == 0:
            level = curriculum.level if curriculum is not None else 0
            print(f"  seed {seed} step {step} wall {train_wall:.0f}s cpu {train_cpu:.0f}s level {level} {train}")
        top = curriculum is None or curriculum.level == curriculum.n_levels - 1
        if top and step % args.check_every == 0:
            w0 = time.perf_counter()
            metrics = evaluate(task, model)
            check_wall += time.perf_counter() - w0
            seen = step * loop.batch_size
            print(
                f"  seed {seed} step {step} seqs {seen} wall {train_wall:.0f}s bits {metrics['bits']:.3f}", flush=True
            )
            if metrics["bits"] < args.target:
                break
    converged = bool(metrics) and metrics["bits"] < args.target
    after_wall = after_cpu = 0.0
    if converged and args.after and not nan:
        # Train on after convergence (full range, the curriculum at its last level) at a lower rate.
        after_rate.factor = args.after_lr
        for group in trainer.optimizer.param_groups:  # the scheduler set this step's rate before the switch
            group["lr"] = loop.lr * args.after_lr
        for after in range(0, args.after + 1):
            if args.after_check and after % args.after_check == 0:
                task.eval_set.extras = extras
                m = evaluate(task, model)
                long = " ".join(f"{k} {v:.2f}" for k, v in m.items() if k.startswith("bits"))
                print(f"  seed {seed} after {after} cpu {after_cpu:.0f}s {long}", flush=True)
            if after == args.after:
                break
            w0, c0 = time.perf_counter(), time.process_time()
            try:
                trainer.step(task.collate(next(batches)))
            except NonFiniteError:
                nan = True
                break
            after_wall += time.perf_counter() - w0
            after_cpu += time.process_time() - c0
    if converged and extras:  # the generalisation sets, once, at the end
        task.eval_set.extras = extras
        metrics = evaluate(task, model)
    if args.save:
        torch.save(model.state_dict(), args.save.format(seed=seed))
    return {
        "recipe": recipe_name,
        "seed": seed,
        "converged": converged,
        "nan": nan,
        "steps": step,
        "sequences": step * loop.batch_size,
        "train_wall_s": round(train_wall, 1),
        "train_cpu_s": round(train_cpu, 1),
        "check_wall_s": round(check_wall, 1),
        **({"after_steps": args.after, "after_cpu_s": round(after_cpu, 1)} if args.after else {}),
        **({"level": curriculum.level} if curriculum is not None else {}),  # where an unconverged run stopped
        **{k: round(v, 4) for k, v in metrics.items()},
        **script_provenance(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recipe")
    p.add_argument("--preset")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--target", type=float, default=0.1, help="wrong bits per sequence (default 0.1)")
    p.add_argument("--budget", type=float, default=180.0, help="training wall seconds per seed")
    p.add_argument("--max-steps", type=int, default=100_000)
    p.add_argument("--check-every", type=int, default=50)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--verbose", action="store_true", help="print the curriculum level every 100 steps")
    p.add_argument("--after", type=int, default=0, help="steps to train on after converging")
    p.add_argument("--after-lr", type=float, default=0.1, help="lr factor of the --after steps")
    p.add_argument("--after-check", type=int, default=0, help="evaluate every N --after steps")
    p.add_argument("--save", help="save the model's state_dict here ({seed} is replaced)")
    p.add_argument("--json", help="append one JSON line per seed to this file")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    sets = dict(s.split("=", 1) for s in args.sets)
    for seed in args.seeds:
        result = converge(args.recipe, seed, args.preset, sets, args)
        print(json.dumps(result), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
