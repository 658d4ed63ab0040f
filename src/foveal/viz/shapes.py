"""Pictures of the ``shapes`` questions: the rows of :func:`foveal.viz.vqa_family.vqa_family_figure`,
and the two-hop figure, every hop's map with the question's three objects outlined (:func:`shapes_figure`
draws the one that fits the question set)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from foveal.attention import box_weights
from foveal.data.by_image import denormalize
from foveal.data.shapes import COLOURS, FAMILIES, OBJECT_ROLES, ShapesVQA
from foveal.data.shapes.by_image import ShapesImageBatch
from foveal.models.vqa import VQA, VQAOutput
from foveal.viz._mpl import FIGURE_DPI, FONT, chars_across, pyplot, wrap
from foveal.viz.heatmap import grey_picture, map_legend, weight_colorbar
from foveal.viz.vqa_family import QuestionPanel, overlay_on_extent, vqa_family_figure

POINTING = FAMILIES.index("pointing")
ROLE_STYLE = {"named": ("black", ":"), "first": ("black", "--"), "second": ("black", "-")}


def object_cells(model: VQA, data: ShapesVQA, ids: Tensor) -> Tensor:
    """Which of the model's grid cells each question's X, first and answer objects touch (their boxes
    overlap the cell): where the two-hop figure, and the evaluation, read each hop's mass.

    Shape:
        - ids: int64 ``(Q,)`` question indices into ``data``
        - output: float ``(Q, 3, N)``, 1 where the object's box overlaps cell ``i``, in :data:`OBJECT_ROLES` order
    """
    pool = box_weights(data.role_boxes(ids), (model.covered, model.covered), (model.grid, model.grid))
    return (pool > 0).float()


def shapes_figure(
    model: VQA,
    data: ShapesVQA,
    picks: Sequence[int],
    batch: ShapesImageBatch,
    out: VQAOutput,
    prediction: Tensor,
    figures_dir: Path,
) -> Path:
    """``vqa-family.png`` (:func:`question_panels`), or on the two-hop set ``shapes-two-hop.png``
    (:func:`two_hop_figure`), of the questions ``picks``: ``batch`` holds them, a picture per question
    (:func:`foveal.data.shapes.by_image.question_batch`), and ``out`` and ``prediction`` are the model's.

    Shape:
        - prediction: int64 ``(Q,)``, the answer, or the chosen candidate of a pointing question
    """
    if data.question_set.name == "two-hop":  # no question points, so the answer is the target
        said = [
            data.answers[int(p)] + ("" if p == r else " (WRONG)") for p, r in zip(prediction, batch.answer, strict=True)
        ]
        maps = None if out.attention is None else out.attention.cpu()
        return two_hop_figure(model, data, list(picks), said, maps, figures_dir / "shapes-two-hop.png")
    panels = question_panels(data, picks, batch, out, prediction)
    path = figures_dir / "vqa-family.png"
    return vqa_family_figure(panels, path, grid=(model.grid, model.grid), extent=model.covered, head=model.spec.head)


def question_panels(
    data: ShapesVQA, picks: Sequence[int], batch: ShapesImageBatch, out: VQAOutput, prediction: Tensor
) -> list[QuestionPanel]:
    """One :class:`QuestionPanel` per question ``picks[n]``, drawn from row ``n`` of ``batch`` (a picture
    per question, :func:`foveal.data.shapes.by_image.question_batch`) and of the model's ``out``.

    Shape:
        - prediction: int64 ``(Q,)``, the answer, or the chosen candidate of a pointing question
    """
    panels = []
    for n, q in enumerate(picks):
        pointing = int(batch.family[n]) == POINTING
        said = f"box {int(prediction[n])}" if pointing else data.answers[int(prediction[n])]
        right = int(batch.correct[n]) if pointing else int(batch.answer[n])
        mark = "ok" if int(prediction[n]) == right else "WRONG"
        words = [data.vocab[int(w)] for w in batch.question[n, : int(batch.length[n])]]
        objects, object_names = data.objects_of(q)
        panels.append(
            QuestionPanel(
                image=denormalize(batch.image[n]),
                title=f"{data.question_text(q)}\npred: {said} | truth: {data.answer_text(q)} ({mark})",
                maps=None if out.attention is None else out.attention[n].cpu(),
                words=words,
                word_weights=None if out.word_weights is None else out.word_weights[n, :, : len(words)].cpu(),
                channel_weights=None if out.channel_weights is None else out.channel_weights[n].cpu(),
                boxes=batch.boxes[n] if pointing else None,
                chosen=int(prediction[n]) if pointing else None,
                correct=int(batch.correct[n]) if pointing else None,
                objects=objects,
                object_names=object_names,
            )
        )
    return panels


def two_hop_figure(
    model: VQA, data: ShapesVQA, picks: list[int], said: list[str], maps: Tensor | None, path: Path
) -> Path:
    """One row per question: the picture, then every hop's map, each with the X object (dotted), the
    object found first (dashed) and the answer's object (solid) outlined, and under it the map's mass on
    each (the cells their boxes touch, :func:`object_cells`, as the evaluation scores it); a question's
    maps share one scale, its colour bar.

    Args:
        said: the model's answer to each question, as the title gives it.

    Shape:
        - maps: ``(len(picks), hops, N)`` or None
    """
    from matplotlib.patches import Rectangle

    plt = pyplot()
    hops = 0 if maps is None else maps.shape[1]
    width = 2.3 * (1 + hops) + 0.5
    fig, axes = plt.subplots(
        len(picks),
        1 + hops,
        figsize=(width, 2.9 * len(picks) + 0.8),
        squeeze=False,
        layout="constrained",
    )
    cells = object_cells(model, data, torch.tensor(picks))  # (Q, 3, N)
    arrays = data.arrays
    all_boxes = data.role_boxes(torch.tensor(picks))
    grid, uniform = (model.grid, model.grid), 1.0 / model.grid**2
    for row, q in enumerate(picks):
        picture = torch.from_numpy(arrays.images[arrays.image[q]]).permute(2, 0, 1).float() / 255
        objects = (arrays.colour[q], arrays.first[q], arrays.target[q])
        vmax = None if maps is None else max(float(maps[row].max()), uniform)  # one scale for the question's hops
        for col, ax in enumerate(axes[row]):
            if col == 0:
                ax.imshow(picture.permute(1, 2, 0).numpy())
                names = ", ".join(f"{role} {COLOURS[k]}" for role, k in zip(OBJECT_ROLES, objects, strict=True))
                title = f"{data.question_text(q)}\npred: {said[row]} | truth: {data.answer_text(q)}\n{names}"
                ax.set_title(wrap(title, chars_across(2.3)), fontsize=FONT, loc="left")
            elif maps is not None:  # a column past the picture is a hop, so there are maps
                ax.imshow(overlay_on_extent(picture, maps[row, col - 1], grid, model.covered, vmax=vmax))
                on = (maps[row, col - 1] * cells[row]).sum(-1).tolist()
                masses = "\n".join(f"{m:.2f} on {r}" for r, m in zip(OBJECT_ROLES, on, strict=True))
                ax.set_title(f"hop {col}", fontsize=FONT)
                ax.set_xlabel(masses, fontsize=FONT)
            for role, (x0, y0, x1, y1) in zip(OBJECT_ROLES, all_boxes[row].tolist(), strict=True):
                colour, style = ROLE_STYLE[role]
                # pixel (x, y) is centred at (x, y) in imshow's coordinates, so a half-open box starts at x0 - 0.5
                ax.add_patch(Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False, ec=colour, lw=1, ls=style))
            ax.set_xticks([])
            ax.set_yticks([])
            if col == 0:
                ax.axis("off")
        if maps is not None and vmax is not None:
            background = float(np.median(grey_picture(picture[:, : model.covered, : model.covered])))
            weight_colorbar(fig, list(axes[row, 1:]), vmax, background=background, uniform=uniform)
    legend = [
        f"head: {model.spec.head}, {hops} hop(s); boxes: the named (X) object dotted, the one found first dashed, "
        "the second (the answer's) solid"
    ]
    if maps is not None:
        legend.append(map_legend())
    fig.suptitle(wrap("\n".join(legend), chars_across(width)), fontsize=FONT, x=0.01, ha="left")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=FIGURE_DPI)
    plt.close(fig)
    return path
