"""Train ``ntm-sort`` for a number of steps and look at what the model gets wrong.

Trains exactly as ``foveal train ntm-sort`` does (the recipe's loss, collate and curriculum; the
loop's optimiser, scheduler and clipping), one thread, then scores 2,000 fresh sequences of every
curriculum level: wrong bits per sequence, and the same split by the smallest gap between the
priorities of the top ``n_out + 1`` vectors (a model that compares priorities exactly makes no
more errors on close priorities than on distant ones). Last, on the first level, the error with
every read vector zeroed (does the model use its memory?) and the argmax rows of its heads. On the
task's last level, whether the model sorts as the paper's fig. 17 shows: each item written to a row of
its own (distinct rows), rows ordered by priority (rank correlation between priority and write row),
and each output step reading the row that its target vector alone was written to.

    python benchmarks/ntm_sort_probe.py --steps 3000 --set n_in=4 --set n_out=3 --set curriculum=false
    python benchmarks/ntm_sort_probe.py --preset full --steps 10000 --check-every 2000 --save sort.pt
    python benchmarks/ntm_sort_probe.py --preset full --steps 0 --load sort.pt --show figures/
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from pathlib import Path

import torch

import foveal.models.ntm as ntm_module
from foveal.data.ntm_tasks import NTMBatch, PrioritySort, wrong_bits
from foveal.recipes.config import resolve_config
from foveal.recipes.ntm import _levels
from foveal.runs import get_recipe
from foveal.train.loop import seed_everything
from foveal.train.optim import build_optimizer, build_scheduler, clip_gradients
from foveal.train.sampler import StepBatchSampler

GAPS = (0.0, 0.01, 0.03, 0.1, 0.3, 3.0)


def by_gap(model: torch.nn.Module, task: PrioritySort, generator: torch.Generator) -> str:
    batch = task.sample(2000, generator)
    with torch.no_grad():
        wrong = wrong_bits(model(batch.inputs).logits, batch.targets)
    top = batch.inputs[:, : task.n_in, task.width].sort(1, descending=True).values[:, : min(task.n_out + 1, task.n_in)]
    gap = (top[:, :-1] - top[:, 1:]).min(1).values
    cells = []
    for lo, hi in itertools.pairwise(GAPS):
        chosen = (gap >= lo) & (gap < hi)
        if chosen.any():
            cells.append(f"gap [{lo}, {hi}): {int(chosen.sum())} seqs, {wrong[chosen].mean():.2f}")
    return f"top {task.n_out} of {task.n_in}: {wrong.mean():.3f} wrong bits/seq | " + "; ".join(cells)


def score(model: torch.nn.Module, evaluation: NTMBatch) -> float:
    """Wrong bits per sequence (the evaluation sequences of benchmarks/ntm_sort_vs_lstm.py)."""
    model.eval()
    with torch.no_grad():
        wrong = wrong_bits(model(evaluation.inputs).logits, evaluation.targets).mean().item()
    model.train()
    return wrong


def _ranks(x: torch.Tensor) -> torch.Tensor:
    return x.argsort(-1).argsort(-1).to(torch.float64)


def placement(model: torch.nn.Module, task: PrioritySort, generator: torch.Generator) -> str:
    """Where each write head puts each item (argmax rows) and where the read heads read them back."""
    batch = task.sample(500, generator)
    with torch.no_grad():
        out = model(batch.inputs, record=True)
    priority = batch.inputs[:, : task.n_in, task.width]
    order = priority.argsort(dim=1, descending=True)[:, : task.n_out]
    read_rows = out.read_weights[:, task.n_in + 1 :].argmax(-1)  # (B, n_out, H_read)
    cells, best_hits = [], 0.0
    for head in range(out.write_weights.shape[2]):
        rows = out.write_weights[:, : task.n_in, head].argmax(-1)  # (B, n_in)
        distinct = torch.tensor([len(set(r)) for r in rows.tolist()], dtype=torch.float64)
        rank_p, rank_r = _ranks(priority) - (task.n_in - 1) / 2, _ranks(rows) - (task.n_in - 1) / 2
        spearman = (rank_p * rank_r).sum(-1) / (rank_p.norm(dim=-1) * rank_r.norm(dim=-1)).clamp_min(1e-12)
        target_rows = rows.gather(1, order)  # the row each output step's target vector was written to
        alone = (rows.unsqueeze(1) == target_rows.unsqueeze(2)).sum(-1) == 1  # no other item shares it
        hits = ((read_rows == target_rows.unsqueeze(-1)) & alone.unsqueeze(-1)).to(torch.float64).mean((0, 1))
        best_hits = max(best_hits, hits.max().item())
        cells.append(f"write head {head}: {distinct.mean():.1f} distinct rows, rank correlation {spearman.mean():+.2f}")
    return (
        f"top {task.n_out} of {task.n_in}, {task.n_in} items: " + "; ".join(cells) + "; output steps reading "
        f"(with some read head) the row only their target was written to: {best_hits:.0%}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="quick")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--load", metavar="FILE", help="start from this state dict (with --steps 0: probe it as it is)")
    p.add_argument("--save", metavar="FILE", help="write the trained model's state dict here")
    p.add_argument("--show", metavar="DIR", help="draw the recipe's figures of the trained model into DIR")
    p.add_argument("--check-every", type=int, default=0, help="score the task's 500 evaluation sequences every K steps")
    args = p.parse_args()
    recipe = get_recipe("ntm-sort")
    config = resolve_config(recipe, args.preset, None, dict(s.split("=", 1) for s in args.sets), args.seed, 1)
    torch.set_num_threads(1)
    seed_everything(config.seed)
    task = recipe.build(config)
    model, loop = task.model, config.loop
    if args.load:
        model.load_state_dict(torch.load(args.load))
    optimizer = build_optimizer(model.parameters(), loop)
    scheduler = build_scheduler(optimizer, loop, task.lr_scale)
    batches = iter(StepBatchSampler(len(task.train_set), loop.batch_size, config.seed))
    curriculum = getattr(model, "curriculum", None)
    final = PrioritySort(config.width, config.n_in, config.n_out).sample(500, torch.Generator().manual_seed(12345))
    cpu0, wall0, running = time.process_time(), time.time(), None
    for step in range(1, args.steps + 1):
        loss, metrics = task.loss(model, task.collate(next(batches)))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_gradients(model.parameters(), loop)
        optimizer.step()
        scheduler.step()
        running = metrics["bits"] if running is None else 0.98 * running + 0.02 * metrics["bits"]
        if step % 250 == 0:
            level = int(curriculum.level) if curriculum is not None else -1
            print(
                f"step {step} cpu {time.process_time() - cpu0:.0f}s level {level} running bits {running:.2f}",
                flush=True,
            )
        if args.check_every and step % args.check_every == 0:
            print(f"step {step} evaluation: {score(model, final):.2f} wrong bits/seq", flush=True)
        if not math.isfinite(loss.item()):
            print("non-finite loss")
            break
    cpu, wall = time.process_time() - cpu0, time.time() - wall0
    if args.save:
        torch.save(model.state_dict(), args.save)
    model.eval()
    if args.show:
        with torch.no_grad():
            print("figures:", *task.show(model, task.eval_set, Path(args.show)))
    levels = (
        [task for task in _levels(config, "ntm-sort")]
        if curriculum is not None
        else [PrioritySort(config.width, config.n_in, config.n_out)]
    )
    generator = torch.Generator().manual_seed(999)
    for level in levels:
        print(by_gap(model, level, generator), flush=True)
    first = levels[0]
    batch = first.sample(2000, torch.Generator().manual_seed(5))
    with torch.no_grad():
        out = model(batch.inputs, record=True)
        read = ntm_module.read
        ntm_module.read = lambda memory, w: torch.zeros_like(read(memory, w))
        try:
            ablated = wrong_bits(model(batch.inputs).logits, batch.targets).mean().item()
        finally:
            ntm_module.read = read
    plain = wrong_bits(out.logits, batch.targets).mean().item()
    print(f"first level: {plain:.2f} wrong bits/seq, {ablated:.2f} with the reads zeroed")
    for s in range(3):
        priority = [round(v, 2) for v in batch.inputs[s, : first.n_in, first.width].tolist()]
        print(
            f"  priorities {priority}: write rows {out.write_weights[s, :, 0].argmax(-1).tolist()}, "
            f"read rows {out.read_weights[s, :, 0].argmax(-1).tolist()}"
        )
    largest = out.write_weights[:, :, 0].max(-1).values.mean(0)
    print(f"  largest write weight per step {[round(v, 2) for v in largest.tolist()]}")
    print(placement(model, levels[-1], torch.Generator().manual_seed(6)))
    print(json.dumps({"steps": args.steps, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1)}))


if __name__ == "__main__":
    main()
