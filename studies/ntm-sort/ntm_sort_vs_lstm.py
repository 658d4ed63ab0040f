"""Priority sort: the NTM of ``ntm-sort`` against a plain LSTM, on the same sequences (NTM paper, fig. 16).

The paper's claim for sort is comparative: an NTM learns it faster than an LSTM of a few layers
(its baseline for sort: 3 layers of 128 units). Both models train through the loop's step
(:meth:`foveal.train.Trainer.step`) with the recipe's loss, optimiser, learning rate and clipping,
on the same batches (drawn from one seed), without a curriculum, and are scored every
``--check-every`` steps on one evaluation set of 500 sequences: the paper's cost per sequence (BCE
in bits) and wrong bits per sequence. Random guessing costs ``n_out * width`` bits. One thread;
CPU time is reported per model (the NTM's step is the dearer).

    python studies/ntm-sort/ntm_sort_vs_lstm.py --steps 3000                  # the paper's 16 of 20
    python studies/ntm-sort/ntm_sort_vs_lstm.py --steps 3000 --set n_in=8 --set n_out=1 --models ntm

``--set`` passes recipe keys (``n_in``, ``n_out``, ``model.n_read_heads``, ``loop.lr``, ...) to the
NTM's config; ``n_in``, ``n_out``, ``width`` and ``loop.*`` set the task and the step for both models.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from foveal.data.ntm_tasks import PrioritySort, output_phase, wrong_bits
from foveal.recipes.config import resolve_config
from foveal.runs import get_recipe
from foveal.train import Trainer, seed_everything
from sorter import evaluation_set


class LSTMOutput(NamedTuple):
    logits: Tensor  # (B, T, O), as the NTM's output names them, so the recipe's loss scores both


class LSTMBaseline(nn.Module):
    """The paper's LSTM baseline: stacked LSTM layers, a linear read-out per step."""

    def __init__(self, input_size: int, output_size: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, output_size)

    def forward(self, x: Tensor) -> LSTMOutput:
        return LSTMOutput(self.out(self.lstm(x)[0]))


def train(name: str, args: argparse.Namespace) -> list[dict]:
    recipe = get_recipe("ntm-sort")
    config = resolve_config(recipe, None, None, {"curriculum": "false", **args.sets}, args.seed, 1)
    seed_everything(args.seed)
    task = recipe.build(config)
    sort = PrioritySort(config.width, config.n_in, config.n_out)
    if name == "lstm":
        seed_everything(args.seed)  # the LSTM starts from the same draws whether or not the NTM was built first
        lstm = LSTMBaseline(sort.input_size, sort.output_size, args.lstm_hidden, args.lstm_layers)
        task = dataclasses.replace(task, model=lstm)
    model = task.model
    n_params = sum(p.numel() for p in model.parameters())
    trainer = Trainer(task, config)
    batches = torch.Generator().manual_seed(args.seed)  # the same sequences for both models
    evaluation = evaluation_set(sort)
    rows, cpu = [], 0.0
    for step in range(1, args.steps + 1):
        c0 = time.process_time()
        trainer.step(sort.sample(config.loop.batch_size, batches))
        cpu += time.process_time() - c0
        if step % args.check_every == 0 or step == args.steps:
            with torch.no_grad():
                logits = output_phase(model(evaluation.inputs).logits, evaluation.targets)
                bce = F.binary_cross_entropy_with_logits(logits, evaluation.targets, reduction="sum").item()
                bits = wrong_bits(logits, evaluation.targets).mean().item()
            n = len(evaluation.inputs)
            row = {"model": name, "params": n_params, "step": step, "sequences": step * config.loop.batch_size}
            row |= {"cpu_s": round(cpu, 1), "cost": round(bce / n / math.log(2), 2), "bits": round(bits, 2)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--check-every", type=int, default=500)
    p.add_argument("--models", nargs="+", default=["ntm", "lstm"], choices=["ntm", "lstm"])
    p.add_argument("--lstm-hidden", type=int, default=128)
    p.add_argument("--lstm-layers", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args()
    args.sets = dict(s.split("=", 1) for s in args.sets)
    torch.set_num_threads(1)
    results = {name: train(name, args) for name in args.models}
    if len(results) == 2:
        print("\nstep | NTM cost (bits) | LSTM cost | NTM wrong bits | LSTM wrong bits | NTM / LSTM CPU per step")
        for ntm, lstm in zip(results["ntm"], results["lstm"], strict=True):
            ratio = f"{ntm['cpu_s'] / lstm['cpu_s']:.1f}x" if lstm["cpu_s"] else "-"  # a few steps round to 0 s
            print(f"{ntm['step']} | {ntm['cost']} | {lstm['cost']} | {ntm['bits']} | {lstm['bits']} | {ratio}")


if __name__ == "__main__":
    main()
