"""On a GPU: the recipes' training steps, the fused attention and the compiled steps agree with the CPU.

Every test here is marked ``cuda`` and skips where torch sees no CUDA device; on a machine with one,
``pytest -m cuda`` runs them. A GPU computes convolutions with TF32 inputs and sums in another order,
so its losses are held to the CPU's within 1e-3 (relative), not bit for bit.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch.utils.data import DataLoader

from foveal import attend
from foveal.compiling import MergeSummedProducts, compile_model
from foveal.errors import DataUnavailableError
from foveal.recipes.config import resolve_config
from foveal.runs import get_recipe
from foveal.train import Trainer, seed_everything

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
]

# Recipes whose training step draws no random numbers: a CUDA step must give the CPU's loss.
DETERMINISTIC = {
    "ntm-copy": ("quick", {}),
    "shapes-vqa": ("quick", {}),
    "easy-vqa": ("quick", {}),
    "stn": ("quick", {"data.dataset": "mnist"}),
}
# Recipes that sample (DRAW's latents, RAM's glimpse locations) from the device's own generator.
STOCHASTIC = {
    "draw": (None, {}),
    "ram": ("quick", {"data.dataset": "mnist"}),
}


def trainer(recipe_name: str, preset: str | None, sets: dict[str, str], device: str) -> tuple[Trainer, list]:
    """A trainer of the recipe on ``device`` and its first two training batches (unshuffled)."""
    recipe = get_recipe(recipe_name)
    config = resolve_config(recipe, preset=preset, sets={**sets, "loop.device": device}, seed=0, threads=1)
    seed_everything(config.seed)
    try:
        task = recipe.build(config)
    except DataUnavailableError as e:
        pytest.skip(str(e))
    loader = DataLoader(task.train_set, batch_size=config.loop.batch_size, collate_fn=task.collate)
    batches = []
    for batch in loader:
        batches.append(batch)
        if len(batches) == 2:
            break
    return Trainer(task, config, torch.device(device)), batches


def close(a: float, b: float, rtol: float = 1e-3) -> bool:
    return math.isfinite(a) and abs(a - b) <= rtol * max(1.0, abs(b))


@pytest.mark.parametrize("recipe_name", sorted(DETERMINISTIC))
def test_a_training_step_on_the_gpu_gives_the_cpus_loss(recipe_name):
    preset, sets = DETERMINISTIC[recipe_name]
    (cpu, batches), (gpu, _) = trainer(recipe_name, preset, sets, "cpu"), trainer(recipe_name, preset, sets, "cuda")
    assert next(gpu.model.parameters()).is_cuda
    for batch in batches:  # the second step runs the weights the optimiser moved on each device
        on_cpu, on_gpu = cpu.step(batch)["loss"], gpu.step(batch)["loss"]
        assert close(on_gpu, on_cpu), f"{recipe_name}: GPU loss {on_gpu}, CPU loss {on_cpu}"


@pytest.mark.parametrize("recipe_name", sorted(STOCHASTIC))
def test_a_sampling_recipe_trains_on_the_gpu_and_its_compiled_step_matches(recipe_name):
    from torch._inductor import config as inductor

    # inductor draws random numbers with its own generator unless told to call torch's
    with inductor.patch(fallback_random=True):
        check_compiled_sampling_recipe(recipe_name)


def check_compiled_sampling_recipe(recipe_name: str) -> None:
    preset, sets = STOCHASTIC[recipe_name]
    (eager, batches) = trainer(recipe_name, preset, sets, "cuda")
    (compiled, _) = trainer(recipe_name, preset, {**sets, "loop.compile": "true"}, "cuda")
    for batch in batches:
        torch.manual_seed(1)  # the same draws for both
        loss_eager = eager.step(batch)["loss"]
        torch.manual_seed(1)
        loss_compiled = compiled.step(batch)["loss"]
        assert close(loss_compiled, loss_eager), f"{recipe_name}: compiled {loss_compiled}, eager {loss_eager}"


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compiled_ntm_training_on_the_gpu_follows_the_eager_one(mode):
    # ntm-copy's batches vary in length: the graphs (CUDA graphs too) must serve every length
    sets = {"curriculum_start": "20"}
    (eager, batches) = trainer("ntm-copy", "quick", sets, "cuda")
    (compiled, _) = trainer("ntm-copy", "quick", {**sets, "loop.compile": "true", "loop.compile_mode": mode}, "cuda")
    for batch in [*batches, *batches]:
        loss_eager, loss_compiled = eager.step(batch)["loss"], compiled.step(batch)["loss"]
        assert close(loss_compiled, loss_eager), f"{mode}: compiled {loss_compiled}, eager {loss_eager}"


class CountingMerge(MergeSummedProducts):
    """The graph pass, counting the matrix products it removes."""

    def __init__(self) -> None:
        self.removed = 0

    def __call__(self, graph: torch.fx.Graph) -> None:
        before = sum(node.target is torch.ops.aten.mm.default for node in graph.nodes)
        super().__call__(graph)
        self.removed += before - sum(node.target is torch.ops.aten.mm.default for node in graph.nodes)

    def uuid(self) -> str:
        return "foveal-test-counting-merge"


class Recurrent(torch.nn.Module):
    """A plain recurrent net: its weights' gradients are sums of one product per step."""

    def __init__(self) -> None:
        super().__init__()
        self.inward = torch.nn.Linear(5, 16)
        self.recurrent = torch.nn.Linear(16, 16, bias=False)

    def forward(self, sequence: torch.Tensor) -> torch.Tensor:
        state = torch.zeros(sequence.shape[1], 16, device=sequence.device)
        for step in sequence:
            state = torch.tanh(self.inward(step) + self.recurrent(state))
        return state


def test_the_graph_pass_merges_a_recurrent_weights_gradient_on_the_gpu():
    from torch._inductor import config as inductor

    torch.manual_seed(0)
    eager = Recurrent().cuda()
    compiled = compile_model(copy.deepcopy(eager), options={"post_grad_custom_pre_pass": (merge := CountingMerge())})
    sequence = torch.randn(8, 12, 5, device="cuda")
    with inductor.patch(force_disable_caches=True):  # a cached graph would skip the pass
        for model in (eager, compiled):
            model(sequence).square().sum().backward()
    assert merge.removed > 0
    for (name, weight), twin in zip(eager.named_parameters(), compiled.parameters(), strict=True):
        torch.testing.assert_close(twin.grad, weight.grad, rtol=1e-4, atol=1e-4, msg=name)


@pytest.mark.parametrize("n", [64, 1000])
def test_fused_attention_on_the_gpu_matches_the_plain_path(n):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, n, 64, generator=g).cuda() for _ in range(3))
    mask = torch.rand(2, 1, n, n, generator=g).cuda() > 0.3
    for m in (None, mask):
        fused = attend(q, k, v, mask=m, need_weights=False, fused=True).output
        plain = attend(q, k, v, mask=m, need_weights=False, fused=False).output
        torch.testing.assert_close(fused, plain, rtol=2e-3, atol=2e-3)
