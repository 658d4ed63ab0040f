"""``ntm-copy``, ``ntm-repeat-copy``, ``ntm-recall``, ``ntm-sort``: the NTM paper's tasks (sec. 4).

Paper sizes by default (LSTM controller of 100 units, memory 128 x 20, one read and one write
head, 8-bit vectors). Where the paper trains with RMSprop (lr 1e-4, momentum 0.9) on one
sequence at a time, these recipes use what converges fastest on a CPU: Adam (lr 3e-3), batches of
32 sequences of one length, gradient-norm clipping at 10, the constant memory initialisation
(Collier & Beel 2018) and an adaptive curriculum on length (:class:`foveal.data.ntm_tasks.Curriculum`):
training starts on short sequences and the maximum length rises each time the running bit error
rate falls below 1% (not for sort by default: its first level is never passed). Evaluation always
uses the task's full range; copy, repeat copy and recall also score sets beyond it (longer
sequences, more repeats, more items), each reported under its own name. See docs/ntm.md for results.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import Dataset

from foveal.data.ntm_tasks import (
    AssociativeRecall,
    Copy,
    NTMBatch,
    NTMTask,
    PrioritySort,
    RepeatCopy,
    SequenceSet,
    TaskDataset,
    output_phase,
    wrong_bits,
)
from foveal.models.ntm import NTM, NTMSpec
from foveal.recipes.base import LoopConfig, Recipe, RunConfig, Task
from foveal.registry import RECIPES
from foveal.train import Curriculum

TRAIN_SET_SIZE = 100_000  # item indices only; every batch is drawn afresh from its own seed


def _loop(steps: int) -> LoopConfig:
    return LoopConfig(steps=steps, batch_size=32, lr=3e-3, clip_norm=10.0, eval_every=0, ckpt_every=500, log_every=50)


def _spec(**options: Any) -> Callable[[], NTMSpec]:
    return lambda: NTMSpec(**options)


@dataclass
class NTMConfig(RunConfig):
    """The model, curriculum and evaluation settings shared by every NTM recipe."""

    model: NTMSpec = field(default_factory=NTMSpec)
    curriculum: bool = True  # start on short sequences and lengthen them as they are mastered
    curriculum_threshold: float = 0.01  # raise the level when the running bit error rate is below this
    # At a constant 3e-3, copy converged and then collapsed (0.003 -> 40 wrong bits per sequence
    # within 200 steps, seed 0), hence the lower rate once the last level is mastered.
    anneal: float = 0.1  # learning-rate multiplier once the last curriculum level is mastered
    n_eval: int = 1000  # sequences in the evaluation set (the task's full range)
    eval_seed: int = 12345  # the evaluation set does not change with the training seed


@dataclass
class CopyConfig(NTMConfig):
    # The output sees only the reads: an LSTM of 100 units can hold a short sequence by itself, and
    # with that shortcut some seeds took 4x longer to start using the memory. Heads start still
    # (mostly keep the previous weighting, shift 0): the trained read heads stay on the first
    # item's row during the input (docs/ntm.md).
    model: NTMSpec = field(default_factory=_spec(output_from="reads", gate_bias=-2.0, still_bias=2.0))
    width: int = 8  # bits per vector
    min_len: int = 1  # shortest training sequence
    max_len: int = 20  # longest training sequence
    curriculum_start: int = 4  # the first level's maximum length; each level adds curriculum_step
    curriculum_step: int = 2  # what each level adds to the maximum length
    generalise_lengths: tuple[int, ...] = (40, 60)  # lengths beyond training, evaluated separately
    # training only: the chance that a vector is all zeros, which once written reads like an unwritten row
    blank_rate: float = 0.0
    n_eval_long: int = 200  # sequences per generalisation length
    loop: LoopConfig = field(default_factory=lambda: _loop(2000))


@dataclass
class RepeatCopyConfig(NTMConfig):
    # The read heads start still (as for copy) and the write head walking (as for recall): on the
    # paper's range 3 of 5 seeds converged in 1,200 s with it (4 in 2,400 s), 2 of 5 with every head
    # still (docs/ntm.md).
    model: NTMSpec = field(default_factory=_spec(gate_bias=-2.0, read_still_bias=2.0, write_walk_bias=2.0))
    width: int = 8  # bits per vector
    min_len: int = 1  # shortest sequence to repeat
    max_len: int = 10  # longest sequence to repeat
    min_repeats: int = 1
    max_repeats: int = 10  # most repeats asked for
    curriculum_start: int = 2  # first level: length and repeats up to 2; each level adds 1 to both
    # Beyond training, evaluated separately as len{L}_rep{N} (paper fig. 7: L = 20 at N = 10 and
    # N = 20 at L = 10). A count outside the training range is encoded with the training range's
    # normalisation, the same affine map extended, so the model sees the scale it learned.
    generalise_lengths: tuple[int, ...] = (20,)  # longer sequences, each repeated generalise_at times
    generalise_repeats: tuple[int, ...] = (20,)  # more repeats, each of a sequence of generalise_at vectors
    generalise_at: int = 10  # the repeats of the longer sequences and the length of the more-repeated ones
    n_eval_long: int = 200  # sequences per generalisation set
    loop: LoopConfig = field(default_factory=lambda: _loop(6000))


@dataclass
class RecallConfig(NTMConfig):
    # The write head starts walking (shift +1 at 0.79): on the paper's 2-6 items 4 of 5 seeds
    # converged with it, 2 of 4 without; the others kept writing over 2-3 rows (docs/ntm.md).
    model: NTMSpec = field(default_factory=_spec(write_walk_bias=2.0))
    width: int = 6  # bits per vector
    item_len: int = 3  # vectors per item
    min_items: int = 2  # fewest items before the query
    max_items: int = 6  # most items before the query
    curriculum_start: int = 2  # first level: 2 items; each level adds one
    # Paper fig. 11: the feed-forward NTM is nearly perfect at twice the training's items.
    generalise_items: tuple[int, ...] = (8, 12)  # item counts beyond training, evaluated separately as items{n}
    n_eval_long: int = 200  # sequences per generalisation set
    loop: LoopConfig = field(default_factory=lambda: _loop(6000))


@dataclass
class SortConfig(NTMConfig):
    # Memory rows that differ from the start (learned, 1e-6 + N(0, 0.5^2)) sort better than the
    # constant start (docs/ntm.md).
    model: NTMSpec = field(default_factory=_spec(memory_init="learned", memory_learned_std=0.5))
    width: int = 8  # bits per vector
    n_in: int = 20  # vectors in
    n_out: int = 16  # vectors out, highest priority first
    # No curriculum: its first level (top 3 of 4) is never passed at a 1% bit error, so the model
    # never sees the task (docs/ntm.md). ``--set curriculum=true`` turns it on.
    curriculum: bool = False
    # What the curriculum grows: "inputs" sorts 4, 8, ... of the n_in vectors (n_out keeps the
    # ratio); "outputs" keeps all n_in and asks for the top curriculum_start, + curriculum_step, ...
    curriculum_over: Literal["inputs", "outputs"] = "inputs"
    curriculum_start: int = 4  # the first level's size
    curriculum_step: int = 4  # what each level adds
    loop: LoopConfig = field(default_factory=lambda: _loop(10000))


# ---- the tasks of each curriculum level -------------------------------------------------------


def _levels(config: NTMConfig, recipe: str) -> list[NTMTask]:
    """Every curriculum level's task, easiest first; the last is the task itself."""
    if recipe == "ntm-copy":
        c: Any = config
        top = Copy(c.width, c.min_len, c.max_len, c.blank_rate)
        starts = range(min(c.curriculum_start, c.max_len), c.max_len, c.curriculum_step)
        return [Copy(c.width, c.min_len, m, c.blank_rate) for m in starts] + [top]
    if recipe == "ntm-repeat-copy":
        c = config
        top = RepeatCopy(c.width, c.min_len, c.max_len, c.min_repeats, c.max_repeats)
        grow = range(c.curriculum_start, max(c.max_len, c.max_repeats))
        levels = [RepeatCopy(c.width, c.min_len, min(n, c.max_len), c.min_repeats, min(n, c.max_repeats)) for n in grow]
        return [*levels, top]
    if recipe == "ntm-recall":
        c = config
        top = AssociativeRecall(c.width, c.item_len, c.min_items, c.max_items)
        grow = range(max(c.curriculum_start, c.min_items), c.max_items)
        return [AssociativeRecall(c.width, c.item_len, c.min_items, n) for n in grow] + [top]
    if recipe == "ntm-sort":
        c = config
        top = PrioritySort(c.width, c.n_in, c.n_out)
        if c.curriculum_over == "outputs":
            grow = range(c.curriculum_start, c.n_out, c.curriculum_step)
            return [PrioritySort(c.width, c.n_in, k) for k in grow] + [top]
        if c.curriculum_over != "inputs":
            raise ValueError(f"curriculum_over must be 'inputs' or 'outputs', got {c.curriculum_over!r}")
        grow = range(c.curriculum_start, c.n_in, c.curriculum_step)
        return [PrioritySort(c.width, n, max(1, round(n * c.n_out / c.n_in))) for n in grow] + [top]
    raise ValueError(f"unknown NTM recipe {recipe!r}")


# ---- loss, evaluation, pictures ---------------------------------------------------------------


def _loss(model: nn.Module, batch: NTMBatch) -> tuple[Tensor, dict[str, float]]:
    logits = output_phase(model(batch.inputs).logits, batch.targets)
    loss = F.binary_cross_entropy_with_logits(logits, batch.targets)
    wrong = wrong_bits(logits, batch.targets)
    metrics = {
        "bits": wrong.mean().item(),
        "bit_error": wrong.sum().item() / batch.targets.numel(),  # what the curriculum reads
        "length": float(batch.inputs.shape[1]),
    }
    return loss, metrics


class NTMEvalSet(Dataset):
    """The evaluation sets of a recipe: ``main`` (the task's full range) and named extras.

    Indexing reaches ``main``; :func:`evaluate` scores every set.
    """

    def __init__(self, main: SequenceSet, extras: dict[str, SequenceSet] | None = None) -> None:
        self.main, self.extras = main, extras or {}

    def __len__(self) -> int:
        return len(self.main)

    def __getitem__(self, index: int) -> NTMBatch:
        return self.main[index]


def score(model: nn.Module, sequences: SequenceSet) -> dict[str, float]:
    """Wrong bits per sequence, BCE per bit (nats) and cost per sequence (bits) over ``sequences``."""
    device = next(model.parameters()).device
    wrong, bce, count, n_bits = 0.0, 0.0, 0, 0
    for batch in sequences.batches():
        inputs, targets = batch.inputs.to(device), batch.targets.to(device)
        logits = output_phase(model(inputs).logits, targets)
        wrong += wrong_bits(logits, targets).sum().item()
        bce += F.binary_cross_entropy_with_logits(logits, targets, reduction="sum").item()
        count += targets.shape[0]
        n_bits += targets.numel()
    return {"bits": wrong / count, "bce": bce / n_bits, "cost": bce / count / torch.log(torch.tensor(2.0)).item()}


def _evaluate(model: nn.Module, dataset: Dataset) -> dict[str, float]:
    assert isinstance(dataset, NTMEvalSet)
    metrics = score(model, dataset.main)
    for name, sequences in dataset.extras.items():
        metrics |= {f"{k}_{name}": v for k, v in score(model, sequences).items() if k in ("bits", "cost")}
    return metrics


def _show_examples(dataset: NTMEvalSet) -> dict[str, NTMBatch]:
    """The sequences drawn by ``show``: the longest of the main set, and one per extra set."""
    task = dataset.main.task
    kwargs: dict[str, dict[str, int]] = {
        "Copy": {"length": getattr(task, "max_len", 0)},
        "RepeatCopy": {"length": getattr(task, "max_len", 0) // 2 or 1, "repeats": 3},
        "AssociativeRecall": {"n_items": getattr(task, "max_items", 0)},
        "PrioritySort": {},
    }
    generator = torch.Generator().manual_seed(dataset.main.seed)
    examples = {"example": task.sample(1, generator, **kwargs[type(task).__name__])}
    for name, sequences in dataset.extras.items():
        examples[name] = sequences[0]
    return examples


def _show(model: nn.Module, dataset: Dataset, figures_dir: Path) -> list[Path]:
    assert isinstance(dataset, NTMEvalSet)
    return _draw(model, _show_examples(dataset), type(dataset.main.task).__name__, figures_dir)


def _draw(model: nn.Module, examples: dict[str, NTMBatch], task: str, figures_dir: Path) -> list[Path]:
    """``ntm-NAME.png`` per example: its inputs, outputs, targets, the heads' weightings and the final memory."""
    from foveal.viz.ntm import plot_ntm

    device = next(model.parameters()).device
    paths = []
    for name, batch in examples.items():
        with torch.no_grad():
            out = model(batch.inputs.to(device), record=True)
        wrong = wrong_bits(out.logits, batch.targets.to(device)).item()
        title = f"{task}: {name}, T = {batch.inputs.shape[1]}, {wrong:.0f} wrong bits"
        paths.append(
            plot_ntm(
                batch.inputs[0],
                torch.sigmoid(out.logits[0]).cpu(),
                batch.targets[0],
                out.write_weights[0].sum(1).cpu(),
                out.read_weights[0].sum(1).cpu(),
                out.memory[0, -1].cpu(),
                figures_dir / f"ntm-{name}.png",
                title,
            )
        )
    return paths


def _sample(config: NTMConfig, task: Task) -> dict[str, Tensor]:
    """The sequences ``show`` draws (``K-NAME.inputs`` and ``K-NAME.targets``, ``K`` their order)."""
    examples = _show_examples(task.eval_set)  # type: ignore[arg-type]
    return {
        f"{k}-{name}.{part}": getattr(batch, part).contiguous()
        for k, (name, batch) in enumerate(examples.items())
        for part in ("inputs", "targets")
    }


def _gallery(recipe: str) -> Callable[[NTMConfig, nn.Module, dict[str, Tensor], Path], list[Path]]:
    def gallery(config: NTMConfig, model: nn.Module, tensors: dict[str, Tensor], figures_dir: Path) -> list[Path]:
        """:func:`_show` on the shipped sequences."""
        keys = sorted({key.rsplit(".", 1)[0] for key in tensors}, key=lambda key: int(key.split("-", 1)[0]))
        examples = {key.split("-", 1)[1]: NTMBatch(tensors[f"{key}.inputs"], tensors[f"{key}.targets"]) for key in keys}
        return _draw(model, examples, type(_levels(config, recipe)[-1]).__name__, figures_dir)

    return gallery


# ---- build ------------------------------------------------------------------------------------


def _generalisation_sets(config: NTMConfig, top: NTMTask) -> dict[str, SequenceSet]:
    """The evaluation sets beyond the training range, by the name their metrics carry.

    Each is drawn from the last level's task, so what is not fixed (the bits, recall's query) comes
    from the training distribution and a repeat count is normalised as in training.
    """
    c: Any = config
    n, seed = getattr(c, "n_eval_long", 0), c.eval_seed
    sets: dict[str, SequenceSet] = {}
    if isinstance(top, Copy):
        for length in c.generalise_lengths:
            sets[f"len{length}"] = SequenceSet(top, n, seed + length, length=length)
    elif isinstance(top, RepeatCopy):
        pairs = [(length, c.generalise_at) for length in c.generalise_lengths]
        pairs += [(c.generalise_at, repeats) for repeats in c.generalise_repeats]
        for length, repeats in dict.fromkeys(pairs):
            name = f"len{length}_rep{repeats}"
            sets[name] = SequenceSet(top, n, seed + 1000 * length + repeats, length=length, repeats=repeats)
    elif isinstance(top, AssociativeRecall):
        for items in c.generalise_items:
            sets[f"items{items}"] = SequenceSet(top, n, seed + items, n_items=items)
    return sets


def _build(config: NTMConfig, recipe: str) -> Task:
    levels = _levels(config, recipe)
    top = levels[-1]
    model = NTM(top.input_size, top.output_size, config.model)
    callbacks: list[Curriculum] = []
    if config.curriculum and len(levels) > 1:
        curriculum = Curriculum(len(levels), threshold=config.curriculum_threshold, anneal=config.anneal)
        callbacks.append(curriculum)

        def current() -> NTMTask:
            return levels[curriculum.level]

        train_set = TaskDataset(current, TRAIN_SET_SIZE, seed=config.seed)
    else:
        train_set = TaskDataset(top, TRAIN_SET_SIZE, seed=config.seed)
    if isinstance(top, Copy):  # evaluation scores the task itself, without the training's emphasis
        top = dataclasses.replace(top, blank_rate=0.0)
    eval_set = NTMEvalSet(SequenceSet(top, config.n_eval, config.eval_seed), _generalisation_sets(config, top))
    return Task(model, train_set, _loss, eval_set, _evaluate, train_set.collate, _show, list(callbacks))


def _register(name: str, description: str, config: type[NTMConfig], presets: dict[str, dict[str, Any]]) -> None:
    def build(c: NTMConfig) -> Task:
        return _build(c, name)

    def describe(c: NTMConfig, task: Task) -> dict[str, dict[str, Any]]:
        # the input: (B, T, input_size) bit vectors of `width` bits, the task's marker channels after them
        return {"preprocessing": {"width": c.width}, "labels": {}}

    recipe = Recipe(name, description, config, build, presets, describe, _sample, _gallery(name))
    RECIPES.register(name)(recipe)


_register(
    "ntm-copy",
    "NTM copy task (paper sec. 4.1): lengths 1-20, generalisation to 40-120",
    CopyConfig,
    {
        "quick": {"loop.steps": 1200, "n_eval": 500, "generalise_lengths": (40,), "n_eval_long": 100},
        # A feed-forward controller, so no state can drift past the 20 steps training shows it (the LSTM's
        # read head stops walking after ~55 output steps whatever the length: 221 wrong bits at 120). The
        # write head starts walking; the read head starts still, parked on row 0, which the walking write
        # head never writes, so a blank read means "input" (started walking instead, some seeds found the
        # start by content and copied nothing longer than 20). More all-zero training vectors (blank_rate),
        # because a written one reads blank too: without them most length-120 errors sat in sequences
        # holding one. The output sees the last read through the controller (output_from=both), which a
        # controller without memory needs to start the read-out on the right row. 256 rows: in the output
        # phase the write head spreads over every row and slowly erases them (128 rows: 9.8 wrong bits at
        # 120). A rate of 1e-3: at 3e-3 seeds 7 and 9 of 0-9 collapsed mid-curriculum. Seeds 0-9: 8 copy
        # length 80 with <= 1 and 120 with <= 2 wrong bits per sequence (the others 4.1 and 4.2 at 120),
        # 71-91 CPU-s each, compiled (docs/ntm.md, results/ntm-copy-compiled.jsonl).
        "full": {
            "loop.steps": 2000,
            "loop.lr": 1e-3,
            "model.controller": "feedforward",
            "model.output_from": "both",
            "model.still_bias": 0.0,
            "model.write_walk_bias": 2.0,
            "model.read_walk_bias": 0.0,
            "model.read_still_bias": 2.0,
            "model.n_rows": 256,
            "blank_rate": 0.05,
            "generalise_lengths": (40, 60, 80, 100, 120),
            "n_eval_long": 500,
            # the step compiled: about 3.5x per step after a ~20 s first compile (benchmarks/compile.py)
            "loop.compile": True,
        },
        # The LSTM controller the previous full preset used: converges (850-1950 steps),
        # then trains on at a tenth of the rate (anneal); the forget gate starts at bias 3: length 40 < 1
        # bit for 5 of 5 seeds, 1 of 5 with PyTorch's init; length 80 and beyond fail (docs/ntm.md).
        "full-lstm": {
            "loop.steps": 3000,
            "model.forget_bias": 3.0,
            "generalise_lengths": (40, 60, 80, 100, 120),
            "n_eval_long": 1000,
            "loop.compile": True,  # about 2.9x per step (benchmarks/compile.py)
        },
    },
)
_register(
    "ntm-repeat-copy",
    "NTM repeat copy (paper sec. 4.2): lengths 1-10, 1-10 repeats; generalisation to 20 of either",
    RepeatCopyConfig,
    {
        # Every head still, the start measured here. A quick preset trains in at most three minutes of
        # one thread (2,400 steps): the curriculum's first levels. Converging on 1-5 takes about 5,000
        # (seed 0: 5,100, docs/ntm.md; `--set loop.steps=6000`); the walk is unmeasured on 1-5. At
        # 6,000 steps seeds 0-2 end at 3.1-3.6 wrong bits per sequence (at 12,000: 0.08-1.34); beyond
        # the range they repeat 3 vectors six times, not more, and copy no longer sequence, after
        # either budget (docs/ntm.md).
        "quick": {
            "loop.steps": 2400,
            "max_len": 5,
            "max_repeats": 5,
            "n_eval": 200,
            "model.still_bias": 2.0,
            "model.write_walk_bias": 0.0,
            "generalise_lengths": (8, 10),
            "generalise_repeats": (8, 10),
            "generalise_at": 3,
        },
        # L, N in 1-10, the write head walking: seeds 1, 3, 4 converged after 4,250-4,850 steps
        # (452-556 CPU-s), seed 0 after 12,150 (1,343 CPU-s), seed 2 not in 23,382 (docs/ntm.md)
        "full": {"loop.steps": 20000},
    },
)
_register(
    "ntm-recall",
    "NTM associative recall (paper sec. 4.3): 2-6 items of 3 six-bit vectors; generalisation to 8 and 12",
    RecallConfig,
    {
        # Without the walk: 2-3 items fit even in the rows a still write head overwrites, and seed 0
        # converged (< 0.1 bit per sequence) after 2,900 steps; with it, 0.34 wrong bits after 7,931.
        # 2,800 steps: at most three minutes of one thread. Beyond 3 items seeds 0-2 find only items
        # at positions training queries (docs/ntm.md).
        "quick": {
            "loop.steps": 2800,
            "max_items": 3,
            "n_eval": 200,
            "model.write_walk_bias": 0.0,
            "generalise_items": (4, 5, 6),
        },
        # 2-6 items, the write head walking: seeds 1-4 converged after 2,350-11,950 steps (193-1,018
        # CPU-s), seed 0 not in 19,162 (docs/ntm.md)
        "full": {"loop.steps": 20000},
    },
)
_register(
    "ntm-sort",
    "NTM priority sort (paper sec. 4.5): the top 16 of 20 vectors by priority",
    SortConfig,
    {
        "quick": {"loop.steps": 1000, "n_in": 8, "n_out": 6, "n_eval": 200},
        "full": {"loop.steps": 30000, "model.n_read_heads": 5, "model.n_write_heads": 5},
    },
)
