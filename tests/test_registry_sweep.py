"""Every registered model and attention module, built small and run on its own example inputs.

A model (``MODELS``) is built from :data:`SMALL` (a new model must be added there, or
:func:`test_every_registered_model_has_a_small_build` fails) and run on ``model.example_inputs(batch,
generator)``: its forward gives finite outputs, and its ``state_dict`` loaded into a fresh instance gives the
same outputs. An attention module (``ATTENTION``) is built as ``factory(dim)``; its forward and ``state_dict``
round trip are checked in tests/attention/test_conformance.py. Every model's parameters all learn from one
backward pass. Both, compiled by :func:`foveal.compiling.compile_model`, give the eager values and gradients:
with the ``aot_eager`` backend (torch's graphs, no code generation) in the default run, with inductor in the
``slow`` one.
"""

from __future__ import annotations

import copy
import dataclasses
import io
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor, nn

import foveal.models.ntm
import foveal.models.ram
import foveal.models.stn_classifier
import foveal.models.vqa  # noqa: F401  (importing each model registers it; the package, the attention modules)
from _grads import assert_every_parameter_learns
from foveal.compiling import Compilable, compile_model
from foveal.models.vqa import VQA_HEADS
from foveal.registry import ATTENTION, MODELS

BATCH = 2

SMALL: dict[str, Callable[[], nn.Module]] = {
    "cnn": lambda: MODELS.get("cnn")(1, 16, 3, width=4, hidden=8),
    "draw": lambda: MODELS.get("draw")((8, 7), 1, steps=3, enc_size=6, dec_size=6, z_size=2, read_size=2, write_size=3),
    "glimpse-cnn": lambda: MODELS.get("glimpse-cnn")(1, 20, 3, filters=2, hidden=8),
    "ntm": lambda: MODELS.get("ntm")(4, 3, controller_size=8, n_rows=6, n_cols=5),
    "ram": lambda: MODELS.get("ram")(1, 28, 3, glimpses=2, glimpse_size=6, scales=2, hidden=16),
    "stcnn": lambda: MODELS.get("stcnn")(1, 28, 3, width=4, hidden=8, loc_width=2, loc_hidden=8),
    "vqa": lambda: MODELS.get("vqa")(
        12, 4, image_size=32, channels=(4, 8), dim=16, k_dim=8, embed_dim=8, mlp_hidden=16
    ),
}


def _tensors(value: Any) -> list[Tensor]:
    """The floating-point tensors in a model's output (a tensor, or NamedTuples and lists of them)."""
    if isinstance(value, Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


def _build(name: str, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return SMALL[name]().eval()  # eval: dropout off, BatchNorm's running statistics


def _inputs(model: nn.Module) -> tuple[Any, ...]:
    return model.example_inputs(BATCH, torch.Generator().manual_seed(0))


def _outputs(model: nn.Module, inputs: tuple[Any, ...]) -> list[Tensor]:
    torch.manual_seed(1)  # the same draws for every call (DRAW's noise, RAM's glimpse locations)
    return _tensors(model(*inputs))


def test_every_registered_model_has_a_small_build():
    missing = set(MODELS.names()) - SMALL.keys()
    assert sorted(SMALL) == MODELS.names(), f"add {sorted(missing)} to SMALL (a small build of the model)"


@pytest.mark.parametrize("name", MODELS.names())
def test_model_forward_on_its_example_inputs(name):
    model = _build(name, 0)
    outputs = _outputs(model, _inputs(model))
    assert outputs and all(torch.isfinite(t).all() for t in outputs)


@pytest.mark.parametrize("head", VQA_HEADS.names())
def test_every_vqa_head_builds_from_its_own_default_options_and_runs(head):
    # each head's options come from its own spec (the registry entry names it), nothing given
    model = SMALL["vqa"]().eval()
    spec = dataclasses.replace(model.spec, head=head, head_options={})
    model = MODELS.get("vqa")(model.vocab_size, model.num_answers, spec).eval()
    assert model.head_options == VQA_HEADS.get(head).options()
    outputs = _outputs(model, _inputs(model))
    assert outputs and all(torch.isfinite(t).all() for t in outputs)


@pytest.mark.parametrize("name", MODELS.names())
def test_model_state_dict_round_trip(name):
    model, fresh = _build(name, 0), _build(name, 1)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    fresh.load_state_dict(torch.load(buffer, weights_only=True), strict=True)
    inputs = _inputs(model)
    for got, want in zip(_outputs(fresh, inputs), _outputs(model, inputs), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def _projected(outputs: list[Tensor]) -> Tensor:
    """A scalar that every output element reaches, each with its own random weight."""
    direction = torch.Generator().manual_seed(2)
    return sum((t * torch.randn(t.shape, generator=direction)).sum() for t in outputs)


@pytest.mark.parametrize("name", MODELS.names())
def test_every_parameter_of_the_model_learns(name):
    model = _build(name, 0)
    # A layer that starts at zero (the ST-CNN's last localisation layer, so that the transform starts as the
    # identity) passes no gradient to the layers before it: nudged off zero, every parameter must get one.
    noise = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=noise), alpha=1e-2)
    _projected(_outputs(model, _inputs(model))).backward()
    assert_every_parameter_learns(model)


def _values_and_gradients(module: nn.Module, inputs: tuple[Any, ...]) -> list[Tensor]:
    outputs = _outputs(module, inputs)
    total = _projected(outputs)
    weights = [p for p in module.parameters() if p.requires_grad]
    grads = torch.autograd.grad(total, weights, allow_unused=True)
    return [t.detach() for t in outputs] + [g for g in grads if g is not None]


def _assert_compiled_equals_eager(eager: nn.Module, inputs: tuple[Any, ...], backend: str = "inductor") -> None:
    torch._dynamo.reset()
    compiled = compile_model(copy.deepcopy(eager), backend=backend)
    expected, got = _values_and_gradients(eager, inputs), _values_and_gradients(compiled, inputs)
    assert len(got) == len(expected) > 1
    for index, (value, want) in enumerate(zip(got, expected, strict=True)):
        torch.testing.assert_close(value, want, rtol=1e-4, atol=1e-5, msg=f"output or gradient {index}")


# The models whose class declares how it compiles (recurrent steps, runs of them, graph-only keywords)
PLANNED = [name for name in MODELS.names() if isinstance(SMALL[name](), Compilable)]


@pytest.mark.parametrize("name", PLANNED)
def test_compiled_plan_traces_to_the_eager_values_and_gradients(name):
    # aot_eager runs the traced graphs, forward and backward, without generating code: what the plan's methods
    # and keywords compute in a graph is checked in seconds
    model = _build(name, 0)
    _assert_compiled_equals_eager(model, _inputs(model), backend="aot_eager")


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS.names())
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch's own jit.script_method, inside inductor
def test_compiled_model_equals_eager(name):
    model = _build(name, 0)
    _assert_compiled_equals_eager(model, _inputs(model))


@pytest.mark.slow
@pytest.mark.parametrize("name", ATTENTION.names())
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_compiled_attention_module_equals_eager(name):
    torch.manual_seed(0)
    module = ATTENTION.get(name)(8).eval()
    _assert_compiled_equals_eager(module, module.example_inputs(BATCH, torch.Generator().manual_seed(0)))
