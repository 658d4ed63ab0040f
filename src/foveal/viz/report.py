"""``RUN/report.html``: one self-contained page per run (config, metrics, loss curve, figures)."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from foveal.train.run_dir import RunDir
from foveal.viz._mpl import pyplot

IMAGE_TYPES = {".png": "image/png", ".gif": "image/gif", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}


def _events(run_dir: Path) -> list[dict[str, Any]]:
    path = RunDir(run_dir).metrics
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _final_metrics(run_dir: Path, events: list[dict[str, Any]]) -> dict[str, Any]:
    path = RunDir(run_dir).eval
    if path.is_file():
        return json.loads(path.read_text())
    evals = [e for e in events if e.get("split") == "eval"]
    if evals:
        return {k: v for k, v in evals[-1].items() if k not in ("step", "time", "split")}
    return {}


def plot_curves(events: list[dict[str, Any]], path: Path) -> Path | None:
    """Training loss (and eval loss, if logged) against step, as a PNG; None if there is no loss."""
    train = [(e["step"], e["loss"]) for e in events if e.get("split") == "train" and "loss" in e]
    if not train:
        return None
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(*zip(*train, strict=True), label="train")
    evals = [(e["step"], e["loss"]) for e in events if e.get("split") == "eval" and "loss" in e]
    if evals:
        ax.plot(*zip(*evals, strict=True), "o-", label="eval")
    ax.set(xlabel="step", ylabel="loss", title="loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    name = html.escape(path.name)
    return (
        f'<figure><img src="data:{IMAGE_TYPES[path.suffix.lower()]};base64,{data}" alt="{name}">'
        f"<figcaption>{name}</figcaption></figure>"
    )


def _table(rows: dict[str, Any]) -> str:
    def cell(v: Any) -> str:
        return (
            f"{v:.4g}" if isinstance(v, float) else html.escape(json.dumps(v) if isinstance(v, list | dict) else str(v))
        )

    body = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{cell(v)}</td></tr>" for k, v in rows.items())
    return f"<table>{body}</table>"


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def write_report(run_dir: str | Path) -> Path:
    """Write ``RUN/report.html`` (images embedded, so the page can be moved or mailed) and return its path."""
    run_dir = Path(run_dir)
    run = RunDir(run_dir)
    record = json.loads(run.config.read_text()) if run.config.is_file() else {}
    events = _events(run_dir)
    title = f"{record.get('recipe', run_dir.name)} ({record.get('preset') or 'default'})"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>foveal: {html.escape(title)}</title><style>",
        "body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em}",
        "table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}",
        "figure{display:inline-block;margin:0 1em 1em 0}img{max-width:100%}",
        "</style></head><body>",
        f"<h1>foveal run: {html.escape(title)}</h1><p>{html.escape(str(run_dir.resolve()))}</p>",
    ]
    metrics = _final_metrics(run_dir, events)
    if metrics:
        parts += ["<h2>Final metrics</h2>", _table(metrics)]
    curve = plot_curves(events, run.loss_curve)
    if curve is not None:
        parts += ["<h2>Loss</h2>", _img(curve)]
    figures = sorted(p for p in run.figures.glob("**/*") if p.suffix.lower() in IMAGE_TYPES)
    if figures:
        parts += ["<h2>Figures</h2>", *(_img(p) for p in figures)]
    if record:
        parts += ["<h2>Config</h2>", _table(_flat(record.get("config", {})))]
    parts.append("</body></html>\n")
    path = run.report
    path.write_text("\n".join(parts))
    return path
