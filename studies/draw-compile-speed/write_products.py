"""DRAW's compiled step with the write's small products as fused broadcast sums, against batched GEMMs.

    python studies/draw-compile-speed/write_products.py [--rounds 30] [--threads 1]

While a graph is traced, :func:`foveal.glimpse.separable.separable` multiplies images of at most
``SMALL_IMAGE`` rows and columns (DRAW's 5 x 5 write patch) as sums of broadcast products; with
``SMALL_IMAGE = 0`` it keeps the two batched GEMMs. Two trainers of the paper's configuration, compiled,
are timed in interleaved rounds of one process; the value is set before each one's step (dynamo guards
on it, so each keeps its own graphs). Prints each one's fastest and median step and their ratios.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import foveal.glimpse.separable as separable  # noqa: E402
from _trainer import compare_interleaved  # noqa: E402
from compile import CASES, build  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    case = CASES["draw-paper"]
    arms = {"broadcast sums": (separable.SMALL_IMAGE, build(case, True, args.threads)[0])}
    arms["batched GEMMs"] = (0, build(case, True, args.threads)[0])
    _, batch = build(case, False, args.threads)

    def step(name: str) -> float:
        separable.SMALL_IMAGE, trainer = arms[name]
        start = time.perf_counter()
        trainer.step(batch)
        return time.perf_counter() - start

    for name in arms:
        torch.manual_seed(0)
        print(f"{name}: first step (compiles) {step(name):.1f} s", flush=True)
    steps = {name: lambda name=name: step(name) for name in arms}
    compare_interleaved(steps, args.rounds, "batched GEMMs", "broadcast sums")


if __name__ == "__main__":
    main()
