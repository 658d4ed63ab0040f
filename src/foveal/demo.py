"""``foveal demo``: a gallery of every shipped model on held-out data, in one page.

No training: each model is loaded from the weights foveal ships (:mod:`foveal.zoo`), its recipe's
``show`` draws where it looks on test data, and one page gathers the pictures with the metrics
the model scored on the whole test set when it was trained.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from foveal.errors import DataUnavailableError
from foveal.viz.report import GallerySection, write_gallery
from foveal.zoo import available, build, card

WHAT_IT_SHOWS = {
    "easy-vqa": "One attention hop answering questions about one shape: where it looks for each question, "
    "the object's outline and the share of attention inside it.",
    "shapes-vqa": "Attention over a picture of several shapes for questions about their relations: "
    "where each hop looks for each kind of question.",
    "stn": "A spatial transformer network on distorted Fashion-MNIST: the box the localisation network "
    "chooses in each input and the warped image the classifier sees.",
    "ram": "The recurrent attention model: the sequence of glimpses it takes before it classifies.",
    "draw": "DRAW writing images on its canvas step by step, with its read and write windows, and images "
    "it generates from noise.",
    "ntm-copy": "A Neural Turing Machine copying bit sequences: inputs, outputs, where its heads write "
    "and read at each step, and the memory at the end, on lengths it was trained on and beyond.",
}


def run_demo(
    out: str | Path = "runs/demo", names: list[str] | None = None, threads: int = 1, page: bool = True
) -> dict[str, Any]:
    """Draw every shipped model (or ``names``) into ``out/figures/NAME/`` and write ``out/index.html``.

    A model whose test data are not on this machine (Fashion-MNIST not installed, say) is left out of the
    figures and named on the page with what to install, and the others are drawn.

    Returns ``{"page", "figures", "seconds", "skipped"}`` (``seconds`` per model and in all; ``page`` None
    when ``page=False``; ``skipped``: model -> why).
    """
    torch.set_num_threads(threads)
    out = Path(out)
    start = time.monotonic()
    sections, figures, seconds, skipped = [], {}, {}, {}
    shipped = available()  # the page opens with the order of WHAT_IT_SHOWS: VQA attention first
    ordered = [n for n in WHAT_IT_SHOWS if n in shipped] + [n for n in shipped if n not in WHAT_IT_SHOWS]
    for name in names or ordered:
        began = time.monotonic()
        entry = card(name)
        try:
            _, _, task = build(name, entry.check["sets"])
        except DataUnavailableError as e:
            skipped[name] = str(e)
            continue
        if task.show is None or task.eval_set is None:
            continue
        with torch.no_grad():
            paths = list(task.show(task.model, task.eval_set, out / "figures" / name))
        figures[name] = paths
        seconds[name] = round(time.monotonic() - began, 1)
        details = {
            "command": entry.command,
            "training time (s, one thread)": entry.seconds,
            "commit": entry.commit,
            "torch": entry.torch,
        }
        text = WHAT_IT_SHOWS.get(name, f"The {entry.recipe} recipe's figures.")
        sections.append(GallerySection(name, text, entry.metrics, paths, details))
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
