"""easy-VQA loading: images keyed by (split, id), tokenizer, vocabularies, object masks, cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch

easy_vqa = pytest.importorskip("easy_vqa")
from PIL import Image  # noqa: E402

from foveal.data.easy_vqa import (  # noqa: E402
    ANSWER_TYPES,
    PAD,
    UNK,
    EasyVQA,
    answer_type,
    load_easy_vqa,
    object_mask,
    tokenize,
)

# The package's own figures (its data/README.md): 28407 train and 7136 test yes/no questions.
YES_NO_COUNTS = {"train": 28407, "test": 7136}
COLOURS = {  # the generator's fill colours (drawn shapes deviate by up to ~40 at anti-aliased edges)
    "red": (255, 0, 0),
    "green": (0, 255, 0),
    "blue": (0, 0, 255),
    "black": (0, 0, 0),
    "gray": (128, 128, 128),
    "teal": (0, 128, 128),
    "brown": (165, 42, 42),
    "yellow": (255, 255, 0),
}


@pytest.fixture(scope="module")
def data():
    return load_easy_vqa()


@pytest.fixture(scope="module")
def splits(data):
    return {split: EasyVQA(split, data=data) for split in ("train", "test")}


def _png(split: str, image_id: int) -> np.ndarray:
    paths = easy_vqa.get_train_image_paths() if split == "train" else easy_vqa.get_test_image_paths()
    return np.asarray(Image.open(paths[image_id]).convert("RGB"))


def test_tokenize_lowercases_and_splits_on_non_letters() -> None:
    assert tokenize("Is there NOT a red-shape in the image?") == [
        "is", "there", "not", "a", "red", "shape", "in", "the", "image",
    ]  # fmt: skip
    assert tokenize("  ?! ") == []


def test_answer_types() -> None:
    assert [answer_type(a) for a in ("yes", "no", "circle", "rectangle", "triangle", "teal")] == [
        "yes/no", "yes/no", "shape", "shape", "shape", "colour",
    ]  # fmt: skip


def test_train_and_test_ids_collide_but_images_are_keyed_by_split(splits) -> None:
    train, test = splits["train"], splits["test"]
    assert set(train.image_ids.tolist()) & set(test.image_ids.tolist())  # the package's ids do overlap
    # Every question's picture is the PNG of its own split with its id, even where the ids collide.
    for ds in (train, test):
        for q in torch.linspace(0, len(ds) - 1, 25).long().tolist():
            split, image_id = ds.key(q)
            assert split == ds.split
            expected = torch.from_numpy(_png(split, image_id).copy()).permute(2, 0, 1)
            assert torch.equal(ds.images[ds.image_index[q]], expected)
    assert not torch.equal(train.images[0], test.images[0])  # same id 0, different pictures


def test_questions_answers_and_types_match_the_package(splits, data) -> None:
    for split, raw in (("train", easy_vqa.get_train_questions()), ("test", easy_vqa.get_test_questions())):
        ds = splits[split]
        texts, answers, image_ids = raw
        assert len(ds) == len(texts)
        for q in (0, 7, len(ds) // 2, len(ds) - 1):
            assert ds.question_text(q) == " ".join(tokenize(texts[q]))
            assert ds.answers[ds[q].answer] == answers[q]
            assert ds.key(q) == (split, image_ids[q])
        yes_no = (ds.answer_types == ANSWER_TYPES.index("yes/no")).sum().item()
        assert yes_no == YES_NO_COUNTS[split]


def test_vocabulary_comes_from_training_questions(data) -> None:
    assert data.vocab[:2] == [PAD, UNK]
    train_words = {w for text in easy_vqa.get_train_questions()[0] for w in tokenize(text)}
    assert set(data.vocab[2:]) == train_words
    assert data.encode("what colour is the zebra")[2:] == [data.vocab.index("is"), data.vocab.index("the"), 1]
    assert sorted(data.answers) == sorted(easy_vqa.get_answers())


def test_sample_is_normalised_and_padded(splits) -> None:
    sample = splits["test"][3]
    assert sample.image.shape == (3, 64, 64) and sample.image.dtype == torch.float32
    assert sample.image.min() >= -1.0 and sample.image.max() <= 1.0
    assert sample.mask.shape == (64, 64) and sample.mask.dtype == torch.bool
    length = int(sample.length)
    assert (sample.question[:length] > 0).all() and (sample.question[length:] == 0).all()


def test_mask_covers_the_shape_not_the_background(splits) -> None:
    # On real pictures whose answer names the colour, the masked pixels are that colour and the
    # unmasked ones the (light) background.
    ds = splits["test"]
    colour_questions = [q for q in range(len(ds)) if ds.answers[ds.answer_ids[q]] in COLOURS][:40]
    assert len(colour_questions) == 40
    for q in colour_questions:
        image = ds.images[ds.image_index[q]].permute(1, 2, 0).int()
        mask = ds.masks[ds.image_index[q]]
        fraction = mask.float().mean().item()
        assert 0.005 < fraction < 0.5, fraction
        shape_colour = image[mask].float().median(dim=0).values
        expected = torch.tensor(COLOURS[ds.answers[ds.answer_ids[q]]], dtype=torch.float)
        assert (shape_colour - expected).abs().max() <= 48, (q, shape_colour, expected)
        assert image[~mask].float().mean(0).min() > 200  # background is light


def test_object_mask_on_a_drawn_square() -> None:
    image = np.full((16, 16, 3), (240, 235, 250), np.uint8)
    image[4:9, 6:12] = (0, 128, 128)
    image[4, 5] = (200, 210, 220)  # an anti-aliased edge pixel closer to the background: not shape
    expected = np.zeros((16, 16), bool)
    expected[4:9, 6:12] = True
    np.testing.assert_array_equal(object_mask(image), expected)


@pytest.mark.slow  # decodes all 5000 pictures again (several seconds of CPU)
def test_cache_round_trip(tmp_path, data) -> None:
    built = load_easy_vqa(tmp_path)  # builds from the package into an empty cache dir
    assert list(tmp_path.glob("*.npz")) and not list(tmp_path.glob("*.tmp*"))
    cached = load_easy_vqa(tmp_path)
    for split in ("train", "test"):
        for name in ("images", "masks", "questions", "answers", "image_index"):
            np.testing.assert_array_equal(getattr(built.splits[split], name), getattr(cached.splits[split], name))
            np.testing.assert_array_equal(getattr(built.splits[split], name), getattr(data.splits[split], name))
    assert built.vocab == cached.vocab == data.vocab


def test_unknown_split_is_one_clear_error(data) -> None:
    with pytest.raises(ValueError, match="choose from: train, test"):
        EasyVQA("val", data=data)


def test_cache_is_built_once_and_read_back(tmp_path, monkeypatch, data) -> None:
    import foveal.data.easy_vqa as module

    def small_arrays() -> dict[str, np.ndarray]:
        calls.append(1)
        arrays = {"vocab": np.array(data.vocab), "answers": np.array(data.answers)}
        for split, a in data.splits.items():
            arrays |= {f"{split}_{k}": v[:3] for k, v in vars(a).items()}
        return arrays

    calls: list[int] = []
    monkeypatch.setattr(module, "_build_arrays", small_arrays)
    first = load_easy_vqa(tmp_path)
    second = load_easy_vqa(tmp_path)
    assert len(calls) == 1 and not list(tmp_path.glob("*.tmp*"))
    np.testing.assert_array_equal(first.splits["test"].images, data.splits["test"].images[:3])
    np.testing.assert_array_equal(second.splits["train"].masks, data.splits["train"].masks[:3])
    assert second.vocab == data.vocab and second.answers == data.answers


def test_grouping_by_image_keeps_every_question_with_its_own_picture(splits) -> None:
    from foveal.data.easy_vqa import EasyVQAByImage, collate_by_image

    questions = splits["test"]
    by_image = EasyVQAByImage(questions)
    assert sum(len(g) for g in by_image.groups) == len(questions)
    assert len(by_image) == len(questions.images)  # every test picture has questions
    picks = [0, 5, len(by_image) - 1]
    batch = collate_by_image([by_image[i] for i in picks])
    assert batch.image.shape == (3, 3, 64, 64) and batch.mask.shape == (3, 64, 64)
    asked = torch.cat([by_image.groups[i] for i in picks])
    assert len(batch.question) == len(asked) == len(batch.image_index)
    for row, q in zip(batch.image_index.tolist(), asked.tolist(), strict=True):
        sample = questions[q]
        assert torch.equal(batch.image[row], sample.image) and torch.equal(batch.mask[row], sample.mask)
    assert torch.equal(batch.question, questions.questions[asked])
    assert torch.equal(batch.answer, questions.answer_ids[asked])
