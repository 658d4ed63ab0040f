"""Questions grouped by picture: every question lands once, with its own picture."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from foveal.data.by_image import ByImage, collate_by_image, denormalize, normalize


class Batch(NamedTuple):
    image: Tensor
    question: Tensor
    image_index: Tensor


class Toy(ByImage[Batch]):
    def __init__(self, pictures: Tensor, image_index: Tensor, limit: int | None = None) -> None:
        super().__init__(image_index, len(pictures), limit=limit)
        self.pictures, self.image_index = pictures, image_index

    def __getitem__(self, i: int) -> Batch:
        q = self.question_ids(i)
        return Batch(self.pictures[self.rows[i]][None], q, torch.zeros(len(q), dtype=torch.long))


def test_every_question_once_with_its_own_picture_and_empty_pictures_skipped() -> None:
    g = torch.Generator().manual_seed(0)
    image_index = torch.randint(0, 7, (40,), generator=g)
    image_index[image_index == 4] = 5  # picture 4 has no question
    pictures = torch.arange(7).float()[:, None]
    data = Toy(pictures, image_index)
    assert len(data) == 6 and 4 not in data.rows.tolist()
    batch = collate_by_image([data[i] for i in range(len(data))])
    assert sorted(batch.question.tolist()) == list(range(40))
    assert torch.equal(batch.image[batch.image_index].squeeze(1), image_index[batch.question].float())
    for i in range(len(data)):  # a picture's questions keep their order
        assert data.question_ids(i).tolist() == sorted(data.question_ids(i).tolist())


def test_limit_keeps_the_first_pictures() -> None:
    data = Toy(torch.zeros(5, 1), torch.tensor([4, 0, 2, 2, 0]), limit=2)
    assert len(data) == 2 and data.rows.tolist() == [0, 2] and data.question_ids(1).tolist() == [2, 3]


def test_normalize_maps_bytes_to_plus_minus_one_and_back() -> None:
    pixels = torch.tensor([0, 51, 255], dtype=torch.uint8)
    torch.testing.assert_close(normalize(pixels), torch.tensor([-1.0, -0.6, 1.0]))
    torch.testing.assert_close(denormalize(normalize(pixels)), pixels / 255.0)
