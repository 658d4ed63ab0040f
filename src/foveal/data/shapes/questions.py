"""The questions of :mod:`foveal.data.shapes`: templates, question sets, exact answers, candidate boxes."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from foveal.data.shapes.scenes import COLOURS, IMAGE_SIZE, N_OBJECTS, SHAPES
from foveal.data.text import encode, make_vocab, pad
from foveal.errors import FovealError

FAMILIES = ("non-relational", "relational", "pointing")
ANSWERS = ("square", "circle", "left", "right", "top", "bottom", "1", "2", "3", "4", "5", "6")
N_CANDIDATES = 4


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
    templates: tuple[Template | RelationTemplate, ...]
    families: tuple[str, ...]
    answers: tuple[str, ...]
    vocab: tuple[str, ...]
    tokens: np.ndarray
    lengths: np.ndarray
    template_family: np.ndarray


def _question_set(
    name: str,
    templates: tuple[Template | RelationTemplate, ...],
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
        raise FovealError(f"unknown shapes question set {name!r}; choose from: {', '.join(QUESTION_SETS)}")
    return SETS[name]


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
