"""The ``shapes`` questions grouped by picture (:mod:`foveal.data.by_image`), so the CNN runs once per picture."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from foveal.data.by_image import ByImage, collate_by_image, normalize
from foveal.data.shapes import FAMILIES, ShapesVQA

__all__ = ["ShapesByImage", "ShapesImageBatch", "collate_by_image", "question_batch"]


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

    def target(self) -> Tensor:
        """What a right prediction is: the answer, or the correct candidate of a pointing question."""
        return torch.where(self.family == FAMILIES.index("pointing"), self.correct, self.answer)


class ShapesByImage(ByImage[ShapesImageBatch]):
    """The pictures of a :class:`foveal.data.shapes.ShapesVQA` split, each with all its questions.

    Batch them with :func:`collate_by_image`; ``loop.batch_size`` then counts pictures.

    Args:
        questions: the question-level data set.
        limit: keep the first ``limit`` pictures (None = all).

    Example:
        >>> import tempfile
        >>> data = ShapesVQA("test", n_images=3, questions_per_image=2, cache_dir=tempfile.mkdtemp())
        >>> batch = collate_by_image([ShapesByImage(data)[0], ShapesByImage(data)[2]])
        >>> batch.image.shape[0], batch.image_index.tolist()
        (2, [0, 0, 1, 1])
    """

    def __init__(self, questions: ShapesVQA, limit: int | None = None) -> None:
        super().__init__(questions.image_index, len(questions.images), limit=limit)
        self.questions = questions

    def __getitem__(self, i: int) -> ShapesImageBatch:
        q, data = self.question_ids(i), self.questions
        return _batch(data, self.rows[i : i + 1], q, torch.zeros(len(q), dtype=torch.long))

    def examples(self, per_template: int, *, one_per_picture: bool = False) -> list[int]:
        """The first ``per_template`` questions of each template (indices into :attr:`questions`), in
        template order; with ``one_per_picture``, each from a picture not yet picked."""
        data, picks = self.questions, list[int]()
        for t in range(len(data.templates)):
            of_template = torch.nonzero(data.template_ids == t).flatten()
            of_template = of_template[torch.isin(data.image_index[of_template], self.rows)]
            if one_per_picture:
                used = {int(data.image_index[q]) for q in picks}
                of_template = of_template[[int(data.image_index[q]) not in used for q in of_template]]
            picks += of_template[:per_template].tolist()
        return picks


def question_batch(data: ShapesVQA, ids: Sequence[int]) -> ShapesImageBatch:
    """The questions ``ids``, each with its own copy of its picture (pictures may repeat)."""
    q = torch.as_tensor(ids, dtype=torch.long)
    return _batch(data, data.image_index[q], q, torch.arange(len(q)))


def _batch(data: ShapesVQA, pictures: Sequence[int] | Tensor, q: Tensor, image_index: Tensor) -> ShapesImageBatch:
    images = normalize(torch.stack([data.images[int(p)] for p in pictures]))
    return ShapesImageBatch(
        images,
        data.questions[q],
        data.lengths[q],
        data.answer_ids[q],
        data.family_ids[q],
        data.template_ids[q],
        data.correct[q],
        data.boxes[q],
        image_index,
    )
