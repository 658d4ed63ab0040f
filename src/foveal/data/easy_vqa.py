"""easy-VQA: 64 x 64 pictures of one coloured shape, with yes/no, shape and colour questions.

The pictures and questions come from the installed ``easy-vqa`` package (nothing is downloaded).
Train and test image ids overlap (both start at 0), so images are keyed by ``(split, id)``: each
split has its own image array and every question points into its own split's array.

The ground-truth object mask is derived from the picture: the background is one flat light colour
and the shape one saturated colour, so a pixel belongs to the shape when any channel differs from
the background colour (the most common border colour) by more than :data:`MASK_THRESHOLD`.

Everything is preprocessed once into arrays and cached as an ``.npz`` (no pickles) under
``$FOVEAL_CACHE`` or ``~/.cache/foveal``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from foveal.data.by_image import ByImage, collate_by_image, denormalize, normalize
from foveal.data.cache import cache_root, save_npz
from foveal.data.text import PAD, UNK, encode, make_vocab, pad, tokenize
from foveal.errors import DataUnavailableError, FovealError

__all__ = [
    "ANSWER_TYPES",
    "IMAGE_SIZE",
    "MASK_THRESHOLD",
    "PAD",
    "SHAPES",
    "SPLITS",
    "UNK",
    "EasyVQA",
    "EasyVQAArrays",
    "EasyVQAByImage",
    "EasyVQAData",
    "VQAImageBatch",
    "VQASample",
    "answer_type",
    "collate_by_image",
    "denormalize",
    "load_easy_vqa",
    "normalize",
    "object_mask",
    "tokenize",
]

SPLITS = ("train", "test")
ANSWER_TYPES = ("yes/no", "shape", "colour")
SHAPES = ("circle", "rectangle", "triangle")
IMAGE_SIZE = 64
MASK_THRESHOLD = 64
"""A pixel is on the shape when some channel differs from the background by more than this (0-255).
The background is near-white and every shape colour is at least ~100 away from it in some channel;
anti-aliased edge pixels half-way between are split by this threshold."""
CACHE_VERSION = 1


def answer_type(answer: str) -> str:
    """The answer type of seed 002's breakdown: ``"yes/no"``, ``"shape"`` or ``"colour"``.

    Example:
        >>> answer_type("no"), answer_type("triangle"), answer_type("teal")
        ('yes/no', 'shape', 'colour')
    """
    if answer in ("yes", "no"):
        return "yes/no"
    return "shape" if answer in SHAPES else "colour"


def object_mask(image: np.ndarray, threshold: int = MASK_THRESHOLD) -> np.ndarray:
    """The pixels of the shape in an easy-VQA picture.

    Args:
        image: uint8 RGB picture.
        threshold: how far (max over channels, 0-255) a pixel must be from the background colour.

    Shape:
        - image: ``(H, W, 3)``
        - output: bool ``(H, W)``, True on the shape

    Example:
        >>> img = np.full((8, 8, 3), 240, np.uint8); img[2:4, 3:6] = (255, 0, 0)
        >>> object_mask(img).sum()
        np.int64(6)
    """
    border = np.concatenate([image[0], image[-1], image[:, 0], image[:, -1]])
    colours, counts = np.unique(border, axis=0, return_counts=True)
    background = colours[counts.argmax()].astype(np.int16)
    return np.abs(image.astype(np.int16) - background).max(axis=-1) > threshold


@dataclass
class EasyVQAArrays:
    """One split, preprocessed. Question ``q`` asks about ``images[image_index[q]]`` of the same split.

    Shape:
        - images: uint8 ``(I, 64, 64, 3)``; masks: bool ``(I, 64, 64)``; image_ids: ``(I,)``
          (the package's ids, unique within a split only)
        - questions: int64 ``(Q, L)`` token ids padded with 0; lengths, answers, answer_types,
          image_index: int64 ``(Q,)``
    """

    images: np.ndarray
    masks: np.ndarray
    image_ids: np.ndarray
    questions: np.ndarray
    lengths: np.ndarray
    answers: np.ndarray
    answer_types: np.ndarray
    image_index: np.ndarray


@dataclass
class EasyVQAData:
    """Both splits plus the vocabularies (built from the training questions only)."""

    splits: dict[str, EasyVQAArrays]
    vocab: list[str]
    answers: list[str]

    def encode(self, question: str) -> list[int]:
        """Token ids of a question; words never seen in training map to ``<unk>``."""
        return encode(question, {word: i for i, word in enumerate(self.vocab)})


def load_easy_vqa(cache_dir: str | Path | None = None) -> EasyVQAData:
    """Load easy-VQA from the cache, building the cache from the ``easy-vqa`` package if needed."""
    path = Path(cache_dir or cache_root()) / f"easy_vqa_v{CACHE_VERSION}.npz"
    if not path.exists():
        save_npz(path, _build_arrays())
    with np.load(path, allow_pickle=False) as f:
        arrays = {key: f[key] for key in f.files}
    fields = EasyVQAArrays.__dataclass_fields__
    splits = {s: EasyVQAArrays(**{k: arrays[f"{s}_{k}"] for k in fields}) for s in SPLITS}
    return EasyVQAData(splits, arrays["vocab"].tolist(), arrays["answers"].tolist())


def _build_arrays() -> dict[str, np.ndarray]:
    try:
        import easy_vqa
    except ImportError:
        raise DataUnavailableError(
            "easy-VQA needs the 'easy-vqa' package, which ships the data (pip install easy-vqa)"
        ) from None
    from PIL import Image

    raw = {
        "train": (easy_vqa.get_train_questions(), easy_vqa.get_train_image_paths()),
        "test": (easy_vqa.get_test_questions(), easy_vqa.get_test_image_paths()),
    }
    vocab = make_vocab(raw["train"][0][0])
    word_index = {word: i for i, word in enumerate(vocab)}
    answers = list(easy_vqa.get_answers())
    answer_index = {a: i for i, a in enumerate(answers)}
    out: dict[str, np.ndarray] = {"vocab": np.array(vocab), "answers": np.array(answers)}
    for split, ((texts, answer_words, image_ids), paths) in raw.items():
        ids = np.array(sorted(paths), dtype=np.int64)
        images = np.stack([np.asarray(Image.open(paths[i]).convert("RGB")) for i in ids])
        row = {int(image_id): r for r, image_id in enumerate(ids)}
        questions, lengths = pad([encode(text, word_index) for text in texts])
        out |= {
            f"{split}_images": images,
            f"{split}_masks": np.stack([object_mask(im) for im in images]),
            f"{split}_image_ids": ids,
            f"{split}_questions": questions,
            f"{split}_lengths": lengths,
            f"{split}_answers": np.array([answer_index[a] for a in answer_words], dtype=np.int64),
            f"{split}_answer_types": np.array([ANSWER_TYPES.index(answer_type(a)) for a in answer_words]),
            f"{split}_image_index": np.array([row[i] for i in image_ids], dtype=np.int64),
        }
    return out


class VQASample(NamedTuple):
    """One question (or, batched by the default collate, a batch of them).

    Shape:
        - image: float ``(3, 64, 64)``, scaled to [-1, 1]
        - question: int64 ``(L,)`` token ids, padded with 0; length: int64 ``()``
        - answer, answer_type: int64 ``()``
        - mask: bool ``(64, 64)``, True on the shape
    """

    image: Tensor
    question: Tensor
    length: Tensor
    answer: Tensor
    answer_type: Tensor
    mask: Tensor


class EasyVQA(Dataset):
    """The questions of one easy-VQA split, each with its picture and object mask.

    Args:
        split: ``"train"`` or ``"test"``.
        data: preloaded :class:`EasyVQAData` (shared between splits); loaded if None.
        cache_dir: where the preprocessed arrays are cached (see :func:`load_easy_vqa`).
        limit: keep only the first ``limit`` questions (for smoke tests).

    Example:
        >>> test = EasyVQA("test")
        >>> sample = test[0]
        >>> sample.image.shape, sample.mask.shape
        (torch.Size([3, 64, 64]), torch.Size([64, 64]))
        >>> test.key(0), test.question_text(0), test.answers[sample.answer]
        (('test', 0), 'what is the red shape', 'triangle')
    """

    def __init__(
        self,
        split: str,
        *,
        data: EasyVQAData | None = None,
        cache_dir: str | Path | None = None,
        limit: int | None = None,
    ) -> None:
        if split not in SPLITS:
            raise FovealError(f"unknown easy-VQA split {split!r}; choose from: {', '.join(SPLITS)}")
        self.split = split
        self.data = data if data is not None else load_easy_vqa(cache_dir)
        arrays = self.data.splits[split]
        self.vocab, self.answers = self.data.vocab, self.data.answers
        self.images = torch.from_numpy(arrays.images).permute(0, 3, 1, 2)  # (I, 3, 64, 64) uint8
        self.masks = torch.from_numpy(arrays.masks)
        self.image_ids = torch.from_numpy(arrays.image_ids)
        n = len(arrays.questions) if limit is None else min(limit, len(arrays.questions))
        self.questions = torch.from_numpy(arrays.questions[:n])
        self.lengths = torch.from_numpy(arrays.lengths[:n])
        self.answer_ids = torch.from_numpy(arrays.answers[:n])
        self.answer_types = torch.from_numpy(arrays.answer_types[:n])
        self.image_index = torch.from_numpy(arrays.image_index[:n])

    def __len__(self) -> int:
        return len(self.questions)

    def __getitem__(self, q: int) -> VQASample:
        i = self.image_index[q]
        return VQASample(
            normalize(self.images[i]),
            self.questions[q],
            self.lengths[q],
            self.answer_ids[q],
            self.answer_types[q],
            self.masks[i],
        )

    def names_present(self) -> Tensor:
        """Per question, True when a yes/no question names the colour or shape that is in the picture.

        "is there a red shape" -> yes, and "is there not a red shape" -> no, both name what is there: the
        named thing is present exactly when the answer is "yes" and the question is not negated ("not",
        "no"), or the answer is "no" and it is. False for shape and colour questions.

        Shape:
            - output: bool ``(Q,)``
        """
        negations = torch.tensor([self.vocab.index(w) for w in ("not", "no") if w in self.vocab])
        negated = torch.isin(self.questions, negations).any(-1)
        says_yes = self.answer_ids == self.answers.index("yes")
        return (self.answer_types == ANSWER_TYPES.index("yes/no")) & (says_yes != negated)

    def key(self, q: int) -> tuple[str, int]:
        """The ``(split, image id)`` of question ``q``'s picture."""
        return self.split, int(self.image_ids[self.image_index[q]])

    def question_text(self, q: int) -> str:
        """Question ``q`` as words (unknown words shown as ``<unk>``)."""
        return " ".join(self.vocab[t] for t in self.questions[q, : self.lengths[q]].tolist())


def cut_sample(test: EasyVQA, count: int) -> dict[str, Tensor]:
    """``count`` questions evenly spread over ``test``, each with its picture (uint8): a shipped model's sample."""
    picks = torch.linspace(0, len(test) - 1, count).round().long()
    return {
        "images": test.images[test.image_index[picks]].contiguous(),
        "questions": test.questions[picks].contiguous(),
        "lengths": test.lengths[picks],
        "answers": test.answer_ids[picks],
        "answer_types": test.answer_types[picks],
    }


def from_sample(tensors: dict[str, Tensor], vocab: list[str], answers: list[str]) -> EasyVQA:
    """A sample of :func:`cut_sample` as a test split (masks made from the pictures, as for the data set)."""
    images = tensors["images"].permute(0, 2, 3, 1).numpy()
    arrays = EasyVQAArrays(
        images=images,
        masks=np.stack([object_mask(image) for image in images]),
        image_ids=np.arange(len(images)),
        questions=tensors["questions"].numpy(),
        lengths=tensors["lengths"].numpy(),
        answers=tensors["answers"].numpy(),
        answer_types=tensors["answer_types"].numpy(),
        image_index=np.arange(len(images)),
    )
    return EasyVQA("test", data=EasyVQAData({"test": arrays}, vocab, answers))


class VQAImageBatch(NamedTuple):
    """Questions grouped by picture: each picture is encoded once and shared by its questions.

    Shape:
        - image: float ``(I, 3, 64, 64)``; mask: bool ``(I, 64, 64)``
        - question: int64 ``(Q, L)``; length, answer, answer_type: int64 ``(Q,)``
        - image_index: int64 ``(Q,)``, question ``q`` is about ``image[image_index[q]]``
    """

    image: Tensor
    question: Tensor
    length: Tensor
    answer: Tensor
    answer_type: Tensor
    mask: Tensor
    image_index: Tensor


class EasyVQAByImage(ByImage[VQAImageBatch]):
    """The pictures of a split, each with all its questions: item ``i`` is one picture.

    Training on these batches runs the CNN once per picture instead of once per question (easy-VQA
    has about ten questions per picture), and every picture brings all its questions. Batch them
    with :func:`collate_by_image`; ``loop.batch_size`` then counts pictures.

    Example:
        >>> by_image = EasyVQAByImage(EasyVQA("test"))
        >>> batch = collate_by_image([by_image[0], by_image[1]])
        >>> batch.image.shape[0], batch.image_index.max().item(), len(batch.question) == len(batch.answer)
        (2, 1, True)
    """

    def __init__(self, questions: EasyVQA) -> None:
        super().__init__(questions.image_index, len(questions.images))
        self.questions = questions

    def __getitem__(self, i: int) -> VQAImageBatch:
        q, row = self.question_ids(i), self.rows[i]
        ds = self.questions
        return VQAImageBatch(
            normalize(ds.images[row])[None],
            ds.questions[q],
            ds.lengths[q],
            ds.answer_ids[q],
            ds.answer_types[q],
            ds.masks[row][None],
            torch.zeros(len(q), dtype=torch.long),
        )
