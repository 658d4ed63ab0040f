"""DRAW's training step at the paper's configuration: the eager step as of a baseline commit against today's.

    python studies/draw-compile-speed/draw_compile_speed.py [--base 9d9ac67] [--threads 1] [--rounds 5]
        [--per-call 9] [--mode default] [--variants class] [--profile 3]

``benchmarks/compile.py`` times today's eager step against today's compiled one; once the compiled step's
speed comes partly from code that the eager step runs too, that ratio no longer says how far it moved from
the eager step of an earlier commit. Here one process times, in interleaved rounds (fastest round each):

``base eager``   the eager step with ``DRAW`` as it was at ``--base`` (its source, loaded from git, takes
                 the model's place: the same weights, batch and noise)
``eager``        today's eager step
``compiled k``   today's step with ``loop.compile=true``, ``k`` drawing steps per graph call, for each ``k``
                 of ``--per-call``, and each of ``--variants``: the inductor options it compiles with
                 (``class``: DRAW's own; the others in ``VARIANTS``)

The losses of all of them are checked to agree before timing. ``--profile n`` then runs each arm's step
``n`` times under ``torch.profiler`` and prints, for the least disturbed of them, how much of the step
is spent inside the library's matrix products (``mm``, ``addmm``, ``bmm``): the part compiling cannot
shorten, since inductor calls the same library for them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from compile import CASES, build  # noqa: E402
from foveal.compiling import compile_model  # noqa: E402

# Inductor options to compare with DRAW's own (``class``): without foveal's pass, each weight's gradient is
# summed over a run's steps one product at a time; without the C++ wrapper, each graph's calls are Python.
# Each variant: its inductor options, and whether foveal's graph pass runs.
VARIANTS = {
    "per-step-sums": ({"cpp_wrapper": False}, False),
    "python-wrapper": ({"cpp_wrapper": False}, True),
}


def base_class(commit: str) -> type:
    """``DRAW`` as the source of ``commit`` defines it (outside the registry, which holds today's)."""
    source = subprocess.run(
        ["git", "show", f"{commit}:src/foveal/models/draw.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    source = source.replace('@MODELS.register("draw")\n', "")
    module = types.ModuleType(f"draw_at_{commit}")
    module.__dict__["__name__"] = module.__name__
    sys.modules[module.__name__] = module  # dataclasses look their module up by name
    exec(compile(source, f"{commit}:draw.py", "exec"), module.__dict__)
    return module.DRAW


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", default="9d9ac67")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--per-call", default="9", help="comma-separated steps per compiled call")
    p.add_argument("--mode", default="default")
    p.add_argument("--variants", default="class", help=f"comma-separated: class, {', '.join(VARIANTS)}")
    p.add_argument("--profile", type=int, default=0, help="profile each arm's step this many times")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    case = CASES["draw-paper"]
    base, batch = build(case, False, args.threads)
    base.model.__class__ = base_class(args.base)
    eager, _ = build(case, False, args.threads)
    arms = {f"base eager ({args.base})": base, "eager": eager}
    compile_s = {}
    for k in (int(v) for v in args.per_call.split(",")):
        for variant in args.variants.split(","):
            compiled, _ = build(case, True, args.threads, args.mode)
            if variant != "class":
                options, graph_pass = VARIANTS[variant]
                compile_model(compiled.model, args.mode, options, graph_pass=graph_pass)
            compiled.model.steps_per_call = k
            arms[f"compiled {k}" + ("" if variant == "class" else f" {variant}")] = compiled
    losses = {}
    for name, trainer in arms.items():
        torch.manual_seed(0)
        start = time.perf_counter()
        losses[name] = trainer.step(batch)["loss"]
        compile_s[name] = time.perf_counter() - start
    reference = losses[f"base eager ({args.base})"]
    for name, loss in losses.items():
        if abs(loss - reference) > 1e-4 * max(1.0, abs(reference)):
            raise SystemExit(f"{name}: loss {loss} differs from the base's {reference}")
    best = dict.fromkeys(arms, float("inf"))
    for _ in range(args.rounds):
        for name, trainer in arms.items():
            start = time.perf_counter()
            trainer.step(batch)
            best[name] = min(best[name], time.perf_counter() - start)
    base_s = best[f"base eager ({args.base})"]
    print(f"draw-paper training step, {args.threads} thread(s), mode {args.mode}, best of {args.rounds} rounds")
    for name, seconds in best.items():
        ratio = base_s / seconds
        print(f"{name:>40} {seconds * 1e3:8.1f} ms  {ratio:5.2f}x the base  first step {compile_s[name]:6.1f} s")
    if args.profile:
        print("time in the library's matrix products (profiled step, least disturbed of", args.profile, "runs)")
        for name, trainer in arms.items():
            total, products = min(product_time(trainer, batch) for _ in range(args.profile))
            print(f"{name:>40} {total * 1e3:8.1f} ms, products {products * 1e3:6.1f} ms ({products / total:.0%})")


PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm")


def product_time(trainer: object, batch: object) -> tuple[float, float]:
    """Seconds of one profiled step: all of it (the sum of every op's own time) and the products' share."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        trainer.step(batch)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events) / 1e6
    return total, sum(e.self_cpu_time_total for e in events if e.key in PRODUCTS) / 1e6


if __name__ == "__main__":
    main()
