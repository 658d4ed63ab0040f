"""Where does the part of an easy-VQA map that misses the object go?

For each trained run, the last hop's mass on the test questions of each answer type is split four ways
by the cells' coverage of the object mask: on the object (``sum_i alpha_i coverage_i``, the recipe's
``mask_mass``), on the outside part of the cells the outline crosses, on the ring of cells next to the
object that it does not touch, and on the cells farther away. One JSON row per run and answer type is
appended to ``--out``.

    python studies/vqa-easy-map-split/map_split.py RUN [RUN ...] --out results/easy-vqa-map-split.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from foveal.data.easy_vqa import ANSWER_TYPES
from foveal.runs import load_run
from foveal.sweep import script_provenance

PARTS = ("on_object", "outline_cells_outside", "ring", "far")


def split(run_dir: Path, limit: int) -> dict[str, dict[str, float]]:
    run = load_run(run_dir)
    model, dataset = run.task.model.eval(), run.task.eval_set
    grid = model.grid
    totals = torch.zeros(len(ANSWER_TYPES), len(PARTS))
    counts = torch.zeros(len(ANSWER_TYPES))
    seen = 0
    with torch.no_grad():
        for batch in DataLoader(dataset, batch_size=500):
            if seen >= limit:
                break
            seen += len(batch.answer)
            last = model(batch.image, batch.question, batch.length).attention[:, -1]  # (B, N)
            cell = batch.mask.shape[-1] // grid
            coverage = F.avg_pool2d(batch.mask[:, None].float(), cell).flatten(1)
            touched = (coverage > 0).float()
            near = F.max_pool2d(touched.view(-1, 1, grid, grid), 3, 1, 1).flatten(1)
            parts = torch.stack(
                [
                    (last * coverage).sum(1),
                    (last * (1 - coverage) * touched).sum(1),
                    (last * (near - touched)).sum(1),
                    (last * (1 - near)).sum(1),
                ],
                dim=1,
            )
            totals.index_add_(0, batch.answer_type, parts)
            counts.index_add_(0, batch.answer_type, torch.ones(len(parts)))
    return {
        kind: dict(zip(PARTS, (totals[t] / counts[t]).tolist(), strict=True)) for t, kind in enumerate(ANSWER_TYPES)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=3000, help="test questions per run (the first ones)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with args.out.open("a") as out:
        for run_dir in args.runs:
            for kind, parts in split(run_dir, args.limit).items():
                seed = json.loads((run_dir / "config.json").read_text())["config"]["seed"]
                row = {
                    "run": str(run_dir),
                    "seed": seed,
                    "answer_type": kind,
                    **{k: round(v, 4) for k, v in parts.items()},
                }
                row |= script_provenance()
                out.write(json.dumps(row) + "\n")
                print(json.dumps(row))


if __name__ == "__main__":
    main()
