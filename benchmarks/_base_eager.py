"""The eager training step of one benchmark case, served to ``benchmarks/compile.py --base COMMIT``.

Runs in a child process whose ``foveal`` is the source of an earlier commit (its ``src``, unpacked from ``git
archive`` and put on ``PYTHONPATH``), so it uses only what every commit since the loop's redesign has: a
recipe, its config, the loop's ``Trainer`` (``_trainer.py``). It builds the case as ``compile.py`` builds its
eager step (the same seed, weights and batch), prints the first step's loss, then times one step for each line
it reads and prints the seconds. ``compile.py`` interleaves these rounds with its own.

    python benchmarks/_base_eager.py '{"recipe": "draw", "preset": null, "sets": {...}, "threads": 1}'
"""

from __future__ import annotations

import json
import sys
import time

import torch

from _trainer import build_trainer


def main() -> None:
    case = json.loads(sys.argv[1])
    torch.set_num_threads(case["threads"])
    trainer, batch = build_trainer(case["recipe"], case["preset"], case["sets"], case["threads"])
    torch.manual_seed(0)  # the noise compile.py draws for its steps
    print(json.dumps({"loss": trainer.step(batch)["loss"]}), flush=True)
    for _ in sys.stdin:
        start = time.perf_counter()
        trainer.step(batch)
        print(time.perf_counter() - start, flush=True)


if __name__ == "__main__":
    main()
