"""One recipe's training step, built one way for ``compile.py`` and for ``_base_eager.py``, which runs it against
an earlier commit's source: it uses only what the loop has had since its redesign."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from foveal.recipes.config import resolve_config
from foveal.runs import get_recipe
from foveal.train import Trainer, seed_everything


def build_trainer(
    recipe_name: str, preset: str | None, sets: dict[str, str], threads: int, device: str = "cpu"
) -> tuple[Trainer, object]:
    """A trainer for the recipe with ``loop.lr=0`` (every step times the same model), seed 0, on ``device``, and
    one training batch of the recipe's size."""
    recipe = get_recipe(recipe_name)
    sets = {**sets, "loop.lr": "0", "loop.warmup_steps": "0"}
    config = resolve_config(recipe, preset=preset, sets=sets, seed=0, threads=threads)
    seed_everything(config.seed)
    task = recipe.build(config)
    loader = DataLoader(
        task.train_set,
        batch_size=config.loop.batch_size,
        shuffle=True,
        collate_fn=task.collate,
        generator=torch.Generator().manual_seed(0),
    )
    return Trainer(task, config, torch.device(device)), next(iter(loader))
