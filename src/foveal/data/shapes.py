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
from tqdm.auto import tqdm

from foveal.data.by_image import normalize
from foveal.data.cache import cache_root, save_npz
from foveal.data.text import encode, make_vocab, pad

IMAGE_SIZE = 75
N_OBJECTS = 6
HALF = 5
"""Half the size of an object: it covers ``2 * HALF + 1`` pixels across."""
MIN_SEPARATION = 2 * HALF + 2
"""Two centres differ by at least this in x or y, so objects never touch (1 px of white between)."""
TIE_MARGIN = 2.0
"""Pixels by which each object's closest (and furthest) other object must beat the runner-up."""
COLOURS = ("red", "green", "blue", "orange", "gray", "yellow")
RGB = np.array([(255, 0, 0), (0, 200, 0), (0, 0, 255), (255, 150, 0), (128, 128, 128), (235, 235, 0)], np.uint8)
SHAPES = ("square", "circle")
FAMILIES = ("non-relational", "relational", "pointing")
ANSWERS = ("square", "circle", "left", "right", "top", "bottom", "1", "2", "3", "4", "5", "6")
N_CANDIDATES = 4
SPLITS = ("train", "test")
DEFAULT_IMAGES = {"train": 10_000, "test": 1_000}
CACHE_VERSION = 1


class Template(NamedTuple):
    name: str
    family: int
    text: str


TEMPLATES = (
    Template("shape", 0, "what is the shape of the {} object?"),
    Template("horizontal", 0, "is the {} object on the left or right of the image?"),
    Template("vertical", 0, "is the {} object on the top or bottom of the image?"),
    Template("closest", 1, "what is the shape of the object closest to the {} object?"),
    Template("furthest", 1, "what is the shape of the object furthest from the {} object?"),
    Template("count", 1, "how many objects have the same shape as the {} object?"),
    Template("point-colour", 2, "which object is the {} object?"),
    Template("point-closest", 2, "which object is closest to the {} object?"),
    Template("point-furthest", 2, "which object is furthest from the {} object?"),
)
TEMPLATE_FAMILY = np.array([t.family for t in TEMPLATES])
TEMPLATE_INDEX = {t.name: i for i, t in enumerate(TEMPLATES)}
VOCAB = tuple(make_vocab(t.text.format(c) for t in TEMPLATES for c in COLOURS))
"""Every word the templates can produce; id 0 pads."""


def _encode_all() -> tuple[np.ndarray, np.ndarray]:
    index = {word: i for i, word in enumerate(VOCAB)}
    tokens, lengths = pad([encode(t.text.format(c), index) for t in TEMPLATES for c in COLOURS])
    return tokens.reshape(len(TEMPLATES), len(COLOURS), -1), lengths.reshape(len(TEMPLATES), len(COLOURS))


TOKENS, LENGTHS = _encode_all()
"""Token ids ``(template, colour, L)`` padded with 0, and lengths ``(template, colour)``."""
MAX_QUESTION_LENGTH = TOKENS.shape[-1]


QUESTION_SETS = ("single", "two-hop")
"""The question sets of a picture: the 9 templates above (the default), or the two-hop set."""


class RelationTemplate(NamedTuple):
    """A template of the two-hop set: ``relations`` are applied to X in order, ``asks`` names the answer."""

    name: str
    family: int
    text: str
    relations: tuple[str, ...]  # "closest" / "furthest", one per hop after finding X
    asks: str  # "shape" or "colour"


TWO_HOP_FAMILIES = ("one-hop", "two-hop")  # 2 families: no index collides with the single set's pointing family
TWO_HOP_ANSWERS = SHAPES + COLOURS


def _relation_templates() -> tuple[RelationTemplate, ...]:
    made = []
    for asks in ("shape", "colour"):
        made += [
            RelationTemplate(f"{asks}-closest", 0, f"what is the {asks} of the object closest to the {{}} object?",
                             ("closest",), asks),
            RelationTemplate(f"{asks}-furthest", 0, f"what is the {asks} of the object furthest from the {{}} object?",
                             ("furthest",), asks),
        ]  # fmt: skip
    for asks in ("shape", "colour"):
        made += [
            RelationTemplate(
                f"{asks}-closest-to-furthest", 1,
                f"what is the {asks} of the object closest to the object furthest from the {{}} object?",
                ("furthest", "closest"), asks,
            ),
            RelationTemplate(
                f"{asks}-furthest-from-closest", 1,
                f"what is the {asks} of the object furthest from the object closest to the {{}} object?",
                ("closest", "furthest"), asks,
            ),
        ]  # fmt: skip
    return tuple(sorted(made, key=lambda t: t.family))  # listed family by family, as generate() draws them


TWO_HOP_TEMPLATES = _relation_templates()
TWO_HOP_VOCAB = tuple(make_vocab(t.text.format(c) for t in TWO_HOP_TEMPLATES for c in COLOURS))
"""Every word the two-hop templates can produce; id 0 pads."""


class QuestionSet(NamedTuple):
    """What a question set's questions are made of: templates, families, answers and their token ids.

    Shape:
        - tokens: int64 ``(template, colour, L)`` padded with 0; lengths: int64 ``(template, colour)``
        - template_family: int64 ``(template,)``
    """

    name: str
    templates: tuple[Template, ...] | tuple[RelationTemplate, ...]
    families: tuple[str, ...]
    answers: tuple[str, ...]
    vocab: tuple[str, ...]
    tokens: np.ndarray
    lengths: np.ndarray
    template_family: np.ndarray


def _question_set(
    name: str,
    templates: tuple[Template, ...] | tuple[RelationTemplate, ...],
    families: tuple[str, ...],
    answers: tuple[str, ...],
    vocab: tuple[str, ...],
) -> QuestionSet:
    index = {word: i for i, word in enumerate(vocab)}
    tokens, lengths = pad([encode(t.text.format(c), index) for t in templates for c in COLOURS])
    shape = (len(templates), len(COLOURS))
    family = np.array([t.family for t in templates])
    return QuestionSet(
        name, templates, families, answers, vocab, tokens.reshape(*shape, -1), lengths.reshape(shape), family
    )


SETS = {
    "single": _question_set("single", TEMPLATES, FAMILIES, ANSWERS, VOCAB),
    "two-hop": _question_set("two-hop", TWO_HOP_TEMPLATES, TWO_HOP_FAMILIES, TWO_HOP_ANSWERS, TWO_HOP_VOCAB),
}
"""Question set name -> :class:`QuestionSet`."""


def question_set(name: str) -> QuestionSet:
    """The :class:`QuestionSet` called ``name`` (one of :data:`QUESTION_SETS`)."""
    if name not in SETS:
        raise ValueError(f"unknown shapes question set {name!r}; choose from: {', '.join(QUESTION_SETS)}")
    return SETS[name]


def valid_scenes(centres: np.ndarray) -> np.ndarray:
    """Which scenes obey the rules of the module docstring (no touching, no ties, off the middle).

    Shape:
        - centres: int ``(n, 6, 2)``, pixel ``(x, y)`` per object
        - output: bool ``(n,)``
    """
    first, second = np.triu_indices(N_OBJECTS, 1)  # the 15 pairs
    gap = np.abs(centres[:, first] - centres[:, second]).max(-1)  # (n, 15)
    ok = (gap >= MIN_SEPARATION).all(axis=1) & ~(2 * centres + 1 == IMAGE_SIZE).any(axis=(1, 2))
    candidates = np.flatnonzero(ok)  # the distance test on the survivors only: most scenes fail above
    kept = centres[candidates].astype(np.float64)
    dist = np.sqrt(((kept[:, :, None] - kept[:, None]) ** 2).sum(-1))
    np.einsum("nii->ni", dist)[:] = np.inf
    ranked = np.sort(dist, axis=-1)[..., : N_OBJECTS - 1]  # (n, 6, 5): nearest first, self dropped
    unique = (ranked[..., 1] - ranked[..., 0] >= TIE_MARGIN) & (ranked[..., -1] - ranked[..., -2] >= TIE_MARGIN)
    ok[candidates] = unique.all(axis=-1)
    return ok


def make_scenes(rng: np.random.Generator, n: int, *, progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random scenes: object ``k`` has colour ``k``, a centre and a shape (0 square, 1 circle).

    Candidate layouts are drawn in chunks and the first ``n`` valid ones kept (about 2% are).

    Shape:
        - centres: int64 ``(n, 6, 2)``, pixel ``(x, y)``; shapes: int64 ``(n, 6)``
    """
    kept, have, chunk = [], 0, 20_000
    with tqdm(total=n, desc="shapes: scenes", unit="scene", disable=not progress) as bar:
        while have < n:
            centres = rng.integers(HALF, IMAGE_SIZE - HALF, size=(chunk, N_OBJECTS, 2))
            good = centres[valid_scenes(centres)][: n - have]
            kept.append(good)
            have += len(good)
            bar.update(len(good))
    shapes = rng.integers(0, len(SHAPES), size=(n, N_OBJECTS))
    return np.concatenate(kept).astype(np.int64), shapes.astype(np.int64)


def _masks() -> np.ndarray:
    dy, dx = np.mgrid[-HALF : HALF + 1, -HALF : HALF + 1]
    square = np.ones_like(dx, dtype=bool)
    circle = dx**2 + dy**2 <= HALF * (HALF + 1)  # a little past the radius, for a round 11 px disc
    return np.stack([square, circle])


OBJECT_MASKS = _masks()
"""bool ``(2, 11, 11)``: the pixels of a square and of a circle around their centre."""


def render(centres: np.ndarray, shapes: np.ndarray, *, progress: bool = False) -> np.ndarray:
    """Draw the scenes: one fancy-indexed write per chunk of pictures.

    Shape:
        - centres: ``(n, 6, 2)``; shapes: ``(n, 6)``
        - output: uint8 ``(n, 75, 75, 3)``, white background
    """
    n = len(centres)
    images = np.full((n, IMAGE_SIZE, IMAGE_SIZE, 3), 255, np.uint8)
    offsets = np.arange(-HALF, HALF + 1)
    pixels = images.reshape(-1, 3)  # one row per pixel, so one flat index per write
    chunk = 2_000
    for start in tqdm(range(0, n, chunk), desc="shapes: drawing", disable=not progress):
        c, s = centres[start : start + chunk], shapes[start : start + chunk]
        m = len(c)
        ys = c[:, :, 1, None, None] + offsets[:, None]  # (m, 6, 11, 1)
        xs = c[:, :, 0, None, None] + offsets  # (m, 6, 1, 11)
        flat = (np.arange(start, start + m)[:, None, None, None] * IMAGE_SIZE + ys) * IMAGE_SIZE + xs
        on = OBJECT_MASKS[s]  # (m, 6, 11, 11)
        colour = np.broadcast_to(np.arange(N_OBJECTS)[:, None, None], on.shape)
        pixels[flat[on]] = RGB[colour[on]]
    return images


def object_boxes(centres: np.ndarray) -> np.ndarray:
    """The box ``(x0, y0, x1, y1)`` of each object, half-open, in pixels (see the module's Convention).

    Shape:
        - centres: ``(..., 2)``; output: float32 ``(..., 4)``
    """
    return np.concatenate([centres - HALF, centres + HALF + 1], axis=-1).astype(np.float32)


def compute_answers(
    centres: np.ndarray, shapes: np.ndarray, image: np.ndarray, template: np.ndarray, colour: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The answer to each question, and the object it is about.

    Args:
        centres, shapes: the scenes (see :func:`make_scenes`).
        image: the scene each question asks about.
        template: index into :data:`TEMPLATES`.
        colour: the colour ``X`` of the question (= the index of the ``X`` object).

    Shape:
        - centres: ``(n, 6, 2)``; shapes: ``(n, 6)``; image, template, colour: ``(M,)``
        - answer: int64 ``(M,)``, an index into :data:`ANSWERS`, -1 for pointing questions
        - target: int64 ``(M,)``, the object the answer is about: X itself for the non-relational,
          count and point-colour templates, X's closest or furthest object for the others

    Example:
        >>> centres = np.array([[[10, 10], [30, 10], [70, 70], [10, 50], [50, 30], [70, 10]]])
        >>> shapes = np.array([[0, 1, 0, 0, 1, 0]])
        >>> first = np.zeros(1, int)  # scene 0, colour 0 (red)
        >>> ask = lambda name: compute_answers(centres, shapes, first, np.array([TEMPLATE_INDEX[name]]), first)
        >>> [ANSWERS[ask(name)[0][0]] for name in ("shape", "horizontal", "closest", "furthest", "count")]
        ['square', 'left', 'circle', 'square', '4']
        >>> int(ask("point-closest")[1][0]), int(ask("point-furthest")[1][0])
        (1, 2)
    """
    rows = np.arange(len(image))
    c, s = centres[image].astype(np.float64), shapes[image]  # (M, 6, 2), (M, 6)
    anchor = c[rows, colour]  # (M, 2)
    dist = np.sqrt(((c - anchor[:, None]) ** 2).sum(-1))
    dist[rows, colour] = np.nan
    closest = np.nanargmin(dist, axis=1)
    furthest = np.nanargmax(dist, axis=1)
    shape_of = s[rows, colour]
    name = np.array([t.name for t in TEMPLATES])[template]
    answer = np.full(len(image), -1, np.int64)
    target = colour.astype(np.int64).copy()
    for t, value in {
        "shape": shape_of,
        "horizontal": np.where(2 * anchor[:, 0] + 1 < IMAGE_SIZE, ANSWERS.index("left"), ANSWERS.index("right")),
        "vertical": np.where(2 * anchor[:, 1] + 1 < IMAGE_SIZE, ANSWERS.index("top"), ANSWERS.index("bottom")),
        "closest": s[rows, closest],
        "furthest": s[rows, furthest],
        "count": ANSWERS.index("1") + (s == shape_of[:, None]).sum(1) - 1,
    }.items():
        answer[name == t] = value[name == t]
    for t in ("closest", "point-closest"):
        target[name == t] = closest[name == t]
    for t in ("furthest", "point-furthest"):
        target[name == t] = furthest[name == t]
    return answer, target


def compute_two_hop_answers(
    centres: np.ndarray, shapes: np.ndarray, image: np.ndarray, template: np.ndarray, colour: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The answer to each question of the two-hop set, the object found first and the answer's object.

    Args:
        centres, shapes: the scenes (see :func:`make_scenes`).
        image: the scene each question asks about.
        template: index into :data:`TWO_HOP_TEMPLATES`.
        colour: the colour ``X`` of the question (= the index of the ``X`` object).

    Shape:
        - centres: ``(n, 6, 2)``; shapes: ``(n, 6)``; image, template, colour: ``(M,)``
        - answer: int64 ``(M,)``, an index into :data:`TWO_HOP_ANSWERS`
        - first: int64 ``(M,)``, X's closest or furthest object for a two-hop template, X for a one-hop one
        - target: int64 ``(M,)``, the object the answer is about, never ``first``

    Example:
        >>> centres = np.array([[[10, 10], [30, 10], [70, 70], [10, 50], [50, 30], [68, 12]]])
        >>> shapes = np.array([[0, 1, 0, 0, 1, 0]])
        >>> names = [t.name for t in TWO_HOP_TEMPLATES]
        >>> ask = lambda name: compute_two_hop_answers(centres, shapes, np.zeros(1, int),
        ...                                            np.array([names.index(name)]), np.zeros(1, int))
        >>> answer, first, target = ask("colour-closest-to-furthest")  # red's furthest is blue, blue's closest gray
        >>> TWO_HOP_ANSWERS[answer[0]], int(first[0]), int(target[0])
        ('gray', 2, 4)
    """
    c = centres.astype(np.float64)
    dist = np.sqrt(((c[:, :, None] - c[:, None]) ** 2).sum(-1))  # (n, 6, 6), per scene
    np.einsum("nii->ni", dist)[:] = np.inf
    closest = dist.argmin(-1)  # (n, 6): each object's closest other object
    np.einsum("nii->ni", dist)[:] = -np.inf
    furthest = dist.argmax(-1)
    step = {"closest": closest[image], "furthest": furthest[image]}  # (M, 6) each
    rows = np.arange(len(image))
    first = colour.astype(np.int64).copy()
    target = colour.astype(np.int64).copy()
    answer = np.zeros(len(image), np.int64)
    for t, spec in enumerate(TWO_HOP_TEMPLATES):
        mine = template == t
        found = colour[mine].astype(np.int64)
        for n, relation in enumerate(spec.relations):
            if n == len(spec.relations) - 1 and len(spec.relations) > 1:
                first[mine] = found
            found = step[relation][rows[mine], found]
        target[mine] = found
        if spec.asks == "shape":
            answer[mine] = shapes[image[mine], found]  # SHAPES lead TWO_HOP_ANSWERS
        else:
            answer[mine] = len(SHAPES) + found  # object k has colour k
    return answer, first, target


def make_candidates(
    rng: np.random.Generator, target: np.ndarray, colour: np.ndarray, template: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """4 candidate objects per question, the target among them at a uniform random position.

    The 3 distractors are other objects of the scene, never the X object of a closest/furthest
    question. Non-pointing questions get ``-1`` everywhere.

    Shape:
        - target, colour, template: ``(M,)``
        - candidates: int64 ``(M, 4)`` object indices; correct: int64 ``(M,)``, the target's position
    """
    rows = np.arange(len(target))
    keys = rng.random((len(target), N_OBJECTS))
    keys[rows, target] = -1.0  # sorts first: always a candidate
    relational = np.isin(template, [TEMPLATE_INDEX["point-closest"], TEMPLATE_INDEX["point-furthest"]])
    keys[rows[relational], colour[relational]] = 2.0  # sorts last: never a candidate
    chosen = np.argsort(keys, axis=1)[:, :N_CANDIDATES]  # (M, 4), target in column 0
    order = np.argsort(rng.random((len(target), N_CANDIDATES)), axis=1)
    candidates = np.take_along_axis(chosen, order, axis=1)
    correct = np.argmax(order == 0, axis=1)
    pointing = TEMPLATE_FAMILY[template] == FAMILIES.index("pointing")
    candidates[~pointing] = -1
    correct[~pointing] = -1
    return candidates.astype(np.int64), correct.astype(np.int64)


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
    first: np.ndarray | None = None  # int64 (Q,): the object found first (see the module docstring)
    questions: np.ndarray = field(default_factory=lambda: np.array("single"))  # 0-d str: the question set

    def __post_init__(self) -> None:
        if self.first is None:
            self.first = self.colour.astype(np.int64).copy()
        self.questions = np.asarray(self.questions, dtype=str)


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
        raise ValueError(f"unknown shapes split {split!r}; choose from: {', '.join(SPLITS)}")
    if n_images < 1 or questions_per_image < 1:
        raise ValueError(f"need n_images >= 1 and questions_per_image >= 1, got {n_images}, {questions_per_image}")
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
        raise ValueError(f"unknown shapes split {split!r}; choose from: {', '.join(SPLITS)}")
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

    vocab = VOCAB
    answers = ANSWERS
    families = FAMILIES
    templates = TEMPLATES

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
