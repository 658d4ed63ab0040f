"""``shapes-vqa``: the VQA model with any seed 002 head on the relational ``shapes`` set (Sort-of-CLEVR).

``foveal train shapes-vqa --preset quick`` trains the default model (residual self-attention over a
9 x 9 grid of regions with coordinate features, then one hop with the dot score);
``--set model.head=transformer``, ``--set model.hops=2``, ``--set model.grid_coords=false`` swap the
parts (every head name in :data:`foveal.models.vqa.VQA_HEADS`; every option of
:class:`foveal.models.vqa.VQASpec`). Pointing questions are answered by scoring their 4 candidate
boxes (a cross-entropy over the candidates), by default with the last hop's mass in each box added
(``model.point_by_attention``); the others by the answer classifier. ``eval`` reports accuracy
per family (non-relational, relational, pointing) and per template, and the parameter count;
``show`` draws, per question, every hop's heatmap, the word weights, the channel weights of channel
attention and the chosen box of a pointing question.

``--set questions=two-hop`` trains and evaluates on the two-hop question set instead (its own
templates, vocabulary and answers; see :mod:`foveal.data.shapes`): ``eval`` then also reports where
each hop looks, ``mass_hopK_{named,first,second}``, the mass of hop ``K``'s map on the cells that the
X object's, the first object's and the answer object's boxes touch, over the two-hop questions, and
``mass_uniform_{named,first,second}``, the same for a uniform map; ``mass_one_hop_*``, the same over
the one-hop questions. ``show`` writes ``shapes-two-hop.png``: per template a question with every
hop's map and the three objects outlined.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

from foveal.data.easy_vqa import denormalize, normalize
from foveal.data.shapes import (
    FAMILIES,
    IMAGE_SIZE,
    QUESTION_SETS,
    ShapesArrays,
    ShapesVQA,
    load_shapes,
    question_set,
)
from foveal.models.vqa import VQA, VQASpec
from foveal.recipes.base import LoopConfig, Recipe, RunConfig, Task
from foveal.registry import RECIPES
from foveal.viz.vqa_family import OBJECT_ROLES, QuestionPanel, object_cells, two_hop_figure, vqa_family_figure

POINTING = FAMILIES.index("pointing")  # the two-hop set has 2 families, so none of its questions points
FAMILY_KEYS = ("non_relational", "relational", "pointing")  # metric-name forms of FAMILIES


def _shapes_model() -> VQASpec:
    return VQASpec(
        # Residual self-attention over the regions, then dot-score hops: 95.1% relational after the full
        # preset, where stacked-dot alone reached 91.9% (docs/vqa.md). One hop: two hops ended behind on
        # relational questions (docs/studies/vqa-shapes-hops.md).
        head="context-self",
        hops=1,
        grid_coords=True,  # relations need positions
        k_dim=32,
        # pointing answers also score where the last hop looked, which trains the attention: without it
        # no head found the named object (docs/studies/vqa-shapes-attention.md)
        point_by_attention=True,
        channels=(24, 32, 32, 32),
        stem_stride=2,  # 75 px -> 38 -> pool 19 -> pool 9: a 9 x 9 grid of 8 px cells
        grid=9,
        mlp_hidden=128,
        image_size=IMAGE_SIZE,
        pointing=True,  # pointing questions score their candidate boxes
    )


@dataclass
class ShapesVQAConfig(RunConfig):
    model: VQASpec = field(default_factory=_shapes_model)
    n_images: int = 10_000  # training pictures (the data set's default)
    questions_per_image: int = 20
    test_images: int = 0  # pictures in the test split (0 = the data set's default, 1,000)
    eval_images: int = 1_000  # test pictures to evaluate on
    data_seed: int = 0
    # "single": the 9 templates (shape, position, closest/furthest, count, pointing); "two-hop": shape or colour
    # of the object closest to / furthest from the object closest to / furthest from X, with one-hop controls
    questions: str = "single"
    cache_dir: str = ""  # "" = $FOVEAL_CACHE or ~/.cache/foveal
    show_per_template: int = 1  # questions per template in the figure
    loop: LoopConfig = field(
        default_factory=lambda: LoopConfig(
            steps=6000,
            batch_size=32,  # pictures, each with all its questions (640 questions)
            optimizer="adamw",
            lr=2e-3,
            weight_decay=1e-4,
            schedule="cosine",
            warmup_steps=200,
            clip_norm=5.0,
            eval_every=1000,
            ckpt_every=500,
            # 1.5x per step compiled (1.9x at the two-hop preset's sizes), after a first compile of about a
            # minute (seconds from inductor's cache): benchmarks/compile.py. The quick preset stays eager.
            compile=True,
        )
    )


class ShapesImageBatch(NamedTuple):
    """Questions grouped by picture: the CNN runs once per picture.

    Shape:
        - image: float ``(I, 3, 75, 75)`` in [-1, 1]
        - question: int64 ``(Q, L)``; length, answer, family, template, correct: int64 ``(Q,)``
        - boxes: float ``(Q, 4, 4)``; image_index: int64 ``(Q,)``, question ``q`` is about ``image[image_index[q]]``
    """

    image: Tensor
    question: Tensor
    length: Tensor
    answer: Tensor
    family: Tensor
    template: Tensor
    correct: Tensor
    boxes: Tensor
    image_index: Tensor


class ShapesByImage(Dataset):
    """The pictures of a :class:`foveal.data.shapes.ShapesVQA` split, each with all its questions.

    Args:
        questions: the question-level data set.
        limit: keep the first ``limit`` pictures (None = all).
    """

    def __init__(self, questions: ShapesVQA, limit: int | None = None) -> None:
        self.questions = questions
        order = torch.argsort(questions.image_index, stable=True)
        counts = torch.bincount(questions.image_index, minlength=len(questions.images))
        self.order, self.starts = order, torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)])
        self.count = len(questions.images) if limit is None else min(limit, len(questions.images))

    def __len__(self) -> int:
        return self.count

    def question_ids(self, i: int) -> Tensor:
        """The question indices (into :attr:`questions`) of picture ``i``."""
        return self.order[self.starts[i] : self.starts[i + 1]]

    def __getitem__(self, i: int) -> ShapesImageBatch:
        q, data = self.question_ids(i), self.questions
        return ShapesImageBatch(
            normalize(data.images[i]).unsqueeze(0),
            data.questions[q],
            data.lengths[q],
            data.answer_ids[q],
            data.family_ids[q],
            data.template_ids[q],
            data.correct[q],
            data.boxes[q],
            torch.zeros(len(q), dtype=torch.long),
        )


def collate_by_image(items: list[ShapesImageBatch]) -> ShapesImageBatch:
    """Concatenate pictures and questions, renumbering each question's ``image_index``."""
    offsets = torch.tensor([0, *[len(item.image) for item in items]]).cumsum(0)
    index = torch.cat([item.image_index + offsets[n] for n, item in enumerate(items)])
    fields = [torch.cat(parts) for parts in zip(*(item[:-1] for item in items), strict=True)]
    return ShapesImageBatch(*fields, index)


def build_model(config: ShapesVQAConfig) -> VQA:
    if config.model.image_size != IMAGE_SIZE or not config.model.pointing:
        raise ValueError(f"shapes-vqa needs model.image_size={IMAGE_SIZE} (its pictures) and model.pointing=true")
    if config.questions not in QUESTION_SETS:
        raise ValueError(f"questions must be one of {', '.join(QUESTION_SETS)}, got {config.questions!r}")
    qs = question_set(config.questions)
    return VQA(len(qs.vocab), len(qs.answers), config.model)


def predict(model: nn.Module, batch: ShapesImageBatch):
    """Run the model; returns its output and each question's per-question loss and prediction.

    A pointing question's loss is the cross-entropy over its candidates and its prediction the index
    of the best candidate; any other question's are over the answers.
    """
    out = model(batch.image, batch.question, batch.length, batch.image_index, batch.boxes)
    pointing = batch.family == POINTING
    answer_loss = F.cross_entropy(out.logits, batch.answer.clamp_min(0), reduction="none")
    box_loss = F.cross_entropy(out.candidate_logits, batch.correct.clamp_min(0), reduction="none")
    losses = torch.where(pointing, box_loss, answer_loss)
    prediction = torch.where(pointing, out.candidate_logits.argmax(-1), out.logits.argmax(-1))
    return out, losses, prediction


def target(batch: ShapesImageBatch) -> Tensor:
    """What a right prediction is: the answer, or the correct candidate of a pointing question."""
    return torch.where(batch.family == POINTING, batch.correct, batch.answer)


def loss(model: nn.Module, batch: ShapesImageBatch) -> tuple[Tensor, dict[str, float]]:
    _, losses, prediction = predict(model, batch)
    return losses.mean(), {"acc": (prediction == target(batch)).float().mean().item()}


def evaluate(model: nn.Module, dataset: ShapesByImage, batch_size: int = 50) -> dict[str, float]:
    """Accuracy overall, per family (``acc_non_relational``, ``acc_relational``, ``acc_pointing``; on the
    two-hop set ``acc_one_hop``, ``acc_two_hop``) and per template (``acc_template_NAME``); ``params``, the
    number of trainable parameters. On the two-hop set also ``mass_hopK_ROLE`` and ``mass_uniform_ROLE``
    (see the module docstring), averaged over the two-hop questions, and ``mass_one_hop_hopK_ROLE`` and
    ``mass_one_hop_uniform_ROLE``, the same over the one-hop questions (their first object is X)."""
    device = next(model.parameters()).device
    data = dataset.questions
    templates = data.templates
    two_hop = data.question_set.name == "two-hop"
    correct, count = torch.zeros(len(templates)), torch.zeros(len(templates))
    families = len(data.families)
    mass, uniform, counted = None, torch.zeros(families, len(OBJECT_ROLES)), torch.zeros(families)
    for b, batch in enumerate(DataLoader(dataset, batch_size=batch_size, collate_fn=collate_by_image)):
        batch = ShapesImageBatch(*(part.to(device) for part in batch))
        out, _, prediction = predict(model, batch)
        right = (prediction == target(batch)).float().cpu()
        correct.index_add_(0, batch.template.cpu(), right)
        count.index_add_(0, batch.template.cpu(), torch.ones_like(right))
        if two_hop and out.attention is not None:
            # the loader keeps picture order, so the batch's questions are its pictures' questions in turn
            pictures = range(b * batch_size, min((b + 1) * batch_size, len(dataset)))
            ids = torch.cat([dataset.question_ids(i) for i in pictures])
            family = batch.family.cpu()
            cells = object_cells(model, data, ids)  # (q, 3, N)
            maps = out.attention.float().cpu()  # (q, hops, N)
            on = torch.einsum("qkn,qrn->qkr", maps, cells)  # (q, hops, 3)
            summed = torch.zeros(families, *on.shape[1:]).index_add_(0, family, on)
            mass = summed if mass is None else mass + summed
            uniform.index_add_(0, family, cells.mean(-1))
            counted += torch.bincount(family, minlength=families).float()
    metrics = {"acc": (correct.sum() / count.sum()).item()}
    family_of = torch.from_numpy(data.question_set.template_family)
    for f, name in enumerate(data.families):
        if count[family_of == f].sum():
            metrics[f"acc_{name.replace('-', '_')}"] = (
                correct[family_of == f].sum() / count[family_of == f].sum()
            ).item()
    metrics |= {f"acc_template_{t.name}": (correct[i] / count[i]).item() for i, t in enumerate(templates) if count[i]}
    if mass is not None:
        for f, name in enumerate(data.families):
            if not counted[f]:
                continue
            prefix = "mass_" if name == "two-hop" else f"mass_{name.replace('-', '_')}_"
            for k in range(mass.shape[1]):
                metrics |= {
                    f"{prefix}hop{k + 1}_{role}": (mass[f, k, r] / counted[f]).item()
                    for r, role in enumerate(OBJECT_ROLES)
                }
            metrics |= {
                f"{prefix}uniform_{role}": (uniform[f, r] / counted[f]).item() for r, role in enumerate(OBJECT_ROLES)
            }
    metrics["params"] = float(sum(p.numel() for p in model.parameters() if p.requires_grad))
    return metrics


def show(model: VQA, dataset: ShapesByImage, figures_dir: Path, per_template: int = 1) -> list[Path]:
    """``vqa-family.png``: per question, every hop's heatmap with the word weights under it, the channel
    weights of channel attention, and for pointing questions the candidates with the chosen box. On the
    two-hop set, ``shapes-two-hop.png`` (see :func:`two_hop_figure`) instead."""
    device = next(model.parameters()).device
    data = dataset.questions
    two_hop = data.question_set.name == "two-hop"
    picks: list[int] = []
    for t in range(len(data.templates)):  # the first questions of each template in the evaluated pictures
        of_template = torch.nonzero(data.template_ids == t).flatten()
        of_template = of_template[data.image_index[of_template] < len(dataset)]
        if two_hop:  # a picture per question: one picture's maps would repeat down the figure
            shown = {int(data.image_index[q]) for q in picks}
            of_template = of_template[[int(data.image_index[q]) not in shown for q in of_template]]
        picks += of_template[:per_template].tolist()
    items = [
        ShapesImageBatch(
            normalize(data.images[data.image_index[q]]).unsqueeze(0), *(part.unsqueeze(0) for part in data[q][1:3]),
            data.answer_ids[q : q + 1], data.family_ids[q : q + 1], data.template_ids[q : q + 1],
            data.correct[q : q + 1], data.boxes[q : q + 1], torch.zeros(1, dtype=torch.long),
        )
        for q in picks
    ]  # fmt: skip
    batch = collate_by_image(items)
    with torch.no_grad():
        out, _, prediction = predict(model, ShapesImageBatch(*(part.to(device) for part in batch)))
    prediction, right = prediction.cpu(), target(batch)
    if two_hop:
        said = [data.answers[int(p)] + ("" if p == r else " (WRONG)") for p, r in zip(prediction, right, strict=True)]
        maps = None if out.attention is None else out.attention.cpu()
        return [two_hop_figure(model, data, picks, said, maps, figures_dir / "shapes-two-hop.png")]
    panels = []
    for n, q in enumerate(picks):
        pointing = int(batch.family[n]) == POINTING
        said = f"box {int(prediction[n])}" if pointing else data.answers[int(prediction[n])]
        mark = "ok" if int(prediction[n]) == int(right[n]) else "WRONG"
        words = [data.vocab[int(w)] for w in batch.question[n, : int(batch.length[n])]]
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
                **dict(zip(("objects", "object_names"), data.objects_of(q), strict=True)),
            )
        )
    path = vqa_family_figure(
        panels,
        figures_dir / "vqa-family.png",
        grid=(model.grid, model.grid),
        extent=model.covered,
        head=model.spec.head,
    )
    return [path]


def build(config: ShapesVQAConfig) -> Task:
    cache = config.cache_dir or None
    model = build_model(config)  # first: it rejects an unknown question set before any data is drawn
    sizes = {"train": config.n_images, "test": config.test_images or None}
    train, test = (
        ShapesVQA(
            arrays=load_shapes(
                split,
                sizes[split],
                config.questions_per_image,
                seed=config.data_seed,
                cache_dir=cache,
                questions=config.questions,
            )
        )
        for split in ("train", "test")
    )
    draw = partial(show, per_template=config.show_per_template)
    eval_set = ShapesByImage(test, limit=config.eval_images)
    return Task(model, ShapesByImage(train), loss, eval_set, evaluate, collate_by_image, draw)


def describe(config: ShapesVQAConfig, task: Task) -> dict[str, dict[str, Any]]:
    """Pictures in [0, 1] map to [-1, 1]; the question set's vocabulary and answer names."""
    questions = question_set(config.questions)
    return {
        "preprocessing": {"size": [IMAGE_SIZE, IMAGE_SIZE], "channels": 3, "mean": [0.5] * 3, "std": [0.5] * 3},
        "labels": {"vocab": list(questions.vocab), "answers": list(questions.answers)},
    }


def sample(config: ShapesVQAConfig, task: Task) -> dict[str, Tensor]:
    """The test pictures ``show`` draws from (the first ones, up to its last pick) with all their questions."""
    data = task.eval_set.questions
    firsts = [
        torch.nonzero(data.template_ids == t).flatten()[: config.show_per_template] for t in range(len(data.templates))
    ]
    pictures = int(data.image_index[torch.cat(firsts)].max()) + 1
    arrays = data.arrays.first_pictures(pictures)
    return {name: torch.from_numpy(value.copy()) for name, value in vars(arrays).items() if name != "questions"}


def gallery(config: ShapesVQAConfig, model: VQA, tensors: dict[str, Tensor], figures_dir: Path) -> list[Path]:
    """:func:`show` on the shipped sample."""
    arrays = ShapesArrays(
        **{name: value.numpy() for name, value in tensors.items()}, questions=np.array(config.questions)
    )
    return show(
        model, ShapesByImage(ShapesVQA("test", arrays=arrays)), figures_dir, per_template=config.show_per_template
    )


RECIPES.register("shapes-vqa")(
    Recipe(
        name="shapes-vqa",
        description="relational VQA (Sort-of-CLEVR shapes) with any seed 002 head; pointing answers score 4 boxes",
        config=ShapesVQAConfig,
        build=build,
        presets={
            "quick": {
                "n_images": 2000,
                "eval_images": 200,
                "loop.steps": 300,
                "loop.batch_size": 16,
                "loop.warmup_steps": 30,
                "loop.eval_every": 0,
                "loop.ckpt_every": 100,
                "loop.compile": False,  # 300 steps: a first compile costs more than it saves
            },
            # 12,000 steps (about 38 epochs, 24 min of one thread): relational 88.0% after 6,000, 95.1% here.
            "full": {"loop.steps": 12000, "loop.eval_every": 2000},
            # The two-hop questions with stacked hops that relate: hop 1 finds the named object by what its
            # cells hold (pixel keys, sharp maps), hop 2 moves from it; only the last glimpse reaches the answer.
            "two-hop": {
                "questions": "two-hop",
                "n_images": 2000,
                "eval_images": 200,
                "loop.steps": 3000,
                "loop.batch_size": 16,
                # at 0.002 the maps of one question type could settle before the hops had learned to find the
                # named object for it, leaving that type at chance (docs/studies/vqa-shapes-hops.md)
                "loop.lr": 1e-3,
                "loop.warmup_steps": 30,
                "loop.eval_every": 1000,
                "loop.ckpt_every": 500,
                "model.head": "stacked",
                "model.hops": 2,
                "model.relate": True,
                "model.keys": "pixels",
                "model.temperature": 0.35,
                "model.readout": "last",
                "model.gate": True,
            },
            "ci": {
                "n_images": 8,
                "questions_per_image": 20,
                "test_images": 4,
                "eval_images": 4,
                "model.channels": (4, 8, 8),
                "model.dim": 16,
                "model.k_dim": 8,
                "model.embed_dim": 8,
                "model.mlp_hidden": 16,
                "model.heads": 2,
                "loop.steps": 2,
                "loop.batch_size": 2,
                "loop.compile": False,
                "loop.warmup_steps": 0,
                "loop.eval_every": 0,
                "loop.ckpt_every": 0,
                "loop.log_every": 1,
            },
        },
        describe=describe,
        sample=sample,
        gallery=gallery,
    )
)
