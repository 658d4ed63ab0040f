"""Time and peak memory of foveal's attention against torch's and timm's, side by side in one process.

    python benchmarks/attention.py [--device cpu|cuda] [--threads 1] [--repeats 3] [--quick]
                                   [--only CASE,...] [--out results/attention-speed.jsonl]

Every case times foveal's call and a baseline in interleaved rounds, back to back within a round
(so a burst of load from other processes hits both alike), in one order and then the other. On a
shared machine a sample is either undisturbed or several times slower, so the ratio is the median
over the clean rounds (both samples within 25% of their fastest) of the round's ratio, or the ratio
of the fastest samples where fewer than five rounds are clean; the times are the fastest samples.
A sample is as many calls as fill about a millisecond, between device synchronisations on a GPU.
``--repeats R`` measures every case R times (the rows' ``seed``); the docs table gives the mean and
the range of the ratios. The cases:

- ``attend``: ``attend(q, k, v)`` (fused by default) against ``F.scaled_dot_product_attention`` on
  ``(B, heads, N, 64)``: a tiny size, where only the per-call host time shows, N = 197 and 1024,
  forward and forward + backward.
- ``mask``: the same with a key-padding mask ``(B, 1, 1, N)``, against SDPA given the same mask; and
  the peak memory of one call at a large N.
- ``maps``: ``Attention(768, heads=12)`` asked for its maps against the default call: what maps cost.
- ``vit``: a ViT-B/16 attention layer (dim 768, 12 heads, 197 tokens, fused qkv and output
  projection) forward + backward, against ``nn.MultiheadAttention`` and against timm's ``Attention``
  (written out below as timm has it: timm is not a dependency).
- ``timm-vit``: a whole timm ViT-Ti/16 (batch 2, 224 x 224) after ``swap_attention``, against timm's own,
  forward and forward + backward; and recording every block's maps (``record_maps``) against timm's
  attention with its fused kernel off (the path that builds the maps). Needs timm.
- ``non-local``: ``NonLocalBlock(f="dot")`` (the O(N) form) against the same block asked for its
  N x N map, and the embedded Gaussian's fused kernel; time and peak memory.
- ``spatial``: ``SpatialAttention`` against seed 000's class, at the seed's sizes.

Peak memory: on the CPU each measured call runs in a fresh subprocess that resets the kernel's
resident-set high-water mark (``/proc/self/clear_refs``) after making its inputs and reports
``VmHWM - VmRSS before the call`` (Linux only); on a GPU, ``torch.cuda.max_memory_allocated`` over
the call. Each row of the results file holds the case, the ratio (foveal over baseline: below 1 is
faster or smaller), both times, the seed, the commit and the command that wrote it.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from foveal import Attention, NonLocalBlock, SpatialAttention, attend, record_maps, swap_attention
from foveal.runs import commit_id

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _timm import import_timm

HEAD_DIM = 64


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


class TimmAttention(nn.Module):
    """timm's ViT ``Attention`` as timm computes it (qk_norm off, fused attention on)."""

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


@dataclass
class Case:
    """One row of the table: foveal's call against a baseline, on inputs made by ``build``."""

    name: str
    shape: str
    passes: str  # "fwd" or "fwd+bwd"
    candidate: str
    baseline: str
    build: Callable[[torch.device, torch.dtype], dict[str, Callable[[], object]]]
    memory: bool = False


def _qkv(shape: tuple[int, ...], device: torch.device, dtype: torch.dtype, grad: bool) -> list[torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(0)
    return [torch.randn(*shape, generator=g).to(device, dtype).requires_grad_(grad) for _ in range(3)]


def _padding(shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    B, N = shape[0], shape[2]
    mask = torch.ones(B, 1, 1, N, dtype=torch.bool, device=device)
    mask[0, ..., N // 2 :] = False  # the first sequence is half padding
    return mask


def _run(fn: Callable[[], torch.Tensor], backward: bool) -> Callable[[], object]:
    if not backward:
        return lambda: fn()
    return lambda: fn().float().sum().backward()


def attend_case(shape: tuple[int, ...], backward: bool, masked: bool) -> Callable:
    def build(device: torch.device, dtype: torch.dtype) -> dict[str, Callable[[], object]]:
        q, k, v = _qkv(shape, device, dtype, backward)
        mask = _padding(shape, device) if masked else None
        return {
            "attend": _run(lambda: attend(q, k, v, mask=mask).output, backward),
            "sdpa": _run(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), backward),
        }

    return build


def maps_case(batch: int, n: int) -> Callable:
    def build(device: torch.device, dtype: torch.dtype) -> dict[str, Callable[[], object]]:
        layer = Attention(768, heads=12, qkv=True, proj=True, bias=True, device=device, dtype=dtype)
        x = torch.randn(batch, n, 768, device=device, dtype=dtype)
        return {
            "maps": lambda: _no_grad(lambda: layer(x, need_weights=True)),
            "fused": lambda: _no_grad(lambda: layer(x)),
        }

    return build


def _no_grad(fn: Callable[[], object]) -> object:
    with torch.no_grad():
        return fn()


def vit_case(batch: int) -> Callable:
    def build(device: torch.device, dtype: torch.dtype) -> dict[str, Callable[[], object]]:
        torch.manual_seed(0)
        timm = TimmAttention(768, 12).to(device)
        ours = Attention.from_timm(timm.state_dict(), heads=12)
        mha = nn.MultiheadAttention(768, 12, batch_first=True).to(device)
        x = torch.randn(batch, 197, 768, device=device, requires_grad=True)
        autocast = device.type == "cuda" and dtype != torch.float32

        def step(fn: Callable[[], torch.Tensor]) -> Callable[[], object]:
            def run() -> None:
                with torch.autocast(device.type, dtype=dtype, enabled=autocast):
                    out = fn()
                out.float().sum().backward()

            return run

        return {
            "foveal": step(lambda: ours(x)),
            "mha": step(lambda: mha(x, x, x, need_weights=False)[0]),
            "timm": step(lambda: timm(x)),
        }

    return build


def timm_vit_case(batch: int, passes: str) -> Callable:
    """A whole timm ViT-Ti/16 with its attention swapped (``swap_attention``) against timm's own."""

    def build(device: torch.device, dtype: torch.dtype) -> dict[str, Callable[[], object]]:
        timm = import_timm()
        torch.manual_seed(0)
        theirs = timm.create_model("vit_tiny_patch16_224", pretrained=False).to(device).eval()
        ours = copy.deepcopy(theirs)
        swap_attention(ours)
        unfused = copy.deepcopy(theirs)  # timm's attention that builds its maps: what recording compares with
        for block in unfused.blocks:
            block.attn.fused_attn = False
        x = torch.randn(batch, 3, 224, 224, device=device)

        def forward(model: nn.Module) -> Callable[[], object]:
            return lambda: _no_grad(lambda: model(x))

        def recorded() -> object:
            with record_maps(ours):
                return _no_grad(lambda: ours(x))

        if passes == "fwd+bwd":
            return {"foveal": _run(lambda: ours(x), True), "timm": _run(lambda: theirs(x), True)}
        return {"foveal": forward(ours), "timm": forward(theirs), "maps": recorded, "timm-maps": forward(unfused)}

    return build


def non_local_case(shape: tuple[int, ...], f: str, maps: bool) -> Callable:
    def build(device: torch.device, dtype: torch.dtype) -> dict[str, Callable[[], object]]:
        torch.manual_seed(0)
        block = NonLocalBlock(shape[1], f=f).to(device, dtype)
        gaussian = NonLocalBlock(shape[1]).to(device, dtype)
        nn.init.normal_(block.W_z.weight)
        x = torch.randn(*shape, device=device, dtype=dtype)
        return {
            "foveal": lambda: _no_grad(lambda: block(x)),
            "maps": lambda: _no_grad(lambda: block(x, need_weights=True)),
            "embedded-gaussian": lambda: _no_grad(lambda: gaussian(x)),
        }

    return build


def spatial_case(backward: bool) -> Callable:
    def build(device: torch.device, dtype: torch.dtype) -> dict[str, Callable[[], object]]:
        B, N, C, d_q, k_dim = 32, 49, 512, 256, 128  # seed 000's sizes
        torch.manual_seed(0)
        seed = SeedSpatialAttention(C, d_q, k_dim).to(device, dtype)
        ours = SpatialAttention(C, d_q, k_dim).to(device, dtype)
        ours.load_state_dict(seed.state_dict(), strict=True)
        V, h_Q = torch.randn(B, N, C, device=device, dtype=dtype), torch.randn(B, d_q, device=device, dtype=dtype)
        if backward:
            return {"foveal": _run(lambda: ours(V, h_Q)[0], True), "seed": _run(lambda: seed(V, h_Q)[0], True)}
        return {"foveal": lambda: _no_grad(lambda: ours(V, h_Q)), "seed": lambda: _no_grad(lambda: seed(V, h_Q))}

    return build


def cases(device: str) -> list[Case]:
    gpu = device == "cuda"
    # On the CPU, calls of a few milliseconds: many rounds in the budget, so the fastest is a clean one.
    tiny, vit_tokens = (1, 1, 8, HEAD_DIM), (64, 12, 197, HEAD_DIM) if gpu else (2, 6, 197, HEAD_DIM)
    long = (4, 8, 1024, HEAD_DIM) if gpu else (1, 2, 1024, HEAD_DIM)
    longest = (1, 8, 16384, HEAD_DIM) if gpu else (1, 2, 4096, HEAD_DIM)
    clip = (2, 256, 8, 28, 28) if gpu else (1, 32, 8, 28, 28)  # N = 6272: the N x N map is 150 MiB
    out = []
    for label, shape in (("tiny", tiny), ("N=197", vit_tokens), ("N=1024", long)):
        for backward in (False, True):
            passes = "fwd+bwd" if backward else "fwd"
            build = attend_case(shape, backward, False)
            out.append(Case("attend", f"{label} {shape}", passes, "attend", "sdpa", build))
    for label, shape in (("N=197", vit_tokens), ("N=1024", long)):
        for backward in (False, True):
            passes = "fwd+bwd" if backward else "fwd"
            out.append(Case("mask", f"{label} {shape}", passes, "attend", "sdpa", attend_case(shape, backward, True)))
    out.append(
        Case("mask", f"N={longest[2]} {longest}", "fwd", "attend", "sdpa", attend_case(longest, False, True), True)
    )
    out.append(Case("maps", "N=1024 (1, 1024, 768)", "fwd", "maps", "fused", maps_case(1, 1024)))
    vit_batch = 64 if gpu else 8
    for baseline in ("mha", "timm"):
        out.append(Case("vit", f"({vit_batch}, 197, 768)", "fwd+bwd", "foveal", baseline, vit_case(vit_batch)))
    if find_spec("timm") is not None:
        vit = "ViT-Ti/16 (2, 3, 224, 224)"
        out.append(Case("timm-vit", vit, "fwd", "foveal", "timm", timm_vit_case(2, "fwd")))
        out.append(Case("timm-vit", vit, "fwd+bwd", "foveal", "timm", timm_vit_case(2, "fwd+bwd")))
        out.append(Case("timm-vit", vit, "fwd", "maps", "timm-maps", timm_vit_case(2, "fwd")))
    for baseline in ("maps", "embedded-gaussian"):
        out.append(
            Case("non-local", f"dot {clip}", "fwd", "foveal", baseline, non_local_case(clip, "dot", False), True)
        )
    for backward in (False, True):
        out.append(
            Case("spatial", "(32, 49, 512)", "fwd+bwd" if backward else "fwd", "foveal", "seed", spatial_case(backward))
        )
    return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def round_times(
    fns: dict[str, Callable[[], object]],
    device: torch.device,
    budget_s: float,
    min_rounds: int = 10,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Per-call time of each function in every interleaved round (after warm-up calls), read off ``clock``."""
    calls = {}
    for name, fn in fns.items():
        for _ in range(2):
            fn()
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        once = time.perf_counter() - t0
        calls[name] = max(1, min(200, int(1e-3 / max(once, 1e-7))))  # a sample of about a millisecond
    times: dict[str, list[float]] = {name: [] for name in fns}
    start, rounds = time.perf_counter(), 0
    while rounds < min_rounds or (time.perf_counter() - start < budget_s and rounds < 300):
        # Every other round runs them in the other order: going first or second has its own cost.
        for name, fn in fns.items() if rounds % 2 == 0 else reversed(fns.items()):
            _sync(device)
            t0 = clock()
            for _ in range(calls[name]):
                fn()
            _sync(device)
            times[name].append((clock() - t0) / calls[name])
        rounds += 1
    return times


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(re.search(rf"{field}:\s+(\d+)", f.read()).group(1))  # type: ignore[union-attr]


def peak_here(case: Case, method: str, device: torch.device, dtype: torch.dtype) -> int:
    """Extra bytes at the peak of one call of ``method`` (on the CPU, run in a fresh process)."""
    fns = case.build(device, dtype)
    fns[method]()  # one-time costs (lazy imports, kernel set-up) are not the call's memory
    if device.type == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fns[method]()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    before = _status_kib("VmRSS")
    out = fns[method]()
    peak = _status_kib("VmHWM")
    del out
    return (peak - before) * 1024


def peak(case: Case, index: int, method: str, args: argparse.Namespace, dtype: torch.dtype) -> int | None:
    device = torch.device(args.device)
    if device.type == "cuda":
        return peak_here(case, method, device, dtype)
    if platform.system() != "Linux":
        return None
    cmd = [sys.executable, __file__, "--device", "cpu", "--threads", str(args.threads)]
    cmd += ["--peak-case", str(index), method]
    result = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return int(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (torch.set_num_threads)")
    parser.add_argument("--repeats", type=int, default=3, help="measure every case this many times (the seeds)")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds of interleaved rounds per measurement")
    parser.add_argument("--quick", action="store_true", help="one repeat, short budgets, no large-N memory case")
    parser.add_argument("--only", default="", help="comma-separated case names (attend, mask, maps, vit, ...)")
    parser.add_argument("--out", default="", help="append one JSON row per case and repeat to this file")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        help="wall: elapsed time; cpu: this thread's CPU time, which time taken by other processes does not add "
        "to (default: cpu on the CPU at one thread, else wall)",
    )
    parser.add_argument("--peak-case", nargs=2, metavar=("INDEX", "METHOD"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    all_cases = cases(args.device)
    if args.peak_case:
        print(peak_here(all_cases[int(args.peak_case[0])], args.peak_case[1], device, dtype))
        return
    repeats, budget = (1, 0.3) if args.quick else (args.repeats, args.budget)
    # At one thread every op of a call runs on the calling thread, so its CPU time is the call's work alone.
    clock_name = args.clock or ("cpu" if device.type == "cpu" and args.threads == 1 else "wall")
    clock = time.thread_time if clock_name == "cpu" else time.perf_counter
    only = {name for name in args.only.split(",") if name}
    name = torch.cuda.get_device_name() if device.type == "cuda" else (platform.processor() or platform.machine())
    print(f"# foveal attention benchmark: torch {torch.__version__}, {args.device} ({name}), {args.threads} thread(s)")
    print(f"# clock: {clock_name}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}; ratio = foveal's time / the baseline's, interleaved rounds\n")
    print("| case | shape | pass | foveal | baseline | foveal ms | baseline ms | ratio | memory ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    base = {
        "device": args.device,
        "device_name": name,
        "threads": args.threads,
        "dtype": str(dtype),
        "clock": clock_name,
    }
    base |= {"torch": torch.__version__, "commit": commit_id(), "command": " ".join(["python", *sys.argv])}
    for index, case in enumerate(all_cases):
        if (only and case.name not in only) or (args.quick and case.name == "mask" and case.memory):
            continue
        fns = case.build(device, dtype)
        fns = {case.candidate: fns[case.candidate], case.baseline: fns[case.baseline]}
        memory, peaks = None, {}
        if case.memory:
            mine, theirs = (peak(case, index, m, args, dtype) for m in (case.candidate, case.baseline))
            if mine is not None and theirs is not None:
                peaks = {"foveal_mib": round(mine / 2**20, 2), "baseline_mib": round(theirs / 2**20, 2)}
                # Below a MiB the resident-set count is the allocator's noise, not the call's memory.
                memory = round(mine / theirs, 3) if theirs >= 2**20 else None
        for seed in range(repeats):
            rounds = round_times(fns, device, budget, 3 if args.quick else 10, clock)
            t = {name: min(samples) for name, samples in rounds.items()}
            # Each round times both back to back, in alternating order. On a shared machine a sample is
            # either undisturbed or several times slower (preempted), so the estimate is the median
            # ratio of the clean rounds, those where both samples are within 25% of their fastest; with
            # fewer than five of them, the ratio of the fastest samples.
            clean = [
                c / b
                for c, b in zip(rounds[case.candidate], rounds[case.baseline], strict=True)
                if c <= 1.25 * t[case.candidate] and b <= 1.25 * t[case.baseline]
            ]
            fastest = t[case.candidate] / t[case.baseline]
            ratio = statistics.median(clean) if len(clean) >= 5 else fastest
            metrics = {"ratio": round(ratio, 4), "ratio_of_fastest": round(fastest, 4), "clean_rounds": len(clean)}
            metrics |= {"foveal_ms": round(t[case.candidate] * 1e3, 4), "baseline_ms": round(t[case.baseline] * 1e3, 4)}
            metrics["rounds"] = len(rounds[case.baseline])
            metrics |= peaks
            if memory is not None:
                metrics["memory_ratio"] = memory
            sets = {"case": case.name, "shape": case.shape, "pass": case.passes, "baseline": case.baseline}
            print(
                f"| {case.name} | {case.shape} | {case.passes} | {case.candidate} | {case.baseline} | "
                f"{metrics['foveal_ms']:.4f} | {metrics['baseline_ms']:.4f} | {ratio:.3f} | "
                f"{'-' if memory is None else f'{memory:.3f}'} |",
                flush=True,
            )
            if args.out:
                row = {"sets": sets, "seed": seed, "metrics": metrics, **base}
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                with open(args.out, "a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
