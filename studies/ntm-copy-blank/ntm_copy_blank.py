"""Where do trained copy machines lose bits at length 120: in sequences that hold an all-zero vector?

    python studies/ntm-copy-blank/ntm_copy_blank.py RUN [RUN ...] [--length 120] [--figure PNG]

For each trained ``ntm-copy`` run it scores the run's own length-``L`` evaluation set (the same
sequences for every run) and splits the wrong bits by whether the sequence holds an all-zero input
vector. With ``--figure`` it draws, for the first such sequence, every run's output error and read
weighting around the first all-zero vector's read-out.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from foveal.data.ntm_tasks import wrong_bits
from foveal.runs import load_run
from foveal.viz import pyplot


def score(run_dir: str, length: int) -> dict[str, object]:
    """Wrong bits per sequence at ``length``, split by sequences with and without an all-zero vector."""
    run = load_run(run_dir)
    model = run.task.model.eval()
    sequences = run.task.eval_set.extras[f"len{length}"]
    bits, blank, records = [], [], []
    with torch.no_grad():
        for batch in sequences.batches():
            out = model(batch.inputs, record=True)
            bits.append(wrong_bits(out.logits, batch.targets))
            blank.append((batch.targets.sum(-1) == 0).any(-1))
            records.append((batch, out))
    bits_all, blank_all = torch.cat(bits), torch.cat(blank)
    return {
        "run": run_dir,
        "sequences": len(bits_all),
        "with_zero_vector": int(blank_all.sum()),
        "bits_with_zero_vector": float(bits_all[blank_all].mean()) if blank_all.any() else None,
        "bits_without": float(bits_all[~blank_all].mean()),
        "failed_with_zero_vector": int((bits_all[blank_all] > 0).sum()),
        "failed_without": int((bits_all[~blank_all] > 0).sum()),
        "_records": records,
    }


def draw(results: list[dict[str, object]], labels: list[str], length: int, path: str) -> None:
    """Each run's wrong bits per output step and read weighting on the first sequence with a zero vector."""
    plt = pyplot()
    batch, _ = results[0]["_records"][0]
    index = int((batch.targets.sum(-1) == 0).any(-1).nonzero()[0])
    zero_at = int((batch.targets[index].sum(-1) == 0).nonzero()[0])
    fig, axes = plt.subplots(2, len(results), figsize=(5.5 * len(results), 6), squeeze=False)
    window = slice(max(zero_at - 12, 0), zero_at + 24)
    for column, (result, label) in enumerate(zip(results, labels, strict=True)):
        batch, out = result["_records"][0]
        logits = out.logits[index, -length:]
        errors = ((logits > 0).float() != batch.targets[index]).sum(-1)
        read = out.read_weights[index, -length:, 0]  # (L, R) over the read-out
        ax = axes[0, column]
        ax.bar(range(length), errors.numpy(), color="crimson")
        ax.axvline(zero_at, color="grey", ls="--", lw=1)
        ax.set(title=f"{label}: {int(errors.sum())} wrong bits", xlabel="output step", ylabel="wrong bits")
        ax = axes[1, column]
        rows = read[window].argmax(-1)
        ax.imshow(
            read[window].T[: int(rows.max()) + 6].numpy(),
            aspect="auto",
            cmap="Greys",
            origin="lower",
            extent=(window.start - 0.5, window.stop - 0.5, -0.5, int(rows.max()) + 5.5),
        )
        ax.axvline(zero_at, color="crimson", ls="--", lw=1)
        ax.set(title="read weighting near the all-zero vector", xlabel="output step", ylabel="memory row")
    fig.suptitle(f"Copy, length {length}: input vector {zero_at} is all zeros (dashed)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+")
    p.add_argument("--labels", help="comma-separated labels of the runs in the figure")
    p.add_argument("--length", type=int, default=120)
    p.add_argument("--figure")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    results = [score(run, args.length) for run in args.runs]
    for result in results:
        print(json.dumps({k: v for k, v in result.items() if not k.startswith("_")}))
    if args.figure:
        labels = args.labels.split(",") if args.labels else [Path(r).name for r in args.runs]
        draw(results, labels, args.length, args.figure)
        print(f"wrote {args.figure}")


if __name__ == "__main__":
    main()
