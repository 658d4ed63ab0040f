"""How precisely must a model compare priorities to sort with few wrong bits? (``ntm-sort``)

A model that sorts perfectly, except that it sees every priority with Gaussian noise of standard
deviation ``sigma``, swaps neighbours whose priorities are closer than about ``sigma``. This
draws the task's sequences (:class:`foveal.data.ntm_tasks.PrioritySort`), sorts them by the noisy
priorities, and reports the wrong bits per sequence and the bit error rate: the floor a model of
that precision cannot beat, to hold against the curriculum's threshold (1% of the target bits).
No model is trained; it runs in seconds.

``--by-location`` scores instead the algorithm the NTM paper saw its sort model use (fig. 17), done
as well as it can be: each vector is written to row ``floor(slope * (1 - priority))`` of the
memory (a later write to the same row replaces the earlier one), then the rows are read in order,
skipping every row nothing was written to. Its only errors come from vectors that share a row; a
steeper slope spreads them further apart, until the memory's rows run out.

    python studies/ntm-sort/ntm_sort_floor.py
    python studies/ntm-sort/ntm_sort_floor.py --sizes 20/16 --by-location 10 32 63.5
"""

from __future__ import annotations

import argparse

import torch

from foveal.data.ntm_tasks import PrioritySort
from sorter import noisy_sort_errors


def floor(n_in: int, n_out: int, sigma: float, n: int, seed: int) -> tuple[float, float]:
    """Wrong bits per sequence and bit error rate of sorting by ``priority + N(0, sigma^2)``."""
    task = PrioritySort(8, n_in, n_out)
    generator = torch.Generator().manual_seed(seed)
    batch = task.sample(n, generator)
    wrong = noisy_sort_errors(batch, task, torch.randn(n, n_in, generator=generator), sigma).sum(-1)
    return wrong.mean().item(), wrong.mean().item() / (n_out * task.width)


def location_floor(n_in: int, n_out: int, slope: float, n: int, seed: int) -> tuple[float, float, float]:
    """Wrong bits per sequence, bit error rate and the share of sequences with no error of the
    write-by-priority, read-in-order algorithm (``--by-location``)."""
    task = PrioritySort(8, n_in, n_out)
    batch = task.sample(n, torch.Generator().manual_seed(seed))
    items, priority = batch.inputs[:, :n_in, : task.width], batch.inputs[:, :n_in, task.width]
    rows = (slope * (1 - priority)).floor().long()  # (B, n_in)
    # an item survives unless a later item (input order) is written to its row and replaces it
    later = torch.ones(n_in, n_in, dtype=torch.bool).triu(diagonal=1)
    replaced = ((rows.unsqueeze(2) == rows.unsqueeze(1)) & later).any(2)
    key = rows.masked_fill(replaced, torch.iinfo(torch.long).max)  # survivors' rows are distinct
    order = key.argsort(dim=1)[:, :n_out]  # rows read in order, empty ones skipped
    read = items.gather(1, order.unsqueeze(-1).expand(-1, -1, task.width))
    read = read.masked_fill(replaced.gather(1, order).unsqueeze(-1), 0.0)  # fewer survivors than outputs: blank
    wrong = (read != batch.targets).float().sum(dim=(1, 2))
    return wrong.mean().item(), wrong.mean().item() / (n_out * task.width), (wrong == 0).float().mean().item()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", nargs="+", default=["4/3", "8/6", "20/16"], help="n_in/n_out pairs")
    p.add_argument("--sigmas", type=float, nargs="+", default=[0.001, 0.003, 0.01, 0.03, 0.1])
    p.add_argument("--n", type=int, default=20000, help="sequences per cell")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--by-location", type=float, nargs="+", metavar="SLOPE", help="rows per unit of priority")
    args = p.parse_args()
    if args.by_location:
        if max(args.by_location) * 2 > 128:
            p.error("--by-location: a slope above 64 rows per unit needs more than the memory's 128 rows")
        print("| n_in / n_out | " + " | ".join(f"{s:g} rows per unit" for s in args.by_location) + " |")
        print("| --- |" + " --- |" * len(args.by_location))
        for size in args.sizes:
            n_in, n_out = (int(v) for v in size.split("/"))
            cells = [location_floor(n_in, n_out, s, min(args.n, 5000), args.seed) for s in args.by_location]
            print(
                f"| {n_in} / {n_out} | "
                + " | ".join(f"{b:.2f} ({100 * r:.1f}%), {100 * ok:.0f}% exact" for b, r, ok in cells)
                + " |"
            )
        return
    print("| n_in / n_out | " + " | ".join(f"sigma {s:g}" for s in args.sigmas) + " |")
    print("| --- |" + " --- |" * len(args.sigmas))
    for size in args.sizes:
        n_in, n_out = (int(v) for v in size.split("/"))
        cells = [floor(n_in, n_out, s, args.n, args.seed) for s in args.sigmas]
        print(f"| {n_in} / {n_out} | " + " | ".join(f"{bits:.2f} ({100 * rate:.1f}%)" for bits, rate in cells) + " |")


if __name__ == "__main__":
    main()
