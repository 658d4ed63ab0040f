"""The pages: ``RUN/report.html`` for one run, and the gallery ``foveal demo`` writes.

Pages link their pictures by relative path (``figures/...``), so a run directory can be moved,
zipped or opened from ``file://`` and the page still shows everything; no path of the machine that
made it appears on the page.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foveal.specs import flatten
from foveal.train.run_dir import RunDir
from foveal.viz._mpl import pyplot

IMAGE_SUFFIXES = (".png", ".gif", ".jpg", ".jpeg")
NOT_METRICS = {"step", "time", "split"}

STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}
th{background:#f5f5f5;font-weight:600}figure{display:inline-block;margin:0 1em 1em 0;vertical-align:top}
img{max-width:100%;border:1px solid #eee}figcaption{font-size:.85em;color:#555}
.muted{color:#666}section{margin-bottom:2em}
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


def plot_curves(events: Sequence[dict[str, Any]], path: Path) -> Path | None:
    """Every logged metric against the step, one panel each (training line, evaluation dots); None if none."""
    names = sorted({k for e in events for k, v in e.items() if k not in NOT_METRICS and isinstance(v, int | float)})
    if not names:
        return None
    plt = pyplot()
    columns = min(3, len(names))
    rows = -(-len(names) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4 * columns, 2.6 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        for split, style in (("train", "-"), ("eval", "o-")):
            points = [(e["step"], e[name]) for e in events if e.get("split") == split and name in e]
            if points:
                ax.plot(*zip(*points, strict=True), style, label=split, markersize=3)
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
        if name in ("loss", "lr") or name.startswith(("nll", "neg_elbo")):
            ax.set_yscale("log") if all(v > 0 for line in ax.get_lines() for v in line.get_ydata()) else None
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("step", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(json.dumps(value) if isinstance(value, list | dict | bool) or value is None else str(value))


def table(rows: dict[str, Any]) -> str:
    """A two-column HTML table of names and values."""
    body = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{_cell(v)}</td></tr>" for k, v in rows.items())
    return f"<table>{body}</table>"


def figure(path: Path, page_dir: Path, caption: str | None = None) -> str:
    """An ``<img>`` of ``path`` linked relative to the page's directory."""
    src = Path(os.path.relpath(path, page_dir)).as_posix()
    text = html.escape(caption or path.name)
    return f'<figure><img src="{html.escape(src)}" alt="{text}" loading="lazy"><figcaption>{text}</figcaption></figure>'


def page(title: str, body: Sequence[str]) -> str:
    """A whole HTML page: no script, no external resource."""
    head = f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
    return "\n".join([head, f"<style>{STYLE}</style></head><body>", *body, "</body></html>\n"])


def write_report(run_dir: str | Path) -> Path:
    """Write ``RUN/report.html``: run details, final metrics, every curve, the figures, the config."""
    from foveal.train.checkpoint import write_text_atomic

    run = RunDir(run_dir)
    record = json.loads(run.config.read_text()) if run.config.is_file() else {}
    info = json.loads(run.info.read_text()) if run.info.is_file() else {}
    events = read_events(run.path)
    title = f"{record.get('recipe', run.path.name)} ({record.get('preset') or 'default'})"
    body = [f"<h1>foveal run: {html.escape(title)}</h1>"]
    if info:
        body += ["<h2>Run</h2>", table(info)]
    metrics = final_metrics(run.path, events)
    if metrics:
        body += ["<h2>Final metrics</h2>", table(metrics)]
    curves = plot_curves(events, run.curves)
    if curves is not None:
        body += ["<h2>Curves</h2>", figure(curves, run.path, "every logged metric against the step")]
    figures = sorted(p for p in run.figures.glob("**/*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if figures:
        body += ["<h2>Figures</h2>", *(figure(p, run.path) for p in figures)]
    if record:
        body += ["<h2>Config</h2>", table(flatten(record.get("config", {})))]
    return write_text_atomic(page(f"foveal: {title}", body), run.report)


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
            body.append(table(section.metrics))
        body += [figure(p, path.parent) for p in section.figures]
        if section.details:
            body += ["<details><summary class='muted'>how it was made</summary>", table(section.details), "</details>"]
        body.append("</section>")
    return write_text_atomic(page(title, body), path)
