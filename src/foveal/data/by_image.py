"""Questions grouped by picture, so a VQA model encodes each picture once for all its questions.

The VQA sets have many questions per picture (easy-VQA about ten, ``shapes`` twenty). A
:class:`ByImage` data set makes item ``i`` one picture with all its questions, and
:func:`collate_by_image` concatenates such items into one batch; a loader's ``batch_size`` then
counts pictures. Pictures reach the model scaled to [-1, 1] (:func:`normalize`).

A batch is a NamedTuple whose first field ``image`` holds the pictures ``(I, ...)``, whose last
field ``image_index`` ``(Q,)`` says which picture each question is about, and whose other fields
are per question (or per picture, like ``image``) and are concatenated along their first axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import torch
from torch import Tensor
from torch.utils.data import Dataset

from foveal.preprocess import picture_input

__all__ = ["ByImage", "collate_by_image", "denormalize", "normalize"]

Batch = TypeVar("Batch", bound=tuple[Any, ...])
"""A NamedTuple batch laid out as the module docstring says (``image`` first, ``image_index`` last)."""


def normalize(image: Tensor) -> Tensor:
    """uint8 ``(..., 3, H, W)`` in [0, 255] -> float in [-1, 1]."""
    return image.float() / 127.5 - 1.0


def denormalize(image: Tensor) -> Tensor:
    """Inverse of :func:`normalize`, to float in [0, 1] for drawing."""
    return ((image + 1.0) / 2.0).clamp(0, 1)


def describe_pictures(size: int, vocab: Sequence[str], answers: Sequence[str]) -> dict[str, dict[str, Any]]:
    """A shipped VQA model's card entries: square RGB float pictures in [0, 1] (uint8 divided by 255) that
    :func:`normalize` maps to [-1, 1] (``(x - mean) / std``), and the question vocabulary and answer names."""
    preprocessing = picture_input([size, size], 3, mean=[0.5] * 3, std=[0.5] * 3)
    return {"preprocessing": preprocessing, "labels": {"vocab": list(vocab), "answers": list(answers)}}


class ByImage(Dataset[Batch]):
    """Item ``i``: the ``i``-th picture that has questions, with all its questions.

    Subclasses build the item (a batch holding one picture, ``image_index`` all zeros) in
    ``__getitem__`` from :attr:`rows` and :meth:`question_ids`.

    Args:
        image_index: which picture each question is about.
        n_images: pictures in the split.
        limit: keep only the first ``limit`` pictures that have questions (None: all).

    Shape:
        - image_index: int64 ``(Q,)``, values in ``[0, n_images)``

    Attributes:
        rows: int64 ``(I,)``, item ``i``'s picture (an index into the split's pictures).
        groups: item ``i``'s questions, int64 ``(Q_i,)`` in their original order.

    Example:
        >>> by_image = ByImage(torch.tensor([1, 0, 1, 3]), 4)
        >>> len(by_image), by_image.rows.tolist(), by_image.question_ids(1).tolist()
        (3, [0, 1, 3], [0, 2])
    """

    def __init__(self, image_index: Tensor, n_images: int, *, limit: int | None = None) -> None:
        order = torch.argsort(image_index, stable=True)
        counts = torch.bincount(image_index, minlength=n_images)
        self.rows = torch.nonzero(counts).squeeze(1)[:limit]
        self.groups = [group for group in torch.split(order, counts.tolist()) if len(group)][:limit]

    def __len__(self) -> int:
        return len(self.rows)

    def question_ids(self, i: int) -> Tensor:
        """The questions (indices into the question-level set) of item ``i``'s picture."""
        return self.groups[i]


def collate_by_image(items: Sequence[Batch]) -> Batch:
    """Concatenate batches of pictures and their questions, renumbering each question's ``image_index``.

    Example:
        >>> from typing import NamedTuple
        >>> class Pictures(NamedTuple):
        ...     image: Tensor
        ...     answer: Tensor
        ...     image_index: Tensor
        >>> one = Pictures(torch.zeros(1, 3, 2, 2), torch.tensor([7, 8]), torch.tensor([0, 0]))
        >>> two = Pictures(torch.ones(2, 3, 2, 2), torch.tensor([9]), torch.tensor([1]))
        >>> batch = collate_by_image([one, two])
        >>> batch.image.shape[0], batch.answer.tolist(), batch.image_index.tolist()
        (3, [7, 8, 9], [0, 0, 2])
    """
    offsets = torch.tensor([0, *[len(item[0]) for item in items]]).cumsum(0)  # item[0]: its pictures
    index = torch.cat([item[-1] + offsets[n] for n, item in enumerate(items)])  # item[-1]: its image_index
    fields = [torch.cat(parts) for parts in zip(*(item[:-1] for item in items), strict=True)]
    batch: Any = type(items[0])  # a NamedTuple's class, which takes its fields
    return batch(*fields, index)
