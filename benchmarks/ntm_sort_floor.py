"""How precisely must a model compare priorities to sort with few wrong bits? (``ntm-sort``)

A model that sorts perfectly, except that it sees every priority with Gaussian noise of standard
deviation ``sigma``, swaps neighbours whose priorities are closer than about ``sigma``. This
draws the task's sequences (:class:`foveal.data.ntm_tasks.PrioritySort`), sorts them by the noisy
priorities, and reports the wrong bits per sequence and the bit error rate: the floor a model of
that precision cannot beat, to hold against the curriculum's threshold (1% of the target bits).
No model is trained; it runs in seconds.

    python benchmarks/ntm_sort_floor.py
"""

from __future__ import annotations

import argparse

import torch

from foveal.data.ntm_tasks import PrioritySort


def floor(n_in: int, n_out: int, sigma: float, n: int, seed: int) -> tuple[float, float]:
    """Wrong bits per sequence and bit error rate of sorting by ``priority + N(0, sigma^2)``."""
    task = PrioritySort(8, n_in, n_out)
    generator = torch.Generator().manual_seed(seed)
    batch = task.sample(n, generator)
    items, priority = batch.inputs[:, :n_in, : task.width], batch.inputs[:, :n_in, task.width]
    noisy = priority + sigma * torch.randn(priority.shape, generator=generator)
    order = noisy.argsort(dim=1, descending=True)[:, :n_out]
    predicted = items.gather(1, order.unsqueeze(-1).expand(-1, -1, task.width))
    wrong = (predicted != batch.targets).float().sum(dim=(1, 2))
    return wrong.mean().item(), wrong.mean().item() / (n_out * task.width)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", nargs="+", default=["4/3", "8/6", "20/16"], help="n_in/n_out pairs")
    p.add_argument("--sigmas", type=float, nargs="+", default=[0.001, 0.003, 0.01, 0.03, 0.1])
    p.add_argument("--n", type=int, default=20000, help="sequences per cell")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    print("| n_in / n_out | " + " | ".join(f"sigma {s:g}" for s in args.sigmas) + " |")
    print("| --- |" + " --- |" * len(args.sigmas))
    for size in args.sizes:
        n_in, n_out = (int(v) for v in size.split("/"))
        cells = [floor(n_in, n_out, s, args.n, args.seed) for s in args.sigmas]
        print(f"| {n_in} / {n_out} | " + " | ".join(f"{bits:.2f} ({100 * rate:.1f}%)" for bits, rate in cells) + " |")


if __name__ == "__main__":
    main()
