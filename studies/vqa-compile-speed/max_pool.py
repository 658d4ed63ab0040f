"""shapes-vqa's compiled step with foveal's traced max pool against the library's.

    python studies/vqa-compile-speed/max_pool.py [--case shapes-vqa] [--rounds 40] [--threads 1] [--out F.jsonl]

While a graph is traced, :class:`foveal.models.pooling.MaxPool2d` runs a 2 x 2 pool as the max of four
strided views (element-wise work that inductor fuses with the BatchNorm and ReLU around it); the
library's ``max_pool2d`` has a backward that inductor lowers to a scatter through the saved indices.
Two trainers of the case, both compiled, one with every such pool swapped for a plain
:class:`torch.nn.MaxPool2d`, are timed in interleaved rounds of one process after checking that their
first losses agree. Prints each one's fastest and median step and their ratios; ``--out`` appends them as one
JSON line (results/compile-fast-paths.jsonl) with the seed, commit and command.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _trainer import append_fast_path_row, compare_interleaved  # noqa: E402
from compile import CASES, build  # noqa: E402
from foveal.models.pooling import MaxPool2d  # noqa: E402


def with_library_pools(module: nn.Module) -> int:
    """Swap every foveal MaxPool2d under ``module`` for the library's; returns how many."""
    swapped = 0
    for name, child in module.named_children():
        if isinstance(child, MaxPool2d):
            setattr(module, name, nn.MaxPool2d(child.kernel_size, child.stride))
            swapped += 1
        else:
            swapped += with_library_pools(child)
    return swapped


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", default="shapes-vqa", choices=("shapes-vqa", "shapes-vqa-two-hop", "easy-vqa"))
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", help="append the result as one JSON line to this file")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    case = CASES[args.case]
    traced, batch = build(case, True, args.threads)
    library, _ = build(case, True, args.threads)
    if not with_library_pools(library.model):
        raise SystemExit(f"{args.case}: the model has no 2 x 2 max pool to compare")
    arms = {"foveal pool": traced, "library pool": library}
    losses = {}
    for name, trainer in arms.items():
        start = time.perf_counter()
        losses[name] = trainer.step(batch)["loss"]
        print(f"{name}: first step (compiles) {time.perf_counter() - start:.1f} s, loss {losses[name]:.6f}", flush=True)
    if abs(losses["foveal pool"] - losses["library pool"]) > 1e-5 * max(1.0, abs(losses["library pool"])):
        raise SystemExit("the two steps' losses differ")

    def step(trainer: object) -> float:
        start = time.perf_counter()
        trainer.step(batch)
        return time.perf_counter() - start

    times = compare_interleaved(
        {name: lambda trainer=trainer: step(trainer) for name, trainer in arms.items()},
        args.rounds,
        "library pool",
        "foveal pool",
    )
    if args.out:
        append_fast_path_row(
            args.out,
            "max-pool",
            "2 x 2 max pool as the max of four strided views while traced",
            args.case,
            args.threads,
            times["foveal pool"],
            times["library pool"],
        )


if __name__ == "__main__":
    main()
