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


# --- the two-hop question set --------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_hop() -> S.ShapesArrays:
    return S.generate(40, 20, seed=3, split="train", questions="two-hop")


def _nearest(centres: list[list[int]], of: int, relation: str) -> int:
    others = [k for k in range(S.N_OBJECTS) if k != of]
    pick = min if relation == "closest" else max
    return pick(others, key=lambda k: math.dist(centres[k], centres[of]))


def test_two_hop_answers_match_a_brute_force_reading_of_each_template(two_hop: S.ShapesArrays) -> None:
    seen = set()
    for q in range(len(two_hop.image)):
        i, x = two_hop.image[q], int(two_hop.colour[q])
        template = S.TWO_HOP_TEMPLATES[two_hop.template[q]]
        centres, shapes = two_hop.centres[i].tolist(), two_hop.shapes[i].tolist()
        # read the name, not the template's fields: "closest-to-furthest" finds the furthest first
        words = template.name.split("-")
        if len(words) == 2:
            first, second = x, _nearest(centres, x, words[1])
        else:
            first = _nearest(centres, x, words[-1])
            second = _nearest(centres, first, words[1])
        expected = S.SHAPES[shapes[second]] if words[0] == "shape" else S.COLOURS[second]
        assert S.TWO_HOP_ANSWERS[two_hop.answer[q]] == expected, (q, template.name)
        assert (two_hop.first[q], two_hop.target[q]) == (first, second), (q, template.name)
        seen.add(template.name)
    assert seen == {t.name for t in S.TWO_HOP_TEMPLATES}


def test_two_hop_first_and_second_objects_differ(two_hop: S.ShapesArrays) -> None:
    assert (two_hop.first != two_hop.target).all()
    is_two_hop = S.SETS["two-hop"].template_family[two_hop.template] == S.TWO_HOP_FAMILIES.index("two-hop")
    assert is_two_hop.any() and (~is_two_hop).any()
    assert (two_hop.first[is_two_hop] != two_hop.colour[is_two_hop]).all()  # a real first hop away from X
    assert (two_hop.first[~is_two_hop] == two_hop.colour[~is_two_hop]).all()


def test_two_hop_answers_on_a_hand_built_scene() -> None:
    #          red       green     blue      orange    gray      yellow
    centres = np.array([[[10, 10], [30, 10], [70, 70], [10, 50], [50, 30], [68, 12]]])
    shapes = np.array([[0, 1, 0, 0, 1, 0]])
    names = [t.name for t in S.TWO_HOP_TEMPLATES]

    def ask(name: str, colour: int) -> tuple[str, int, int]:
        answer, first, target = S.compute_two_hop_answers(
            centres, shapes, np.zeros(1, int), np.array([names.index(name)]), np.array([colour])
        )
        return S.TWO_HOP_ANSWERS[answer[0]], int(first[0]), int(target[0])

    # red: closest green (20), furthest blue (84.9); blue: closest gray (44.7); green: furthest blue (72.1)
    assert ask("colour-closest-to-furthest", 0) == ("gray", 2, 4)
    assert ask("shape-closest-to-furthest", 0) == ("circle", 2, 4)
    assert ask("colour-furthest-from-closest", 0) == ("blue", 1, 2)
    assert ask("colour-closest", 2) == ("gray", 2, 4)
    assert ask("shape-furthest", 0) == ("square", 0, 2)


def test_two_hop_set_shares_pictures_but_not_questions_or_cache(tmp_path, small, two_hop) -> None:
    assert np.array_equal(small.images, two_hop.images)  # same scenes, same stream
    assert str(small.questions) == "single" and np.array_equal(small.first, small.colour)
    assert str(two_hop.questions) == "two-hop" and (two_hop.correct == -1).all()
    S.load_shapes("test", 5, 4, seed=1, cache_dir=tmp_path)
    loaded = S.load_shapes("test", 5, 4, seed=1, cache_dir=tmp_path, questions="two-hop")
    names = sorted(f.name for f in (tmp_path / "shapes").iterdir())
    assert names == ["shapes_v1_test_seed1_5x4.npz", "shapes_v1_two-hop_test_seed1_5x4.npz"]
    again = S.load_shapes("test", 5, 4, seed=1, cache_dir=tmp_path, questions="two-hop")
    for name in S.ShapesArrays.__dataclass_fields__:
        assert np.array_equal(getattr(loaded, name), getattr(again, name)), name
    assert str(again.questions) == "two-hop"
    with pytest.raises(ValueError, match="unknown shapes question set"):
        S.load_shapes("test", 5, 4, cache_dir=tmp_path, questions="three-hop")


def test_a_cache_file_without_the_newer_fields_still_loads(tmp_path, small) -> None:
    path = tmp_path / "shapes" / "shapes_v1_test_seed2_40x20.npz"
    old = {name: getattr(small, name) for name in S.ShapesArrays.__dataclass_fields__}
    del old["first"], old["questions"]
    path.parent.mkdir()
    np.savez_compressed(path, **old)
    loaded = S.load_shapes("test", 40, 20, seed=2, cache_dir=tmp_path)
    assert str(loaded.questions) == "single" and np.array_equal(loaded.first, small.colour)


def test_two_hop_dataset_items_use_their_own_vocabulary(two_hop: S.ShapesArrays) -> None:
    data = S.ShapesVQA("train", arrays=two_hop)
    assert data.vocab == S.TWO_HOP_VOCAB and data.answers == S.TWO_HOP_ANSWERS
    for q in range(0, 200, 7):
        sample = data[q]
        words = [S.TWO_HOP_VOCAB[t] for t in sample.question[: sample.length].tolist()]
        assert words == tokenize(data.question_text(q))
        assert data.answer_text(q) in S.TWO_HOP_ANSWERS
        assert sample.family == S.TWO_HOP_TEMPLATES[sample.template].family and sample.correct == -1
