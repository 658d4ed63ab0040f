"""The pages: ``RUN/report.html`` for one run, and the gallery ``foveal demo`` writes.

Pages link their pictures by relative path (``figures/...``), so a run directory can be moved,
zipped or opened from ``file://`` and the page still shows everything; no path of the machine that
made it appears on the page.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from foveal.errors import FovealError
from foveal.specs import flatten
from foveal.train.run_dir import RunDir
from foveal.viz._mpl import PAGE_WIDTH_PX, pyplot
from foveal.viz.metric_names import describe_metric, format_metric, in_words

if TYPE_CHECKING:
    from matplotlib.typing import LineStyleType, MarkerType

IMAGE_SUFFIXES = (".png", ".gif", ".jpg", ".jpeg")
NOT_METRICS = {"step", "time", "split"}

STYLE = f"""
body{{font-family:system-ui,sans-serif;max-width:{PAGE_WIDTH_PX}px;margin:2em auto;padding:0 1em;color:#222}}
h1{{margin-bottom:.2em}}h2{{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}}
table{{border-collapse:collapse;margin:.5em 0}}th,td{{border:1px solid #ccc;padding:2px 8px;text-align:left}}
th{{background:#f5f5f5;font-weight:600}}figure{{display:inline-block;margin:0 1em 1em 0;vertical-align:top}}
img{{max-width:100%;border:1px solid #eee}}figcaption{{font-size:.85em;color:#555;max-width:60em}}
.muted{{color:#666}}section{{margin-bottom:2em}}th .muted{{font-weight:400;font-size:.85em}}
.warn{{background:#fff3f3;border-left:4px solid #b00000;padding:.5em 1em}}
.note{{background:#f5f8ff;border-left:4px solid #4a6fd0;padding:.5em 1em}}
"""


def read_events(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every event of the run's ``metrics.jsonl`` (an empty list if there is none)."""
    path = RunDir(run_dir).metrics
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def final_metrics(run_dir: str | Path, events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``eval.json`` if the run was evaluated, else its last logged evaluation."""
    path = RunDir(run_dir).eval
    if path.is_file():
        return json.loads(path.read_text())
    evals = [e for e in events if e.get("split") == "eval"]
    return {k: v for k, v in evals[-1].items() if k not in NOT_METRICS} if evals else {}


class SeriesStyle(TypedDict):
    """How one kind of series is drawn: its legend label and its line."""

    label: str
    color: str
    linestyle: LineStyleType
    marker: MarkerType | None


# The two kinds of series on a curve panel, drawn alike in every panel and named by the legend.
SERIES: dict[str, SeriesStyle] = {
    "train": {"label": "train (mean of each logged window)", "color": "#1f77b4", "linestyle": "-", "marker": None},
    "eval": {"label": "eval (held-out set)", "color": "#d62728", "linestyle": "--", "marker": "o"},
}
# The least a linear panel's y-axis spans, relative to the largest value on it: a change of 1e-4 in
# an accuracy of 0.9 stays a flat line rather than filling the panel. A log panel spans a factor 1.5 at least.
MIN_RELATIVE_SPAN = 0.1
MIN_LOG_RATIO = 1.5


@dataclass(frozen=True)
class Progress:
    """How far a run got: its last logged step against the steps its config asks for."""

    step: int
    steps: int | None

    @property
    def finished(self) -> bool:
        """True when the run reached its configured steps (or the config is unknown and it logged anything)."""
        return self.step > 0 and (self.steps is None or self.step >= self.steps)

    def describe(self) -> str:
        """One line: finished, or where it stopped."""
        if self.finished:
            return f"finished: {self.step} steps"
        if self.step == 0:
            return "not started: no step logged"
        return f"interrupted at step {self.step} of {self.steps}"


def run_progress(run_dir: str | Path, events: Sequence[dict[str, Any]]) -> Progress:
    """The run's :class:`Progress`, from its metrics log and its ``config.json`` (``loop.steps``)."""
    run = RunDir(run_dir)
    record = json.loads(run.config.read_text()) if run.config.is_file() else {}
    steps = record.get("config", {}).get("loop", {}).get("steps")
    return Progress(max((int(e.get("step", 0)) for e in events), default=0), steps)


def _unmagnified_limits(values: Sequence[float], log: bool) -> tuple[float, float] | None:
    """Y limits that span at least :data:`MIN_RELATIVE_SPAN` (log: :data:`MIN_LOG_RATIO`) around the values;
    None where the values already spread that far."""
    low, high = min(values), max(values)
    if log:
        if high / low >= MIN_LOG_RATIO:
            return None
        middle = (low * high) ** 0.5
        return middle / MIN_LOG_RATIO**0.5, middle * MIN_LOG_RATIO**0.5
    span = MIN_RELATIVE_SPAN * max(abs(low), abs(high)) or 1.0
    if high - low >= span:
        return None
    middle = (low + high) / 2
    return middle - span / 2, middle + span / 2


def plot_curves(events: Sequence[dict[str, Any]], path: Path, progress: Progress | None = None) -> Path | None:
    """Save :func:`curves_figure` to ``path``; None (and no file) if nothing was logged."""
    fig = curves_figure(events, progress)
    if fig is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    pyplot().close(fig)
    return path


def _points(events: Sequence[dict[str, Any]], split: str, name: str) -> list[tuple[int, float]]:
    return [(e["step"], e[name]) for e in events if e.get("split") == split and _number(e.get(name))]


def curve_names(events: Sequence[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The logged metrics split in two: those with a curve (a series of two points or more), and those
    logged once per series, which a table shows better than a panel with a dot."""
    names = sorted(
        {k for e in events if e.get("split") in SERIES for k, v in e.items() if k not in NOT_METRICS and _number(v)}
    )
    curves = [n for n in names if any(len(_points(events, split, n)) > 1 for split in SERIES)]
    return curves, [n for n in names if n not in curves]


def curves_figure(events: Sequence[dict[str, Any]], progress: Progress | None = None) -> Any:
    """Every metric logged more than once against the step, one panel each; None if there is none.

    Training windows are a solid line, evaluations dashed with dots in another colour, named by one
    legend; each panel is titled with the metric's name and unit (:mod:`foveal.viz.metric_names`); a
    panel's y-axis spans at least 10% of its values' size, so noise stays small; an unfinished
    ``progress`` is written over the panels and the configured last step marked on each. A metric
    logged once (:func:`curve_names`) has no panel.
    """
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    splits = [split for split in SERIES if any(e.get("split") == split for e in events)]
    names, _ = curve_names(events)
    if not names:
        return None
    plt = pyplot()
    columns = min(3, len(names))
    rows = -(-len(names) // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(4 * columns, 2.6 * rows + 0.4), squeeze=False, layout="constrained"
    )
    unfinished = progress if progress is not None and not progress.finished else None
    for ax, name in zip(axes.flat, names, strict=False):
        values: list[float] = []
        metric = describe_metric(name)
        for split in splits:
            points = [(step, value * metric.scale) for step, value in _points(events, split, name)]
            if points:
                style = SERIES[split]
                ax.plot(
                    *zip(*points, strict=True),
                    color=style["color"],
                    linestyle=style["linestyle"],
                    marker=style["marker"],
                    markersize=3,
                )
                values += [float(v) for _, v in points]
        log = (name in ("loss", "lr") or name.startswith(("nll", "neg_elbo"))) and all(v > 0 for v in values)
        if log:
            ax.set_yscale("log")
            if values and max(values) / min(values) < 10:  # within a decade: plain numbers, not powers of ten
                ax.yaxis.set_major_formatter(ScalarFormatter())
                ax.yaxis.set_minor_formatter(ScalarFormatter())
        else:
            ax.ticklabel_format(axis="y", useOffset=False)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole
        limits = _unmagnified_limits(values, log) if values else None
        if limits is not None:
            ax.set_ylim(*limits)
        if unfinished is not None and unfinished.steps:
            ax.axvline(unfinished.steps, color="#999999", linestyle=":", linewidth=1)
            ax.set_xlim(right=unfinished.steps * 1.03)
        ax.set_title(metric.label, fontsize=10)
        ax.grid(alpha=0.3)
        ax.tick_params(which="both", labelsize=8)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    for i, ax in enumerate(axes.flat[: len(names)]):
        if i + columns >= len(names):  # the lowest panel of its column
            ax.set_xlabel("step", fontsize=8)
    from matplotlib.lines import Line2D

    handles = [
        Line2D(
            [],
            [],
            color=SERIES[s]["color"],
            linestyle=SERIES[s]["linestyle"],
            marker=SERIES[s]["marker"],
            markersize=3,
            label=SERIES[s]["label"],
        )
        for s in splits
    ]
    fig.legend(handles=handles, loc="outside upper left", ncols=len(handles), fontsize=8, frameon=False)
    if unfinished is not None:
        fig.suptitle(
            f"{unfinished.describe()} (dotted: the configured last step)",
            x=0.99,
            ha="right",
            fontsize=9,
            color="#b00000",
        )
    return fig


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(json.dumps(value) if isinstance(value, list | dict | bool) or value is None else str(value))


def table(rows: dict[str, Any]) -> str:
    """A two-column HTML table of names and values."""
    body = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{_cell(v)}</td></tr>" for k, v in rows.items())
    return f"<table>{body}</table>"


def metrics_table(metrics: dict[str, Any]) -> str:
    """An HTML table of metrics: each one's name in words with its unit, its logged key, and its value in
    that unit (:mod:`foveal.viz.metric_names`)."""
    rows = []
    for key, value in metrics.items():
        name = html.escape(describe_metric(key).name)
        shown = html.escape(format_metric(key, value)) if _number(value) else _cell(value)
        rows.append(f"<tr><th>{name} <span class='muted'>{html.escape(key)}</span></th><td>{shown}</td></tr>")
    return f"<table>{''.join(rows)}</table>"


def once_table(events: Sequence[dict[str, Any]], names: Sequence[str]) -> str:
    """An HTML table of the metrics logged once per series: name, and each series' value with its step."""
    rows = {}
    for name in names:
        cells = [
            f"{split} at step {step}: {format_metric(name, value)}"
            for split in SERIES
            for step, value in _points(events, split, name)
        ]
        rows[name] = "; ".join(cells)
    body = "".join(
        f"<tr><th>{html.escape(describe_metric(k).name)} <span class='muted'>{html.escape(k)}</span></th>"
        f"<td>{html.escape(v)}</td></tr>"
        for k, v in rows.items()
    )
    return f"<table>{body}</table>"


# What each figure a recipe's ``show`` draws shows, by file name.
CAPTIONS = {
    "attention.png": "Test questions, each with its picture and, beside it, where each attention hop looks: "
    "the object is outlined and the share of the map on it is above the map.",
    "vqa-family.png": "One test question per template: the picture (a pointing question with its candidate "
    "boxes), each hop's map with the objects the question is about outlined and the share of the map on each, "
    "and the weights over the question's words and the channels where the head has them.",
    "shapes-two-hop.png": "Two-hop questions: each hop's map with the named object, the one found first and "
    "the answer's outlined, and the share of each hop's map on each.",
    "transformer.png": "Test images with the box the spatial transformer chooses (top row) and the warped "
    "image the classifier sees (bottom row).",
    "glimpses.png": "The glimpses the recurrent attention model takes on test canvases, in order, and its answer.",
    "generation.png": "Images DRAW generates from noise: its canvas at each step, with its write window.",
    "generation.gif": "The same generation, animated step by step.",
    "reconstruction.png": "Test images as DRAW redraws them step by step, with its read and write windows; "
    "the last column is the image itself.",
    "regions.png": "The classes the network gives each point of the plane, with the test points.",
}
NTM_EXAMPLE = re.compile(r"ntm-(.+)\.png")


def caption_of(path: Path) -> str:
    """A sentence that says what the figure at ``path`` shows, from its file name (the name itself if unknown).

    Example:
        >>> caption_of(Path("figures/ntm-len40.png"))[:50]
        'The NTM on a sequence of length 40: its inputs, it'
    """
    if path.name in CAPTIONS:
        return CAPTIONS[path.name]
    if match := NTM_EXAMPLE.fullmatch(path.name):
        what = "an example from its training range" if match[1] == "example" else f"a sequence of {in_words(match[1])}"
        return (
            f"The NTM on {what}: its inputs, its outputs under the targets, where its heads write and read at "
            "each step, and the memory at the end."
        )
    return path.name


def figure(path: Path, page_dir: Path, caption: str | None = None) -> str:
    """An ``<img>`` of ``path`` linked relative to the page's directory, captioned by ``caption`` or
    :func:`caption_of` with the file's name."""
    src = Path(os.path.relpath(path, page_dir)).as_posix()
    text = html.escape(caption or caption_of(path))
    name = f" <span class='muted'>({html.escape(path.name)})</span>" if caption is None and text != path.name else ""
    return (
        f'<figure><img src="{html.escape(src)}" alt="{text}" loading="lazy">'
        f"<figcaption>{text}{name}</figcaption></figure>"
    )


def page(title: str, body: Sequence[str]) -> str:
    """A whole HTML page: no script, no external resource."""
    head = f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
    return "\n".join([head, f"<style>{STYLE}</style></head><body>", *body, "</body></html>\n"])


# The run record's keys (``run.json``) as the page names them.
RUN_FIELDS = {
    "seconds": "wall time (s)",
    "cpu_seconds": "CPU time (s, every thread)",
    "parts": "parts (a resumed run adds one)",
    "threads": "torch threads",
}


def write_report(run_dir: str | Path, out: str | Path | None = None, figures_note: str | None = None) -> Path:
    """Write the run's page: how it was made and how far it got, final metrics, every curve, the figures,
    the config. It goes to ``RUN/report.html`` with ``RUN/curves.png``, or with ``out`` to
    ``OUT/report.html`` and ``OUT/curves.png`` (the figures stay in the run, linked by relative path).

    Metrics are named in words with their units; one logged once is a table row rather than a curve.
    Without figures in ``RUN/figures/`` the page says so, with ``figures_note`` (why none were drawn)
    or how to draw them (``foveal report`` draws them itself where it can)."""
    from foveal.train.checkpoint import write_text_atomic

    run = RunDir(run_dir)
    if not run.path.is_dir():
        raise FovealError(f"run directory {str(run.path)!r} does not exist")
    if not (run.config.is_file() or run.metrics.is_file()):
        raise FovealError(f"{str(run.path)!r} is not a run directory: it has no config.json or metrics.jsonl")
    page_dir = run.path if out is None else Path(out)
    record = json.loads(run.config.read_text()) if run.config.is_file() else {}
    info = json.loads(run.info.read_text()) if run.info.is_file() else {}
    events = read_events(run.path)
    progress = run_progress(run.path, events)
    title = f"{record.get('recipe', run.path.name)} ({record.get('preset') or 'default'})"
    body = [f"<h1>foveal run: {html.escape(title)}</h1>"]
    if not progress.finished:
        hint = f"foveal train {record.get('recipe', 'RECIPE')} --out RUN --resume" if progress.step else "foveal train"
        body.append(
            f"<p class='warn'><strong>Unfinished run</strong>: {html.escape(progress.describe())}. The curves and "
            f"metrics below are those of the last logged step; <code>{html.escape(hint)}</code> continues it.</p>"
        )
    body += [
        "<h2>Run</h2>",
        table({"status": progress.describe(), **{RUN_FIELDS.get(k, k): v for k, v in info.items()}}),
    ]
    metrics = final_metrics(run.path, events)
    if metrics:
        body += ["<h2>Final metrics</h2>" if progress.finished else "<h2>Last metrics</h2>", metrics_table(metrics)]
    _, once = curve_names(events)
    # an evaluation logged once, at the end, is already a row of the metrics above
    once = [n for n in once if n not in metrics or _points(events, "train", n)]
    curves = plot_curves(events, page_dir / run.curves.name, progress)
    if curves is not None:
        caption = "every metric logged more than once against the step: training windows (line) and evaluations "
        caption += "(dashed, dots)" + ("; the metrics logged once are in the tables" if once or metrics else "")
        body += ["<h2>Curves</h2>", figure(curves, page_dir, caption)]
    if once:
        body += ["<h2>Logged once</h2>", once_table(events, once)]
    figures = sorted(p for p in run.figures.glob("**/*") if p.suffix.lower() in IMAGE_SUFFIXES)
    body.append("<h2>Figures</h2>")
    if figures:
        body += [figure(p, page_dir) for p in figures]
    else:
        why = f"{figures_note}. " if figures_note else ""
        body.append(
            f"<p class='note'>No figures yet. {html.escape(why)}<code>foveal show RUN</code> draws them into "
            "<code>RUN/figures/</code>, and <code>foveal report RUN</code> then shows them here.</p>"
        )
    if record:
        body += ["<h2>Config</h2>", table(flatten(record.get("config", {})))]
    return write_text_atomic(page(f"foveal: {title}", body), page_dir / run.report.name)


@dataclass
class GallerySection:
    """One model on the gallery page."""

    title: str
    text: str  # one line: what the pictures show
    metrics: dict[str, Any]
    figures: list[Path]
    details: dict[str, Any] = field(default_factory=dict)  # how the model was made


def write_gallery(path: Path, title: str, intro: str, sections: Sequence[GallerySection]) -> Path:
    """Write a page with one section per model: what it shows, its metrics, its pictures."""
    from foveal.train.checkpoint import write_text_atomic

    body = [f"<h1>{html.escape(title)}</h1>", f"<p>{html.escape(intro)}</p>"]
    body += ["<ul>", *(f'<li><a href="#s{i}">{html.escape(s.title)}</a></li>' for i, s in enumerate(sections)), "</ul>"]
    for i, section in enumerate(sections):
        body += [f'<section id="s{i}"><h2>{html.escape(section.title)}</h2><p>{html.escape(section.text)}</p>']
        if section.metrics:
            body.append(metrics_table(section.metrics))
        body += [figure(p, path.parent) for p in section.figures]
        if section.details:
            body += ["<details><summary class='muted'>how it was made</summary>", table(section.details), "</details>"]
        body.append("</section>")
    return write_text_atomic(page(title, body), path)
