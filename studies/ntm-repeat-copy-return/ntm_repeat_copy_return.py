"""Where does a repeat-copy machine's read head go back to the first vector, on sequences longer than it trained on?

    python studies/ntm-repeat-copy-return/ntm_repeat_copy_return.py RUN [RUN ...] [--length 20] [--repeats 10] [--out F]

For each trained ``ntm-repeat-copy`` run it feeds 50 sequences of ``--length`` vectors repeated ``--repeats``
times (the run's own ``len{L}_rep{N}`` evaluation set) and follows the read head's row (the largest read
weight) through the output: the number of steps it walks, one row a step in the direction its write head
went, before its first jump back (a read-out that returns at the end of the sequence walks ``L``), and the
fraction of the repeated vectors' bits that are wrong. ``--out`` appends a row per run, in the form a sweep
writes (settings: the length and repeats; metrics: the most common count, its share and the error).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import torch

from foveal.data.ntm_tasks import wrong_bits
from foveal.runs import load_run
from foveal.sweep import script_provenance


def first_return(run_dir: str, length: int, repeats: int, sequences: int = 50) -> tuple[Counter[int], float]:
    """How many output steps the read head walks before its first jump back, over ``sequences``, and the
    fraction of vector bits wrong."""
    run = load_run(run_dir)
    model = run.task.model.eval()
    batch = run.task.eval_set.extras[f"len{length}_rep{repeats}"].batches(max_batch=sequences)[0]
    with torch.no_grad():
        out = model(batch.inputs, record=True)
    assert out.read_weights is not None
    steps = batch.targets.shape[1]
    rows = out.read_weights[:, -steps:, 0].argmax(-1)  # (B, T_out): the read head's row at each output step
    walks: Counter[int] = Counter()
    for sequence in rows:
        moves = (sequence[1:] - sequence[:-1]) % model.n_rows
        # the read head walks one row a step, forwards (+1) or backwards (R - 1), as its write head did
        walk = Counter(m for m in moves.tolist() if m in (1, model.n_rows - 1)).most_common(1)
        forward = walk[0][0] if walk else 1
        back = [t for t, m in enumerate(moves.tolist(), start=1) if m not in (0, forward)]
        walks[back[0] if back else steps] += 1
    vectors = batch.targets[:, :-1, :-1]
    error = float(wrong_bits(out.logits[:, -steps:-1, :-1], vectors).sum() / vectors.numel())
    return walks, error


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+")
    p.add_argument("--length", type=int, default=20)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--out", type=Path, help="append a results row per run to this file")
    args = p.parse_args()
    torch.set_num_threads(1)
    for run_dir in args.runs:
        walks, error = first_return(run_dir, args.length, args.repeats)
        common = ", ".join(f"{steps} steps: {count}" for steps, count in walks.most_common(3))
        print(f"{run_dir}: first jump back after {common} (of {sum(walks.values())}); vector bits wrong {error:.3f}")
        if args.out:
            steps, count = walks.most_common(1)[0]
            run = load_run(run_dir)
            row = {
                "recipe": run.recipe.name,
                "preset": run.preset,
                "sets": {"length": str(args.length), "repeats": str(args.repeats)},
                "seed": run.config.seed,
                "metrics": {"return_steps": steps, "return_share": count / sum(walks.values()), "vector_error": error},
                **script_provenance(),
            }
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
