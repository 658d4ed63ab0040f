"""shapes-vqa's compiled step with a traced four-view 2 x 2 max pool against the library's.

    python studies/vqa-compile-speed/max_pool.py [--case shapes-vqa] [--rounds 40] [--threads 1] [--out F.jsonl]

While a graph is traced, :class:`MaxPool2d` below runs a 2 x 2 pool as the max of four strided views
(element-wise work that inductor fuses with the BatchNorm and ReLU around it); the library's
``max_pool2d`` has a backward that inductor lowers to a scatter through the saved indices. foveal's
models use the library's pool; this script keeps the four-view form to compare. Two trainers of the
case, both compiled, one with every library pool swapped for this one, are timed in interleaved rounds
of one process after checking that their first losses agree. Prints each one's fastest and median step
and their ratios; ``--out`` appends them as one JSON line (results/compile-fast-paths.jsonl) with the
seed, commit and command.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch import Tensor, nn

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _trainer import append_fast_path_row, compare_interleaved  # noqa: E402
from compile import CASES, build  # noqa: E402
from foveal._checks import tracing  # noqa: E402


class MaxPool2d(nn.MaxPool2d):
    """The library's 2 x 2 pool eagerly; while a graph is traced, the max of the four strided views of
    each window (:class:`WindowMax`), with the library's values and gradients."""

    def forward(self, input: Tensor) -> Tensor:
        H, W = input.shape[-2:]
        if tracing() and isinstance(H, int) and isinstance(W, int) and input.dim() == 4:
            # like the library's pool, an odd last row or column is left out
            return WindowMax.apply(input[..., : H - H % 2, : W - W % 2])
        return super().forward(input)


def _corners(x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The four elements of every 2 x 2 window, in row-major order, as strided views."""
    return x[..., 0::2, 0::2], x[..., 0::2, 1::2], x[..., 1::2, 0::2], x[..., 1::2, 1::2]


class WindowMax(torch.autograd.Function):
    """The max of each 2 x 2 window (stride 2) of an even-sized ``(B, C, H, W)`` map, and its gradient to
    the window's first maximum in row-major order, as ``max_pool2d``'s."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:  # type: ignore[override]
        top_left, top_right, bottom_left, bottom_right = _corners(x)
        window_max = torch.maximum(torch.maximum(top_left, top_right), torch.maximum(bottom_left, bottom_right))
        ctx.save_for_backward(x, window_max)
        return window_max

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:  # type: ignore[override]
        x, window_max = ctx.saved_tensors
        top_left, top_right, bottom_left, _ = _corners(x)
        first = top_left == window_max
        second = (top_right == window_max) & ~first
        third = (bottom_left == window_max) & ~(first | second)
        fourth = ~(first | second | third)
        zero = grad.new_zeros(())
        top = torch.stack([torch.where(first, grad, zero), torch.where(second, grad, zero)], dim=-1)
        bottom = torch.stack([torch.where(third, grad, zero), torch.where(fourth, grad, zero)], dim=-1)
        # (B, C, H/2, 2, W/2, 2): window row, row within it, window column, column within it
        return torch.stack([top, bottom], dim=3).reshape(x.shape)


def with_window_pools(module: nn.Module) -> int:
    """Swap every plain 2 x 2 stride-2 library pool under ``module`` for the four-view one; returns how many."""
    swapped = 0
    for name, child in module.named_children():
        plain = type(child) is nn.MaxPool2d and child.kernel_size in (2, (2, 2)) and child.stride in (2, (2, 2))
        if plain and child.padding in (0, (0, 0)) and not child.ceil_mode and child.dilation in (1, (1, 1)):
            setattr(module, name, MaxPool2d(2))
            swapped += 1
        else:
            swapped += with_window_pools(child)
    return swapped


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", default="shapes-vqa", choices=("shapes-vqa", "shapes-vqa-two-hop", "easy-vqa"))
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", help="append the result as one JSON line to this file")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    case = CASES[args.case]
    traced, batch = build(case, True, args.threads)
    library, _ = build(case, True, args.threads)
    if not with_window_pools(traced.model):
        raise SystemExit(f"{args.case}: the model has no 2 x 2 max pool to compare")
    arms = {"four-view pool": traced, "library pool": library}
    losses = {}
    for name, trainer in arms.items():
        start = time.perf_counter()
        losses[name] = trainer.step(batch)["loss"]
        print(f"{name}: first step (compiles) {time.perf_counter() - start:.1f} s, loss {losses[name]:.6f}", flush=True)
    if abs(losses["four-view pool"] - losses["library pool"]) > 1e-5 * max(1.0, abs(losses["library pool"])):
        raise SystemExit("the two steps' losses differ")

    def step(trainer: object) -> float:
        start = time.perf_counter()
        trainer.step(batch)
        return time.perf_counter() - start

    times = compare_interleaved(
        {name: lambda trainer=trainer: step(trainer) for name, trainer in arms.items()},
        args.rounds,
        "library pool",
        "four-view pool",
    )
    if args.out:
        append_fast_path_row(
            args.out,
            "max-pool",
            "2 x 2 max pool as the max of four strided views while traced",
            args.case,
            args.threads,
            times["four-view pool"],
            times["library pool"],
        )


if __name__ == "__main__":
    main()
