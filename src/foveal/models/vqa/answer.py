"""Asking a VQA model a question in words: the picture and question in, the answer's name and maps out.

A model loaded by :func:`foveal.pretrained` or :func:`foveal.from_pretrained` carries what this
needs: ``labels["vocab"]`` (token id -> word, id 0 the padding and ``<unk>`` for words it never saw)
and ``labels["answers"]`` (class -> answer), and ``preprocessing``, from which
:func:`foveal.preprocess.transform_for` makes the network's input of a picture.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch import Tensor

from foveal._checks import check_shape
from foveal.errors import FovealError
from foveal.preprocess import picture_input, transform_for

if TYPE_CHECKING:
    from foveal.models.vqa.model import VQA

UNK = "<unk>"


class Answer(NamedTuple):
    """What :meth:`foveal.models.vqa.VQA.answer` returns.

    Shape:
        - maps: ``(hops, grid, grid)``, where each hop looked (row 0 at the top of the picture), or
          None for the ``none`` head
    """

    text: str  # the answer's name; with candidate boxes, "box K" for the K-th (from 0) box chosen
    maps: Tensor | None


def words(text: str) -> list[str]:
    """The question's words as the VQA data sets split them (:func:`foveal.data.text.tokenize`).

    Example:
        >>> words("What colour is the shape?")
        ['what', 'colour', 'is', 'the', 'shape']
    """
    return re.findall(r"[a-z]+", text.lower())


def answer(model: VQA, image: Any, question: str, boxes: Tensor | None = None) -> Answer:
    """``model``'s answer to ``question`` about ``image``, with every hop's map (see :meth:`VQA.answer`)."""
    labels, preprocessing = getattr(model, "labels", None) or {}, getattr(model, "preprocessing", None) or {}
    vocab, answers = labels.get("vocab"), labels.get("answers")
    if not vocab or not answers:
        raise FovealError(
            "answer: this model has no vocabulary and answer names (labels 'vocab' and 'answers'); "
            "load it with foveal.pretrained(NAME) or foveal.from_pretrained(PATH)"
        )
    if not preprocessing:  # labels set by hand: the pictures of foveal's VQA recipes
        size = model.spec.image_size
        preprocessing = picture_input([size, size], 3, mean=[0.5] * 3, std=[0.5] * 3)
    parameter = next(model.parameters())
    x = transform_for(preprocessing)(image)
    if x.shape[0] != 1:
        raise FovealError(f"image: expected one picture, got a batch of {x.shape[0]}")
    x = x.to(parameter)
    index = {word: i for i, word in enumerate(vocab)}
    tokens = [index.get(word, index.get(UNK, 1)) for word in words(question)]
    if not tokens:
        raise FovealError(f"question: expected at least one word, got {question!r}")
    ids = torch.tensor([tokens], device=parameter.device)
    length = torch.tensor([len(tokens)], device=parameter.device)
    if boxes is not None:
        check_shape("boxes", boxes, (None, 4))
        boxes = boxes[None].to(parameter)
    with torch.no_grad():
        out = model(x, ids, length, boxes=boxes)
    if out.candidate_logits is not None:
        text = f"box {int(out.candidate_logits.argmax())}"
    else:
        text = answers[int(out.logits.argmax())]
    maps = None if out.attention is None else out.attention[0].view(-1, model.grid, model.grid).cpu()
    return Answer(text, maps)
