"""The ``shapes`` relational VQA set: determinism, drawing, answers checked by hand and by brute force, cache."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from foveal.data import shapes as S
from foveal.data.text import tokenize


@pytest.fixture(scope="module")
def small() -> S.ShapesArrays:
    return S.generate(40, 20, seed=3, split="train")


def test_same_seed_same_bytes_other_seed_or_split_differs(small: S.ShapesArrays) -> None:
    again = S.generate(40, 20, seed=3, split="train")
    for name in S.ShapesArrays.__dataclass_fields__:
        assert getattr(again, name).tobytes() == getattr(small, name).tobytes(), name
    assert not np.array_equal(S.generate(40, 20, seed=4).images, small.images)
    assert not np.array_equal(S.generate(40, 20, seed=3, split="test").images, small.images)


def test_scenes_follow_the_rules(small: S.ShapesArrays) -> None:
    assert S.valid_scenes(small.centres).all()
    assert ((small.centres >= S.HALF) & (small.centres < S.IMAGE_SIZE - S.HALF)).all()
    # every object is drawn whole and untouched by the others: its colour covers exactly its mask
    for i in range(len(small.images)):
        for k in range(S.N_OBJECTS):
            painted = (small.images[i] == S.RGB[k]).all(-1)
            assert painted.sum() == S.OBJECT_MASKS[small.shapes[i, k]].sum()
            cx, cy = small.centres[i, k]
            assert painted[cy, cx]


def test_valid_scenes_rejects_touching_ties_and_the_middle() -> None:
    good = np.array([[[10, 10], [30, 10], [62, 62], [10, 50], [50, 34], [67, 12]]])
    assert S.valid_scenes(good).all()
    touching = good.copy()
    touching[0, 1] = [21, 15]  # 11 px right of red: under MIN_SEPARATION
    tied = good.copy()
    tied[0, 4] = [10, 30]  # gray and green both 20 px from red
    middle = good.copy()
    middle[0, 2] = [37, 62]  # on the middle column: neither left nor right
    for scene in (touching, tied, middle):
        assert not S.valid_scenes(scene).any()


def _ask(centres, shapes, name: str, colour: int) -> tuple[str | int, int]:
    template = [t.name for t in S.TEMPLATES].index(name)
    answer, target = S.compute_answers(
        np.array([centres]), np.array([shapes]), np.zeros(1, int), np.array([template]), np.array([colour])
    )
    return (S.ANSWERS[answer[0]] if answer[0] >= 0 else -1), int(target[0])


def test_answers_on_a_hand_built_scene() -> None:
    #          red       green     blue      orange    gray      yellow
    centres = [[10, 10], [30, 10], [70, 70], [10, 50], [50, 30], [68, 12]]
    shapes = [0, 1, 0, 0, 1, 0]  # square circle square square circle square
    # red: green at 20, orange at 40, gray at 44.7, yellow at 58.0, blue at 84.9
    assert _ask(centres, shapes, "shape", 1) == ("circle", 1)
    assert _ask(centres, shapes, "horizontal", 0) == ("left", 0)
    assert _ask(centres, shapes, "horizontal", 2) == ("right", 2)
    assert _ask(centres, shapes, "vertical", 0) == ("top", 0)
    assert _ask(centres, shapes, "vertical", 3) == ("bottom", 3)
    assert _ask(centres, shapes, "closest", 0) == ("circle", 1)
    assert _ask(centres, shapes, "furthest", 0) == ("square", 2)
    assert _ask(centres, shapes, "count", 0) == ("4", 0)  # four squares, red among them
    assert _ask(centres, shapes, "count", 4) == ("2", 4)
    # blue (70, 70): gray at 44.7, orange at 63.2, yellow at 58.0, green at 72.1, red at 84.9
    assert _ask(centres, shapes, "closest", 2) == ("circle", 4)
    assert _ask(centres, shapes, "furthest", 2) == ("square", 0)
    assert _ask(centres, shapes, "point-colour", 5) == (-1, 5)
    assert _ask(centres, shapes, "point-closest", 2) == (-1, 4)
    assert _ask(centres, shapes, "point-furthest", 2) == (-1, 0)


def test_answers_match_a_brute_force_reading_of_the_templates(small: S.ShapesArrays) -> None:
    for q in range(0, len(small.image), 7):
        i, t, x = small.image[q], S.TEMPLATES[small.template[q]].name, small.colour[q]
        centres, shapes = small.centres[i].tolist(), small.shapes[i].tolist()
        others = [k for k in range(S.N_OBJECTS) if k != x]
        dist = {k: math.dist(centres[k], centres[x]) for k in others}
        closest, furthest = min(others, key=dist.get), max(others, key=dist.get)
        expected = {
            "shape": S.SHAPES[shapes[x]],
            "horizontal": "left" if centres[x][0] < 37 else "right",
            "vertical": "top" if centres[x][1] < 37 else "bottom",
            "closest": S.SHAPES[shapes[closest]],
            "furthest": S.SHAPES[shapes[furthest]],
            "count": str(sum(s == shapes[x] for s in shapes)),
        }
        if t in expected:
            assert S.ANSWERS[small.answer[q]] == expected[t]
            assert small.correct[q] == -1 and (small.candidates[q] == -1).all()
        else:
            target = {"point-colour": x, "point-closest": closest, "point-furthest": furthest}[t]
            candidates = small.candidates[q].tolist()
            assert small.answer[q] == -1 and candidates[small.correct[q]] == target
            assert len(set(candidates)) == S.N_CANDIDATES and all(0 <= k < S.N_OBJECTS for k in candidates)
            if t != "point-colour":
                assert x not in candidates


def test_question_mix_covers_every_template_and_colour(small: S.ShapesArrays) -> None:
    assert set(small.template.tolist()) == set(range(len(S.TEMPLATES)))
    assert set(small.colour.tolist()) == set(range(S.N_OBJECTS))
    pointing = small.correct >= 0
    assert set(small.correct[pointing].tolist()) == set(range(S.N_CANDIDATES))


def test_cache_round_trip(tmp_path) -> None:
    first = S.load_shapes("test", 5, 4, seed=1, cache_dir=tmp_path)
    files = list((tmp_path / "shapes").iterdir())
    assert [f.name for f in files] == ["shapes_v1_test_seed1_5x4.npz"]
    second = S.load_shapes("test", 5, 4, seed=1, cache_dir=tmp_path)
    for name in S.ShapesArrays.__dataclass_fields__:
        assert np.array_equal(getattr(first, name), getattr(second, name)), name
    files[0].write_bytes(b"")  # a second load really reads the file: a broken one fails
    with pytest.raises((ValueError, OSError, EOFError)):
        S.load_shapes("test", 5, 4, seed=1, cache_dir=tmp_path)


def test_dataset_items(small: S.ShapesArrays) -> None:
    data = S.ShapesVQA("train", arrays=small)
    assert len(data) == 40 * 20
    batch = torch.utils.data.default_collate([data[q] for q in range(32)])
    assert batch.image.shape == (32, 3, 75, 75) and batch.image.min() >= -1 and batch.image.max() <= 1
    assert batch.question.shape == (32, S.MAX_QUESTION_LENGTH)
    assert torch.equal(batch.word_mask, batch.question != 0)
    assert torch.equal(batch.word_mask.sum(1), batch.length)
    for q in range(32):
        sample = data[q]
        words = [S.VOCAB[t] for t in sample.question[: sample.length].tolist()]
        assert words == tokenize(data.question_text(q))
        assert sample.family == S.TEMPLATES[sample.template].family
        if sample.correct >= 0:
            x0, y0, x1, y1 = sample.boxes[sample.correct].tolist()
            cx, cy = small.centres[small.image[q], small.target[q]]
            assert (x0, y0, x1 - 1, y1 - 1) == (cx - S.HALF, cy - S.HALF, cx + S.HALF, cy + S.HALF)
        else:
            assert (sample.boxes == 0).all() and sample.answer >= 0


def test_question_only_baseline_is_near_chance() -> None:
    train = S.ShapesVQA("train", arrays=S.generate(300, 20, seed=0, split="train"))
    test = S.ShapesVQA("test", arrays=S.generate(300, 20, seed=0, split="test"))
    result = S.question_only_baseline(train, test)
    assert 0.45 < result["non-relational"] < 0.55
    assert 0.38 < result["relational"] < 0.50
    assert 0.20 < result["pointing"] < 0.30


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="unknown shapes split"):
        S.generate(2, split="val")
    with pytest.raises(ValueError, match="n_images >= 1"):
        S.generate(0)
