"""``foveal demo``: a gallery of every shipped model on held-out data, in one page.

No training and no data set: each model is loaded from the weights foveal ships (:mod:`foveal.shipped`),
its recipe's ``show`` draws where it looks on the held-out test examples shipped with it, and one
page gathers the pictures, captioned by the model's card (``shows``), with the metrics the model scored
on the whole test set when it was trained.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from foveal.errors import DataUnavailableError, FovealError
from foveal.shipped import available, card, pretrained, sample
from foveal.train import use_threads
from foveal.viz.report import GallerySection, write_gallery
from foveal.zoo import build, config


def draw_model(name: str, figures_dir: str | Path) -> list[Path]:
    """Draw shipped model ``name``'s figures into ``figures_dir``; returns their paths.

    A recipe with a gallery draws from the sample shipped with the model, so no data set is read;
    without one (or without a sample) the model's small check task is built, its recipe's data with it.

    Raises:
        DataUnavailableError: the model ships no sample and its recipe's test data are not on this machine.
    """
    from foveal.runs import get_recipe

    entry = card(name)
    recipe = get_recipe(entry.recipe)
    held_out = sample(name)
    with torch.no_grad():
        if recipe.gallery is not None and held_out:
            return list(recipe.gallery(config(name), pretrained(name), held_out, Path(figures_dir)))
        _, _, task = build(name, entry.check["sets"])
        if task.show is None:
            return []
        if task.eval_set is None:
            raise FovealError(f"{name}: its recipe draws figures from a test set, but its check task has none")
        return list(task.show(task.model, task.eval_set, Path(figures_dir)))


def run_demo(
    out: str | Path = "runs/demo", names: list[str] | None = None, threads: int = 1, page: bool = True
) -> dict[str, Any]:
    """Draw every shipped model (or ``names``) into ``out/figures/NAME/`` and write ``out/index.html``.

    Each model draws from the test examples shipped with it (:func:`draw_model`); one that could not
    (no sample, and its data set not on this machine) is named on the page with what to install.

    Returns ``{"page", "figures", "seconds", "skipped"}`` (``seconds`` per model and in all; ``page`` None
    when ``page=False``; ``skipped``: model -> why).
    """
    use_threads(threads)
    out = Path(out)
    start = time.monotonic()
    sections, figures, seconds, skipped = [], {}, {}, {}
    for name in names or available():
        began = time.monotonic()
        entry = card(name)
        try:
            paths = draw_model(name, out / "figures" / name)
        except DataUnavailableError as e:
            skipped[name] = str(e)
            continue
        if not paths:
            continue
        figures[name] = paths
        seconds[name] = round(time.monotonic() - began, 1)
        details = {
            "command": entry.command,
            "training time (CPU s, one thread)": entry.seconds,
            "commit": entry.commit,
            "torch": entry.torch,
        }
        sections.append(GallerySection(name, entry.shows, entry.metrics, paths, details))
    intro = (
        "Every model foveal ships, on test data it never trained on. Each was trained by the recipe "
        "and command under its pictures; the numbers are its scores on the whole test set."
    )
    if skipped:  # models that miss the same data set share one message
        by_reason: dict[str, list[str]] = {}
        for name, why in skipped.items():
            by_reason.setdefault(why, []).append(name)
        intro += " Not drawn, as their test data are not on this machine: " + "; ".join(
            f"{', '.join(names)}: {why}" for why, names in by_reason.items()
        )
    written = write_gallery(out / "index.html", "foveal: where each model looks", intro, sections) if page else None
    seconds["all"] = round(time.monotonic() - start, 1)
    return {"page": written, "figures": figures, "seconds": seconds, "skipped": skipped}
