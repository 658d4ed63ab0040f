"""One sweep over every registered attention module (timm's test_models pattern).

The contract it holds is written in docs/attention.md ("The modules"): ``factory(dim, **options)`` builds a
module whose ``example_inputs(batch, generator)`` returns positional arguments for its ``forward``, whose
``forward`` returns a NamedTuple with ``output`` and ``weights`` first, and whose maps ``record_maps`` records.
"""

from __future__ import annotations

import io

import pytest
import torch

import foveal  # noqa: F401  (importing the package registers every module)
from foveal.attention import record_maps
from foveal.attention.maps import is_map_module
from foveal.registry import ATTENTION

DIM, BATCH = 8, 2
WITHOUT_MAPS = {"context-bilstm"}  # registered with the attention modules, but an LSTM: no weights to record


def _build(name: str, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    module = ATTENTION.get(name)(DIM)
    assert hasattr(module, "example_inputs"), f"{name}: registered modules must define example_inputs(batch, generator)"
    return module


def _run(module: torch.nn.Module):
    args = module.example_inputs(BATCH, torch.Generator().manual_seed(0))
    return args, module(*args)


@pytest.mark.parametrize("name", ATTENTION.names())
def test_forward_shapes_and_finite(name):
    out = _run(_build(name, 0))[1]
    assert isinstance(out, tuple) and out._fields[:2] == ("output", "weights")
    assert out.output.shape[0] == BATCH and torch.isfinite(out.output).all()
    assert out.weights is None or (out.weights.shape[0] == BATCH and (out.weights >= 0).all())


@pytest.mark.parametrize("name", ATTENTION.names())
def test_every_parameter_gets_a_gradient(name):
    module = _build(name, 0)
    args, out = _run(module)
    tensors = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
    for a in tensors:
        a.requires_grad_(True)
    out = module(*args)
    # Every tensor the module returns counts (a two-stream module returns more than output and weights).
    returned = [t for t in out if isinstance(t, torch.Tensor) and t.is_floating_point()]
    sum(((t * torch.randn_like(t)).sum() for t in returned), torch.zeros(())).backward()
    for pname, p in module.named_parameters():
        assert p.grad is not None, f"{name}.{pname} gets no gradient"
        assert torch.isfinite(p.grad).all(), f"{name}.{pname} has a non-finite gradient"
    assert all(torch.isfinite(a.grad).all() for a in tensors if a.grad is not None)


@pytest.mark.parametrize("name", ATTENTION.names())
def test_state_dict_round_trip(name):
    module, other = _build(name, 0), _build(name, 1)
    buffer = io.BytesIO()
    torch.save(module.state_dict(), buffer)
    buffer.seek(0)
    other.load_state_dict(torch.load(buffer, weights_only=True), strict=True)
    args, out = _run(module)
    again = other(*args)
    torch.testing.assert_close(again.output, out.output)
    if out.weights is not None:
        torch.testing.assert_close(again.weights, out.weights)


@pytest.mark.parametrize("name", ATTENTION.names())
def test_record_maps_records_its_weights_and_changes_no_output(name):
    module = _build(name, 0).eval()
    assert is_map_module(module), f"{name}: register its class with foveal.register_map_module"
    args, out = _run(module)
    with record_maps(module) as maps:
        recorded = module(*args)
    torch.testing.assert_close(recorded.output, out.output)
    if name in WITHOUT_MAPS:
        assert recorded.weights is None and maps == {}
        return
    assert "" in maps and maps[""].shape[0] == BATCH, f"{name}: its weights were not recorded under its name"
    if out.weights is not None:
        torch.testing.assert_close(maps[""], out.weights)
