"""Questions as token ids: the tokenizer, the vocabulary and the padding both VQA sets use.

Id 0 is :data:`PAD` (padding after a question's last word) and id 1 is :data:`UNK` (a word the
vocabulary has not seen); the other ids are the vocabulary's words in sorted order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

__all__ = ["PAD", "UNK", "encode", "make_vocab", "pad", "tokenize"]

PAD, UNK = "<pad>", "<unk>"


def tokenize(text: str) -> list[str]:
    """Lowercase and split on anything that is not a letter.

    Example:
        >>> tokenize("Does the image NOT contain a red shape?")
        ['does', 'the', 'image', 'not', 'contain', 'a', 'red', 'shape']
    """
    return re.findall(r"[a-z]+", text.lower())


def make_vocab(texts: Iterable[str]) -> list[str]:
    """``[PAD, UNK, *words]``: every word of ``texts`` once, sorted.

    Example:
        >>> make_vocab(["is it red?", "Is it blue"])
        ['<pad>', '<unk>', 'blue', 'is', 'it', 'red']
    """
    return [PAD, UNK, *sorted({word for text in texts for word in tokenize(text)})]


def encode(text: str, index: Mapping[str, int]) -> list[int]:
    """Token ids of ``text`` under ``index`` (word -> id); words it lacks map to ``index[UNK]``.

    Example:
        >>> vocab = make_vocab(["is it red"])
        >>> encode("Is it green?", {word: i for i, word in enumerate(vocab)})
        [2, 3, 1]
    """
    return [index.get(word, index[UNK]) for word in tokenize(text)]


def pad(sequences: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token id lists padded with 0 to the longest, and each list's length.

    Shape:
        - output: tokens int64 ``(N, L)``, ``L`` the longest length; lengths int64 ``(N,)``

    Example:
        >>> tokens, lengths = pad([[4, 5], [6]])
        >>> tokens.tolist(), lengths.tolist()
        ([[4, 5], [6, 0]], [2, 1])
    """
    lengths = np.array([len(s) for s in sequences], dtype=np.int64)
    tokens = np.zeros((len(sequences), int(lengths.max(initial=0))), dtype=np.int64)
    for row, sequence in enumerate(sequences):
        tokens[row, : len(sequence)] = sequence
    return tokens, lengths
