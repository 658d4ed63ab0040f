"""A saved model directory: save_pretrained writes it, from_pretrained builds the same model from it."""

import json

import pytest
import torch
from torch import nn

import foveal
from foveal.artifact import describe_model, from_pretrained, read_card, save_pretrained
from foveal.errors import FovealError
from foveal.models.ntm import NTM
from foveal.models.ram import RAM, RAMClassifierSpec
from foveal.models.vqa import VQA

VOCAB = ["<pad>", "<unk>", "is", "it", "red", "what", "shape"]
ANSWERS = ["yes", "no", "circle"]


def tiny_vqa() -> VQA:
    torch.manual_seed(0)
    return VQA(
        len(VOCAB),
        len(ANSWERS),
        head="stacked",
        head_options={"hops": 2},
        dim=8,
        k_dim=4,
        channels=(4, 4),
        grid=4,
        image_size=16,
    )


def test_a_saved_model_comes_back_with_the_same_outputs_preprocessing_and_labels(tmp_path):
    model = tiny_vqa().eval()
    labels = {"vocab": VOCAB, "answers": ANSWERS}
    save_pretrained(model, tmp_path, labels=labels, preprocessing={"mean": [0.5] * 3, "std": [0.5] * 3})
    again = from_pretrained(tmp_path)
    assert type(again) is VQA and not again.training and again.labels == labels
    image, question, length = torch.rand(2, 3, 16, 16), torch.tensor([[2, 3, 4], [5, 6, 0]]), torch.tensor([3, 2])
    assert torch.equal(again(image, question, length).logits, model(image, question, length).logits)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["card.json", "model.safetensors"]


def test_a_spec_of_a_subclass_keeps_only_the_fields_the_model_takes(tmp_path):
    # the ram recipe's spec adds `name` (which classifier); RAM itself does not take it
    model = RAM(1, 20, 10, RAMClassifierSpec(glimpses=2, glimpse_size=4, scales=1, hidden=8))
    entry = describe_model(model)
    assert entry["name"] == "ram" and entry["args"] == [1, 20, 10] and "name" not in entry["spec"]
    save_pretrained(model, tmp_path)
    torch.manual_seed(0)
    images = torch.rand(2, 1, 20, 20)
    assert torch.equal(from_pretrained(tmp_path)(images).logits, model.eval()(images).logits)


def test_the_card_keeps_extra_entries_and_loading_ignores_them(tmp_path):
    save_pretrained(NTM(4, 3, controller_size=8, n_rows=6, n_cols=5), tmp_path, card={"metrics": {"bits": 0.0}})
    assert read_card(tmp_path)["metrics"] == {"bits": 0.0}
    assert from_pretrained(tmp_path).n_rows == 6


def test_a_model_that_is_not_registered_is_refused_by_name(tmp_path):
    with pytest.raises(FovealError, match=r"Linear is not in foveal.registry.MODELS"):
        save_pretrained(nn.Linear(2, 2), tmp_path)


def test_a_directory_without_a_card_or_with_other_weights_says_what_is_wrong(tmp_path):
    with pytest.raises(FovealError, match=r"no card\.json"):
        from_pretrained(tmp_path)
    save_pretrained(NTM(4, 3, controller_size=8, n_rows=6, n_cols=5), tmp_path)
    card = json.loads((tmp_path / "card.json").read_text())
    card["model"]["spec"]["n_rows"] = 7
    (tmp_path / "card.json").write_text(json.dumps(card))
    with pytest.raises(FovealError, match="does not fit ntm"):
        from_pretrained(tmp_path)


def test_the_package_exports_both_functions():
    assert foveal.save_pretrained is save_pretrained and foveal.from_pretrained is from_pretrained


def test_answer_tokenises_the_question_with_the_models_vocabulary(tmp_path):
    model = tiny_vqa()
    save_pretrained(model, tmp_path, labels={"vocab": VOCAB, "answers": ANSWERS})
    model = from_pretrained(tmp_path)
    image = torch.rand(3, 16, 16)
    said = model.answer(image, "Is it RED? (really)")  # "really" is not in the vocabulary: <unk>
    with torch.no_grad():
        out = model((image * 2 - 1)[None], torch.tensor([[2, 3, 4, 1]]), torch.tensor([4]))
    assert said.text == ANSWERS[int(out.logits.argmax())]
    assert torch.equal(said.maps, out.attention[0].view(2, 4, 4))
    assert model.answer(torch.rand(3, 32, 32), "is it red").maps.shape == (2, 4, 4)  # resized to the model's size


def test_answer_takes_a_pil_image_as_the_same_picture():
    pil = pytest.importorskip("PIL.Image")
    model = tiny_vqa()
    model.labels = {"vocab": VOCAB, "answers": ANSWERS}
    pixels = torch.randint(0, 256, (16, 16, 3), dtype=torch.uint8)
    picture = pil.fromarray(pixels.numpy())
    from_tensor = model.answer(pixels.permute(2, 0, 1) / 255, "what shape")
    from_pil = model.answer(picture, "what shape")
    assert from_pil.text == from_tensor.text and torch.equal(from_pil.maps, from_tensor.maps)


def test_answer_takes_a_uint8_picture_in_0_to_255_as_the_float_one_over_255():
    model = tiny_vqa()
    model.labels = {"vocab": VOCAB, "answers": ANSWERS}
    pixels = torch.randint(0, 256, (3, 16, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    from_uint8, from_float = model.answer(pixels, "what shape"), model.answer(pixels / 255, "what shape")
    assert from_uint8.text == from_float.text and torch.allclose(from_uint8.maps, from_float.maps, atol=1e-6)
    channels_last = model.answer(pixels.permute(1, 2, 0), "what shape")
    assert torch.allclose(channels_last.maps, from_uint8.maps, atol=1e-6)


def test_answer_says_what_it_lacks_or_was_given():
    model = tiny_vqa()
    with pytest.raises(FovealError, match="no vocabulary"):
        model.answer(torch.rand(3, 16, 16), "is it red")
    model.labels = {"vocab": VOCAB, "answers": ANSWERS}
    with pytest.raises(FovealError, match=r"a PIL image, a tensor or a list of them, got list"):
        model.answer([[0.0] * 16] * 16, "is it red")
    with pytest.raises(FovealError, match=r"one picture, got a batch of 2"):
        model.answer(torch.rand(2, 3, 16, 16), "is it red")
    with pytest.raises(FovealError, match="at least one word"):
        model.answer(torch.rand(3, 16, 16), "?")


def test_answer_splits_words_as_the_data_sets_do():
    from foveal.data.text import tokenize
    from foveal.models.vqa.answer import words

    for text in ("Does the image NOT contain a red shape?", "what's the colour, left-most?", "3 shapes"):
        assert words(text) == tokenize(text)


def test_a_trained_run_exports_as_a_saved_model(tmp_path):
    from foveal.recipes.config import resolve_config
    from foveal.runs import Run, export_run, get_recipe

    recipe = get_recipe("ntm-copy")
    config = resolve_config(recipe, None, sets={"model.n_rows": 8, "model.controller_size": 8})
    run = Run(tmp_path / "run", recipe, None, config, recipe.build(config))
    path = export_run(run, tmp_path / "exported")
    card = read_card(path)
    assert card["recipe"] == "ntm-copy" and card["preprocessing"]["width"] == 8
    assert card["preprocessing"]["input_size"] == run.task.model.input_size == 9
    inputs = torch.zeros(1, 3, run.task.model.input_size)
    assert torch.equal(from_pretrained(path)(inputs).logits, run.task.model.eval()(inputs).logits)
