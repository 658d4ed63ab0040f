"""Results as data: a grid of settings x seeds trained by the one loop, one JSON line per run.

``foveal sweep NAME RECIPE --preset quick --grid model.head_options.hops=1,2 --seeds 0,1,2`` trains every
combination and appends a row to ``results/NAME.jsonl``: the recipe, preset, the settings of the
cell, the seed, the final metrics, wall and CPU seconds, the commit and the torch version. A row
already in the file is not trained again, so an interrupted sweep continues where it stopped.
``foveal results NAME --metric acc`` prints the table of mean and spread over seeds that the docs
quote; ``tests/test_results.py`` checks that every table in docs/ matches its results file, and
``scripts/refresh_docs_tables.py`` writes them again from the files.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shlex
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from foveal.errors import FovealError
from foveal.train.checkpoint import write_text_atomic

RESULTS_DIR = Path("results")


def parse_grid(items: Sequence[str]) -> dict[str, list[str]]:
    """``["model.dim=16,32", "loop.lr=1e-3"]`` -> ``{"model.dim": ["16", "32"], "loop.lr": ["1e-3"]}``.

    Example:
        >>> parse_grid(["model.dim=16,32"])
        {'model.dim': ['16', '32']}
    """
    grid: dict[str, list[str]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise FovealError(f"--grid needs key=value[,value...], got {item!r}")
        grid[key.strip()] = [v.strip() for v in values.split(",") if v.strip()]
    return grid


def cells(grid: dict[str, list[str]]) -> list[dict[str, str]]:
    """Every combination of the grid's values, in order.

    Example:
        >>> cells({"a": ["1", "2"], "b": ["x"]})
        [{'a': '1', 'b': 'x'}, {'a': '2', 'b': 'x'}]
    """
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(grid[k] for k in keys))]


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a results file (an empty list if there is none)."""
    path = Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def train_command(recipe: str, preset: str | None, sets: dict[str, str], seed: int, threads: int = 1) -> str:
    """The ``foveal train`` command that makes one row of a sweep again.

    Example:
        >>> train_command("toy", "quick", {"model.hidden": "8"}, 2)
        'foveal train toy --preset quick --set model.hidden=8 --seed 2 --threads 1'
    """
    parts = ["foveal", "train", recipe, *(["--preset", preset] if preset else [])]
    parts += [arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")]
    return shlex.join([*parts, "--seed", str(seed), "--threads", str(threads)])


def script_provenance() -> dict[str, str]:
    """``{"commit", "command"}`` for a row that a script (a benchmark, a study) writes to ``results/``."""
    from foveal.runs import commit_id

    return {"commit": commit_id(), "command": shlex.join(["python", *sys.argv])}


def eval_curve(metrics_log: str | Path) -> list[dict[str, float]]:
    """Every evaluation a run logged (``metrics.jsonl``'s ``eval`` lines): ``[{"step": ..., metric: ...}]``.

    A sweep keeps it in the row, so a table's numbers come with the curve that shows whether they were
    still moving.
    """
    return [
        {k: v for k, v in record.items() if k not in ("time", "split")}
        for record in read_results(metrics_log)
        if record.get("split") == "eval"
    ]


def _row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["recipe"], row["preset"], json.dumps(row["sets"], sort_keys=True), row["seed"])


def run_sweep(
    name: str,
    recipe: str,
    preset: str | None,
    grid: dict[str, list[str]],
    seeds: Sequence[int],
    *,
    sets: dict[str, str] | None = None,
    threads: int = 1,
    results_dir: str | Path = RESULTS_DIR,
    runs_dir: str | Path = "runs/sweeps",
) -> Path:
    """Train every cell of ``grid`` (on top of ``sets``) for every seed; append a row per run.

    Returns the results file. Rows already in it (same recipe, preset, settings and seed) are kept
    and not trained again, including rows another sweep into the same file wrote since this one began.
    """
    from foveal.runs import RunRequest, commit_id, holds_this_run, start_run
    from foveal.train import RunDir

    path = Path(results_dir) / f"{name}.jsonl"
    for cell in cells(grid) or [{}]:
        settings = {**(sets or {}), **cell}
        for seed in seeds:
            row: dict[str, Any] = {"recipe": recipe, "preset": preset, "sets": settings, "seed": seed}
            # read afresh before every run: a second sweep into the same file may have written this row
            if _row_key(row) in {_row_key(done) for done in read_results(path)}:
                continue
            # the recipe, the preset and every setting, fixed or gridded, name the run: two sweeps into one
            # file (another recipe's, another preset's) never share a run directory
            tag = "-".join(f"{k.split('.')[-1]}={v}" for k, v in settings.items()) or "default"
            out = RunDir(Path(runs_dir) / name / recipe / (preset or "defaults") / f"{tag}-seed{seed}")
            # A run of this cell stopped part-way (Ctrl-C, SIGTERM) left a checkpoint: go on from it. Anything
            # else there (other settings, or defaults changed since) is trained afresh over it.
            resume = holds_this_run(out.path, recipe, preset, settings, seed)
            request = RunRequest(
                recipe,
                preset,
                sets=settings,
                seed=seed,
                threads=threads,
                out=out.path,
                resume=resume,
                overwrite=not resume,
            )
            _, metrics = start_run(request, command=f"foveal sweep {name} {recipe}")
            info = json.loads(out.info.read_text())
            row |= {
                "metrics": metrics,
                "wall_s": info["seconds"],
                "cpu_s": info["cpu_seconds"],
                "commit": commit_id(),
                "command": train_command(recipe, preset, settings, seed, threads),
                "torch": torch.__version__,
            }
            if info["parts"] > 1:  # resumed: the times add up every part that run.json recorded
                row["parts"] = info["parts"]
            if curve := eval_curve(out.metrics):
                row["curve"] = curve
            rows = [*read_results(path), row]
            write_text_atomic("".join(json.dumps(r) + "\n" for r in rows), path)
    return path


def _value(row: dict[str, Any], metric: str) -> Any:
    """A row's ``metric``: one of its metrics, or one of the row's own numbers (``cpu_s``, ``wall_s``)."""
    return row["metrics"].get(metric, row.get(metric) if metric in ("cpu_s", "wall_s") else None)


def summarize(rows: Sequence[dict[str, Any]], metric: str, by: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Mean, spread (min-max) and seeds of ``metric`` per setting, in the order settings first appear.

    A setting whose runs lack the metric (the ``none`` head has no map, so no mask mass) gets None. Besides
    the metrics, a run's ``cpu_s`` and ``wall_s`` can be summarised.
    ``by`` names the settings that make a row of the table (default: every setting that varies).

    Example:
        >>> rows = [{"sets": {"hops": "1"}, "seed": s, "metrics": {"acc": a}} for s, a in ((0, 0.5), (1, 0.7))]
        >>> summarize(rows, "acc")
        [{'setting': {'hops': '1'}, 'mean': 0.6, 'min': 0.5, 'max': 0.7, 'seeds': [0, 1]}]
    """
    keys = list(by) if by is not None else sorted({k for r in rows for k in r["sets"]})
    if by is None and len(rows) > 1:
        keys = [k for k in keys if len({r["sets"].get(k) for r in rows}) > 1] or keys
    if rows and all(_value(row, metric) is None for row in rows):
        raise FovealError(f"metric {metric!r} is not in the results; choose from: {', '.join(rows[0]['metrics'])}")
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        setting = {k: row["sets"].get(k) for k in keys}
        groups.setdefault(json.dumps(setting), []).append(row)
    table = []
    for key, group in groups.items():
        values = [v for r in group if (v := _value(r, metric)) is not None]
        if values and len(values) < len(group):  # a model without the metric (no map) lacks it in every seed
            raise FovealError(f"metric {metric!r} is missing from some seeds of {key}")
        table.append(
            {
                "setting": json.loads(key),
                "mean": round(statistics.fmean(values), 6) if values else None,
                "min": min(values, default=None),
                "max": max(values, default=None),
                "seeds": sorted(r["seed"] for r in group),
            }
        )
    return table


def markdown_table(rows: Sequence[dict[str, Any]], metric: str, digits: int = 3) -> str:
    """The table the docs quote: one line per setting, mean and spread over seeds of each metric.

    ``metric`` is one metric or several, comma-separated (``"acc,mask_mass"``): each gets a mean and a
    min-max column.

    Example:
        >>> rows = [{"sets": {"hops": "1"}, "seed": s, "metrics": {"acc": a}} for s, a in ((0, 0.5), (1, 0.7))]
        >>> print(markdown_table(rows, "acc"))
        | hops | acc (mean) | min-max | seeds |
        | --- | --- | --- | --- |
        | 1 | 0.600 | 0.500-0.700 | 0, 1 |
    """
    metrics = [m.strip() for m in metric.split(",") if m.strip()]
    summaries = [summarize(rows, m) for m in metrics]
    keys = list(summaries[0][0]["setting"]) if summaries and summaries[0] else []
    header = [*(k.split(".")[-1] for k in keys)]
    for m in metrics:
        header += [f"{m} (mean)", "min-max"]
    lines = ["| " + " | ".join([*header, "seeds"]) + " |", "| " + " | ".join(["---"] * (len(header) + 1)) + " |"]
    for entries in zip(*summaries, strict=True):
        # A key a setting does not set has the recipe's default value.
        cells_ = [("default" if (v := entries[0]["setting"][k]) is None else str(v)) for k in keys]
        for entry in entries:
            if entry["mean"] is None:
                cells_ += ["-", "-"]
            else:
                cells_ += [f"{entry['mean']:.{digits}f}", f"{entry['min']:.{digits}f}-{entry['max']:.{digits}f}"]
        seeds = ", ".join(map(str, entries[0]["seeds"]))
        lines.append("| " + " | ".join([*cells_, seeds]) + " |")
    return "\n".join(lines)


def seed_table(rows: Sequence[dict[str, Any]], metric: str, digits: int = 3) -> str:
    """One line per run: its recipe and preset where the rows have several, the settings that vary, the seed and
    each of ``metric`` (comma-separated, ``-`` where a run lacks one), in file order.

    For a claim counted over seeds ("9 of 10 seeds copy length 120"), where a mean would hide the one that fails.

    Example:
        >>> rows = [{"sets": {}, "seed": s, "metrics": {"bits": b}, "cpu_s": 40.0} for s, b in ((5, 0.0), (6, 2.5))]
        >>> print(seed_table(rows, "bits,cpu_s"))
        | seed | bits | cpu_s |
        | --- | --- | --- |
        | 5 | 0.000 | 40.000 |
        | 6 | 2.500 | 40.000 |
    """
    metrics = [m.strip() for m in metric.split(",") if m.strip()]
    keys = sorted({k for r in rows for k in r["sets"]})
    keys = [k for k in keys if len({r["sets"].get(k) for r in rows}) > 1]
    # a file of several recipes or presets names each row's: a setting left out means that preset's value
    named = [part for part in ("recipe", "preset") if len({r.get(part) for r in rows}) > 1]
    header = [*named, *(k.split(".")[-1] for k in keys), "seed", *metrics]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    for row in rows:
        values = [_value(row, m) for m in metrics]
        cells_ = [str(row.get(part)) for part in named]
        cells_ += [str(row["sets"].get(k, "default")) for k in keys] + [str(row["seed"])]
        cells_ += ["-" if v is None else f"{v:.{digits}f}" for v in values]
        lines.append("| " + " | ".join(cells_) + " |")
    return "\n".join(lines)


def speed_table(rows: Sequence[dict[str, Any]], digits: int = 2) -> str:
    """The table of a speed benchmark's file (rows with a ``case``): medians per case of its newest runs.

    A case's rows are grouped by case, compile mode and graph pass; each group is summarised over the rows of
    the newest commit that timed it (the file's order), so an older commit's runs never mix into the table
    (each row keeps its commit and command in the file).

    Example:
        >>> rows = [{"case": "ntm", "compiled_ms": m, "speedup": s, "commit": c} for m, s, c in
        ...         ((30.0, 2.0, "a"), (20.0, 3.0, "b"), (22.0, 3.4, "b"), (21.0, 3.2, "b"))]
        >>> print(speed_table(rows))
        | case | mode | runs | compiled ms (median) | speed-up (median) | min-max |
        | --- | --- | --- | --- | --- | --- |
        | ntm | default | 3 | 21.00 | 3.20x | 3.00-3.40x |
    """
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        mode = row.get("compile_mode", "default") + (" (no graph pass)" if row.get("graph_pass") == "off" else "")
        groups.setdefault((row["case"], mode), []).append(row)
    with_base = any("speedup_vs_base" in row for row in rows)
    header = ["case", "mode", "runs", "compiled ms (median)", "speed-up (median)", "min-max"]
    header += ["on the base commit's eager step"] if with_base else []
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    for (case, mode), group in groups.items():
        newest = group[-1]["commit"]
        runs = [r for r in group if r["commit"] == newest]
        speedups = [r["speedup"] for r in runs]
        cells_ = [case, mode, str(len(runs)), f"{statistics.median(r['compiled_ms'] for r in runs):.{digits}f}"]
        spread = f"{min(speedups):.{digits}f}-{max(speedups):.{digits}f}x"
        cells_ += [f"{statistics.median(speedups):.{digits}f}x", spread]
        if with_base:
            base = [r["speedup_vs_base"] for r in runs if "speedup_vs_base" in r]
            cells_.append(f"{statistics.median(base):.{digits}f}x" if base else "-")
        lines.append("| " + " | ".join(cells_) + " |")
    return "\n".join(lines)


def comparison_table(rows: Sequence[dict[str, Any]], metric: str, key: str, base: str, new: str) -> str:
    """Two settings of ``key`` side by side for every other setting: their means over seeds and the difference.

    ``difference`` is ``new``'s mean minus ``base``'s; ``SE`` is the standard error of that difference over
    the seeds, ``sqrt(s_base^2 / n_base + s_new^2 / n_new)`` with each side's sample variance over its seeds
    (none with one seed a side); ``z`` their ratio. A setting that lacks either side is left out.

    Example:
        >>> rows = [{"sets": {"m": m, "d": "R"}, "seed": s, "metrics": {"e": e}}
        ...         for m, s, e in (("a", 0, 2.0), ("a", 1, 4.0), ("b", 0, 1.0), ("b", 1, 1.0))]
        >>> print(comparison_table(rows, "e", "m", "a", "b"))
        | d | e a | e b | difference | SE | z | seeds |
        | --- | --- | --- | --- | --- | --- | --- |
        | R | 3.000 | 1.000 | -2.000 | 1.000 | -2.0 | 0, 1 |
    """
    others = sorted({k for r in rows for k in r["sets"] if k != key})
    others = [k for k in others if len({r["sets"].get(k) for r in rows}) > 1] or others
    groups: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for row in rows:
        side = row["sets"].get(key)
        if side in (base, new):
            setting = json.dumps({k: row["sets"].get(k) for k in others})
            groups.setdefault(setting, {}).setdefault(side, []).append(row)
    header = [
        *(k.split(".")[-1] for k in others),
        f"{metric} {base}",
        f"{metric} {new}",
        "difference",
        "SE",
        "z",
        "seeds",
    ]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    for setting, sides in groups.items():
        if base not in sides or new not in sides:
            continue
        values = {side: [r["metrics"][metric] for r in sides[side]] for side in (base, new)}
        means = {side: statistics.fmean(v) for side, v in values.items()}
        difference = means[new] - means[base]
        # one seed a side has no spread to measure: no standard error
        se = (
            math.sqrt(sum(statistics.variance(v) / len(v) for v in values.values()))
            if min(map(len, values.values())) > 1
            else None
        )
        z = f"{difference / se:.1f}" if se else "-"
        seeds = sorted(set.intersection(*({r["seed"] for r in sides[side]} for side in (base, new))))
        cells_ = [str(v) for v in json.loads(setting).values()]
        cells_ += [
            f"{means[base]:.3f}",
            f"{means[new]:.3f}",
            f"{difference:.3f}",
            "-" if se is None else f"{se:.3f}",
            z,
        ]
        lines.append("| " + " | ".join([*cells_, ", ".join(map(str, seeds))]) + " |")
    return "\n".join(lines)


def clopper_pearson(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) ``level`` interval of a binomial rate seen as ``successes`` of ``trials``: each
    bound is the rate at which a count as extreme as the one seen has chance ``(1 - level) / 2``, found by bisection
    on the binomial tail (no statistics package).

    Example:
        >>> [round(x, 3) for x in clopper_pearson(6, 10)]
        [0.262, 0.878]
    """
    if not 0 <= successes <= trials or trials < 1:
        raise FovealError(f"expected 0 <= successes <= trials and trials >= 1, got {successes} of {trials}")
    tail = (1 - level) / 2

    def mass(p: float, counts: range) -> float:
        return sum(math.comb(trials, i) * p**i * (1 - p) ** (trials - i) for i in counts)

    def solve(f: Callable[[float], float], rising: bool) -> float:
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if (f(mid) < tail) == rising else (lo, mid)
        return (lo + hi) / 2

    lower = 0.0 if successes == 0 else solve(lambda p: mass(p, range(successes, trials + 1)), rising=True)
    upper = 1.0 if successes == trials else solve(lambda p: mass(p, range(successes + 1)), rising=False)
    return lower, upper


def pass_table(rows: Sequence[dict[str, Any]], criteria: str) -> str:
    """How many runs meet every one of ``criteria`` (``"acc>=0.99,bits_len80<=1"``), with the rate's 95% interval.

    For a promise about a user's seed ("9 of 10 runs answer 99% right"): the runs that fail are named by seed,
    and the interval (:func:`clopper_pearson`) says what ten runs can tell about the rate. A run that lacks a
    metric fails.

    Example:
        >>> rows = [{"sets": {}, "seed": s, "metrics": {"acc": a}} for s, a in ((1, 0.995), (2, 0.9), (3, 1.0))]
        >>> print(pass_table(rows, "acc>=0.99"))
        | runs | pass | rate | 95% interval | fail (seeds) | criteria |
        | --- | --- | --- | --- | --- | --- |
        | 3 | 2 | 0.67 | 0.09-0.99 | 2 | acc >= 0.99 |
    """
    tests = []
    for part in (p.strip() for p in criteria.split(",") if p.strip()):
        match = re.fullmatch(r"([\w.]+)\s*(>=|<=)\s*([-+0-9.eE]+)", part)
        if match is None:
            raise FovealError(f"a pass criterion is written METRIC>=VALUE or METRIC<=VALUE, got {part!r}")
        tests.append((match[1], match[2], float(match[3])))
    if not tests:
        raise FovealError("pass: expected at least one criterion, such as acc>=0.99")

    def passes(row: dict[str, Any]) -> bool:
        for name, op, bound in tests:
            value = _value(row, name)
            if value is None or not (value >= bound if op == ">=" else value <= bound):
                return False
        return True

    failed = [str(row["seed"]) for row in rows if not passes(row)]
    runs, passed = len(rows), len(rows) - len(failed)
    lower, upper = clopper_pearson(passed, runs) if runs else (0.0, 1.0)
    rate = f"{passed / runs:.2f}" if runs else "-"
    said = ", ".join(f"{name} {op} {bound:g}" for name, op, bound in tests)
    cells_ = [str(runs), str(passed), rate, f"{lower:.2f}-{upper:.2f}", ", ".join(failed) or "none", said]
    header = ["runs", "pass", "rate", "95% interval", "fail (seeds)", "criteria"]
    return "\n".join("| " + " | ".join(line) + " |" for line in (header, ["---"] * len(header), cells_))


def results_table(rows: Sequence[dict[str, Any]], metric: str) -> str:
    """The docs table of a results file: :func:`speed_table` for a benchmark's rows, :func:`comparison_table` for
    a metric written ``M:KEY=BASE/NEW`` (``error:model.name=cnn/stcnn``), else :func:`markdown_table`.

    ``M@preset`` keeps only the rows that ran a preset as it is, with no other setting: a preset's cost
    (``cpu_s@preset``) or its own scores, apart from the variations a file also holds.
    ``M@seed`` lists every run on its own line (:func:`seed_table`); ``pass:CRITERIA`` counts the runs that meet
    them all (:func:`pass_table`).
    """
    if rows and all("case" in row for row in rows):
        return speed_table(rows)
    if metric.startswith("pass:"):
        return pass_table(rows, metric.removeprefix("pass:"))
    if metric.endswith("@seed"):
        return seed_table(rows, metric.removesuffix("@seed"))
    if metric.endswith("@preset"):
        metric = metric.removesuffix("@preset")
        rows = [row for row in rows if not row["sets"]]
    if ":" in metric:
        name, _, comparison = metric.partition(":")
        key, _, sides = comparison.partition("=")
        base, _, new = sides.partition("/")
        if not (key and base and new):
            raise FovealError(f"a comparison is written METRIC:KEY=BASE/NEW, got {metric!r}")
        return comparison_table(rows, name, key, base, new)
    return markdown_table(rows, metric)


MARKER = "<!-- results:"


def parse_marker(line: str) -> tuple[str, str] | None:
    """``(name, metric)`` of a ``<!-- results: NAME metric=M -->`` line, or None for any other line.

    Example:
        >>> parse_marker("<!-- results: vqa-family-easy metric=acc,acc_shape -->")
        ('vqa-family-easy', 'acc,acc_shape')
    """
    line = line.strip()
    if not line.startswith(MARKER):
        return None
    name, *parts = line[len(MARKER) : -3].split()
    return name, dict(part.split("=", 1) for part in parts).get("metric", "")


def docs_tables(text: str) -> list[tuple[str, str, str]]:
    """Every ``<!-- results: NAME metric=M -->`` marker of a page, with the table under it.

    Returns ``(name, metric, table)`` per marker; the table is the run of ``|`` lines after it.
    """
    found = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if (marker := parse_marker(line)) is not None:
            table: list[str] = []
            for following in lines[i + 1 :]:
                if not following.startswith("|"):
                    if table:
                        break
                    continue
                table.append(following)
            found.append((*marker, "\n".join(table)))
    return found
