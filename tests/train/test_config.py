"""Config resolution: defaults -> preset -> file -> --set -> --seed, dotted keys, clear errors."""

import json
from dataclasses import dataclass, field

import pytest
import torch

from foveal.recipes.base import Recipe
from foveal.recipes.config import (
    apply_overrides,
    coerce,
    load_run_config,
    parse_sets,
    resolve_config,
    save_run_config,
)
from foveal.train import LoopConfig, RunConfig


@dataclass
class Inner:
    width: int = 4
    sizes: tuple[int, ...] = (1, 2)


@dataclass
class Cfg(RunConfig):
    name: str = "a"
    flag: bool = False
    scale: float | None = None
    pair: tuple[int, int] = (0, 0)
    inner: Inner = field(default_factory=Inner)


RECIPE = Recipe(
    "cfg-test",
    "test recipe",
    Cfg,
    build=None,
    presets={"quick": {"loop.steps": 10, "name": "preset", "flag": True}},
)


@pytest.fixture
def registered(monkeypatch):
    """The test recipe in the registry for one test only: other tests list every registered recipe."""
    from foveal.registry import RECIPES

    monkeypatch.setitem(RECIPES._entries, RECIPE.name, RECIPE)


def test_precedence_defaults_preset_file_set_seed(tmp_path):
    file = tmp_path / "c.toml"
    file.write_text('name = "file"\nseed = 5\n[loop]\nsteps = 20\nlr = 0.5\n')
    assert resolve_config(RECIPE).loop.steps == LoopConfig().steps
    c = resolve_config(RECIPE, "quick")
    assert (c.loop.steps, c.name, c.flag) == (10, "preset", True)
    c = resolve_config(RECIPE, "quick", file)
    assert (c.loop.steps, c.name, c.flag, c.loop.lr, c.seed) == (20, "file", True, 0.5, 5)
    c = resolve_config(RECIPE, "quick", file, {"name": "flag", "loop.lr": "0.25"}, seed=9, threads=2)
    assert (c.loop.steps, c.name, c.loop.lr, c.seed, c.threads) == (20, "flag", 0.25, 9, 2)


def test_json_file_and_nested_dotted_keys(tmp_path):
    file = tmp_path / "c.json"
    file.write_text(json.dumps({"inner": {"width": 7}, "inner.sizes": [3, 4, 5]}))
    c = resolve_config(RECIPE, config_file=file)
    assert c.inner == Inner(width=7, sizes=(3, 4, 5))


def test_values_parse_to_field_types():
    c = apply_overrides(
        Cfg(),
        {"flag": "yes", "scale": "2", "pair": "3,4", "inner.sizes": "[5, 6]", "loop.clip_norm": "1", "seed": "12"},
    )
    assert (c.flag, c.scale, c.pair, c.inner.sizes, c.loop.clip_norm, c.seed) == (True, 2.0, (3, 4), (5, 6), 1.0, 12)
    assert apply_overrides(c, {"scale": "none", "loop.clip_norm": "null"}).scale is None
    assert c.loop.clip_norm is None
    assert coerce("off", bool) is False
    assert coerce(3, float) == 3.0 and isinstance(coerce(3, float), float)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("loop.lrr", "1", "unknown config key 'loop.lrr' (--set); did you mean 'loop.lr'?"),
        ("nope", "1", "valid keys: flag, inner.sizes, inner.width, loop.batch_size"),
        ("loop.lr", "fast", "bad value 'fast' for loop.lr (--set); expected float"),
        ("loop.steps", "1.5", "bad value '1.5' for loop.steps (--set); expected int"),
        ("flag", "maybe", "expected bool"),
        ("pair", "1,2,3", "expected tuple[int, int]"),
        ("loop.optimizer", "sgd", "choose from: adam, adamw, rmsprop"),
        ("loop.schedule", "linear", "choose from: constant, cosine, step"),
    ],
)
def test_bad_key_or_value_is_one_clear_line(key, value, message):
    with pytest.raises(ValueError) as info:
        resolve_config(RECIPE, sets={key: value})
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_preset_file_and_ranges(tmp_path):
    with pytest.raises(ValueError, match="unknown preset 'medium' for recipe 'cfg-test'; choose from: quick"):
        resolve_config(RECIPE, "medium")
    with pytest.raises(ValueError, match="does not exist"):
        resolve_config(RECIPE, config_file=tmp_path / "missing.toml")
    bad = tmp_path / "c.yaml"
    bad.write_text("a: 1")
    with pytest.raises(ValueError, match=r"must end in \.toml or \.json"):
        resolve_config(RECIPE, config_file=bad)
    with pytest.raises(ValueError, match=r"loop\.steps"):
        resolve_config(RECIPE, sets={"loop.steps": "0"})
    with pytest.raises(ValueError, match="step_size"):
        resolve_config(RECIPE, sets={"loop.schedule": "step"})
    with pytest.raises(ValueError, match="key=value"):
        parse_sets(["loop.lr"])


def test_saved_config_rebuilds_the_same_config(tmp_path, registered):
    c = resolve_config(RECIPE, "quick", sets={"inner.sizes": "9,8", "scale": "0.5"})
    save_run_config(tmp_path, "cfg-test", "quick", c)
    recipe, preset, loaded = load_run_config(tmp_path)
    assert (recipe, preset, loaded) == (RECIPE, "quick", c)
    # A saved config.json can be passed back in as --config.
    assert resolve_config(RECIPE, config_file=tmp_path / "config.json") == c


def test_defaults_fit_the_machine_device_auto_and_every_core(monkeypatch):
    from foveal.train import cpu_threads, task
    from foveal.train.distributed import pick_device

    c = resolve_config(RECIPE)
    assert (c.loop.device, c.threads) == ("auto", 0)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert pick_device(c.loop.device).type == expected
    monkeypatch.setattr(task, "available_cores", lambda: 16)
    assert cpu_threads(c.threads) == 16
    assert cpu_threads(3) == 3  # --threads overrides
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # torchrun's ranks on one machine share its cores
    assert cpu_threads(0) == 4
    assert resolve_config(RECIPE, threads=1).threads == 1
    with pytest.raises(ValueError, match=r"bad value for threads: -1; expected an int >= 0 \(0: every core\)"):
        resolve_config(RECIPE, threads=-1)


def test_threads_are_set_in_one_place():
    # use_threads gives --threads and the config's threads one meaning (0: every core) in every command
    from pathlib import Path

    import foveal

    source = Path(foveal.__file__).parent
    setters = sorted(str(p.relative_to(source)) for p in source.rglob("*.py") if "set_num_threads(" in p.read_text())
    assert setters == ["train/task.py"]


def test_a_config_saved_with_explicit_device_and_threads_loads_as_saved(tmp_path, registered):
    c = resolve_config(RECIPE, sets={"loop.device": "cpu"}, threads=1)
    save_run_config(tmp_path, "cfg-test", None, c)
    _, _, loaded = load_run_config(tmp_path)
    assert (loaded.loop.device, loaded.threads) == ("cpu", 1)
