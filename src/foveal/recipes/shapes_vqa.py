"""``shapes-vqa``: the VQA model with any seed 002 head on the relational ``shapes`` set (Sort-of-CLEVR).

``foveal train shapes-vqa --preset quick`` trains the default model (residual self-attention over a
9 x 9 grid of regions with coordinate features, then one hop with the dot score);
``--set model.head=transformer``, ``--set model.head_options.hops=2``, ``--set model.grid_coords=false``
swap the parts (every head name in :data:`foveal.models.vqa.VQA_HEADS`; every option of
:class:`foveal.models.vqa.VQASpec`; ``foveal config shapes-vqa`` lists the head's own options too).
Pointing questions are answered by scoring their 4 candidate boxes, by default with the last hop's
mass in each box added (``model.point_by_attention``); the others by the answer classifier. ``eval``
reports accuracy per family and per template (:func:`evaluate`); ``show`` draws every hop's heatmap
per question.

``--set questions=two-hop`` uses the two-hop question set (:mod:`foveal.data.shapes`): ``eval`` then also
reports where each hop looks, and ``show`` writes ``shapes-two-hop.png``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader

from foveal.data.by_image import describe_pictures
from foveal.data.shapes import FAMILIES, IMAGE_SIZE, QUESTION_SETS, ShapesVQA, question_set
from foveal.data.shapes.by_image import ShapesByImage, ShapesImageBatch, collate_by_image, question_batch
from foveal.data.shapes.scores import ShapesScores
from foveal.errors import FovealError
from foveal.models.vqa import VQA, VQASpec
from foveal.recipes.base import LoopConfig, Recipe, RunConfig, Task
from foveal.registry import RECIPES
from foveal.viz.shapes import object_cells, shapes_figure
from foveal.viz.shapes import two_hop_figure as two_hop_figure  # also importable from the recipe

POINTING = FAMILIES.index("pointing")  # the two-hop set has 2 families, so none of its questions points


def _shapes_model() -> VQASpec:
    return VQASpec(
        # Residual self-attention over the regions, then dot-score hops, which answer relational questions
        # better than hops alone; one hop, as two ended behind (docs/studies/vqa-shapes-hops.md).
        head="context-self",
        head_options={"hops": 1},
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
            # The compiled step repays its first compile here; the quick preset's few steps do not
            # (docs/studies/compile-speed.md).
            compile=True,
        )
    )


def build_model(config: ShapesVQAConfig) -> VQA:
    if config.model.image_size != IMAGE_SIZE or not config.model.pointing:
        raise FovealError(f"shapes-vqa needs model.image_size={IMAGE_SIZE} (its pictures) and model.pointing=true")
    if config.questions not in QUESTION_SETS:
        raise FovealError(f"questions must be one of {', '.join(QUESTION_SETS)}, got {config.questions!r}")
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


def loss(model: nn.Module, batch: ShapesImageBatch) -> tuple[Tensor, dict[str, float]]:
    _, losses, prediction = predict(model, batch)
    return losses.mean(), {"acc": (prediction == batch.target()).float().mean().item()}


def evaluate(model: VQA, dataset: ShapesByImage, batch_size: int = 50) -> dict[str, float]:
    """Accuracy overall, per family and per template, and on the two-hop set where each hop looks
    (:meth:`foveal.data.shapes.scores.ShapesScores.metrics`); ``params``, the trainable parameters."""
    device = next(model.parameters()).device
    data = dataset.questions
    two_hop = data.question_set.name == "two-hop"
    scores = ShapesScores(data)
    for b, batch in enumerate(DataLoader(dataset, batch_size=batch_size, collate_fn=collate_by_image)):
        batch = ShapesImageBatch(*(part.to(device) for part in batch))
        out, _, prediction = predict(model, batch)
        scores.add(batch.template.cpu(), (prediction == batch.target()).float().cpu())
        if two_hop and out.attention is not None:
            # the loader keeps picture order, so the batch's questions are its pictures' questions in turn
            pictures = range(b * batch_size, min((b + 1) * batch_size, len(dataset)))
            ids = torch.cat([dataset.question_ids(i) for i in pictures])
            scores.add_maps(batch.family.cpu(), out.attention.float().cpu(), object_cells(model, data, ids))
    params = float(sum(p.numel() for p in model.parameters() if p.requires_grad))
    return scores.metrics() | {"params": params}


def show(model: VQA, dataset: ShapesByImage, figures_dir: Path, per_template: int = 1) -> list[Path]:
    """``vqa-family.png`` or, on the two-hop set, ``shapes-two-hop.png`` (:func:`foveal.viz.shapes.shapes_figure`)."""
    device = next(model.parameters()).device
    data = dataset.questions
    picks = dataset.examples(per_template, one_per_picture=data.question_set.name == "two-hop")
    batch = question_batch(data, picks)
    with torch.no_grad():
        out, _, prediction = predict(model, ShapesImageBatch(*(part.to(device) for part in batch)))
    return [shapes_figure(model, data, picks, batch, out, prediction.cpu(), figures_dir)]


def build(config: ShapesVQAConfig) -> Task:
    model = build_model(config)  # first: it rejects an unknown question set before any data is drawn
    shapes = partial(
        ShapesVQA,
        questions_per_image=config.questions_per_image,
        seed=config.data_seed,
        cache_dir=config.cache_dir or None,
        questions=config.questions,
    )
    train, test = shapes("train", n_images=config.n_images), shapes("test", n_images=config.test_images or None)
    draw = partial(show, per_template=config.show_per_template)
    eval_set = ShapesByImage(test, limit=config.eval_images)
    return Task(model, ShapesByImage(train), loss, eval_set, evaluate, collate_by_image, draw)


def describe(config: ShapesVQAConfig, task: Task) -> dict[str, dict[str, Any]]:
    questions = question_set(config.questions)
    return describe_pictures(IMAGE_SIZE, questions.vocab, questions.answers)


def sample(config: ShapesVQAConfig, task: Task) -> dict[str, Tensor]:
    """The test pictures ``show`` draws from, with all their questions."""
    return task.evaluation_set().questions.cut_sample(config.show_per_template)


def gallery(config: ShapesVQAConfig, model: VQA, tensors: dict[str, Tensor], figures_dir: Path) -> list[Path]:
    """:func:`show` on the shipped sample."""
    test = ShapesByImage(ShapesVQA.from_sample(tensors, config.questions))
    return show(model, test, figures_dir, per_template=config.show_per_template)


RECIPES.add(
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
            # Relational questions keep improving to this budget (docs/vqa.md).
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
                "model.keys": "pixels",
                "model.head_options": {"hops": 2, "relate": True, "temperature": 0.35, "readout": "last", "gate": True},
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
