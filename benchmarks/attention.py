"""Speed and peak memory of foveal's attention against baselines measured in the same run.

    python benchmarks/attention.py [--threads 1] [--quick]

Three tables:

1. ``attend(q, k, v, need_weights=False)`` (the fused path) against a naive
   ``softmax(q k^T / sqrt(d)) v`` and against raw ``F.scaled_dot_product_attention``, for N query
   and N key positions (self-attention, head size 64, batch 1). ``achieved`` is the attention's
   ``4 N^2 d`` multiply-add FLOPs over its time, as a fraction of this machine's GEMM rate.
2. ``SpatialAttention`` against seed 000's snippet (pasted below), at the seed's sizes.
3. The roofline: GFLOP/s of a 512^3 float32 matmul, timed in the same interleaved rounds as every row;
   the fastest over the whole run is the machine's rate (load only ever slows it down).

Timing: the candidates of one row are timed in interleaved rounds (so a burst of load from other
processes hits all of them alike) and each reports its fastest call: on a shared machine the
minimum is the least disturbed estimate. Ratios, not absolute times, are the result.

Peak memory: each (method, N) runs in a fresh subprocess. After one warm-up call on tiny inputs
(lazy imports and kernel set-up are not the call's memory) it allocates its inputs, resets the
kernel's resident-set high-water mark (``echo 5 > /proc/self/clear_refs``), makes one call, and
reports ``VmHWM - VmRSS before the call``: the extra resident memory the call needed at its peak,
output included, everything the process touched counted (torch's allocator returns large blocks
to the OS, so nothing hides in a cache). Linux only; elsewhere the column says n/a.
"""

from __future__ import annotations

import argparse
import functools
import math
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from foveal import SpatialAttention, attend

HEAD_DIM = 64
GEMM_SIZE = 512  # the roofline: a square float32 matmul, 0.27 GFLOP (short calls dodge preemption)


# Seed 000's layer, verbatim (comments trimmed): the baseline SpatialAttention must not be slower than.
class SeedSpatialAttention(nn.Module):
    def __init__(self, c_dim=512, q_dim=256, k_dim=128):
        super(SeedSpatialAttention, self).__init__()  # noqa: UP008
        self.W_v = nn.Linear(c_dim, k_dim, bias=False)
        self.W_q = nn.Linear(q_dim, k_dim, bias=True)
        self.w_a = nn.Linear(k_dim, 1, bias=True)

    def forward(self, V, h_Q):
        B, N, C = V.size()  # noqa: RUF059
        v_proj = self.W_v(V)
        q_proj = self.W_q(h_Q)
        q_exp = q_proj.unsqueeze(1).expand(-1, N, -1)
        z = torch.tanh(v_proj + q_exp)
        e = self.w_a(z).squeeze(2)
        alpha = F.softmax(e, dim=1)
        v_hat = torch.bmm(alpha.unsqueeze(1), V).squeeze(1)
        return v_hat, alpha


def naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


METHODS: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "attend": lambda q, k, v: attend(q, k, v, need_weights=False).output,
    # SDPA's flash kernel needs (batch, heads, n, d); given (batch, n, d) it runs its math kernel.
    "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None])[:, 0],
    "naive": naive,
}


def inputs(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(1, n, HEAD_DIM, generator=g) for _ in range(3))  # type: ignore[return-value]


def best_times(fns: dict[str, Callable[[], object]], min_reps: int, budget_s: float) -> dict[str, float]:
    """Fastest call of each function, timed in interleaved rounds (after one warm-up call each)."""
    for fn in fns.values():
        fn()
    best = dict.fromkeys(fns, math.inf)
    start, reps = time.perf_counter(), 0
    while reps < min_reps or (time.perf_counter() - start < budget_s and reps < 200):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
        reps += 1
    return best


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(re.search(rf"{field}:\s+(\d+)", f.read()).group(1))  # type: ignore[union-attr]


def measure_peak_here(method: str, n: int) -> int:
    """Extra resident bytes at the peak of one call (run in a fresh process)."""
    METHODS[method](*inputs(64))  # one-time costs (lazy imports, kernel set-up) are not the call's memory
    q, k, v = inputs(n)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    before = _status_kib("VmRSS")
    out = METHODS[method](q, k, v)
    peak = _status_kib("VmHWM")
    del out
    return (peak - before) * 1024


def peak_in_subprocess(method: str, n: int, threads: int) -> int | None:
    if platform.system() != "Linux":
        return None
    cmd = [sys.executable, __file__, "--threads", str(threads), "--peak-case", method, str(n)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return int(result.stdout.strip().splitlines()[-1])


def mib(x: int | None) -> str:
    return "n/a" if x is None else f"{x / 2**20:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="N up to 4096, shorter timing budgets")
    parser.add_argument("--naive-max", type=int, default=8192, help="largest N for the naive baseline")
    parser.add_argument("--peak-case", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.peak_case:
        print(measure_peak_here(args.peak_case[0], int(args.peak_case[1])))
        return

    sizes = [256, 1024, 4096] if args.quick else [256, 512, 1024, 2048, 4096, 8192, 16384]
    budget = 0.5 if args.quick else 2.0
    print(f"# foveal attention benchmark: torch {torch.__version__}, {args.threads} thread(s), {platform.processor()}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {'quick' if args.quick else 'full'} run; best-of-interleaved times")
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(GEMM_SIZE, GEMM_SIZE, generator=g), torch.randn(GEMM_SIZE, GEMM_SIZE, generator=g)
    gemm_rates = []

    rows = []
    for n in sizes:
        q, k, v = inputs(n)
        methods = [m for m in METHODS if m != "naive" or n <= args.naive_max]
        # The roofline GEMM runs in the same interleaved rounds, so it sees the same machine load.
        fns = {m: functools.partial(METHODS[m], q, k, v) for m in methods} | {"gemm": lambda: a @ b}
        times = best_times(fns, min_reps=3, budget_s=budget)
        gemm_rates.append(2 * GEMM_SIZE**3 / times["gemm"] / 1e9)
        rows.append((n, times, {m: peak_in_subprocess(m, n, args.threads) for m in methods}))
        print(f"  N={n} done", file=sys.stderr)

    gemm = max(gemm_rates)
    print(f"roofline: float32 {GEMM_SIZE}^3 GEMM at {gemm:.1f} GFLOP/s ({args.threads} thread(s)), the best of")
    print(f"every row's rounds (range {min(gemm_rates):.1f} to {gemm:.1f}: the spread is the machine's load)\n")
    header = (
        "| N | attend ms | sdpa ms | naive ms | naive/attend time | attend/sdpa time | attend % of GEMM "
        "| attend MiB | sdpa MiB | naive MiB | naive/attend memory |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for n, times, peaks in rows:
        flops = 4 * n * n * HEAD_DIM
        t_naive, p_naive = times.get("naive"), peaks.get("naive")
        speedup = f"{t_naive / times['attend']:.2f}x" if t_naive else "skipped"
        mem_ratio = (
            f"{p_naive / max(peaks['attend'], 1):.1f}x" if p_naive and peaks["attend"] is not None else "skipped"
        )
        print(
            f"| {n} | {times['attend'] * 1e3:.2f} | {times['sdpa'] * 1e3:.2f} | "
            f"{f'{t_naive * 1e3:.2f}' if t_naive else 'skipped'} | {speedup} | "
            f"{times['attend'] / times['sdpa']:.3f} | {100 * flops / times['attend'] / 1e9 / gemm:.0f}% | "
            f"{mib(peaks['attend'])} | {mib(peaks['sdpa'])} | {mib(p_naive) if p_naive else 'skipped'} | {mem_ratio} |"
        )

    B, N, C, d_q, k_dim = 32, 49, 512, 256, 128  # seed 000's sizes
    torch.manual_seed(0)
    seed = SeedSpatialAttention(C, d_q, k_dim)
    ours = SpatialAttention(C, d_q, k_dim)
    ours.load_state_dict(seed.state_dict(), strict=True)
    V, h_Q = torch.randn(B, N, C), torch.randn(B, d_q)

    def forward_backward(module: nn.Module) -> None:
        v_hat, _ = module(V, h_Q)
        v_hat.sum().backward()

    with torch.no_grad():
        fwd = best_times({"seed": lambda: seed(V, h_Q), "ours": lambda: ours(V, h_Q)}, 100, budget)
    step = best_times({"seed": lambda: forward_backward(seed), "ours": lambda: forward_backward(ours)}, 100, budget)
    print(f"\nSpatialAttention vs seed 000 (B={B}, N={N}, C={C}, d_q={d_q}, k={k_dim})\n")
    print("| pass | seed ms | foveal ms | seed/foveal time |")
    print("|---|---|---|---|")
    for label, t in (("forward", fwd), ("forward+backward", step)):
        print(f"| {label} | {t['seed'] * 1e3:.3f} | {t['ours'] * 1e3:.3f} | {t['seed'] / t['ours']:.2f} |")


if __name__ == "__main__":
    main()
