"""The ``shapes`` questions by picture, the objects each question is about, and the scores of a split."""

from __future__ import annotations

import pytest
import torch

from foveal.data.shapes import OBJECT_ROLES, ShapesVQA, object_boxes
from foveal.data.shapes.by_image import ShapesByImage, collate_by_image, question_batch
from foveal.data.shapes.scores import ShapesScores


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> ShapesVQA:
    return ShapesVQA("test", n_images=12, questions_per_image=6, cache_dir=tmp_path_factory.mktemp("shapes"))


@pytest.fixture(scope="module")
def two_hop(tmp_path_factory) -> ShapesVQA:
    cache = tmp_path_factory.mktemp("two-hop")
    return ShapesVQA("test", n_images=12, questions_per_image=6, cache_dir=cache, questions="two-hop")


def test_an_item_is_a_picture_with_all_its_questions(data: ShapesVQA) -> None:
    by_image = ShapesByImage(data)
    assert len(by_image) == 12 and len(ShapesByImage(data, limit=5)) == 5
    ids = by_image.question_ids(3)
    item = by_image[3]
    assert (data.image_index[ids] == 3).all() and len(ids) == 6 and item.image.shape == (1, 3, 75, 75)
    assert torch.equal(item.image[0], data[int(ids[0])].image) and torch.equal(item.answer, data.answer_ids[ids])
    batch = collate_by_image([by_image[0], item])
    assert batch.image_index.tolist() == [0] * 6 + [1] * 6 and torch.equal(batch.boxes[6:], data.boxes[ids])


def test_a_question_batch_gives_each_question_its_own_picture(data: ShapesVQA) -> None:
    ids = ShapesByImage(data).question_ids(2).tolist()
    single, item = question_batch(data, ids), ShapesByImage(data)[2]
    assert single.image_index.tolist() == list(range(6)) and torch.equal(single.question, item.question)
    assert all(torch.equal(picture, item.image[0]) for picture in single.image)


def test_examples_are_each_templates_first_questions_in_the_pictures_kept(data: ShapesVQA) -> None:
    kept = ShapesByImage(data, limit=6)
    picks = kept.examples(1)
    for q in picks:
        same = torch.nonzero((data.template_ids == data.template_ids[q]) & (data.image_index < 6)).flatten()
        assert q == int(same[0])
    spread = ShapesByImage(data).examples(1, one_per_picture=True)
    assert len({int(data.image_index[q]) for q in spread}) == len(spread) == len(data.templates)


def test_role_boxes_outline_the_named_the_first_and_the_answers_object(two_hop: ShapesVQA) -> None:
    ids = torch.arange(len(two_hop))
    boxes = two_hop.role_boxes(ids)  # (Q, 3, 4)
    arrays = two_hop.arrays
    assert boxes.shape == (len(two_hop), len(OBJECT_ROLES), 4)
    for q in (0, 7, len(two_hop) - 1):
        for role, obj in enumerate((arrays.colour[q], arrays.first[q], arrays.target[q])):
            assert boxes[q, role].tolist() == object_boxes(arrays.centres[arrays.image[q], obj]).tolist()
    one_hop = two_hop.family_ids == two_hop.families.index("one-hop")
    assert one_hop.any() and torch.equal(boxes[one_hop, 0], boxes[one_hop, 1])  # found first: X itself


def test_scores_are_means_over_templates_families_and_maps(two_hop: ShapesVQA) -> None:
    right = (torch.arange(len(two_hop)) % 3 == 0).float()
    cells = torch.zeros(len(two_hop), 3, 4)
    cells[:, :, 0] = 1  # every object on cell 0 ...
    cells[:, 2, 1] = 1  # ... and the answer's also on cell 1
    maps = torch.tensor([0.25, 0.5, 0.25, 0.0]).expand(len(two_hop), 1, 4)
    scores = ShapesScores(two_hop)
    half = len(two_hop) // 2  # in two batches
    for part in (slice(0, half), slice(half, None)):
        scores.add(two_hop.template_ids[part], right[part])
        scores.add_maps(two_hop.family_ids[part], maps[part], cells[part])
    metrics = scores.metrics()
    assert metrics["acc"] == pytest.approx(right.mean().item())
    for f, name in enumerate(two_hop.families):
        mine = two_hop.family_ids == f
        assert metrics[f"acc_{name.replace('-', '_')}"] == pytest.approx(right[mine].mean().item())
    for t, template in enumerate(two_hop.templates):
        mine = two_hop.template_ids == t
        if mine.any():
            assert metrics[f"acc_template_{template.name}"] == pytest.approx(right[mine].mean().item())
    for prefix in ("mass_", "mass_one_hop_"):
        assert metrics[f"{prefix}hop1_named"] == pytest.approx(0.25)
        assert metrics[f"{prefix}hop1_second"] == pytest.approx(0.75)
        assert metrics[f"{prefix}uniform_second"] == pytest.approx(0.5)
    assert not any(key.startswith("mass_hop2") for key in metrics)
