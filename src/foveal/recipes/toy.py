"""``toy``: a small MLP on seeded 2-D spirals. Trains in seconds; smoke-tests the loop and the CLI."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import TensorDataset

from foveal.recipes.base import LoopConfig, Recipe, RunConfig, Task
from foveal.registry import RECIPES


@dataclass
class MLPSpec:
    """The options of :func:`mlp`."""

    hidden: int = 64  # units in each of the two hidden layers
    dropout: float = 0.1  # after the first hidden layer


def mlp(in_features: int, classes: int, spec: MLPSpec) -> nn.Sequential:
    """Two ReLU layers of ``spec.hidden`` units and a linear classifier."""
    return nn.Sequential(
        nn.Linear(in_features, spec.hidden),
        nn.ReLU(),
        nn.Dropout(spec.dropout),
        nn.Linear(spec.hidden, spec.hidden),
        nn.ReLU(),
        nn.Linear(spec.hidden, classes),
    )


@dataclass
class ToyConfig(RunConfig):
    model: MLPSpec = field(default_factory=MLPSpec)
    n_train: int = 2048  # training points
    n_eval: int = 512  # evaluation points
    classes: int = 3  # spiral arms
    noise: float = 0.15  # std of the angle noise
    loop: LoopConfig = field(
        default_factory=lambda: LoopConfig(steps=1000, batch_size=64, lr=1e-2, eval_every=250, ckpt_every=250)
    )


def spirals(n: int, classes: int, noise: float, generator: torch.Generator) -> TensorDataset:
    """``n`` points on ``classes`` interleaved spiral arms in [-1, 1]^2, with Gaussian noise.

    Shape:
        x: (n, 2) float32; y: (n,) int64 in [0, classes).

    Example:
        >>> ds = spirals(6, 3, 0.1, torch.Generator().manual_seed(0))
        >>> ds.tensors[0].shape, ds.tensors[1].tolist()
        (torch.Size([6, 2]), [0, 1, 2, 0, 1, 2])
    """
    y = torch.arange(n) % classes
    r = torch.rand(n, generator=generator)
    angle = 2 * math.pi * y / classes + 3 * math.pi * r + noise * torch.randn(n, generator=generator)
    x = torch.stack([r * torch.cos(angle), r * torch.sin(angle)], dim=1)
    return TensorDataset(x.float(), y)


def _loss(model: nn.Module, batch: list[Tensor]) -> tuple[Tensor, dict[str, float]]:
    x, y = batch
    logits = model(x)
    return F.cross_entropy(logits, y), {"acc": (logits.argmax(-1) == y).float().mean().item()}


def _evaluate(model: nn.Module, dataset: TensorDataset) -> dict[str, float]:
    device = next(model.parameters()).device
    x, y = (t.to(device) for t in dataset.tensors)
    logits = model(x)
    return {"loss": F.cross_entropy(logits, y).item(), "acc": (logits.argmax(-1) == y).float().mean().item()}


def _show(model: nn.Module, dataset: TensorDataset, figures_dir: Path) -> list[Path]:
    from foveal.viz import pyplot

    plt = pyplot()
    device = next(model.parameters()).device
    grid = torch.linspace(-1.1, 1.1, 200)
    gx, gy = torch.meshgrid(grid, grid, indexing="xy")
    with torch.no_grad():
        regions = model(torch.stack([gx.flatten(), gy.flatten()], 1).to(device)).argmax(-1).cpu().view(200, 200)
    x, y = dataset.tensors
    fig, ax = plt.subplots(figsize=(4, 4))
    ax.contourf(gx, gy, regions, alpha=0.3, cmap="viridis")
    ax.scatter(x[:, 0], x[:, 1], c=y, s=4, cmap="viridis")
    ax.set(title="toy: decision regions on the eval set", xticks=[], yticks=[])
    figures_dir.mkdir(parents=True, exist_ok=True)
    path = figures_dir / "regions.png"
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return [path]


def build(config: ToyConfig) -> Task:
    generator = torch.Generator().manual_seed(config.seed)
    train_set = spirals(config.n_train, config.classes, config.noise, generator)
    eval_set = spirals(config.n_eval, config.classes, config.noise, generator)
    model = mlp(2, config.classes, config.model)
    return Task(model, train_set, _loss, eval_set=eval_set, evaluate=_evaluate, show=_show)


RECIPES.add(
    Recipe(
        name="toy",
        description="small MLP on seeded 2-D spirals; trains in seconds (smoke test of the loop and CLI)",
        config=ToyConfig,
        build=build,
        presets={
            "quick": {"loop.steps": 300, "loop.eval_every": 100, "loop.ckpt_every": 100},
            "full": {"loop.steps": 3000, "n_train": 8192, "loop.schedule": "cosine", "loop.warmup_steps": 100},
        },
    )
)
