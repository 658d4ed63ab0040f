"""Which glimpse is faster? Gaussian filterbank vs spatial transformer vs hard crop (seed 003's question).

    python benchmarks/glimpse.py [--threads 1] [--quick]

Three tables, every row timed against baselines in the same run:

1. Time per batch of 64 glimpses (1 and 3 channels) for inputs of 28-512 px and glimpses of 12, 28, 64
   px: ``gaussian_glimpse`` (channels folded into two GEMMs; ``truncate="auto"``), ``stn_glimpse`` via
   ``F.grid_sample`` (``stn``) and via our seed-formula sampler (``stn-ours``), and ``crop``. Three
   modes: forward; forward+backward to the glimpse parameters only (the image is data: a glimpse on
   the raw input); forward+backward to the parameters *and* the image (a glimpse on a feature map
   inside a network). Crop has no parameter gradient (it needs REINFORCE), so its row in the
   parameters-only mode is its forward time. Each glimpse covers half the image's side at a random
   place; the Gaussian's std is half its stride (DRAW-like). Ratios are to ``stn``.
2. The Gaussian product: our channels-folded GEMMs against the naive 3-operand einsum
   ``einsum("bih,bchw,bjw->bcij", A_y, I, A_x)``.
3. Zoomed-in glimpses (stride 1 px, std 0.5-1 px: filters a few pixels wide on a large image): the
   truncated-support path against the dense product, forward and forward+backward, with the
   largest absolute difference of the outputs.

Timing: the candidates of a row run in interleaved rounds and each reports its fastest call (the
least disturbed estimate on a shared machine). Ratios, not absolute times, are the result.

Roofline: a float32 512^3 GEMM runs in the same interleaved rounds as every row's candidates, and
each table prints, beside its ratios, the GFLOP/s and % of that GEMM's rate for foveal's candidate
(the Gaussian glimpse in table 1, the folded product in table 2, the truncated path in table 3)
and for the baseline where it has FLOPs to count (the einsum; the dense product). FLOPs are
matmuls and convolutions by torch's counter (``benchmarks/_roofline.py``); element-wise work,
gathers and ``grid_sample`` are not counted, so for element-wise-bound rows the % is a floor, and
the STN and the crop, which make no matmuls, get none.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable

import torch

from _roofline import count_flops, gemm_call, gemm_gflops, roofline
from foveal.glimpse import crop, gaussian_glimpse, stn_glimpse
from foveal.glimpse.gaussian import SIGMA_MIN, gaussian_mask
from foveal.glimpse.separable import separable

BATCH = 64


def best_times(fns: dict[str, Callable[[], object]], min_reps: int, budget_s: float) -> dict[str, float]:
    """Fastest call of each function, in seconds, over interleaved rounds."""
    for fn in fns.values():
        fn()  # warm-up
    best = dict.fromkeys(fns, float("inf"))
    start, reps = time.perf_counter(), 0
    while reps < min_reps or (time.perf_counter() - start < budget_s and reps < 50):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
        reps += 1
    return best


def glimpse_params(size: int, glimpse: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """The same windows for every method: half the image's side, anywhere on the image."""
    extent = size / 2
    corner = torch.rand(BATCH, 2, generator=generator) * (size - extent)  # (x, y) of the window's edge
    stride = extent / glimpse
    first = corner + stride / 2  # centre of the first Gaussian / sample
    sigma = torch.full((BATCH,), stride / 2)
    d = torch.full((BATCH,), stride)
    gaussian = torch.stack([first[:, 1], sigma, d, first[:, 0], sigma, d], dim=-1)
    # STN (align_corners=False): a window of `extent` px at `corner` is scale = extent / size, centre at
    # (corner + extent / 2) px, i.e. shift = 2 (corner + extent / 2) / size - 1 in normalised units.
    scale = torch.full((BATCH,), extent / size)
    shift = 2 * (corner + extent / 2) / size - 1
    stn = torch.stack([scale, shift[:, 1], scale, shift[:, 0]], dim=-1)
    return {"gaussian": gaussian, "stn": stn, "crop": corner.floor().long()}


def make_call(method: str, images: torch.Tensor, params: torch.Tensor, glimpse: int, mode: str) -> Callable[[], None]:
    size = (glimpse, glimpse)
    image_grad = mode == "fwd+bwd(params+image)"
    param_grad = mode != "fwd" and method != "crop"
    x = images.detach().requires_grad_(image_grad)
    p = params.detach().requires_grad_(param_grad)

    def glimpse_of() -> torch.Tensor:
        if method == "gaussian":
            return gaussian_glimpse(x, p, size)
        if method == "stn":
            return stn_glimpse(x, p, size)
        if method == "stn-ours":
            return stn_glimpse(x, p, size, fast=False)
        return crop(x, p, size)

    def call() -> None:
        out = glimpse_of()
        if out.requires_grad:
            x.grad = p.grad = None
            out.sum().backward()

    return call


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.2f}"


def table_methods(sizes, glimpses, channels_list, min_reps, budget, generator) -> None:
    methods = ["gaussian", "stn", "stn-ours", "crop"]
    modes = ["fwd", "fwd+bwd(params)", "fwd+bwd(params+image)"]
    print("\n## 1. Time per batch of 64 glimpses (ms) and ratio to stn (grid_sample)\n")
    header = "| mode | C | input | glimpse | " + " | ".join(f"{m} ms" for m in methods)
    header += " | gaussian/stn | stn-ours/stn | crop/stn | gaussian roofline |"
    print(header)
    print("|" + "---|" * (4 + len(methods) + 4))
    gemm = gemm_call(generator)
    peaks: list[float] = []
    results: dict[tuple[str, int, int, int], dict[str, float]] = {}
    for mode in modes:
        for channels in channels_list:
            for size in sizes:
                images = torch.rand(BATCH, channels, size, size, generator=generator)
                for glimpse in glimpses:
                    params = glimpse_params(size, glimpse, generator)
                    calls = {
                        m: make_call(m, images, params["stn" if m.startswith("stn") else m], glimpse, mode)
                        for m in methods
                    }
                    t = best_times({**calls, "gemm": gemm}, min_reps, budget)
                    peaks.append(gemm_gflops(t["gemm"]))
                    results[mode, channels, size, glimpse] = t
                    ratios = [t["gaussian"] / t["stn"], t["stn-ours"] / t["stn"], t["crop"] / t["stn"]]
                    cells = " | ".join(fmt_ms(t[m]) for m in methods)
                    ratio_cells = " | ".join(f"{r:.2f}" for r in ratios)
                    line = roofline(count_flops(calls["gaussian"]), t["gaussian"], peaks[-1])
                    print(f"| {mode} | {channels} | {size} | {glimpse} | {cells} | {ratio_cells} | {line} |")
    print_roofline_note("the Gaussian glimpse", peaks, "; stn and crop make no matmuls, so have none")

    print_pivots(results, modes, channels_list, sizes, glimpses)


def print_roofline_note(what: str, peaks: list[float], aside: str = "") -> None:
    print(
        f"\nroofline: the matmul FLOPs of {what} by torch's counter, against a float32 512^3 GEMM timed in "
        f"the same rounds ({min(peaks):.1f}-{max(peaks):.1f} GFLOP/s over the rows: the spread is the machine's "
        f"load); element-wise work is not counted, so the % is a floor{aside}"
    )


def print_pivots(results, modes, channels_list, sizes, glimpses) -> None:
    """The ratios of table 1 laid out as input size x glimpse size, one block per mode and method."""
    for method in ("gaussian", "stn-ours", "crop"):
        for mode in modes:
            print(f"\n{method} / stn, {mode} (C = {' / '.join(map(str, channels_list))}):\n")
            print("| input | " + " | ".join(f"glimpse {g}" for g in glimpses) + " |")
            print("|---|" + "---|" * len(glimpses))
            for size in sizes:
                cells = []
                for g in glimpses:
                    times = [results[mode, c, size, g] for c in channels_list]
                    ratios = [t[method] / t["stn"] for t in times]
                    cells.append(" / ".join(f"{r:.1f}" for r in ratios))
                print(f"| {size} | " + " | ".join(cells) + " |")


def table_einsum(cases, min_reps, budget, generator) -> None:
    print("\n## 2. Gaussian product: channels folded into GEMMs vs a 3-operand einsum (forward, ms)\n")
    print(
        "| C | input | glimpse | folded | einsum | einsum/folded | max abs diff | folded roofline | einsum roofline |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    gemm = gemm_call(generator)
    peaks: list[float] = []
    for channels, size, glimpse in cases:
        images = torch.rand(BATCH, channels, size, size, generator=generator)
        p = glimpse_params(size, glimpse, generator)["gaussian"]
        uy, sy, dy, ux, sx, dx = p.unbind(-1)
        Ay = gaussian_mask(uy, sy, dy, glimpse, size)
        Ax = gaussian_mask(ux, sx, dx, glimpse, size)
        calls = {
            "folded": lambda images=images, Ay=Ay, Ax=Ax: separable(images, Ay, Ax),
            "einsum": lambda images=images, Ay=Ay, Ax=Ax: torch.einsum("bih,bchw,bjw->bcij", Ay, images, Ax),
        }
        t = best_times({**calls, "gemm": gemm}, min_reps, budget)
        peaks.append(gemm_gflops(t["gemm"]))
        diff = (calls["folded"]() - calls["einsum"]()).abs().max().item()
        lines = [roofline(count_flops(calls[m]), t[m], peaks[-1]) for m in ("folded", "einsum")]
        print(
            f"| {channels} | {size} | {glimpse} | {fmt_ms(t['folded'])} | {fmt_ms(t['einsum'])} | "
            f"{t['einsum'] / t['folded']:.2f} | {diff:.1e} | {lines[0]} | {lines[1]} |"
        )
    print_roofline_note("each product (the einsum's as torch contracts it)", peaks)


def table_truncated(cases, min_reps, budget, generator) -> None:
    print("\n## 3. Zoomed-in glimpses: truncated support vs dense (ms; speed-up = dense / truncated)\n")
    print(
        "| C | input | glimpse | std px | fwd dense | fwd trunc | speed-up "
        "| fwd+bwd dense | fwd+bwd trunc | speed-up | max abs err "
        "| fwd dense roofline | fwd trunc roofline | fwd+bwd dense roofline | fwd+bwd trunc roofline |"
    )
    print("|" + "---|" * 15)
    gemm = gemm_call(generator)
    peaks: list[float] = []
    for channels, size, glimpse, std in cases:
        images = torch.rand(BATCH, channels, size, size, generator=generator) * 2 - 1
        first = torch.rand(BATCH, 2, generator=generator) * (size - glimpse)
        sigma = torch.full((BATCH,), max(std, SIGMA_MIN))
        one = torch.ones(BATCH)
        params = torch.stack([first[:, 1], sigma, one, first[:, 0], sigma, one], dim=-1)

        def call(truncate: bool, backward: bool, params=params, images=images, glimpse=glimpse) -> torch.Tensor:
            p = params.detach().requires_grad_(backward)
            out = gaussian_glimpse(images, p, (glimpse, glimpse), truncate=truncate)
            if backward:
                out.sum().backward()
            return out

        lines, times = [], {}
        for backward in (False, True):
            calls = {"dense": lambda b=backward: call(False, b), "trunc": lambda b=backward: call(True, b)}
            t = times[backward] = best_times({**calls, "gemm": gemm}, min_reps, budget)
            peaks.append(gemm_gflops(t["gemm"]))
            lines += [roofline(count_flops(calls[m]), t[m], peaks[-1]) for m in ("dense", "trunc")]
        fwd, bwd = times[False], times[True]
        err = (call(True, False) - call(False, False)).abs().max().item()
        print(
            f"| {channels} | {size} | {glimpse} | {std} | {fmt_ms(fwd['dense'])} | {fmt_ms(fwd['trunc'])} | "
            f"{fwd['dense'] / fwd['trunc']:.1f} | {fmt_ms(bwd['dense'])} | {fmt_ms(bwd['trunc'])} | "
            f"{bwd['dense'] / bwd['trunc']:.1f} | {err:.1e} | {' | '.join(lines)} |"
        )
    print_roofline_note("each path", peaks, "; the truncated path's FLOPs are those of its window, not the image")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="fewer sizes, one channel count, shorter budgets")
    parser.add_argument("--only", choices=["1", "2", "3"], help="run one table")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    print(f"# glimpse benchmark: torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{args.threads} thread(s), batch {BATCH}{', quick' if args.quick else ''}")  # fmt: skip
    if args.quick:
        sizes, glimpses, channels_list, min_reps, budget = [28, 100, 224], [12, 28], [1], 2, 0.1
    else:
        sizes, glimpses, channels_list, min_reps, budget = [28, 60, 100, 224, 512], [12, 28, 64], [1, 3], 5, 0.5
    if args.only in (None, "1"):
        table_methods(sizes, glimpses, channels_list, min_reps, budget, generator)
    if args.only in (None, "2"):
        einsum_cases = [(c, s, g) for c in channels_list for s, g in ((28, 12), (100, 28), (224, 28), (512, 64))]
        table_einsum(einsum_cases if not args.quick else einsum_cases[:3], min_reps, budget, generator)
    if args.only in (None, "3"):
        trunc_cases = [(1, 100, 12, 0.5), (1, 224, 12, 0.5), (1, 512, 12, 0.5), (1, 512, 28, 1.0), (3, 512, 12, 1.0)]
        table_truncated(trunc_cases if not args.quick else trunc_cases[:3], min_reps, budget, generator)


if __name__ == "__main__":
    main()
