"""``easy-vqa``: the VQA model of seeds 000/002 on easy-VQA, with a choice of attention head.

``foveal train easy-vqa --preset quick`` trains the default model, one additive hop whose map sits
on the object, in about five CPU-minutes. ``--set model.head_options.hops=2`` stacks hops; another head
takes ``--set model.head=spatial`` (and ``model.keys=values``), with its own options from their defaults;
every option of the model is a ``model.`` key (:class:`foveal.models.vqa.VQASpec`). ``eval``
reports accuracy overall and per answer type, and the attention mass inside the object mask (each
hop and the last); ``show`` draws each hop's heatmap over test images.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader

from foveal.artifact import card_labels
from foveal.attention import StackedAttention
from foveal.data.by_image import describe_pictures
from foveal.data.easy_vqa import (
    ANSWER_TYPES,
    IMAGE_SIZE,
    EasyVQA,
    EasyVQAByImage,
    VQAImageBatch,
    VQASample,
    collate_by_image,
    cut_sample,
    denormalize,
    from_sample,
    load_easy_vqa,
)
from foveal.errors import FovealError
from foveal.models.vqa import VQA, VQASpec
from foveal.recipes.base import LoopConfig, Recipe, RunConfig, Task
from foveal.registry import RECIPES
from foveal.train import Anneal, Callback
from foveal.viz.heatmap import attention_figure, mass_in_mask

TYPE_KEYS = ("yesno", "shape", "colour")  # metric-name forms of ANSWER_TYPES


@dataclass
class EasyVQAConfig(RunConfig):
    # One additive hop (the stacked head with hops=1) with six changes from seed 002's stacked head that put its map
    # on the object (each a VQASpec option; docs/studies/vqa-easy-attention.md): the picture reaches the answer only
    # through the map (readout), the scores read what each cell's own pixels are but not where in the cell they lie
    # (keys), the question gates the glimpse's channels with a signed gate (gate, gate_form: "is there a red shape"
    # is then a product of the named colour and the glimpse's, which runs that never learned it settled off the
    # object), the scores are sharpened (temperature), and the map is exactly zero off the cells it picks (normalize:
    # no haze over the background to read a shape from). One hop, because with two the first read the object and
    # the second could pass it on by where it looked, off the object. k_dim = 16 halves the step time.
    model: VQASpec = field(
        default_factory=lambda: VQASpec(
            k_dim=16,
            keys="pixels",
            head_options=dict(
                hops=1, readout="last", gate=True, gate_form="linear", temperature=0.35, normalize="sparsemax"
            ),
        )
    )
    # The stacked heads' score temperature starts at temperature_from and falls geometrically to the head's temperature
    # over the first temperature_warmup of the steps (0 = the head's throughout). A soft start keeps every cell in the
    # map while the values learn what the cells hold; a sharp map from step 1 settled off the object on some seeds.
    temperature_from: float = 30.0
    temperature_warmup: float = 0.3
    softmax_while_warm: bool = False  # a softmax map while it falls (docs/studies/vqa-support.md: not a fix)
    cache_dir: str = ""  # "" = $FOVEAL_CACHE or ~/.cache/foveal
    train_limit: int = 0  # keep the first N training questions (0 = all)
    eval_limit: int = 0  # evaluate on the first N test questions (0 = all)
    interim_eval_limit: int = 1000  # evaluations during training read the first N test questions (0: all)
    show_count: int = 8
    by_image: bool = True  # batches of pictures with all their questions (loop.batch_size counts pictures)
    loop: LoopConfig = field(
        default_factory=lambda: LoopConfig(
            steps=3000,
            batch_size=32,
            optimizer="adamw",
            lr=3e-3,
            weight_decay=1e-4,
            schedule="cosine",
            warmup_steps=150,
            clip_norm=5.0,
            eval_every=1000,
            ckpt_every=500,
        )
    )


def build_model(config: EasyVQAConfig, vocab_size: int, num_answers: int) -> VQA:
    if config.model.image_size != IMAGE_SIZE:
        raise FovealError(f"easy-VQA pictures are {IMAGE_SIZE} px; model.image_size is {config.model.image_size}")
    return VQA(vocab_size, num_answers, config.model)


def loss(model: nn.Module, batch: VQASample | VQAImageBatch) -> tuple[Tensor, dict[str, float]]:
    logits = model(batch.image, batch.question, batch.length, getattr(batch, "image_index", None)).logits
    accuracy = (logits.argmax(-1) == batch.answer).float().mean().item()
    return F.cross_entropy(logits, batch.answer), {"acc": accuracy}


def evaluate(model: VQA, dataset: EasyVQA, batch_size: int = 256) -> dict[str, float]:
    """Accuracy overall and per answer type; attention mass inside the object mask per hop and last.

    Masses are averaged over all questions (see :func:`foveal.viz.heatmap.mass_in_mask`); ``mask_mass``
    is the last hop's, ``mask_mass_TYPE`` the last hop's over the questions of one answer type, and
    ``mask_mass_yesno_present`` / ``_absent`` split the yes/no questions by whether the colour or shape
    they name is in the picture (:meth:`EasyVQA.names_present`). The picture holds one object, so the
    right place is the object either way: an absent colour is ruled out by reading the object's. The
    ``none`` head has no attention and reports no mass.
    """
    device = next(model.parameters()).device
    groups = ("yesno_present", "yesno_absent")
    names_present = dataset.names_present()
    correct = torch.zeros(len(ANSWER_TYPES))
    count = torch.zeros(len(ANSWER_TYPES))
    group_count = torch.zeros(len(groups))
    mass_sum: Tensor | None = None  # (answer types, hops)
    group_mass = torch.zeros(len(groups))  # the last hop's, over yes/no questions naming what is there / is not
    start = 0
    for batch in DataLoader(dataset, batch_size=batch_size):
        out = model(batch.image.to(device), batch.question.to(device), batch.length.to(device))
        right = (out.logits.argmax(-1).cpu() == batch.answer).float()
        correct.index_add_(0, batch.answer_type, right)
        count.index_add_(0, batch.answer_type, torch.ones_like(right))
        yes_no = batch.answer_type == ANSWER_TYPES.index("yes/no")
        group = (~names_present[start : start + len(right)]).long()[yes_no]  # 0: named thing present, 1: absent
        start += len(right)
        group_count.index_add_(0, group, torch.ones(len(group)))
        if out.attention is not None:
            mass = mass_in_mask(out.attention.cpu(), batch.mask, (model.grid, model.grid))  # (B, hops)
            if mass_sum is None:
                mass_sum = mass.new_zeros(len(ANSWER_TYPES), mass.shape[1])
            mass_sum.index_add_(0, batch.answer_type, mass)
            group_mass.index_add_(0, group, mass[yes_no, -1])
    metrics = {"acc": (correct.sum() / count.sum()).item()}
    metrics |= {f"acc_{key}": (correct[t] / count[t]).item() for t, key in enumerate(TYPE_KEYS) if count[t]}
    if mass_sum is not None:
        masses = (mass_sum.sum(0) / count.sum()).tolist()
        metrics |= {f"mask_mass_hop{h + 1}": m for h, m in enumerate(masses)}
        metrics["mask_mass"] = masses[-1]
        metrics |= {
            f"mask_mass_{key}": (mass_sum[t, -1] / count[t]).item() for t, key in enumerate(TYPE_KEYS) if count[t]
        }
        metrics |= {
            f"mask_mass_{key}": (group_mass[g] / group_count[g]).item()
            for g, key in enumerate(groups)
            if group_count[g]
        }
    return metrics


def show(model: VQA, dataset: EasyVQA, figures_dir: Path, count: int = 8) -> list[Path]:
    """``attention.png``: test images with each hop's heatmap, the question, prediction and truth."""
    device = next(model.parameters()).device
    count = min(count, len(dataset))
    # Evenly spaced questions: a fixed, varied sample (all three answer types appear).
    picks = torch.linspace(0, len(dataset) - 1, count).round().long().tolist()
    samples = [dataset[q] for q in picks]
    batch = VQASample(*(torch.stack(parts) for parts in zip(*samples, strict=True)))
    with torch.no_grad():
        out = model(batch.image.to(device), batch.question.to(device), batch.length.to(device))
    predictions = out.logits.argmax(-1).tolist()
    titles = []
    for q, predicted, truth in zip(picks, predictions, batch.answer.tolist(), strict=True):
        said, right = f"pred: {dataset.answers[predicted]} | truth: {dataset.answers[truth]}", predicted == truth
        titles.append(f"{dataset.question_text(q)}\n{said} ({'ok' if right else 'WRONG'})")
    maps = [None] * count if out.attention is None else list(out.attention.cpu())
    images = [denormalize(image) for image in batch.image]
    masks = [sample.mask for sample in samples]
    grid = (model.grid, model.grid)
    return [attention_figure(images, maps, titles, figures_dir / "attention.png", grid=grid, masks=masks)]


def build(config: EasyVQAConfig) -> Task:
    data = load_easy_vqa(config.cache_dir or None)
    train_set = EasyVQA("train", data=data, limit=config.train_limit or None)
    eval_set = EasyVQA("test", data=data, limit=config.eval_limit or None)
    n = config.interim_eval_limit
    interim_set = EasyVQA("test", data=data, limit=n) if 0 < n < len(eval_set) else None
    model = build_model(config, len(data.vocab), len(data.answers))
    train, collate = (EasyVQAByImage(train_set), collate_by_image) if config.by_image else (train_set, None)
    draw, callbacks = partial(show, count=config.show_count), temperature_schedule(config, model)
    return Task(model, train, loss, eval_set, evaluate, collate, draw, callbacks, interim_eval_set=interim_set)


def temperature_schedule(config: EasyVQAConfig, model: VQA) -> list[Callback]:
    """The warm start of the stacked heads' score temperature, or nothing for a head without one."""
    if not 0.0 <= config.temperature_warmup <= 1.0:
        raise FovealError(f"temperature_warmup is a fraction of the steps, in [0, 1]; got {config.temperature_warmup}")
    # the additive hops only: the dot score's (stacked-dot) were always trained sharp from the start
    if config.temperature_warmup == 0 or config.model.head != "stacked":
        return []
    if not config.temperature_from > 0:
        raise FovealError(f"temperature_from divides the scores, so it must be > 0; got {config.temperature_from}")
    attention = cast(StackedAttention, model.head.attention)
    steps, end = max(1, round(config.temperature_warmup * config.loop.steps)), model.head_options.temperature

    def apply(temperature: float) -> None:
        attention.temperature = temperature
        warm = config.softmax_while_warm and temperature > end * (1 + 1e-9)
        attention.normalize = "softmax" if warm else model.head_options.normalize

    return [Anneal(apply, start=config.temperature_from, end=end, steps=steps, name="temperature")]


def describe(config: EasyVQAConfig, task: Task) -> dict[str, dict[str, Any]]:
    data = task.evaluation_set().data
    return describe_pictures(config.model.image_size, data.vocab, data.answers)


def sample(config: EasyVQAConfig, task: Task) -> dict[str, Tensor]:
    """Eight test questions evenly spread over the test set, with their pictures (``show`` draws them all)."""
    return cut_sample(EasyVQA("test", data=task.evaluation_set().data), 8)


def gallery(config: EasyVQAConfig, model: VQA, tensors: dict[str, Tensor], figures_dir: Path) -> list[Path]:
    """:func:`show` on the shipped sample."""
    return show(model, from_sample(tensors, **card_labels(model)), figures_dir, count=len(tensors["questions"]))


RECIPES.add(
    Recipe(
        name="easy-vqa",
        description="VQA on easy-VQA: CNN grid + BiLSTM question + attention head (none|spatial|dot|cosine|stacked)",
        config=EasyVQAConfig,
        build=build,
        presets={
            # The full preset's model and rate, fewer steps: a faster rate or a wider MLP learns sooner but reads
            # shape questions off the background (docs/studies/vqa-easy-attention.md).
            "quick": {
                "loop.steps": 1500,
                "threads": 2,
                "loop.eval_every": 0,
                "loop.ckpt_every": 250,
            },
            "full": {"loop.steps": 2500, "loop.eval_every": 500, "threads": 2},
        },
        describe=describe,
        sample=sample,
        gallery=gallery,
    )
)
