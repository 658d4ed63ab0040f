"""``torch.export``: every shipped model and every registered attention layer exports, saves and loads.

The outputs are foveal's named tuples; ``torch.export.save`` writes a program only when the classes
it returns are registered with torch's pytree under a name (:func:`foveal._torch_private.exportable_output`).
"""

from __future__ import annotations

import io

import pytest
import torch
from torch.testing import assert_close

import foveal
from foveal.registry import ATTENTION
from foveal.zoo import available


def _round_trip(module: torch.nn.Module, args: tuple) -> None:
    module.eval()
    torch.manual_seed(0)  # DRAW draws its latents: both runs draw the same
    with torch.no_grad():
        expected = module(*args)
    buffer = io.BytesIO()
    torch.export.save(torch.export.export(module, args), buffer)
    buffer.seek(0)
    torch.manual_seed(0)
    with torch.no_grad():
        again = torch.export.load(buffer).module()(*args)
    assert type(again) is type(expected), f"{type(again).__name__} is not {type(expected).__name__}"
    for field, got, want in zip(expected._fields, again, expected, strict=True):
        if want is None:
            assert got is None, field
        else:
            assert_close(got, want, msg=lambda m, f=field: f"{f}: {m}")


# Tracing the recurrent models' unrolled steps takes 5-30 s each; small ones of the same classes run by default.
SLOW_TO_TRACE = {"draw", "ntm-copy", "ram", "shapes-vqa"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_TO_TRACE else n for n in available()]
)
def test_shipped_model_saves_and_loads_as_an_exported_program(name):
    model = foveal.pretrained(name)
    _round_trip(model, model.example_inputs(2, torch.Generator().manual_seed(0)))


def _small(name: str) -> torch.nn.Module:
    from foveal.models.draw import DRAW
    from foveal.models.ntm import NTM
    from foveal.models.ram import RAM

    torch.manual_seed(0)
    small = {
        "draw": lambda: DRAW((8, 8), 1, steps=2, enc_size=8, dec_size=8, z_size=3, read_size=2, write_size=2),
        "ntm": lambda: NTM(4, 3, controller_size=8, n_rows=6, n_cols=5),
        "ram": lambda: RAM(1, 16, 3, glimpses=2, glimpse_size=4, scales=1, glimpse_hidden=8, location_hidden=8),
    }
    return small[name]()


@pytest.mark.parametrize("name", ["draw", "ntm", "ram"])
def test_recurrent_model_saves_and_loads_as_an_exported_program(name):
    model = _small(name)
    _round_trip(model, model.example_inputs(2, torch.Generator().manual_seed(0)))


@pytest.mark.parametrize("name", ATTENTION.names())
def test_attention_layer_saves_and_loads_as_an_exported_program(name):
    torch.manual_seed(0)
    module = ATTENTION.get(name)(8)
    _round_trip(module, module.example_inputs(2, torch.Generator().manual_seed(0)))


def test_an_unregistered_named_tuple_is_what_fails_to_save():
    """The failure the registration prevents (so the tests above can fail)."""
    from typing import NamedTuple

    class Plain(NamedTuple):
        output: torch.Tensor

    class Returns(torch.nn.Module):
        def forward(self, x):
            return Plain(x + 1)

    with pytest.raises(Exception, match=r"namedtuple|NamedTuple|serialize"):
        torch.export.save(torch.export.export(Returns(), (torch.ones(2),)), io.BytesIO())
