"""Maps from a whole model with record_maps, by module name, whatever kernel runs; attention rollout
against a hand-computed example."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from foveal.attention import (
    Attention,
    HopCoAttention,
    NonLocalBlock,
    ResidualSelfAttention,
    SpatialAttention,
    attention_rollout,
    record_maps,
    register_map_module,
)
from foveal.attention.maps import report, wants_maps
from foveal.errors import FovealError


class _Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Attention(8, heads=2, qkv=True, proj=True) for _ in range(2))
        self.non_local = NonLocalBlock(8)
        self.context = ResidualSelfAttention(8)
        self.spatial = SpatialAttention(8, 8, 4)
        self.co = HopCoAttention(8, hops=2, k_dim=4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + block(x).output
        grid = self.non_local(x.transpose(1, 2).reshape(2, 8, 3, 3)).output
        x = self.context(grid.flatten(2).transpose(1, 2)).output
        pooled = self.spatial(x, x.mean(1)).output
        return pooled + self.co(x, x[:, :4]).output


def test_record_maps_collects_every_modules_maps_by_name_and_changes_no_output():
    torch.manual_seed(0)
    model = _Model().double()
    x = torch.randn(2, 9, 8, dtype=torch.float64)
    plain = model(x)
    with record_maps(model) as maps:
        recorded = model(x)
    assert_close(recorded, plain)
    assert set(maps) == {
        "blocks.0",
        "blocks.1",
        "non_local",  # kept once, under the outer name, though its inner attention made it
        "context",
        "spatial",
        "co",
        "co.word_weights",
        *(f"co.{side}_hops.{i}" for side in ("image", "word") for i in range(2)),
    }
    first = model.blocks[0](x, need_weights=True).weights
    assert_close(maps["blocks.0"], first)
    assert maps["non_local"].shape == (2, 1, 9, 9) and maps["co"].shape == (2, 2, 9)
    assert not maps["blocks.0"].requires_grad
    # Outside the recording, the fused path runs again and returns no maps.
    assert model.blocks[0](x).weights is None


def test_a_module_called_twice_keeps_every_call():
    attn = Attention(4)
    with record_maps(attn, detach=False) as maps:
        x = torch.randn(1, 3, 4)
        attn(x)
        attn(x * 2)
    assert len(maps.calls[""]) == 2 and maps[""] is maps.calls[""][1] and maps[""].requires_grad


@register_map_module
class _Saliency(nn.Module):
    """A third party's module: a tensor out, its maps computed only while a recording wants them."""

    def __init__(self) -> None:
        super().__init__()
        self.computed = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = x.norm(dim=-1).softmax(-1)
        if wants_maps(self):
            self.computed += 1
            report(self, {"weights": w, "peak": w.argmax(-1)})
        return (w.unsqueeze(-1) * x).sum(1)


class _Unregistered(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        report(self, {"weights": x})  # not a registered type: no recording holds it
        return x


def test_a_users_module_reports_its_maps_through_the_public_hook():
    model = nn.Sequential(nn.Linear(3, 3), _Saliency(), nn.Linear(3, 2))
    x = torch.randn(2, 5, 3)
    plain = model(x)
    assert model[1].computed == 0  # outside a recording: no maps computed, report not called
    with record_maps(model) as maps:
        recorded = model(x)
    assert_close(recorded, plain)
    assert set(maps) == {"1", "1.peak"} and maps["1"].shape == (2, 5) and maps["1.peak"].shape == (2,)
    assert_close(maps["1"], model[0](x).norm(dim=-1).softmax(-1))
    report(model[1], {"weights": torch.ones(1)})  # outside a recording it does nothing
    unregistered = nn.Sequential(_Unregistered())
    with record_maps(unregistered) as maps:
        unregistered(x)
    assert maps == {}
    with pytest.raises(FovealError, match="maps by name"), record_maps(model):
        report(model[1], {0: torch.ones(1)})


def test_record_maps_refuses_a_non_module():
    with pytest.raises(FovealError, match=r"nn\.Module"), record_maps(lambda x: x):
        pass


def test_rollout_hand_computed():
    # Layer 1, two heads: mean [[.75, .25], [.25, .75]]; + I, rows / 2: [[.875, .125], [.125, .875]].
    # Layer 2, one head [[.2, .8], [.6, .4]]; + I, rows / 2: [[.6, .4], [.3, .7]].
    # Rollout = A2 A1 = [[.6*.875 + .4*.125, .6*.125 + .4*.875], [.3*.875 + .7*.125, .3*.125 + .7*.875]].
    layer1 = torch.tensor([[[[0.5, 0.5], [0.5, 0.5]], [[1.0, 0.0], [0.0, 1.0]]]], dtype=torch.float64)
    layer2 = torch.tensor([[[0.2, 0.8], [0.6, 0.4]]], dtype=torch.float64)
    expected = torch.tensor([[[0.575, 0.425], [0.35, 0.65]]], dtype=torch.float64)
    assert_close(attention_rollout([layer1, layer2]), expected)
    # max fusion: layer 1 is [[1, .5], [.5, 1]]; + I, rows / 2.5: [[.8, .2], [.2, .8]].
    expected_max = torch.tensor([[[0.56, 0.44], [0.38, 0.62]]], dtype=torch.float64)
    assert_close(attention_rollout([layer1, layer2], head_fusion="max"), expected_max)
    # min fusion: layer 1 is [[.5, 0], [0, .5]]; + I, rows / 1.5: [[1, 0], [0, 1]]: layer 2's alone.
    assert_close(
        attention_rollout([layer1, layer2], head_fusion="min"), torch.tensor([[[0.6, 0.4], [0.3, 0.7]]]).double()
    )
    # without the residual, the raw maps multiply: [[.2, .8], [.6, .4]] @ [[.75, .25], [.25, .75]]
    raw = torch.tensor([[[0.35, 0.65], [0.55, 0.45]]], dtype=torch.float64)
    assert_close(attention_rollout([layer1, layer2], residual=False), raw)


def test_rollout_discards_the_lowest_weights_of_each_row():
    w = torch.tensor([[[0.1, 0.3, 0.6], [0.5, 0.2, 0.3], [0.4, 0.4, 0.2]]], dtype=torch.float64)
    # a third of 3 keys: each row drops its lowest weight (0.1, 0.2, 0.2), gains the identity, is renormalised
    expected = torch.tensor([[[1.0, 0.3, 0.6], [0.5, 1.0, 0.3], [0.4, 0.4, 1.0]]], dtype=torch.float64)
    expected = expected / torch.tensor([1.9, 1.8, 1.8], dtype=torch.float64)[:, None]
    assert_close(attention_rollout([w], discard_ratio=1 / 3), expected)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"head_fusion": "median"}, "head_fusion"),
        ({"discard_ratio": 1.0}, "discard_ratio"),
        ({"discard_ratio": -0.1}, "discard_ratio"),
    ],
)
def test_rollout_refuses_bad_options(kwargs, message):
    with pytest.raises(FovealError, match=message):
        attention_rollout([torch.eye(3)[None]], **kwargs)


def test_rollout_refuses_maps_that_are_not_square_or_do_not_chain():
    with pytest.raises(FovealError, match="maps\\[0\\]"):
        attention_rollout([torch.ones(1, 2, 3)])
    with pytest.raises(FovealError, match="maps\\[1\\]"):
        attention_rollout([torch.eye(2)[None], torch.eye(3)[None]])
    with pytest.raises(FovealError, match="at least one"):
        attention_rollout([])
