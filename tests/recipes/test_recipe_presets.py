"""Every preset of every registered recipe resolves, builds, and takes one training step.

Each preset is shrunk by :data:`TINY` (its recipe's sizes and data counts, on top of the preset; every other
choice the preset makes, such as a controller, a head or a distortion, stays), so the sweep costs seconds. A
recipe without an entry in :data:`TINY` fails :func:`test_every_recipe_has_a_tiny_form`. Data that cannot be
made here (a package that ships it missing) skips with the loader's own message.
"""

from __future__ import annotations

import gzip
import math
import struct

import pytest
import torch
from torch.utils.data import DataLoader

from foveal.data.images import FASHION_FILES
from foveal.errors import DataUnavailableError
from foveal.recipes import load_all
from foveal.recipes.config import resolve_config
from foveal.registry import RECIPES
from foveal.train import Trainer

load_all()

# Every preset: a batch of two, one thread, and no torch.compile (the compiled step has tests of its own).
COMMON = {"loop.batch_size": 2, "loop.compile": False, "threads": 1}
VQA = {"model.channels": (4, 8), "model.dim": 16, "model.k_dim": 8, "model.embed_dim": 8, "model.mlp_hidden": 16}
NTM = {"model.controller_size": 8, "model.n_rows": 8, "model.n_cols": 4, "n_eval": 2}
CLASSIFIER = {"data.n_train": 8, "data.n_test": 4}
TINY: dict[str, dict[str, object]] = {
    "draw": {
        **{"model.steps": 2, "model.enc_size": 8, "model.dec_size": 8, "model.z_size": 2},
        **{"model.read_size": 2, "model.write_size": 3, "train_limit": 8, "test_limit": 4, "iwae_images": 2},
    },
    "easy-vqa": {**VQA, "train_limit": 32, "eval_limit": 4},
    "ntm-copy": {**NTM, "n_eval_long": 2},
    "ntm-recall": {**NTM, "n_eval_long": 2},
    "ntm-repeat-copy": {**NTM, "n_eval_long": 2},
    "ntm-sort": NTM,
    "ram": {**CLASSIFIER, "model.glimpses": 2, "model.glimpse_size": 6, "model.scales": 2, "model.hidden": 8},
    "shapes-vqa": {**VQA, "model.channels": (4, 8, 8), "n_images": 2, "test_images": 2, "eval_images": 2},
    "stn": {**CLASSIFIER, "model.width": 4, "model.hidden": 8, "model.loc_width": 2, "model.loc_hidden": 8},
    "toy": {"n_train": 8, "n_eval": 4, "model.hidden": 8},
}

PRESETS = [
    pytest.param(name, preset, id=f"{name}:{preset}") for name, recipe in RECIPES.items() for preset in recipe.presets
]


def _write_idx(path, tensor: torch.Tensor) -> None:
    header = bytes([0, 0, 0x08, tensor.ndim]) + b"".join(struct.pack(">i", d) for d in tensor.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + bytes(tensor.flatten().tolist()))


def _local_data(tmp_path, name: str) -> dict[str, object]:
    """Where the recipe's data go: a private cache, and for the classifiers a few fake Fashion-MNIST images."""
    if name in ("stn", "ram"):
        root = tmp_path / "idx"
        root.mkdir()
        g = torch.Generator().manual_seed(0)
        for split in ("train", "test"):
            images, labels = FASHION_FILES[split]
            _write_idx(root / images, torch.randint(0, 256, (16, 28, 28), generator=g, dtype=torch.uint8))
            _write_idx(root / labels, torch.randint(0, 10, (16,), generator=g, dtype=torch.uint8))
        return {"data.data_dir": str(root), "data.cache_dir": str(tmp_path / "cache")}
    if name == "shapes-vqa":
        return {"cache_dir": str(tmp_path / "cache")}
    return {}  # easy-vqa shares the user's cache: building it reads every picture of the package once


def test_every_recipe_has_a_tiny_form_and_is_registered_under_its_own_name():
    missing, gone = set(RECIPES.names()) - TINY.keys(), TINY.keys() - set(RECIPES.names())
    assert not missing and not gone, f"add {sorted(missing)} to TINY (its sizes and data counts); drop {sorted(gone)}"
    assert all(name == recipe.name for name, recipe in RECIPES.items())


@pytest.mark.parametrize(("name", "preset"), PRESETS)
def test_preset_builds_and_takes_one_training_step(tmp_path, name, preset):
    recipe = RECIPES.get(name)
    config = resolve_config(recipe, preset, sets={**TINY[name], **COMMON, **_local_data(tmp_path, name)})
    torch.manual_seed(0)
    try:
        task = recipe.build(config)
    except DataUnavailableError as e:
        pytest.skip(f"{name}:{preset} needs data that are not on this machine: {e}")
    loader = DataLoader(task.train_set, batch_sampler=[[0, 1]], collate_fn=task.collate)
    trainer = Trainer(task, config)
    before = [p.detach().clone() for p in task.model.parameters()]
    metrics = trainer.step(next(iter(loader)))
    assert math.isfinite(metrics["loss"]) and trainer.skipped == 0
    moved = [not torch.equal(a, p) for a, p in zip(before, task.model.parameters(), strict=True)]
    assert any(moved), "the step changed no weight"
