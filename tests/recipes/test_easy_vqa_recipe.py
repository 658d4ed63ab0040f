"""The easy-vqa recipe end to end on a few questions: build, loss, evaluate, show."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

pytest.importorskip("easy_vqa")

from foveal.errors import FovealError
from foveal.models.vqa import StackedOptions, VQASpec
from foveal.recipes import load_all
from foveal.registry import RECIPES

TINY = {"channels": (4, 8), "dim": 16, "k_dim": 8, "embed_dim": 8, "mlp_hidden": 16}


def tiny_config(recipe, head: str = "stacked", **options):
    return recipe.config(model=VQASpec(head=head, **TINY), train_limit=200, **options)


@pytest.mark.parametrize("by_image", [True, False])
def test_build_loss_evaluate_show(tmp_path, by_image: bool) -> None:
    load_all()
    recipe = RECIPES.get("easy-vqa")
    config = tiny_config(recipe, eval_limit=40, show_count=2, by_image=by_image)
    task = recipe.build(config)
    batch = task.collate([task.train_set[i] for i in range(4)]) if task.collate else None
    if batch is None:
        from torch.utils.data import default_collate

        batch = default_collate([task.train_set[i] for i in range(4)])
    loss, metrics = task.loss(task.model, batch)
    assert loss.ndim == 0 and torch.isfinite(loss) and 0 <= metrics["acc"] <= 1
    task.model.eval()
    with torch.no_grad():
        result = task.evaluate(task.model, task.eval_set)
    assert {"acc", "acc_yesno", "acc_shape", "acc_colour", "mask_mass_hop1", "mask_mass_hop2", "mask_mass"} <= set(
        result
    )
    assert 0 <= result["mask_mass"] <= 1 and result["mask_mass"] == result["mask_mass_hop2"]
    # the overall mass is the question-weighted mean of the per-answer-type masses, so it lies between them
    per_type = [result[f"mask_mass_{key}"] for key in ("yesno", "shape", "colour")]
    assert min(per_type) - 1e-6 <= result["mask_mass"] <= max(per_type) + 1e-6
    # and the yes/no mass is the mean over the questions naming what is there and those naming what is not
    present = task.eval_set.names_present()
    n_present = int(present.sum())
    n_absent = int((task.eval_set.answer_types == 0).sum()) - n_present
    split = (n_present * result["mask_mass_yesno_present"] + n_absent * result["mask_mass_yesno_absent"]) / (
        n_present + n_absent
    )
    assert split == pytest.approx(result["mask_mass_yesno"], abs=1e-5)
    (path,) = task.show(task.model, task.eval_set, tmp_path)
    assert path.exists() and path.stat().st_size > 1000


def test_none_head_reports_no_mask_mass() -> None:
    load_all()
    recipe = RECIPES.get("easy-vqa")
    task = recipe.build(tiny_config(recipe, head="none", eval_limit=20))
    task.model.eval()
    with torch.no_grad():
        result = task.evaluate(task.model, task.eval_set)
    assert "acc" in result and not any(k.startswith("mask_mass") for k in result)


def test_model_options_are_model_keys_and_the_heads_are_model_head_options_keys() -> None:
    # The model's options live in one nested spec, the head's own in its head_options: --set model.head_options.<key>.
    from foveal.recipes.config import format_config, resolve_config

    load_all()
    recipe = RECIPES.get("easy-vqa")
    config = resolve_config(recipe, "quick", sets={"model.head_options.hops": "3"})
    # the recipe's default model, every option of its head recorded
    fixed = {"readout": "last", "gate": True, "gate_form": "linear", "temperature": 0.35, "normalize": "sparsemax"}
    assert config.model == VQASpec(
        keys="pixels", k_dim=16, head_options={"hops": 3, **fixed, "relate": False, "prior": False}
    )
    assert "model.head_options.hops = 3" in format_config(config)
    # another head starts from its own options' defaults, whatever order the keys come in
    config = resolve_config(recipe, "quick", sets={"model.head_options.hops": "3", "model.head": "stacked-dot"})
    assert config.model.head_options == dataclasses.asdict(StackedOptions(hops=3))
    config = resolve_config(recipe, "quick", sets={"model.head": "spatial", "model.keys": "values"})
    assert config.model == VQASpec(head="spatial", k_dim=16, head_options={})
    with pytest.raises(FovealError, match=re.escape("head 'spatial' has no option 'hops'; its options: none")):
        resolve_config(recipe, "quick", sets={"model.head": "spatial", "model.head_options.hops": "5"})
    with pytest.raises(FovealError, match=re.escape("bad value 'mean' for model.head_options.readout (--set); choose")):
        resolve_config(recipe, sets={"model.head_options.readout": "mean"})
    with pytest.raises(ValueError, match="unknown config key 'head'"):
        resolve_config(recipe, sets={"head": "spatial"})


def test_a_yes_no_question_names_what_is_present_as_the_pictures_own_answers_say() -> None:
    # Checked against the picture's own colour and shape questions, not against the rule that computes it.
    from foveal.data.easy_vqa import EasyVQA

    test = EasyVQA("test", limit=3000)
    present = test.names_present()
    truth: dict[int, set[str]] = {}
    for q in range(len(test)):
        if test.answer_types[q] != 0:
            truth.setdefault(int(test.image_index[q]), set()).add(test.answers[test.answer_ids[q]])
    checked = 0
    for q in range(len(test)):
        words = set(test.question_text(q).split())
        known = truth.get(int(test.image_index[q]), set())
        if test.answer_types[q] != 0 or len(known) < 2:
            continue
        named = words & (set(test.answers) - {"yes", "no"})
        assert len(named) == 1, test.question_text(q)
        assert bool(present[q]) == bool(named & known), test.question_text(q)
        checked += 1
    assert checked > 100 and 0.1 < present.float().mean() < 0.9
    assert not present[test.answer_types != 0].any()


def test_the_score_temperature_warms_up_from_hot_to_the_models() -> None:
    from foveal.train import Trainer

    load_all()
    recipe = RECIPES.get("easy-vqa")
    config = tiny_config(recipe, eval_limit=20)
    config.model.head_options, config.temperature_from, config.temperature_warmup = {"temperature": 0.5}, 8.0, 0.5
    config.loop.steps, config.loop.batch_size = 4, 2
    task = recipe.build(config)
    assert task.model.head.attention.temperature == 0.5  # building (as for evaluation) leaves the model's own
    trainer = Trainer(task, config)
    batch = task.collate([task.train_set[i] for i in range(2)])
    seen = [trainer.step(batch)["temperature"] for _ in range(3)]
    assert seen == pytest.approx([8.0, 2.0, 0.5])  # 8 * (0.5 / 8) ** (done / 2)
    assert task.model.head.attention.temperature == 0.5
    for head, warmup in [("spatial", 0.3), ("stacked", 0.0)]:
        assert recipe.build(tiny_config(recipe, head=head, temperature_warmup=warmup)).callbacks == []
    with pytest.raises(ValueError, match="fraction of the steps"):
        recipe.build(tiny_config(recipe, temperature_warmup=1.5))
    with pytest.raises(ValueError, match="temperature_from divides the scores"):
        recipe.build(tiny_config(recipe, temperature_from=0.0))


@pytest.mark.parametrize("softmax_while_warm", [True, False])
def test_a_sparsemax_map_is_a_softmax_while_the_temperature_falls(softmax_while_warm: bool) -> None:
    from foveal.train import Trainer

    load_all()
    recipe = RECIPES.get("easy-vqa")
    config = tiny_config(recipe, eval_limit=20, softmax_while_warm=softmax_while_warm)
    config.model.head_options = {"temperature": 0.5, "normalize": "sparsemax", "prior": True}
    config.temperature_from, config.temperature_warmup = 8.0, 0.5
    config.loop.steps, config.loop.batch_size = 4, 2
    task = recipe.build(config)
    attention = task.model.head.attention
    assert attention.normalize == "sparsemax"  # building (as for evaluation) leaves the model's own
    seen: list[str] = []
    task.model.register_forward_pre_hook(lambda module, args: seen.append(attention.normalize))
    trainer = Trainer(task, config)
    batch = task.collate([task.train_set[i] for i in range(2)])
    for _ in range(3):
        trainer.step(batch)  # at temperatures 8, 2, then the model's 0.5
    warm = "softmax" if softmax_while_warm else "sparsemax"
    assert seen == [warm, warm, "sparsemax"] and attention.normalize == "sparsemax"


@pytest.mark.parametrize(
    ("eval_limit", "interim_eval_limit", "interim"), [(60, 20, 20), (60, 0, None), (60, 100, None)]
)
def test_the_interim_evaluations_read_a_fixed_slice_of_the_test_set(eval_limit, interim_eval_limit, interim) -> None:
    load_all()
    recipe = RECIPES.get("easy-vqa")
    config = tiny_config(recipe, eval_limit=eval_limit, interim_eval_limit=interim_eval_limit)
    task = recipe.build(config)
    assert len(task.eval_set) == eval_limit
    if interim is None:  # none asked for, or not smaller than the whole: the interim evaluations read eval_set
        assert task.interim_eval_set is None
    else:
        assert len(task.interim_eval_set) == interim
        assert torch.equal(task.interim_eval_set.questions, task.eval_set.questions[:interim])
