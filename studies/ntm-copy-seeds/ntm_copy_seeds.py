"""What tells a copy machine that copies length 120 from one that copies only the training lengths?

    python studies/ntm-copy-seeds/ntm_copy_seeds.py RUN [RUN ...] [--set KEY=VALUE ...] [--out F.jsonl]
    python studies/ntm-copy-seeds/ntm_copy_seeds.py RUN RUN --figure PNG --labels A B

For each trained ``ntm-copy`` run it scores the run's own evaluation sets at lengths 20 and 120 (the
same sequences for every run) and measures, over the input phase, how peaked the read weighting is (its
largest weight, averaged over steps and sequences: 1 is a head parked on one row, 1/R one spread over
all R rows) and the norm of the read vector, and, over the read-out, where the first wrong bit of a ruined
sequence (more than 20 wrong bits) lies. One row per run, in the form a sweep writes, with the settings
the runs were trained with as ``--set KEY=VALUE`` gives them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from foveal.data.ntm_tasks import SequenceSet, wrong_bits
from foveal.runs import load_run
from foveal.sweep import script_provenance
from foveal.viz import pyplot


def measure(run_dir: str, lengths: tuple[int, ...] = (20, 120), sequences: int = 200) -> dict[str, object]:
    """Wrong bits and the read head's input-phase peak and read norm at each of ``lengths``."""
    run = load_run(run_dir)
    model = run.task.model.eval()
    task = run.task.eval_set.main.task
    row: dict[str, object] = {}
    for length in lengths:
        pool = SequenceSet(task, sequences, getattr(run.config, "eval_seed", 0) + length, length=length)
        batch = pool.batches(max_batch=sequences)[0]
        with torch.no_grad():
            out = model(batch.inputs, record=True)
        assert out.read_weights is not None and out.memory is not None
        reads = out.read_weights[:, :length, 0]  # (B, L, R): the input phase
        read_vectors = torch.einsum("blr,blrc->blc", reads, out.memory[:, :length])
        errors = ((out.logits[:, -length:] > 0).float() != batch.targets).sum(-1)  # (B, L)
        bits = errors.sum(-1)
        ruined = bits > 20
        first = (errors[ruined] > 0).float().argmax(-1)
        row |= {
            f"bits_len{length}": float(wrong_bits(out.logits, batch.targets).mean()),
            f"ruined_len{length}": int(ruined.sum()),
            f"ruined_from_the_start_len{length}": int((first < 3).sum()),
            f"read_peak_input_len{length}": float(reads.max(-1).values.mean()),
            f"read_norm_input_end_len{length}": float(read_vectors[:, -1].norm(dim=-1).mean()),
        }
    return row


def sweep_row(run_dir: str, sets: dict[str, str]) -> dict[str, object]:
    """:func:`measure` as a results row: recipe, preset, ``sets``, seed, metrics, commit and command."""
    run = load_run(run_dir)
    return {
        "recipe": run.recipe.name,
        "preset": run.preset,
        "sets": sets,
        "seed": run.config.seed,
        "metrics": measure(run_dir),
        **script_provenance(),
    }


def draw(runs: list[str], labels: list[str], path: Path, length: int = 120) -> None:
    """Each run on one length-``length`` sequence: the read weighting (the write head's row as a line), and
    over time the read weighting's largest weight and the read vector's norm."""
    from matplotlib.colors import PowerNorm

    plt = pyplot()
    fig, axes = plt.subplots(2, len(runs), figsize=(6 * len(runs), 6.5), squeeze=False, height_ratios=(3, 2))
    for column, (run_dir, label) in enumerate(zip(runs, labels, strict=True)):
        run = load_run(run_dir)
        model = run.task.model.eval()
        task = run.task.eval_set.main.task
        batch = SequenceSet(task, 1, getattr(run.config, "eval_seed", 0) + length, length=length)[0]
        with torch.no_grad():
            out = model(batch.inputs, record=True)
        assert out.read_weights is not None and out.write_weights is not None and out.memory is not None
        reads = out.read_weights[0, :, 0]  # (T, R)
        read_vectors = torch.einsum("tr,trc->tc", reads, out.memory[0])
        ax = axes[0, column]
        # a power norm shows a weighting spread over every row, which a linear scale draws as white
        ax.imshow(reads[:, : 2 * length + 2].T.numpy(), aspect="auto", cmap="Reds", origin="lower", norm=PowerNorm(0.3))
        ax.plot(out.write_weights[0, :, 0].argmax(-1).numpy(), color="tab:blue", lw=1, label="write head's row")
        ax.axvline(length, color="grey", ls="--", lw=1)
        bits = int(wrong_bits(out.logits, batch.targets)[0])
        ax.set(title=f"{label}: {bits} wrong bits", ylabel="memory row (read weighting in red)")
        ax.legend(loc="upper left", fontsize=10)
        ax = axes[1, column]
        ax.plot(reads.max(-1).values.numpy(), color="tab:red", label="largest read weight")
        ax.plot(read_vectors.norm(dim=-1).numpy() / 10, color="black", label="read vector's norm / 10")
        ax.axvline(length, color="grey", ls="--", lw=1)
        ax.set(xlabel="time step (dashed: the delimiter)", ylim=(0, 1.05))
        ax.legend(loc="center left", fontsize=10)
    fig.suptitle(f"Copy, length {length}, the same sequence for both")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting the runs trained with")
    p.add_argument("--out", type=Path)
    p.add_argument("--figure", type=Path, help="draw the runs' weightings at length 120 instead of measuring")
    p.add_argument("--labels", nargs="+", help="the runs' titles in the figure")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.figure:
        draw(args.runs, args.labels or args.runs, args.figure)
        return
    for run_dir in args.runs:
        row = sweep_row(run_dir, dict(item.split("=", 1) for item in args.set))
        print(row["sets"], row["seed"], {k: round(v, 3) for k, v in row["metrics"].items()})  # type: ignore[union-attr]
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
