"""Train ``ntm-sort`` for a number of steps and look at what the model gets wrong.

Trains exactly as ``foveal train ntm-sort`` does (the recipe's task and the loop's step,
:meth:`foveal.train.Trainer.step`), one thread, then scores 2,000 fresh sequences of every
curriculum level: wrong bits per sequence, and wrong bits per output step split by the gap between
that step's priority and the nearest neighbouring one, each set against a perfect sorter that sees
every priority with Gaussian noise, its standard deviation chosen so that it makes as many wrong
bits as the model (``sorter.py``, as in ``ntm_sort_floor.py``): a model whose errors come from comparing
priorities imprecisely matches the sorter in every gap, one that has not learned to sort makes
errors at wide gaps too. Last, on the first level, the error with
every read vector zeroed (does the model use its memory?) and the argmax rows of its heads. On the
task's last level, whether the model sorts as the paper's fig. 17 shows: the write location as a
linear function of the priority (fitted per write head), how many distinct places the target
vectors get, and how often an output step reads the place its target vector alone was written to
(with ``--show``, a scatter of write location against priority).

    python studies/ntm-sort/ntm_sort_probe.py --steps 3000 --set n_in=4 --set n_out=3 --set curriculum=false
    python studies/ntm-sort/ntm_sort_probe.py --preset full --steps 10000 --check-every 2000 --save sort.pt
    python studies/ntm-sort/ntm_sort_probe.py --preset full --steps 0 --load sort.pt --show figures/
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
from foveal.data.ntm_tasks import NTMBatch, PrioritySort, output_phase, wrong_bits
from foveal.errors import NonFiniteError
from foveal.recipes.config import resolve_config
from foveal.recipes.ntm import _levels
from foveal.runs import get_recipe
from foveal.train import Curriculum, StepBatchSampler, Trainer, seed_everything
from sorter import evaluation_set, noisy_sort_errors

GAPS = (0.0, 0.003, 0.01, 0.03, 0.1, 0.3, math.inf)


def matched_sigma(wrong: float, batch: NTMBatch, task: PrioritySort, noise: torch.Tensor) -> float:
    """The priority noise at which a perfect sorter makes ``wrong`` bits per sequence on ``batch``
    (bisection on log sigma)."""
    lo, hi = math.log(1e-5), 0.0
    for _ in range(30):
        mid = (lo + hi) / 2
        bits = noisy_sort_errors(batch, task, noise, math.exp(mid)).sum(-1).mean()
        lo, hi = (mid, hi) if bits < wrong else (lo, mid)
    return math.exp((lo + hi) / 2)


def by_gap(model: torch.nn.Module, task: PrioritySort, generator: torch.Generator) -> str:
    """Wrong bits per output step, split by how close that step's priority is to its neighbours'."""
    batch = task.sample(2000, generator)
    with torch.no_grad():
        logits = output_phase(model(batch.inputs).logits, batch.targets)
    wrong = ((logits > 0).float() != batch.targets).float().sum(-1)  # (B, n_out)
    noise = torch.randn(len(wrong), task.n_in, generator=generator)
    sigma = matched_sigma(wrong.sum(-1).mean().item(), batch, task, noise)
    sorter = noisy_sort_errors(batch, task, noise, sigma)
    # the bisection stops at 1: a model that errs more than that is not sorting by priority at all
    precision = f"{sigma:.4f}" if sigma < 0.99 else "1 or more (about a random order)"
    top = batch.inputs[:, : task.n_in, task.width].sort(1, descending=True).values
    below = top[:, : task.n_out] - top[:, 1 : task.n_out + 1] if task.n_in > task.n_out else None
    above = torch.cat([torch.full_like(top[:, :1], math.inf), top[:, : task.n_out - 1] - top[:, 1 : task.n_out]], 1)
    gap = above if below is None else torch.minimum(above, below)
    cells = []
    for lo, hi in itertools.pairwise(GAPS):
        chosen = (gap >= lo) & (gap < hi)
        if chosen.any():
            model_bits, sorter_bits = wrong[chosen].mean(), sorter[chosen].mean()
            cells.append(f"gap [{lo}, {hi}): {int(chosen.sum())} steps, {model_bits:.2f} (sorter {sorter_bits:.2f})")
    return (
        f"top {task.n_out} of {task.n_in}: {wrong.sum(-1).mean():.3f} wrong bits/seq, as many as a perfect sorter "
        f"that sees each priority with noise of standard deviation {precision}; wrong bits per output step by the "
        "gap to the nearest neighbouring priority (the sorter's in brackets) | " + "; ".join(cells)
    )


def score(model: torch.nn.Module, evaluation: NTMBatch) -> float:
    """Wrong bits per sequence on ``evaluation`` (:func:`sorter.evaluation_set`)."""
    model.eval()
    with torch.no_grad():
        wrong = wrong_bits(model(evaluation.inputs).logits, evaluation.targets).mean().item()
    model.train()
    return wrong


SHARP = 0.5  # a write counts as placed at a row when that row gets at least this weight


def placement(model: torch.nn.Module, task: PrioritySort, generator: torch.Generator, figure: Path | None) -> str:
    """Where the write heads put each item, fitted as the paper's fig. 17 does, and how the reads use it.

    A write head places an item when its largest weight at that input step is at least ``SHARP``.
    Rows are unwrapped to ``-R/2 .. R/2 - 1`` (the heads start at row 0 and may move either way) and,
    for the ``n_out`` target vectors (the others need no order), fitted per head as a linear function
    of the priority. Each item's place is the argmax row of the
    head that wrote it most sharply; an output step is a hit when some read head's argmax row is the
    place of its target vector and no other item shares that place.
    """
    batch = task.sample(500, generator)
    with torch.no_grad():
        out = model(batch.inputs, record=True)
    priority = batch.inputs[:, : task.n_in, task.width]
    writes = out.write_weights[:, : task.n_in]  # (B, n_in, H_write, R)
    n_rows = writes.shape[-1]
    rows = (writes.argmax(-1) + n_rows // 2) % n_rows - n_rows // 2  # (B, n_in, H_write)
    sharp = writes.max(-1).values >= SHARP
    order = priority.argsort(dim=1, descending=True)[:, : task.n_out]
    target = torch.zeros_like(priority, dtype=torch.bool).scatter_(1, order, True)
    cells = []
    for head in range(writes.shape[2]):
        chosen = sharp[:, :, head] & target
        placed = rows[:, :, head][chosen]
        cell = f"write head {head} places {chosen.sum() / target.sum():.0%} of the target vectors"
        if placed.numel() > 2 and placed.unique().numel() == 1:
            cell += f" (always row {placed[0]})"
        elif placed.numel() > 2:
            x, y = priority[chosen].double(), placed.double()
            design = torch.stack([x, torch.ones_like(x)], dim=1)
            slope, intercept = torch.linalg.lstsq(design, y.unsqueeze(1)).solution.squeeze(1).tolist()
            residual = y - design @ torch.tensor([slope, intercept], dtype=torch.float64)
            r2 = 1 - residual.var() / y.var().clamp_min(1e-12)
            cell += f" (row = {slope:.1f} x priority {intercept:+.1f}, R^2 {r2:.2f})"
        cells.append(cell)
    place = rows.gather(2, writes.max(-1).values.argmax(-1, keepdim=True)).squeeze(2)  # (B, n_in)
    target_place = place.gather(1, order)
    distinct = (target_place.sort(dim=1).values.diff(dim=1) != 0).sum(1).double() + 1
    alone = (place.unsqueeze(1) == target_place.unsqueeze(2)).sum(-1) == 1
    read_rows = (out.read_weights[:, task.n_in + 1 :].argmax(-1) + n_rows // 2) % n_rows - n_rows // 2
    hits = ((read_rows == target_place.unsqueeze(-1)).any(-1) & alone).double().mean()
    if figure is not None:
        _scatter(priority[:100], rows[:100], sharp[:100], figure)
    return (
        f"top {task.n_out} of {task.n_in}: "
        + "; ".join(cells)
        + f"; the {task.n_out} target vectors sit at {distinct.mean():.1f} distinct places on average;"
        f" output steps reading the place only their target was written to: {hits:.0%}"
    )


def _scatter(priority: torch.Tensor, rows: torch.Tensor, sharp: torch.Tensor, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for head in range(rows.shape[2]):
        chosen = sharp[:, :, head]
        if chosen.any():
            ax.scatter(priority[chosen], rows[:, :, head][chosen], s=4, label=f"write head {head}")
    ax.set(xlabel="priority", ylabel="write location (row, unwrapped)", title="where each item is written")
    ax.legend(markerscale=3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


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
    model = task.model
    if args.load:
        model.load_state_dict(torch.load(args.load))
    trainer = Trainer(task, config)
    batches = iter(StepBatchSampler(len(task.train_set), config.loop.batch_size, config.seed))
    curriculum = next((c for c in task.callbacks if isinstance(c, Curriculum)), None)
    final = evaluation_set(PrioritySort(config.width, config.n_in, config.n_out))
    cpu0, wall0, running = time.process_time(), time.time(), None
    for step in range(1, args.steps + 1):
        try:
            metrics = trainer.step(task.collate(next(batches)))
        except NonFiniteError as error:
            print(error)
            break
        running = metrics["bits"] if running is None else 0.98 * running + 0.02 * metrics["bits"]
        if step % 250 == 0:
            level = int(curriculum.level) if curriculum is not None else -1
            print(
                f"step {step} cpu {time.process_time() - cpu0:.0f}s level {level} running bits {running:.2f}",
                flush=True,
            )
        if args.check_every and step % args.check_every == 0:
            print(f"step {step} evaluation: {score(model, final):.2f} wrong bits/seq", flush=True)
    cpu, wall = time.process_time() - cpu0, time.time() - wall0
    if args.save:
        torch.save(model.state_dict(), args.save)
    print(f"evaluation (the 500 sequences of ntm_sort_vs_lstm.py): {score(model, final):.2f} wrong bits/seq")
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
    figure = Path(args.show) / "ntm-sort-write-locations.png" if args.show else None
    print(placement(model, levels[-1], torch.Generator().manual_seed(6), figure))
    print(json.dumps({"steps": args.steps, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1)}))


if __name__ == "__main__":
    main()
