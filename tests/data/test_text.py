"""Question tokens: the vocabulary's fixed ids, unknown words, padding."""

from __future__ import annotations

import numpy as np

from foveal.data.text import PAD, UNK, encode, make_vocab, pad, tokenize


def test_vocab_reserves_pad_and_unknown_then_sorts_every_word_once() -> None:
    vocab = make_vocab(["What colour is the shape?", "what SHAPE is it"])
    assert vocab[:2] == [PAD, UNK] and vocab[2:] == sorted(set(vocab[2:]))
    assert set(vocab[2:]) == {"what", "colour", "is", "the", "shape", "it"}


def test_encode_round_trips_known_words_and_maps_the_rest_to_unknown() -> None:
    vocab = make_vocab(["is the circle red"])
    index = {word: i for i, word in enumerate(vocab)}
    ids = encode("Is the square red?", index)
    assert [vocab[i] for i in ids] == ["is", "the", UNK, "red"]
    assert [vocab[i] for i in encode("is the circle red", index)] == tokenize("is the circle red")


def test_pad_fills_with_the_pad_id_and_keeps_lengths() -> None:
    tokens, lengths = pad([[5, 6, 7], [], [8]])
    assert tokens.dtype == lengths.dtype == np.int64
    assert tokens.tolist() == [[5, 6, 7], [0, 0, 0], [8, 0, 0]] and lengths.tolist() == [3, 0, 1]
    empty, none = pad([])
    assert empty.shape == (0, 0) and none.shape == (0,)
