"""The pages render in a real browser: not blank, every picture found, nothing in the console."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from foveal.viz.report import (
    CAPTIONS,
    GallerySection,
    Progress,
    curve_names,
    curves_figure,
    plot_curves,
    read_events,
    run_progress,
    write_gallery,
    write_report,
)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--window-size=1100,1400",
]


def render(page: Path, tmp_path: Path) -> tuple[Path, str]:
    """Screenshot ``page`` from ``file://`` in headless Chromium; returns the PNG and the browser's log."""
    shot = tmp_path / "shot.png"
    command = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", page.as_uri()]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert shot.is_file(), result.stderr[-2000:]
    return shot, result.stderr


def is_blank(png: Path) -> bool:
    from PIL import Image, ImageStat

    return max(ImageStat.Stat(Image.open(png).convert("L")).stddev) < 5.0


def console_errors(log: str) -> list[str]:
    return [line for line in log.splitlines() if ":CONSOLE" in line]


def missing_pictures(page: Path) -> list[str]:
    """Every ``src`` of the page that names no file next to it."""
    import re

    sources = re.findall(r'src="([^"]+)"', page.read_text())
    return [src for src in sources if not (page.parent / src).is_file()]


def fake_run(root: Path) -> Path:
    """A run directory as the loop and `show` leave it, built by hand so the test needs no training."""
    from foveal.viz import pyplot

    run = root / "run"
    (run / "figures").mkdir(parents=True)
    events = [{"step": s, "time": 0.1 * s, "split": "train", "loss": 1 / s, "lr": 1e-3} for s in (10, 20, 30)]
    events.append({"step": 30, "time": 3.0, "split": "eval", "loss": 0.05, "acc": 0.9})
    (run / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (run / "config.json").write_text(json.dumps({"recipe": "toy", "preset": "quick", "config": {"seed": 0}}))
    (run / "run.json").write_text(json.dumps({"command": "foveal train toy", "seconds": 3.0, "commit": "abc1234"}))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.imshow([[0, 1], [1, 0]])
    fig.savefig(run / "figures" / "map.png")
    plt.close(fig)
    return run


def test_the_report_links_pictures_relatively_and_names_no_machine_path(tmp_path):
    run = fake_run(tmp_path)
    page = write_report(run).read_text()
    assert 'src="curves.png"' in page and 'src="figures/map.png"' in page
    assert str(tmp_path) not in page and "<script" not in page
    assert "abc1234" in page and "Final metrics" in page and "Curves" in page


def test_curves_draw_every_metric_logged_more_than_once(tmp_path):
    events = [{"step": s, "split": "train", "loss": 1.0 / s, "lr": 0.1} for s in (1, 2)]
    events.append({"step": 2, "split": "eval", "acc": 0.5})
    assert plot_curves(events, tmp_path / "c.png").stat().st_size > 1000
    assert sorted(panels(curves_figure(events))) == ["learning rate", "loss"]  # acc: one dot, so no panel
    assert curve_names(events) == (["loss", "lr"], ["acc"])
    assert plot_curves([{"step": 1, "split": "train"}], tmp_path / "none.png") is None
    assert plot_curves(events[:1], tmp_path / "once.png") is None


def panels(fig) -> dict:
    return {ax.get_title(): ax for ax in fig.axes if ax.get_title()}


def test_train_and_eval_are_told_apart_by_a_legend():
    events = [
        {"step": 10, "split": "train", "loss": 1.0},
        {"step": 10, "split": "eval", "acc": 0.4},
        {"step": 20, "split": "train", "loss": 0.5},
        {"step": 20, "split": "eval", "loss": 0.6, "acc": 0.5},
    ]
    fig = curves_figure(events)
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["train (mean of each logged window)", "eval (held-out set)"]
    train, evaluation = panels(fig)["loss"].get_lines()
    (eval_only,) = panels(fig)["accuracy (%)"].get_lines()  # a metric only evaluations log is drawn as one
    assert train.get_color() != evaluation.get_color() and train.get_linestyle() != evaluation.get_linestyle()
    assert (eval_only.get_color(), eval_only.get_marker()) == (evaluation.get_color(), evaluation.get_marker())


def test_axes_do_not_magnify_noise():
    flat = [{"step": s, "split": "eval", "acc": 0.9 + 1e-4 * (s % 2)} for s in range(1, 6)]
    moving = [{"step": s, "split": "eval", "acc": 0.1 * s} for s in range(1, 6)]
    low, high = panels(curves_figure(flat))["accuracy (%)"].get_ylim()  # drawn in percent
    assert high - low >= 0.1 * 90  # a 0.01-point wobble is a flat line, not the whole panel
    low, high = panels(curves_figure(moving))["accuracy (%)"].get_ylim()
    assert high - low < 60  # a real change fills the panel as before
    losses = [{"step": s, "split": "train", "loss": 2.0 + 1e-5 * s} for s in range(1, 6)]
    low, high = panels(curves_figure(losses))["loss"].get_ylim()  # a log axis: at least a factor 1.5
    assert high / low >= 1.5 - 1e-9


def test_an_interrupted_run_is_marked_as_such(tmp_path):
    run = fake_run(tmp_path)
    assert run_progress(run, []).describe() == "not started: no step logged"
    (run / "config.json").write_text(json.dumps({"recipe": "toy", "config": {"loop": {"steps": 100}}}))
    progress = run_progress(run, read_events(run))
    assert progress == Progress(30, 100) and not progress.finished
    fig = curves_figure(read_events(run), progress)
    assert "interrupted at step 30 of 100" in fig._suptitle.get_text()
    page = write_report(run).read_text()
    assert "Unfinished run" in page and "interrupted at step 30 of 100" in page and "Final metrics" not in page
    (run / "config.json").write_text(json.dumps({"recipe": "toy", "config": {"loop": {"steps": 30}}}))
    page = write_report(run).read_text()
    assert "Unfinished" not in page and "finished: 30 steps" in page and "Final metrics" in page


def test_metrics_are_named_in_words_with_their_units(tmp_path):
    run = fake_run(tmp_path)
    (run / "eval.json").write_text(json.dumps({"error": 20.7, "acc": 0.838, "params": 64949.0, "odd_key": 1.5}))
    page = write_report(run).read_text()
    assert "classification error <span class='muted'>error</span></th><td>20.7 %" in page  # logged in percent
    assert "accuracy <span class='muted'>acc</span></th><td>83.8 %" in page  # logged as a fraction
    assert "<td>64,949</td>" in page and "odd_key <span class='muted'>odd_key</span></th><td>1.5" in page


def test_a_metric_logged_once_is_a_table_row_not_a_panel(tmp_path):
    run = fake_run(tmp_path)
    with (run / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 30, "time": 3.0, "split": "train", "skipped": 2.0}) + "\n")
    page = write_report(run).read_text()
    section = page.split("<h2>Logged once</h2>")[1].split("<h2>")[0]
    assert "steps skipped" in section and "train at step 30: 2" in section
    assert "acc" not in section  # the final evaluation's rows are in the metrics table already
    assert set(panels(curves_figure(read_events(run)))) == {"loss", "learning rate"}


def test_figures_are_captioned_in_words(tmp_path):
    run = fake_run(tmp_path)
    (run / "figures" / "map.png").rename(run / "figures" / "attention.png")
    page = write_report(run).read_text()
    assert f"<figcaption>{CAPTIONS['attention.png']}" in page.replace("&#x27;", "'")
    assert "(attention.png)" in page


def test_a_report_without_figures_says_how_to_draw_them(tmp_path):
    run = fake_run(tmp_path)
    (run / "figures" / "map.png").unlink()
    page = write_report(run, figures_note="Its data are not on this machine").read_text()
    assert "No figures yet. Its data are not on this machine." in page and "<code>foveal show RUN</code>" in page


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_report_renders_in_a_browser(tmp_path):
    page = write_report(fake_run(tmp_path))
    shot, log = render(page, tmp_path)
    assert not is_blank(shot) and not console_errors(log), console_errors(log)


def test_every_picture_of_the_report_is_found(tmp_path):
    run = fake_run(tmp_path)
    page = write_report(run)
    assert not missing_pictures(page)
    (run / "figures" / "map.png").unlink()
    assert missing_pictures(page) == ["figures/map.png"]  # the check can fail


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_console_check_can_fail(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<html><body><p>x</p><script>undefinedFunction();</script></body></html>")
    _, log = render(page, tmp_path)
    assert console_errors(log)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_gallery_renders_in_a_browser(tmp_path):
    run = fake_run(tmp_path)
    section = GallerySection("toy", "what it shows", {"acc": 0.9}, [run / "figures" / "map.png"], {"commit": "x"})
    page = write_gallery(tmp_path / "demo" / "index.html", "gallery", "intro", [section, section])
    text = page.read_text()
    assert 'src="../run/figures/map.png"' in text and str(tmp_path) not in text
    shot, log = render(page, tmp_path)
    assert not is_blank(shot) and not console_errors(log) and not missing_pictures(page)
