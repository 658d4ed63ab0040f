"""ntm-copy's compiled step shifting by rolls, as the NTM's compile plan has it, against the same step shifting by
the gather.

    python studies/ntm-compile-speed/shift_rolls.py [--case ntm-copy] [--rounds 40] [--threads 1] [--out F.jsonl]

The NTM's compile plan has its graphs shift each head's weighting by one roll per allowed shift
(:func:`foveal.models.ntm.circular_shift_by_rolls`, whose gradient is the opposite rolls); the eager step takes
:func:`foveal.memory.circular_shift`'s one gather, whose gradient inductor lowers to a scatter-add run as a
scalar loop. Two trainers of the case, both compiled, the second under a plan without that keyword (its graphs
take the gather), are timed in interleaved rounds of one process after checking that their first losses agree.
Prints each one's fastest and median step and their ratios; ``--out`` appends them as one JSON line
(results/compile-fast-paths.jsonl) with the seed, commit and command.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from types import MappingProxyType

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _trainer import append_fast_path_row, compare_interleaved  # noqa: E402
from compile import CASES, build  # noqa: E402
from foveal.compiling import compile_model  # noqa: E402
from foveal.models.ntm import NTM  # noqa: E402


class GatherNTM(NTM):
    """The NTM under a compile plan whose graphs shift by the gather, as the eager step does."""

    compile_plan = dataclasses.replace(NTM.compile_plan, keywords=MappingProxyType({}))


def with_the_gather(model: nn.Module) -> None:
    """Compile ``model`` (an NTM, before its first call) again, its graphs shifting by the gather."""
    if type(model) is not NTM or "shift_function" not in NTM.compile_plan.keywords:
        raise SystemExit("the model is no NTM whose compile plan shifts by rolls: nothing to compare")
    model.__class__ = GatherNTM
    compile_model(model)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", default="ntm-copy", choices=("ntm-copy", "ntm-copy-lstm"))
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", help="append the result as one JSON line to this file")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    case = CASES[args.case]
    rolls, batch = build(case, True, args.threads)
    gather, _ = build(case, True, args.threads)
    with_the_gather(gather.model)
    arms = {"rolls": rolls, "gather": gather}
    losses = {}
    for name, trainer in arms.items():
        start = time.perf_counter()
        losses[name] = trainer.step(batch)["loss"]
        print(f"{name}: first step (compiles) {time.perf_counter() - start:.1f} s, loss {losses[name]:.6f}", flush=True)
    if abs(losses["rolls"] - losses["gather"]) > 1e-5 * max(1.0, abs(losses["gather"])):
        raise SystemExit("the two steps' losses differ")

    def step(trainer: object) -> float:
        start = time.perf_counter()
        trainer.step(batch)
        return time.perf_counter() - start

    times = compare_interleaved(
        {name: lambda trainer=trainer: step(trainer) for name, trainer in arms.items()}, args.rounds, "gather", "rolls"
    )
    if args.out:
        append_fast_path_row(
            args.out,
            "circular-shift",
            "one roll per shift in the NTM's compiled graphs (its compile plan), instead of the gather",
            args.case,
            args.threads,
            times["rolls"],
            times["gather"],
        )


if __name__ == "__main__":
    main()
