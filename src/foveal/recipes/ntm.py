"""``ntm-copy``, ``ntm-repeat-copy``, ``ntm-recall``, ``ntm-sort``: the NTM paper's tasks (sec. 4).

Paper sizes by default (LSTM controller of 100 units, memory 128 x 20, one read and one write
head, 8-bit vectors). Where the paper trains with RMSprop (lr 1e-4, momentum 0.9) on one
sequence at a time, these recipes use what converges fastest on a CPU: Adam (lr 3e-3), batches of
32 sequences of one length, gradient-norm clipping at 10, the constant memory initialisation
(Collier & Beel 2018) and an adaptive curriculum on length (:class:`foveal.train.Curriculum`):
training starts on short sequences and the maximum length rises each time the running bit error
rate falls below 1% (not for sort by default: its first level is never passed). Evaluation always
uses the task's full range; copy, repeat copy and recall also score sets beyond it (longer
sequences, more repeats, more items), each reported under its own name. See docs/ntm.md for results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from torch import Tensor, nn

from foveal.data.ntm_eval import NTMEvalSet, score
from foveal.data.ntm_tasks import AssociativeRecall, Copy, NTMBatch, NTMTask, PrioritySort, RepeatCopy
from foveal.errors import FovealError
from foveal.models.ntm import NTMSpec
from foveal.preprocess import sequence_input
from foveal.recipes._ntm import NTMConfig, build, loop_config, spec
from foveal.recipes.base import LoopConfig, Recipe, Task
from foveal.registry import RECIPES
from foveal.viz.ntm import draw_ntm, show_ntm

__all__ = [
    "CopyConfig",
    "NTMConfig",
    "NTMEvalSet",
    "RecallConfig",
    "RepeatCopyConfig",
    "SortConfig",
    "score",
    "show_ntm",
]


@dataclass
class CopyConfig(NTMConfig):
    # The output sees only the reads, so the controller must use the memory; heads start still, as trained
    # read heads stay on the first row during the input (docs/studies/ntm-copy.md).
    model: NTMSpec = field(default_factory=spec(output_from="reads", gate_bias=-2.0, still_bias=2.0))
    width: int = 8  # bits per vector
    min_len: int = 1  # shortest training sequence
    max_len: int = 20  # longest training sequence
    curriculum_start: int = 4  # the first level's maximum length; each level adds curriculum_step
    curriculum_step: int = 2  # what each level adds to the maximum length
    generalise_lengths: tuple[int, ...] = (40, 60)  # lengths scored each on its own (beyond training, or its longest)
    # training only: the chance that a vector is all zeros, which once written reads like an unwritten row
    blank_rate: float = 0.0
    n_eval_long: int = 200  # sequences per generalisation length
    loop: LoopConfig = field(default_factory=lambda: loop_config(2000))


@dataclass
class RepeatCopyConfig(NTMConfig):
    # Read heads start still (as for copy), the write head walking (as for recall): more seeds converge on the
    # paper's range (docs/studies/ntm-write-walk.md).
    model: NTMSpec = field(default_factory=spec(gate_bias=-2.0, read_still_bias=2.0, write_walk_bias=2.0))
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
    loop: LoopConfig = field(default_factory=lambda: loop_config(6000))


@dataclass
class RecallConfig(NTMConfig):
    # The write head starts walking, or it keeps writing over a few rows (docs/studies/ntm-write-walk.md).
    model: NTMSpec = field(default_factory=spec(write_walk_bias=2.0))
    width: int = 6  # bits per vector
    item_len: int = 3  # vectors per item
    min_items: int = 2  # fewest items before the query
    max_items: int = 6  # most items before the query
    curriculum_start: int = 2  # first level: 2 items; each level adds one
    # Paper fig. 11: the feed-forward NTM is nearly perfect at twice the training's items.
    generalise_items: tuple[int, ...] = (8, 12)  # item counts beyond training, evaluated separately as items{n}
    n_eval_long: int = 200  # sequences per generalisation set
    loop: LoopConfig = field(default_factory=lambda: loop_config(6000))


@dataclass
class SortConfig(NTMConfig):
    # Memory rows that differ from the start sort better than a constant start (docs/studies/ntm-sort.md).
    model: NTMSpec = field(default_factory=spec(memory_init="learned", memory_learned_std=0.5))
    width: int = 8  # bits per vector
    n_in: int = 20  # vectors in
    n_out: int = 16  # vectors out, highest priority first
    # No curriculum: its first level is never passed, so the model would never see the task (docs/studies/ntm-sort.md).
    curriculum: bool = False
    # What the curriculum grows: "inputs" sorts 4, 8, ... of the n_in vectors (n_out keeps the
    # ratio); "outputs" keeps all n_in and asks for the top curriculum_start, + curriculum_step, ...
    curriculum_over: Literal["inputs", "outputs"] = "inputs"
    curriculum_start: int = 4  # the first level's size
    curriculum_step: int = 4  # what each level adds
    loop: LoopConfig = field(default_factory=lambda: loop_config(10000))


def _levels(config: NTMConfig, recipe: str) -> Sequence[NTMTask]:
    """Every curriculum level's task, easiest first; the last is the task itself."""
    c: Any = config
    if recipe == "ntm-copy":
        return Copy(c.width, c.min_len, c.max_len, c.blank_rate).levels(c.curriculum_start, c.curriculum_step)
    if recipe == "ntm-repeat-copy":
        return RepeatCopy(c.width, c.min_len, c.max_len, c.min_repeats, c.max_repeats).levels(c.curriculum_start)
    if recipe == "ntm-recall":
        return AssociativeRecall(c.width, c.item_len, c.min_items, c.max_items).levels(c.curriculum_start)
    if recipe == "ntm-sort":
        return PrioritySort(c.width, c.n_in, c.n_out).levels(c.curriculum_start, c.curriculum_step, c.curriculum_over)
    raise FovealError(f"unknown NTM recipe {recipe!r}")


def _sample(config: NTMConfig, task: Task) -> dict[str, Tensor]:
    """The sequences ``show`` draws (``K-NAME.inputs`` and ``K-NAME.targets``, ``K`` their order)."""
    examples = task.eval_set.examples()  # type: ignore[union-attr]
    return {
        f"{k}-{name}.{part}": getattr(batch, part).contiguous()
        for k, (name, batch) in enumerate(examples.items())
        for part in ("inputs", "targets")
    }


def _gallery(recipe: str) -> Callable[[NTMConfig, nn.Module, dict[str, Tensor], Path], list[Path]]:
    def gallery(config: NTMConfig, model: nn.Module, tensors: dict[str, Tensor], figures_dir: Path) -> list[Path]:
        """The evaluation's figures, drawn on the shipped sequences."""
        keys = sorted({key.rsplit(".", 1)[0] for key in tensors}, key=lambda key: int(key.split("-", 1)[0]))
        examples = {key.split("-", 1)[1]: NTMBatch(tensors[f"{key}.inputs"], tensors[f"{key}.targets"]) for key in keys}
        return draw_ntm(model, examples, type(_levels(config, recipe)[-1]).__name__, figures_dir)

    return gallery


def _register(name: str, description: str, config: type[NTMConfig], presets: dict[str, dict[str, Any]]) -> None:
    def build_task(c: NTMConfig) -> Task:
        return build(c, _levels(c, name))

    def describe(c: NTMConfig, task: Task) -> dict[str, dict[str, Any]]:
        # (B, T, input_size): vectors of `width` bits, the task's marker channels after them, which hold a
        # normalised count (repeat copy) or priority (sort) where the task has one: not bits
        task_itself = _levels(c, name)[-1]
        binary = not isinstance(task_itself, RepeatCopy | PrioritySort)
        return {"preprocessing": sequence_input(c.width, task_itself.input_size, binary=binary), "labels": {}}

    RECIPES.add(Recipe(name, description, config, build_task, presets, describe, _sample, _gallery(name)))


_register(
    "ntm-copy",
    "NTM copy task (paper sec. 4.1): lengths 1-20, generalisation to 40-120",
    CopyConfig,
    {
        "quick": {"loop.steps": 1200, "n_eval": 500, "generalise_lengths": (40,), "n_eval_long": 100},
        # Copies past the training lengths: a feed-forward controller has no state to drift, the read head
        # parks on one row during the input, and more rows and blank vectors keep long sequences intact
        # (docs/studies/ntm-copy-generalisation.md, docs/studies/ntm-copy-blank.md). Lengths 1-20 from the first
        # step, as in the paper: a curriculum's short first levels let some seeds tell the input phase by
        # reading the unwritten rows, which stops working as a long input fills the memory
        # (docs/studies/ntm-copy-seeds.md).
        "full": {
            "curriculum": False,
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
            "generalise_lengths": (20, 40, 60, 80, 100, 120),  # 20: the longest trained length on its own
            "n_eval_long": 500,
            "loop.compile": True,  # the compiled step repays its first compile (docs/studies/compile-speed.md)
        },
        # The LSTM controller: learns the training lengths, fails beyond twice them; the forget gate starts
        # at bias 3, which lets more seeds copy twice the length (docs/studies/ntm-copy-generalisation.md).
        "full-lstm": {
            "loop.steps": 3000,
            "model.forget_bias": 3.0,
            "generalise_lengths": (40, 60, 80, 100, 120),
            "n_eval_long": 1000,
            "loop.compile": True,  # (docs/studies/compile-speed.md)
        },
    },
)
_register(
    "ntm-repeat-copy",
    "NTM repeat copy (paper sec. 4.2): lengths 1-10, 1-10 repeats; generalisation to 20 of either",
    RepeatCopyConfig,
    {
        # Minutes of one thread on a smaller range: the curriculum's first levels, not convergence
        # (docs/studies/ntm-generalisation.md).
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
        # The paper's range, with a budget most seeds converge in (docs/studies/ntm-write-walk.md).
        "full": {"loop.steps": 20000, "loop.compile": True},  # (docs/studies/compile-speed.md)
    },
)
_register(
    "ntm-recall",
    "NTM associative recall (paper sec. 4.3): 2-6 items of 3 six-bit vectors; generalisation to 8 and 12",
    RecallConfig,
    {
        # Minutes of one thread on 2-3 items, which fit even where a still write head overwrites; no
        # walk, which converges later at this size (docs/studies/ntm-write-walk.md).
        "quick": {
            "loop.steps": 2800,
            "max_items": 3,
            "n_eval": 200,
            "model.write_walk_bias": 0.0,
            "generalise_items": (4, 5, 6),
        },
        # The paper's 2-6 items, with a budget most seeds converge in (docs/studies/ntm-write-walk.md).
        "full": {"loop.steps": 20000, "loop.compile": True},  # (docs/studies/compile-speed.md)
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
