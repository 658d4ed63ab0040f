"""``shapes``: a relational VQA set in the spirit of Sort-of-CLEVR (Santoro et al. 2017), with pointing.

Each 75 x 75 picture holds 6 objects on white, one of each colour (red, green, blue, orange, gray,
yellow), each a square or a circle of 11 px across, none touching. Every picture gets 20 questions
from 9 templates in three families (family drawn uniformly, then template, then colour):

=================  ===============  ===================================================  ============
family             template         text (``X`` = a colour)                              answer
=================  ===============  ===================================================  ============
non-relational     shape            what is the shape of the X object                   square/circle
non-relational     horizontal       is the X object on the left or right of the image   left/right
non-relational     vertical         is the X object on the top or bottom of the image   top/bottom
relational         closest          what is the shape of the object closest to the X     square/circle
                                    object
relational         furthest         what is the shape of the object furthest from the   square/circle
                                    X object
relational         count            how many objects have the same shape as the X        1 ... 6 (X
                                    object                                               counts too)
pointing           point-colour     which object is the X object                         1 of 4 boxes
pointing           point-closest    which object is closest to the X object              1 of 4 boxes
pointing           point-furthest   which object is furthest from the X object           1 of 4 boxes
=================  ===============  ===================================================  ============

Pointing questions follow Visual7W's "which" questions: the answer is one of 4 candidate boxes of
objects in the scene, one of them correct (for closest/furthest the X object itself is never a
candidate). Scenes are redrawn until every answer is unambiguous: each object's nearest and
furthest other objects win by at least :data:`TIE_MARGIN` px, and no centre lies on the middle
row or column.

The opt-in ``two-hop`` question set (``questions="two-hop"``) asks about the same pictures with its
own 8 templates, vocabulary and answers (:data:`TWO_HOP_TEMPLATES`, :data:`TWO_HOP_VOCAB`,
:data:`TWO_HOP_ANSWERS`), family drawn uniformly, then template, then colour:

=================  ================================  =====================================================
family             template                          text (``X`` = a colour)
=================  ================================  =====================================================
one-hop            shape-closest, colour-closest     what is the shape (colour) of the object closest to
                                                     the X object
one-hop            shape-furthest, colour-furthest   ... furthest from the X object
two-hop            shape-closest-to-furthest,        what is the shape (colour) of the object closest to
                   colour-closest-to-furthest        the object furthest from the X object
two-hop            shape-furthest-from-closest,      what is the shape (colour) of the object furthest
                   colour-furthest-from-closest      from the object closest to the X object
=================  ================================  =====================================================

Each question records the object found first (``first``: X's furthest or closest object for the
two-hop templates, X itself otherwise) and the object the answer is about (``target``); a two-hop
answer is the shape or colour of ``target``, found relative to ``first``. The one-hop templates
are there as a control on the same pictures, vocabulary and answers.

Everything is drawn with vectorised numpy from ``numpy.random.default_rng((seed, split))`` and
cached as an ``.npz`` (no pickles) under ``$FOVEAL_CACHE`` or ``~/.cache/foveal``.

Convention:
    Pixel ``(x, y)``: ``x`` is the column (left to right), ``y`` the row (top to bottom), integers
    at pixel centres. An object centred on pixel ``(cx, cy)`` covers ``cx - 5 .. cx + 5``; its box
    is ``(x0, y0, x1, y1) = (cx - 5, cy - 5, cx + 6, cy + 6)``, half-open, in pixels. "Left" means
    the centre is left of the image's middle: ``2 cx + 1 < 75``. Distances are Euclidean between
    centres.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from foveal.data.by_image import normalize
from foveal.data.cache import cache_root, save_npz
from foveal.data.shapes.questions import (
    ANSWERS,
    FAMILIES,
    LENGTHS,
    MAX_QUESTION_LENGTH,
    N_CANDIDATES,
    QUESTION_SETS,
    SETS,
    TEMPLATE_FAMILY,
    TEMPLATE_INDEX,
    TEMPLATES,
    TOKENS,
    TWO_HOP_ANSWERS,
    TWO_HOP_FAMILIES,
    TWO_HOP_TEMPLATES,
    TWO_HOP_VOCAB,
    VOCAB,
    QuestionSet,
    RelationTemplate,
    Template,
    compute_answers,
    compute_two_hop_answers,
    make_candidates,
    question_set,
)
from foveal.data.shapes.scenes import (
    COLOURS,
    HALF,
    IMAGE_SIZE,
    MIN_SEPARATION,
    N_OBJECTS,
    OBJECT_MASKS,
    RGB,
    SHAPES,
    TIE_MARGIN,
    make_scenes,
    object_boxes,
    render,
    valid_scenes,
)
from foveal.errors import FovealError

SPLITS = ("train", "test")
OBJECT_ROLES = ("named", "first", "second")  # a question's X object, the object found first, the answer's object
DEFAULT_IMAGES = {"train": 10_000, "test": 1_000}
CACHE_VERSION = 1


@dataclass
class ShapesArrays:
    """One split. Question ``q`` asks about ``images[image[q]]``.

    Shape:
        - images: uint8 ``(I, 75, 75, 3)``; centres: int64 ``(I, 6, 2)``; shapes: int64 ``(I, 6)``
        - image, template, colour, answer, target, correct: int64 ``(Q,)``; candidates: int64 ``(Q, 4)``
    """

    images: np.ndarray
    centres: np.ndarray
    shapes: np.ndarray
    image: np.ndarray
    template: np.ndarray
    colour: np.ndarray
    answer: np.ndarray
    target: np.ndarray
    candidates: np.ndarray
    correct: np.ndarray
    # optional so files cached before these fields load: for them first = colour, questions = "single"
    first: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # int64 (Q,): the object found first
    questions: np.ndarray = field(default_factory=lambda: np.array("single"))  # 0-d str: the question set

    def __post_init__(self) -> None:
        if self.first.size == 0:  # no first given (see the module docstring for what it is)
            self.first = self.colour.astype(np.int64).copy()
        self.questions = np.asarray(self.questions, dtype=str)

    def first_pictures(self, count: int) -> ShapesArrays:
        """The first ``count`` pictures with all their questions (a small sample of a split)."""
        keep = self.image < count
        asked = ("image", "template", "colour", "answer", "target", "candidates", "correct", "first")
        pictures = {name: getattr(self, name)[:count] for name in ("images", "centres", "shapes")}
        return ShapesArrays(**pictures, **{name: getattr(self, name)[keep] for name in asked}, questions=self.questions)


SPLIT_STREAM = {"train": 0, "test": 1}


def generate(
    n_images: int,
    questions_per_image: int = 20,
    *,
    seed: int = 0,
    split: str = "train",
    progress: bool = False,
    questions: str = "single",
) -> ShapesArrays:
    """Draw one split: scenes, pictures and questions, all from ``default_rng((seed, split))``.

    ``questions`` picks the question set (:data:`QUESTION_SETS`); both sets draw the same scenes
    from the same seed and split, so they ask about the same pictures.
    """
    if split not in SPLIT_STREAM:
        raise FovealError(f"unknown shapes split {split!r}; choose from: {', '.join(SPLITS)}")
    if n_images < 1 or questions_per_image < 1:
        raise FovealError(f"need n_images >= 1 and questions_per_image >= 1, got {n_images}, {questions_per_image}")
    chosen = question_set(questions)
    rng = np.random.default_rng((seed, SPLIT_STREAM[split]))
    centres, shapes = make_scenes(rng, n_images, progress=progress)
    M = n_images * questions_per_image
    image = np.repeat(np.arange(n_images), questions_per_image)
    if chosen.name == "two-hop":
        family = rng.integers(0, len(TWO_HOP_FAMILIES), M)
        per_family = len(TWO_HOP_TEMPLATES) // len(TWO_HOP_FAMILIES)
        template = family * per_family + rng.integers(0, per_family, M)
        colour = rng.integers(0, N_OBJECTS, M)
        answer, first, target = compute_two_hop_answers(centres, shapes, image, template, colour)
        none = np.full(M, -1, np.int64)  # no pointing questions in this set
        images = render(centres, shapes, progress=progress)
        return ShapesArrays(
            images, centres, shapes, image, template, colour, answer, target,
            np.full((M, N_CANDIDATES), -1, np.int64), none, first, np.array(chosen.name),
        )  # fmt: skip
    family = rng.integers(0, len(FAMILIES), M)
    per_family = len(TEMPLATES) // len(FAMILIES)  # templates are listed family by family
    template = family * per_family + rng.integers(0, per_family, M)
    colour = rng.integers(0, N_OBJECTS, M)
    answer, target = compute_answers(centres, shapes, image, template, colour)
    candidates, correct = make_candidates(rng, target, colour, template)
    images = render(centres, shapes, progress=progress)
    return ShapesArrays(images, centres, shapes, image, template, colour, answer, target, candidates, correct)


def load_shapes(
    split: str = "train",
    n_images: int | None = None,
    questions_per_image: int = 20,
    *,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    progress: bool | None = None,
    questions: str = "single",
) -> ShapesArrays:
    """One split from the cache, generating (and caching) it on first use.

    Args:
        split: ``"train"`` or ``"test"`` (independent streams of the same seed).
        n_images: pictures in the split (default 10,000 train, 1,000 test).
        questions_per_image: questions per picture.
        seed: the data seed.
        cache_dir: where the ``.npz`` lives (default ``$FOVEAL_CACHE`` or ``~/.cache/foveal``).
        progress: show progress bars (default: for 2,000 pictures or more).
        questions: the question set, ``"single"`` or ``"two-hop"`` (cached under its own name).
    """
    if split not in SPLIT_STREAM:
        raise FovealError(f"unknown shapes split {split!r}; choose from: {', '.join(SPLITS)}")
    question_set(questions)
    n_images = DEFAULT_IMAGES[split] if n_images is None else n_images
    # the single set keeps its original file name, so sets cached before the two-hop one are reused
    kind = "" if questions == "single" else f"{questions}_"
    name = f"shapes_v{CACHE_VERSION}_{kind}{split}_seed{seed}_{n_images}x{questions_per_image}.npz"
    path = Path(cache_dir or cache_root()) / "shapes" / name
    if path.exists():
        with np.load(path, allow_pickle=False) as f:
            return ShapesArrays(**{field.name: f[field.name] for field in fields(ShapesArrays) if field.name in f})
    progress = n_images >= 2_000 if progress is None else progress
    arrays = generate(n_images, questions_per_image, seed=seed, split=split, progress=progress, questions=questions)
    save_npz(path, {field.name: getattr(arrays, field.name) for field in fields(ShapesArrays)})
    return arrays


class ShapesSample(NamedTuple):
    """One question (or, batched by the default collate, a batch of them).

    Shape:
        - image: float ``(3, 75, 75)`` in [-1, 1]
        - question: int64 ``(L,)`` token ids padded with 0; length: int64 ``()``;
          word_mask: bool ``(L,)``, True = real word
        - answer: int64 ``()``, index into :data:`ANSWERS`; -1 for pointing questions
        - family, template: int64 ``()``, indices into :data:`FAMILIES` and :data:`TEMPLATES`
        - correct: int64 ``()``, the right candidate (0-3) of a pointing question, else -1
        - boxes: float ``(4, 4)``, the candidates' ``(x0, y0, x1, y1)`` in pixels (zeros if not pointing)
        - target: int64 ``()``, the object the answer is about (colour index)
    """

    image: Tensor
    question: Tensor
    length: Tensor
    word_mask: Tensor
    answer: Tensor
    family: Tensor
    template: Tensor
    correct: Tensor
    boxes: Tensor
    target: Tensor


class ShapesVQA(Dataset):
    """The questions of one ``shapes`` split, each with its picture (see the module docstring).

    Args:
        split: ``"train"`` or ``"test"``.
        n_images, questions_per_image, seed, cache_dir, progress: as in :func:`load_shapes`.
        arrays: already loaded :class:`ShapesArrays` (then the others are ignored).
        questions: the question set (:data:`QUESTION_SETS`) to load; given ``arrays`` carry their own.

    Example:
        >>> import tempfile
        >>> data = ShapesVQA("test", n_images=2, questions_per_image=3, cache_dir=tempfile.mkdtemp())
        >>> len(data), data[0].image.shape, data[0].question.shape
        (6, torch.Size([3, 75, 75]), torch.Size([12]))
    """

    # the default set's; an instance has its own set's (see __init__)
    vocab: tuple[str, ...] = VOCAB
    answers: tuple[str, ...] = ANSWERS
    families: tuple[str, ...] = FAMILIES
    templates: tuple[Template | RelationTemplate, ...] = TEMPLATES

    def __init__(
        self,
        split: str = "train",
        *,
        n_images: int | None = None,
        questions_per_image: int = 20,
        seed: int = 0,
        cache_dir: str | Path | None = None,
        progress: bool | None = None,
        arrays: ShapesArrays | None = None,
        questions: str = "single",
    ) -> None:
        if arrays is None:
            arrays = load_shapes(
                split,
                n_images,
                questions_per_image,
                seed=seed,
                cache_dir=cache_dir,
                progress=progress,
                questions=questions,
            )
        self.split, self.arrays = split, arrays
        # the arrays name their set, so given arrays are read with their own templates and vocabulary
        self.question_set = qs = question_set(str(arrays.questions))
        self.vocab, self.answers, self.families, self.templates = qs.vocab, qs.answers, qs.families, qs.templates
        self.images = torch.from_numpy(arrays.images).permute(0, 3, 1, 2)  # (I, 3, 75, 75) uint8
        self.image_index = torch.from_numpy(arrays.image)
        self.questions = torch.from_numpy(qs.tokens[arrays.template, arrays.colour])  # (Q, L)
        self.lengths = torch.from_numpy(qs.lengths[arrays.template, arrays.colour])
        self.max_length = qs.tokens.shape[-1]
        self.answer_ids = torch.from_numpy(arrays.answer)
        self.template_ids = torch.from_numpy(arrays.template)
        self.family_ids = torch.from_numpy(qs.template_family[arrays.template])
        self.correct = torch.from_numpy(arrays.correct)
        self.targets = torch.from_numpy(arrays.target)
        self.firsts = torch.from_numpy(arrays.first)
        boxes = object_boxes(arrays.centres[arrays.image[:, None], arrays.candidates.clip(min=0)])
        boxes[arrays.candidates < 0] = 0.0
        self.boxes = torch.from_numpy(boxes)  # (Q, 4, 4)

    def __len__(self) -> int:
        return len(self.questions)

    def __getitem__(self, q: int) -> ShapesSample:
        length = self.lengths[q]
        return ShapesSample(
            normalize(self.images[self.image_index[q]]),
            self.questions[q],
            length,
            torch.arange(self.max_length) < length,
            self.answer_ids[q],
            self.family_ids[q],
            self.template_ids[q],
            self.correct[q],
            self.boxes[q],
            self.targets[q],
        )

    def question_text(self, q: int) -> str:
        """Question ``q`` as its template wrote it."""
        return self.templates[int(self.template_ids[q])].text.format(COLOURS[int(self.arrays.colour[q])])

    def answer_text(self, q: int) -> str:
        """The answer as words; for pointing, the correct candidate and its object's colour."""
        if int(self.answer_ids[q]) >= 0:
            return self.answers[int(self.answer_ids[q])]
        return f"box {int(self.correct[q])} (the {COLOURS[int(self.targets[q])]} object)"

    def role_boxes(self, ids: Tensor) -> Tensor:
        """The boxes of each question's objects in :data:`OBJECT_ROLES` order: X, the object found first
        and the answer's object (see the module docstring).

        Shape:
            - ids: int64 ``(Q,)`` question indices
            - output: ``(Q, 3, 4)``, ``(x0, y0, x1, y1)`` in pixels
        """
        arrays, q = self.arrays, ids.numpy()
        objects = np.stack([arrays.colour[q], arrays.first[q], arrays.target[q]], 1)
        return torch.from_numpy(object_boxes(arrays.centres[arrays.image[q][:, None], objects]))

    def cut_sample(self, per_template: int) -> dict[str, Tensor]:
        """The first pictures, up to the last that holds one of each template's first ``per_template``
        questions, with all their questions: a shipped model's sample (:meth:`from_sample` reads it)."""
        firsts = [torch.nonzero(self.template_ids == t).flatten()[:per_template] for t in range(len(self.templates))]
        arrays = self.arrays.first_pictures(int(self.image_index[torch.cat(firsts)].max()) + 1)
        return {name: torch.from_numpy(value.copy()) for name, value in vars(arrays).items() if name != "questions"}

    @classmethod
    def from_sample(cls, tensors: dict[str, Tensor], questions: str) -> ShapesVQA:
        """A sample of :meth:`cut_sample` as the test split of the question set ``questions``."""
        arrays = ShapesArrays(**{name: value.numpy() for name, value in tensors.items()}, questions=np.array(questions))
        return cls("test", arrays=arrays)

    def objects_of(self, q: int) -> tuple[Tensor, list[str]]:
        """The boxes ``(R, 4)`` of the objects question ``q`` is about, the one it names and the answer's
        (one box when they are the same), and their names (``"red (named)"``, ``"blue (answer's)"``)."""
        named, answers = int(self.arrays.colour[q]), int(self.targets[q])
        objects = [named] if answers == named else [named, answers]
        names = [f"{COLOURS[named]} (named)", f"{COLOURS[answers]} (answer's)"][: len(objects)]
        return torch.from_numpy(object_boxes(self.arrays.centres[self.arrays.image[q], objects])), names


def question_only_baseline(train: ShapesVQA, test: ShapesVQA) -> dict[str, float]:
    """Accuracy on ``test`` of answering every question with its template's most common train answer.

    The answer of a pointing question is its correct candidate position. Returns the accuracy per
    family, per template (``"template/NAME"``) and overall.
    """

    qs = train.question_set

    def label(data: ShapesVQA) -> np.ndarray:
        return np.where(data.arrays.answer >= 0, data.arrays.answer, len(qs.answers) + data.arrays.correct)

    train_label, test_label = label(train), label(test)
    majority = np.zeros(len(qs.templates), np.int64)
    for t in range(len(qs.templates)):
        counts = Counter(train_label[train.arrays.template == t].tolist())
        majority[t] = counts.most_common(1)[0][0] if counts else -1
    hit = majority[test.arrays.template] == test_label
    family = qs.template_family[test.arrays.template]
    result = {name: float(hit[family == f].mean()) for f, name in enumerate(qs.families) if (family == f).any()}
    result |= {f"template/{t.name}": float(hit[test.arrays.template == i].mean()) for i, t in enumerate(qs.templates)}
    result["overall"] = float(hit.mean())
    return result


__all__ = [
    "ANSWERS",
    "CACHE_VERSION",
    "COLOURS",
    "DEFAULT_IMAGES",
    "FAMILIES",
    "HALF",
    "IMAGE_SIZE",
    "LENGTHS",
    "MAX_QUESTION_LENGTH",
    "MIN_SEPARATION",
    "N_CANDIDATES",
    "N_OBJECTS",
    "OBJECT_MASKS",
    "QUESTION_SETS",
    "RGB",
    "SETS",
    "SHAPES",
    "SPLITS",
    "SPLIT_STREAM",
    "TEMPLATES",
    "TEMPLATE_FAMILY",
    "TEMPLATE_INDEX",
    "TIE_MARGIN",
    "TOKENS",
    "TWO_HOP_ANSWERS",
    "TWO_HOP_FAMILIES",
    "TWO_HOP_TEMPLATES",
    "TWO_HOP_VOCAB",
    "VOCAB",
    "QuestionSet",
    "RelationTemplate",
    "ShapesArrays",
    "ShapesSample",
    "ShapesVQA",
    "Template",
    "compute_answers",
    "compute_two_hop_answers",
    "generate",
    "load_shapes",
    "make_candidates",
    "make_scenes",
    "object_boxes",
    "question_only_baseline",
    "question_set",
    "render",
    "valid_scenes",
]
