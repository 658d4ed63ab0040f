"""crop: seed 003's I[y:y+h, x:x+w], batched, with out-of-bounds windows padded."""

import math

import pytest
import torch
import torch.nn.functional as F

from foveal.glimpse import crop


def test_crop_is_seed_003_slice_for_every_image():
    images = torch.randn(4, 3, 9, 11)
    boxes = torch.tensor([[0, 0], [2, 3], [6, 4], [5, 0]])  # (x, y), all inside
    out = crop(images, boxes, (5, 5))
    for b, (x, y) in enumerate(boxes.tolist()):
        torch.testing.assert_close(out[b], images[b, :, y : y + 5, x : x + 5], rtol=0, atol=0)


def test_out_of_bounds_reads_fill_like_a_padded_image():
    images = torch.randn(3, 2, 6, 7)
    boxes = torch.tensor([[-2, -3], [5, 4], [-10, 20]])
    h, w, fill = 4, 5, -1.5
    padded = F.pad(images, (20, 20, 20, 20), value=fill)
    out = crop(images, boxes, (h, w), fill=fill)
    for b, (x, y) in enumerate(boxes.tolist()):
        torch.testing.assert_close(out[b], padded[b, :, y + 20 : y + 20 + h, x + 20 : x + 20 + w], rtol=0, atol=0)
    assert (out[2] == fill).all()  # wholly outside


def test_float_boxes_are_floored_and_image_gets_gradient():
    images = torch.randn(2, 1, 8, 8, requires_grad=True)
    out = crop(images, torch.tensor([[1.7, 2.2], [6.0, 6.9]]), (3, 3))
    torch.testing.assert_close(out[0, 0], images[0, 0, 2:5, 1:4])
    out.sum().backward()
    assert images.grad[0].sum() == 9 and images.grad[1].sum() == 4  # the second box is 2x2 on the image


@pytest.mark.parametrize(
    ("images", "boxes", "size"),
    [
        (torch.zeros(3, 8, 8), torch.zeros(3, 2), (2, 2)),  # no channel dim
        (torch.zeros(3, 1, 8, 8), torch.zeros(3, 4), (2, 2)),  # boxes are (x, y)
        (torch.zeros(3, 1, 8, 8), torch.zeros(2, 2), (2, 2)),  # batch mismatch
        (torch.zeros(3, 1, 8, 8), torch.zeros(3, 2), (0, 2)),  # empty window
    ],
)
def test_shape_errors(images, boxes, size):
    with pytest.raises(ValueError):
        crop(images, boxes, size)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_boxes_are_floored_and_non_finite_ones_read_fill(dtype):
    # float16 cannot hold the distance that non-finite corners are moved to; the corners are widened first.
    images = torch.arange(16.0).view(1, 1, 4, 4).expand(5, 1, 4, 4)
    boxes = torch.tensor([[1.5, 2.0], [math.nan, 0.0], [math.inf, 0.0], [-math.inf, 0.0], [0.0, 6e4]]).to(dtype)
    out = crop(images, boxes, (2, 2), fill=-1.0)
    torch.testing.assert_close(out[0], crop(images[:1], torch.tensor([[1, 2]]), (2, 2))[0])
    assert (out[1:] == -1).all()
