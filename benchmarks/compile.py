"""Training-step speed with ``loop.compile=true`` against the eager step, measured in the same run.

    python benchmarks/compile.py [--threads 1] [--rounds 7] [--only ntm-copy,draw-paper] [--mode MODE] [--out F.jsonl]
    python benchmarks/compile.py --device cuda [--mode reduce-overhead]
    python benchmarks/compile.py --base b1f220c [--only draw-paper,shapes-vqa]

Each case builds one recipe's task twice from the same seed (the same weights and the same batch)
and times the loop's own step (:meth:`foveal.train.Trainer.step`: forward, loss, backward,
clipping, optimiser) eager and compiled (:mod:`foveal.compiling`: the recurrent models compile
their time step, the others their forward). The learning rate is 0, so every round times the
same model, and before timing the benchmark checks that the two steps give the same loss.

``--mode`` is ``loop.compile_mode`` (:data:`foveal.compiling.COMPILE_MODES`); with
``max-autotune-no-cudagraphs`` inductor times its own matrix-product kernels against the library's,
and with ``reduce-overhead`` (``--device cuda`` only) the compiled graphs are replayed as CUDA graphs,
one launch for a graph's kernels.
``--base COMMIT`` also times the eager step of an earlier commit's code in the same rounds: once the
compiled step's speed comes partly from changes that the eager step runs too, the ratio to today's
eager step no longer says how far training moved from that commit. The commit's ``src`` (from
``git archive``) runs in a child process (``_base_eager.py``) that builds the same case from the same
seed, checks in with its first loss, and times one step per round when asked. A case whose first loss
differs there (the recipe's defaults changed since) or that the commit lacks is timed against today's
eager step only.

The compile time is the wall time of the first compiled step. Inductor keeps what it compiled in
an on-disk cache, so a second run of the benchmark compiles in a fraction of the first's time;
``--cold`` points the cache at an empty directory to time a first compile.
``--graph-pass off`` compiles without :class:`foveal.compiling.MergeSummedProducts`, the pass every
``loop.compile`` applies, to measure what it buys on a machine.

Timing: eager, compiled and a float32 GEMM (512^3 on the CPU, 4096^3 on a GPU, waiting for the GPU
after each call) are timed in interleaved rounds, and each reports its fastest round (on a shared
machine the least disturbed one). ``--device cuda`` runs both steps on the GPU (``loop.device``).
The roofline is the step's matmul and convolution FLOPs (torch's counter: element-wise work is not
counted, so for small-op-bound steps the % is a floor) against that GEMM.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from _roofline import count_flops, gemm_call, gemm_gflops, gemm_size, roofline, synchronize
from _trainer import build_trainer
from foveal.compiling import COMPILE_MODES, compile_model
from foveal.runs import commit_id
from foveal.train import Trainer


@dataclass
class Case:
    """One recipe configuration to time, and the speed-up it is expected to reach."""

    recipe: str
    preset: str | None = None
    sets: dict[str, str] = field(default_factory=dict)
    target: float = 1.0  # the compiled step's speed-up the case is held to


CASES = {
    # Batches of the whole training range (lengths 1-20), not the curriculum's first level
    "ntm-copy": Case("ntm-copy", "full", {"curriculum_start": "20"}, target=3.0),
    "ntm-copy-lstm": Case("ntm-copy", "full-lstm", {"curriculum_start": "20"}, target=3.0),
    # The paper's ranges: lengths and repeats 1-10, and 2-6 items
    "ntm-repeat-copy": Case("ntm-repeat-copy", "full", {"curriculum_start": "10"}, target=2.0),
    "ntm-recall": Case("ntm-recall", "full", {"curriculum_start": "6"}, target=2.0),
    # The paper's MNIST configuration: 64 glimpses, read 2 x 2, write 5 x 5, 256-unit LSTMs, batch 64
    "draw-paper": Case(
        "draw",
        sets={"model.steps": "64", "model.read_size": "2", "model.write_size": "5", "loop.batch_size": "64"},
        target=1.6,
    ),
    "shapes-vqa": Case("shapes-vqa", target=1.5),
    # Another preset that compiles by default, held to winning: shapes-vqa's two-hop one (batch 16, stacked hops)
    "shapes-vqa-two-hop": Case("shapes-vqa", "two-hop", target=1.0),
    # easy-vqa trains eagerly (its published per-seed results are eager runs); timed to say what compiling buys it
    "easy-vqa": Case("easy-vqa", target=1.0),
}


def build(
    case: Case, compile_step: bool, threads: int, mode: str = "default", device: str = "cpu"
) -> tuple[Trainer, object]:
    """A trainer for the case (``loop.lr=0``) on ``device`` and one training batch of the recipe's size."""
    sets = {**case.sets, "loop.compile": str(compile_step).lower(), "loop.compile_mode": mode, "loop.device": device}
    return build_trainer(case.recipe, case.preset, sets, threads, device)


class BaseUnavailableError(Exception):
    """The earlier commit cannot run a case (a recipe or preset it does not have yet)."""


class BaseEager:
    """The eager step of ``commit``'s code, in a child process that times one step per :meth:`__call__`."""

    def __init__(self, case: Case, commit: str, threads: int) -> None:
        root = Path(__file__).resolve().parents[1]
        self.commit = commit
        self.source = tempfile.TemporaryDirectory(prefix=f"foveal-{commit}-")
        archive = subprocess.run(["git", "archive", commit, "src"], cwd=root, capture_output=True, check=False)
        if archive.returncode:
            raise SystemExit(f"--base {commit}: git archive failed: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", self.source.name], input=archive.stdout, check=True)
        spec = {k: v for k, v in asdict(case).items() if k != "target"} | {"threads": threads}
        env = {**os.environ, "PYTHONPATH": os.path.join(self.source.name, "src")}
        self.child = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("_base_eager.py")), json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        line = self.child.stdout.readline()
        if not line:
            self.close()
            raise BaseUnavailableError(f"the eager step of {commit} did not start (its error is above)")
        self.loss = json.loads(line)["loss"]

    def __call__(self) -> float:
        self.child.stdin.write("step\n")
        self.child.stdin.flush()
        line = self.child.stdout.readline()
        if not line:
            raise SystemExit(f"--base {self.commit}: the earlier commit's eager step stopped (its error is above)")
        return float(line)

    def close(self) -> None:
        self.child.stdin.close()
        self.child.wait()
        self.source.cleanup()


def time_case(
    case: Case,
    threads: int,
    rounds: int,
    mode: str,
    device: str = "cpu",
    base: str | None = None,
    graph_pass: bool = True,
) -> dict[str, float]:
    """Seconds per step (fastest round) of eager, compiled and (with ``base``) the base commit's eager step,
    the compile time, FLOPs and the GEMM peak."""
    (eager, batch) = build(case, False, threads, device=device)
    (compiled, _) = build(case, True, threads, mode, device)
    if not graph_pass:  # compiled again, before its first call, without foveal's pass
        compile_model(compiled.model, mode, graph_pass=False)
    torch.manual_seed(0)  # the same noise for both (DRAW's z, RAM's glimpse locations)
    start = time.perf_counter()
    compiled_loss = compiled.step(batch)["loss"]
    synchronize(device)
    compile_s = time.perf_counter() - start
    torch.manual_seed(0)
    eager_loss = eager.step(batch)["loss"]
    # On a GPU convolutions take TF32 inputs, whose rounding the two steps may meet in another order
    tolerance = 1e-3 if device == "cuda" else 1e-4
    if abs(compiled_loss - eager_loss) > tolerance * max(1.0, abs(eager_loss)):
        raise SystemExit(f"{case.recipe}: compiled loss {compiled_loss} differs from eager {eager_loss}")
    gemm = gemm_call(torch.Generator().manual_seed(0), device)
    calls: dict[str, Callable[[], object]] = {
        "eager": lambda: eager.step(batch),
        "compiled": lambda: compiled.step(batch),
        "gemm": gemm,
    }
    base_eager = None
    if base is not None:
        try:
            base_eager = BaseEager(case, base, threads)
        except BaseUnavailableError as e:
            print(f"{case.recipe} {case.preset or ''}: {e}; timed against today's eager step only", flush=True)
        if base_eager is not None and abs(base_eager.loss - eager_loss) > tolerance * max(1.0, abs(eager_loss)):
            # Not the same computation (the recipe's defaults changed since): its time would compare nothing
            print(
                f"{case.recipe} {case.preset or ''}: the first loss at {base} ({base_eager.loss:.6g}) differs from "
                f"today's ({eager_loss:.6g}): that commit trains another model here; timed against today's eager "
                "step only",
                flush=True,
            )
            base_eager.close()
            base_eager = None
    best = dict.fromkeys([*calls, *(["base"] if base_eager else [])], float("inf"))
    for _ in range(rounds):
        for name, call in calls.items():
            synchronize(device)
            start = time.perf_counter()
            call()
            synchronize(device)
            best[name] = min(best[name], time.perf_counter() - start)
        if base_eager is not None:  # the child times its own step, away from the pipe
            best["base"] = min(best["base"], base_eager())
    if base_eager is not None:
        base_eager.close()
    # Counted on the eager step (the same matmuls): a compiled call under the counter's dispatch mode
    # would make dynamo give up on the step's code for the rest of the process.
    flops = count_flops(lambda: eager.step(batch))
    return {**best, "compile_s": compile_s, "flops": flops, "peak": gemm_gflops(best["gemm"], device)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--only", default=",".join(CASES), help=f"comma-separated cases of: {', '.join(CASES)}")
    p.add_argument("--mode", default="default", choices=COMPILE_MODES, help="loop.compile_mode of the compiled step")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="loop.device of both steps")
    p.add_argument("--cold", action="store_true", help="compile into an empty inductor cache (first-compile times)")
    p.add_argument("--graph-pass", default="on", choices=("on", "off"), help="off: compile without MergeSummedProducts")
    p.add_argument("--base", help="also time the eager step of this commit's code (CPU only)")
    p.add_argument("--out", help="append one JSON line per case to this file (results/compile-speed.jsonl)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.cold:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="foveal-inductor-")
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        p.error(f"unknown case(s) {', '.join(unknown)}; choose from: {', '.join(CASES)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device is available")
    if args.device == "cuda" and args.base:
        p.error("--base times the earlier commit's step on the CPU only")
    if args.base:
        root = Path(__file__).resolve().parents[1]
        known = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"{args.base}^{{commit}}"], cwd=root, capture_output=True
        )
        if known.returncode:
            p.error(f"--base {args.base}: not a commit of this repository")
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"{args.threads} CPU thread(s)"
    without = ", without the graph pass" if args.graph_pass == "off" else ""
    print(
        f"training step, eager against loop.compile=true (mode {args.mode}{without}), {where}, "
        f"best of {args.rounds} rounds"
    )
    print(
        f"{'case':>14} {'eager ms':>9} {'compiled ms':>12} {'speed-up':>9} {'target':>7} {'compile s':>10}  "
        "compiled roofline"
    )
    for name in names:
        case = CASES[name]
        r = time_case(case, args.threads, args.rounds, args.mode, args.device, args.base, args.graph_pass == "on")
        ratio = r["eager"] / r["compiled"]
        # Held to the earlier commit's step when there is one: the eager step the target was set against
        has_base = "base" in r
        base_ratio = r["base"] / r["compiled"] if has_base else None
        mark = "ok" if (base_ratio or ratio) >= case.target else "below"
        against_base = ""
        if has_base:
            against_base = f"; {base_ratio:.2f}x the eager step of {args.base} ({r['base'] * 1e3:.1f} ms)"
        print(
            f"{name:>14} {r['eager'] * 1e3:9.1f} {r['compiled'] * 1e3:12.1f} {ratio:8.2f}x {case.target:5.1f}x "
            f"{r['compile_s']:10.1f}  {r['flops'] / 1e9:.2f} GFLOP/step, "
            f"{roofline(r['flops'], r['compiled'], r['peak'])}{against_base}  [{mark}]",
            flush=True,
        )
        if args.out:
            record = {
                "case": name,
                "recipe": case.recipe,
                "preset": case.preset,
                "sets": case.sets,
                "threads": args.threads,
                "device": where if args.device == "cuda" else "cpu",
                "compile_mode": args.mode,
                **({"graph_pass": "off"} if args.graph_pass == "off" else {}),
                "rounds": args.rounds,
                "eager_ms": round(r["eager"] * 1e3, 2),
                "compiled_ms": round(r["compiled"] * 1e3, 2),
                "speedup": round(ratio, 3),
                **({"base": args.base, "base_eager_ms": round(r["base"] * 1e3, 2)} if has_base else {}),
                **({"speedup_vs_base": round(base_ratio, 3)} if has_base else {}),
                "target": case.target,
                "compile_s": round(r["compile_s"], 2),
                "inductor_cache": "cold" if args.cold else "warm",
                "gflop_per_step": round(r["flops"] / 1e9, 4),
                "percent_of_peak": round(100 * r["flops"] / r["compiled"] / 1e9 / r["peak"], 2),
                "gemm_peak_gflops": round(r["peak"], 1),
                "torch": torch.__version__,
                "seed": 0,  # build_trainer's: the weights and the batch
                "commit": commit_id(),
                "command": "python " + " ".join(sys.argv),
            }
            with open(args.out, "a") as f:
                f.write(json.dumps(record) + "\n")
    size = gemm_size(args.device)
    print(
        f"speed-up = eager time per step / compiled; roofline against a float32 {size}^3 GEMM timed in the same rounds"
    )


if __name__ == "__main__":
    main()
