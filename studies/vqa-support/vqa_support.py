"""What keeps easy-vqa's map off the background: a cap on its support, a softmax share, noise, a prior?

    python studies/vqa-support/vqa_support.py --seed 200 --top-k 0 --out runs/vqa-support/k0-s200
    python studies/vqa-support/vqa_support.py --seed 200 --top-k 16 --out runs/vqa-support/k16-s200

Trains the ``easy-vqa`` task (``--preset``, default ``quick``, and ``--set`` overrides, such as the recipe's
``softmax_while_warm`` and ``model.head_options.prior``) with the sparsemax of its attention restricted to each
row's ``--top-k`` best-scoring cells (0: no cap, the recipe as it is), ``--softmax-floor`` of each map a
softmax over every cell (which gives every cell a gradient) and ``--score-noise`` on the training scores, then
reads the first 1,000 test questions and reports, beside the recipe's metrics, the map's support (cells with a
weight above 0.001) per answer type and the share of the map on cells whose pixels are all background. Appends a
row to ``--results``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from torch.utils.data import DataLoader

import foveal.attention.core as core
import foveal.recipes.easy_vqa as easy_vqa
from foveal.attention.normalizers import sparsemax
from foveal.data.easy_vqa import ANSWER_TYPES
from foveal.recipes.config import parse_sets
from foveal.runs import RunRequest, commit_id, start_run
from foveal.sweep import eval_curve
from foveal.train import RunDir

NOISE = [0.0]  # the training scores' noise, in units of the final temperature's logits (--score-noise)


def normaliser(k: int, floor: float):  # type: ignore[no-untyped-def]
    """The sparsemax over each row's ``k`` best scores (0: all), mixed with ``floor`` of a softmax over every key."""

    def normalise(logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        everywhere = mask
        if NOISE[0] and torch.is_grad_enabled():  # training steps only: evaluations run without gradients
            logits = logits + NOISE[0] * torch.randn_like(logits)
        if k and logits.shape[-1] > k:
            kth = logits.detach().topk(k, dim=-1).indices
            keep = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, kth, True)
            mask = keep if mask is None else mask & keep
        weights = sparsemax(logits, mask)
        if floor:
            soft = logits if everywhere is None else logits.masked_fill(~everywhere, -torch.inf)
            weights = (1 - floor) * weights + floor * soft.softmax(-1)
        return weights

    return normalise


@torch.no_grad()
def support(model, dataset, limit: int = 1000) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Mean count of cells in the last map's support, and its share on all-background cells, per answer type."""
    model.eval()
    grid = model.grid
    sizes, background = torch.zeros(3), torch.zeros(3)
    count = torch.zeros(3)
    seen = 0
    for batch in DataLoader(dataset, batch_size=250):
        out = model(batch.image, batch.question, batch.length)
        weights = out.attention[:, -1].reshape(len(batch.answer), -1)  # (B, cells)
        # a cell is background when none of its pixels is in the object's mask
        mask = batch.mask.float().unsqueeze(1)  # (B, 1, 64, 64)
        empty = (torch.nn.functional.adaptive_max_pool2d(mask, grid).flatten(1) == 0).float()
        sizes.index_add_(0, batch.answer_type, (weights > 1e-3).float().sum(-1))
        background.index_add_(0, batch.answer_type, (weights * empty).sum(-1))
        count.index_add_(0, batch.answer_type, torch.ones(len(batch.answer)))
        seen += len(batch.answer)
        if seen >= limit:
            break
    keys = [t.replace("/", "") for t in ANSWER_TYPES]
    return {f"support_{key}": float(sizes[t] / count[t]) for t, key in enumerate(keys)} | {
        f"background_{key}": float(background[t] / count[t]) for t, key in enumerate(keys)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--softmax-floor", type=float, default=0.0, help="this share of the map is a softmax")
    parser.add_argument(
        "--score-noise",
        type=float,
        default=0.0,
        help="Gaussian noise on the training scores, its std in the final temperature's units (0: none)",
    )
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", required=True)
    parser.add_argument("--results", default="results/vqa-support.jsonl")
    args = parser.parse_args()
    core.sparsemax = normaliser(args.top_k, args.softmax_floor)
    if args.score_noise:
        schedule = easy_vqa.temperature_schedule

        def flagged(config, model):  # type: ignore[no-untyped-def]
            (anneal,) = schedule(config, model)
            apply = anneal.apply

            def flag(temperature: float) -> None:
                # constant in score units: small against a hot start's logits, `--score-noise` at the end
                NOISE[0] = args.score_noise * anneal.end / temperature
                apply(temperature)

            anneal.apply = flag
            return [anneal]

        easy_vqa.temperature_schedule = flagged
    sets = parse_sets(args.set)
    request = RunRequest("easy-vqa", args.preset, sets=sets, seed=args.seed, threads=1, out=args.out, overwrite=True)
    run, metrics = start_run(request)
    metrics |= support(run.task.model, run.task.evaluation_set())
    row = {
        "recipe": "easy-vqa",
        "preset": args.preset,
        "sets": {
            "top_k": str(args.top_k),
            "softmax_floor": str(args.softmax_floor),
            **({"score_noise": str(args.score_noise)} if args.score_noise else {}),
            **sets,
        },
        "seed": args.seed,
        "metrics": metrics,
        "cpu_s": json.loads(RunDir(args.out).info.read_text())["cpu_seconds"],
        "commit": commit_id(),
        "command": " ".join(
            ["python studies/vqa-support/vqa_support.py", f"--seed {args.seed}", f"--top-k {args.top_k}"]
            + ([f"--softmax-floor {args.softmax_floor}"] if args.softmax_floor else [])
            + ([f"--score-noise {args.score_noise}"] if args.score_noise else [])
            + [f"--set {s}" for s in args.set]
            + ([f"--preset {args.preset}"] if args.preset != "quick" else [])
        ),
        "curve": eval_curve(RunDir(args.out).metrics),
    }
    with Path(args.results).open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row["metrics"]))


if __name__ == "__main__":
    main()
