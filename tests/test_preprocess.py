"""transform_for: a shipped model's card made into the function from a user's picture to the network's input.

The conversions it is held to are written out here by hand (a uint8 picture over 255, the VQA models'
[-1, 1]), not read from the cards, so a card or a transform that disagrees with how the model was trained fails.
"""

import pytest
import torch

import foveal
from foveal.errors import FovealError
from foveal.preprocess import picture_input, transform_for
from foveal.zoo import available, card, sample

SHIPPED = available()
PICTURES = [name for name in SHIPPED if "size" in card(name).preprocessing]


@pytest.fixture(scope="module")
def models():
    return {name: foveal.pretrained(name) for name in SHIPPED}


def predictions(name, model, pictures, tensors):
    """What ``model`` answers for ``pictures`` (its input), with the rest of its sample."""
    with torch.no_grad():
        if name in ("stn", "ram"):
            return model(pictures).logits.argmax(-1)
        if name == "draw":
            noise = torch.randn(model.steps, len(pictures), model.z_size, generator=torch.Generator().manual_seed(0))
            return model(pictures, noise=noise).logits
        if name == "easy-vqa":
            return model(pictures, tensors["questions"], tensors["lengths"]).logits.argmax(-1)
        # shapes-vqa ships pictures without token ids: every picture asked the same made-up questions
        questions = torch.randint(1, len(model.labels["vocab"]), (4, 6), generator=torch.Generator().manual_seed(0))
        index = torch.arange(len(pictures)).repeat_interleave(2)
        return model(pictures, questions, torch.full((4,), 6), image_index=index).logits.argmax(-1)


def by_hand(name, tensors):
    """The sample's pictures converted as each model's recipe feeds its data set to the model."""
    images = tensors["images"]
    if name in ("stn", "ram"):
        return images.float() / 255
    if name == "draw":
        return images.float()  # bits already
    if name == "shapes-vqa":
        images = images.permute(0, 3, 1, 2)  # stored as the data set draws them, channels last
    return images.float() / 127.5 - 1  # foveal.data.by_image.normalize


@pytest.mark.parametrize("name", PICTURES)
def test_a_shipped_models_own_sample_through_its_transform_predicts_as_the_right_conversion(name, models):
    model, tensors = models[name], sample(name)
    prepared, expected = transform_for(model)(tensors["images"]), by_hand(name, tensors)
    assert prepared.dtype == torch.float32 and prepared.shape == expected.shape
    torch.testing.assert_close(prepared, expected, rtol=0, atol=1e-6)
    assert torch.equal(predictions(name, model, prepared, tensors), predictions(name, model, expected, tensors))


def test_the_right_conversion_is_what_the_classifiers_were_trained_on(models):
    # The failure this guards: .float() alone gives 0-255 to a network trained on [0, 1]
    tensors = sample("stn")
    right = predictions("stn", models["stn"], transform_for(models["stn"])(tensors["images"]), tensors)
    wrong = predictions("stn", models["stn"], tensors["images"].float(), tensors)
    assert (right == tensors["labels"]).sum() >= 7 > (wrong == tensors["labels"]).sum()


def test_the_ntm_transform_takes_bits_of_any_dtype_and_checks_the_width(models):
    transform, tensors = transform_for(models["ntm-copy"]), sample("ntm-copy")
    inputs = tensors["0-example.inputs"]
    for bits in (inputs.bool(), inputs.to(torch.uint8), inputs.double(), inputs[0]):
        assert torch.equal(transform(bits), inputs)
    with torch.no_grad():
        copied = models["ntm-copy"](transform(inputs.bool())).logits[:, -tensors["0-example.targets"].shape[1] :]
    assert torch.equal(copied.sigmoid().round(), tensors["0-example.targets"])
    with pytest.raises(FovealError, match=r"vectors of 9 values \(8 data bits and 1 marker channel\), got 8"):
        transform(inputs[..., :8])
    with pytest.raises(FovealError, match=r"expected bits \(0 or 1\)"):
        transform(inputs * 2)


@pytest.mark.parametrize("name", PICTURES)
def test_a_uint8_picture_given_straight_to_a_model_is_refused_with_the_conversion(name, models):
    model, tensors = models[name], sample(name)
    pictures = transform_for(model)(tensors["images"])
    pixels = (pictures * 255).to(torch.uint8) if name != "draw" else pictures.to(torch.uint8)
    with pytest.raises(FovealError, match=r"got torch.uint8; .*x\.float\(\) / 255.*foveal\.transform_for\(model\)"):
        predictions(name, model, pixels, tensors)


def test_every_card_says_what_its_model_takes():
    for name in SHIPPED:
        preprocessing = card(name).preprocessing
        assert preprocessing["dtype"] == "float32" and preprocessing["layout"] in ("NCHW", "NTC"), name
        if name in PICTURES:
            assert preprocessing["range"] == [0.0, 1.0] and preprocessing["uint8_range"] == [0, 255], name
            assert {"size", "channels"} <= preprocessing.keys(), name
            assert ("mean" in preprocessing) != ("binarize" in preprocessing), name
    assert card("ntm-copy").preprocessing["input_size"] == foveal.pretrained("ntm-copy").input_size


GREY = picture_input([6, 6], 1, mean=[0.5], std=[0.25])
RGB = picture_input([6, 6], 3, mean=[0.5] * 3, std=[0.5] * 3)


def test_a_picture_comes_as_one_or_many_channels_first_or_last():
    pixels = torch.randint(0, 256, (2, 3, 6, 6), dtype=torch.uint8)
    batch = transform_for(RGB)(pixels)
    torch.testing.assert_close(batch, pixels.float() / 127.5 - 1)
    torch.testing.assert_close(transform_for(RGB)(pixels[0]), batch[:1])  # one picture: a batch of one
    torch.testing.assert_close(transform_for(RGB)(pixels.permute(0, 2, 3, 1)), batch)  # channels last
    torch.testing.assert_close(transform_for(RGB)(pixels[1].permute(1, 2, 0)), batch[1:])
    torch.testing.assert_close(transform_for(RGB)([pixels[0], pixels[1]]), batch)  # a list
    torch.testing.assert_close(transform_for(RGB)(pixels.float() / 255), batch)  # float in [0, 1]


def test_channels_are_converted_and_sizes_resized():
    grey = torch.randint(0, 256, (6, 6), dtype=torch.uint8)
    as_rgb = transform_for(RGB)(grey)
    assert as_rgb.shape == (1, 3, 6, 6) and torch.equal(as_rgb[:, 0], as_rgb[:, 2])
    red = torch.zeros(1, 4, 6, 6, dtype=torch.uint8)  # RGBA: the alpha is dropped
    red[:, 0] = 255
    torch.testing.assert_close(transform_for(GREY)(red), torch.full((1, 1, 6, 6), (0.299 - 0.5) / 0.25))
    big = transform_for(GREY)(torch.full((1, 1, 30, 18), 255, dtype=torch.uint8))
    assert big.shape == (1, 1, 6, 6)
    torch.testing.assert_close(big, torch.full_like(big, 2.0))
    with pytest.raises(FovealError, match=r"1, 3 or 4 channels .*got shape \(2, 5, 6, 6\)"):
        transform_for(GREY)(torch.zeros(2, 5, 6, 6))


def test_draws_transform_binarises_at_its_threshold_and_takes_bits_as_bool():
    draw = picture_input([2, 2], 1, binarize="threshold", threshold=0.5)
    pixels = torch.tensor([[0, 127], [128, 255]], dtype=torch.uint8)
    assert transform_for(draw)(pixels).flatten().tolist() == [0.0, 0.0, 1.0, 1.0]
    bits = torch.tensor([[False, True], [True, False]])
    assert transform_for(draw)(bits).flatten().tolist() == [0.0, 1.0, 1.0, 0.0]
    with pytest.raises(FovealError, match=r"uint8 picture in 0-255, got one of only 0s and 1s; .*bool"):
        transform_for(draw)(bits.to(torch.uint8))


def test_what_the_transform_cannot_read_is_refused_naming_it():
    with pytest.raises(FovealError, match=r"float values in \[0, 1\], got values in \[0, 255\]; divide .* by 255"):
        transform_for(GREY)(torch.tensor([[0.0, 255.0]]))
    with pytest.raises(FovealError, match=r"uint8 \(0-255\), bool or floating point, got torch.int64"):
        transform_for(GREY)(torch.zeros(6, 6, dtype=torch.int64))
    with pytest.raises(FovealError, match=r"a PIL image, a tensor or a list of them, got str"):
        transform_for(GREY)("picture.png")
    with pytest.raises(FovealError, match=r"a model loaded by foveal.pretrained .*got a Linear without one"):
        transform_for(torch.nn.Linear(2, 2))


def test_a_pil_image_is_the_same_picture_as_its_pixels():
    image = pytest.importorskip("PIL.Image")
    pixels = torch.randint(0, 256, (6, 6, 3), dtype=torch.uint8)
    picture = image.fromarray(pixels.numpy())
    torch.testing.assert_close(transform_for(RGB)(picture), transform_for(RGB)(pixels))
    torch.testing.assert_close(transform_for(RGB)([picture, picture]), transform_for(RGB)(pixels).expand(2, -1, -1, -1))
    grey = transform_for(GREY)(picture)  # PIL's own grey conversion, to within its rounding to uint8
    torch.testing.assert_close(grey, transform_for(GREY)(pixels), rtol=0, atol=1 / 255 / 0.25)
    stn = foveal.pretrained("stn")
    shipped = sample("stn")["images"][0, 0]
    torch.testing.assert_close(transform_for(stn)(image.fromarray(shipped.numpy())), shipped[None, None] / 255)
