"""``record_maps`` on the glimpse and memory families: each records where it looked, and what it records
is what the model itself computes (the boxes, windows and weightings its own outputs hold)."""

from __future__ import annotations

import torch
from torch import nn
from torch.testing import assert_close

from foveal import GaussianRead, GaussianWrite, record_maps
from foveal.glimpse.sampler import affine_grid
from foveal.models.draw import DRAW
from foveal.models.ntm import NTM
from foveal.models.ram import RAM
from foveal.models.stn_classifier import STCNN

G = lambda seed=0: torch.Generator().manual_seed(seed)  # noqa: E731


def test_spatial_transformer_records_its_theta_and_sampling_grid():
    torch.manual_seed(0)
    model = STCNN(1, 28, 10, width=4, hidden=8).eval()
    with torch.no_grad():
        nn.init.normal_(model.transformer.localization[-1].weight, std=0.1)  # away from the identity
    images = torch.rand(3, 1, 28, 28, generator=G())
    out = model(images)
    with record_maps(model) as maps:
        again = model(images)
    assert set(maps) == {"transformer.theta", "transformer.grid"}
    assert_close(again.logits, out.logits)
    assert_close(maps["transformer.theta"], out.theta)
    assert_close(maps["transformer.grid"], affine_grid(out.theta, (28, 28)))


def test_gaussian_heads_record_their_windows_by_part():
    torch.manual_seed(0)
    model = nn.ModuleDict({"read": GaussianRead(6, 3), "write": GaussianWrite(6, 3)})
    h, images = torch.randn(2, 6, generator=G()), torch.rand(2, 1, 12, 10, generator=G(1))
    with record_maps(model) as maps:
        read = model["read"](images, h)
        write = model["write"](h, (12, 10))
    for name, out in (("read", read), ("write", write)):
        for part, value in zip(out.window._fields, out.window, strict=True):
            assert_close(maps[f"{name}.window.{part}"], value)


def test_ram_records_its_glimpse_locations_and_extents():
    torch.manual_seed(0)
    model = RAM(1, 24, 3, glimpses=3, glimpse_size=4, scales=2, glimpse_hidden=8, location_hidden=8).eval()
    images = torch.rand(2, 1, 24, 24, generator=G())
    out = model(images)
    with record_maps(model) as maps:
        model(images)
    assert maps["locations"].shape == (2, 3, 2) and maps["extents"].shape == (2, 3)
    assert_close(maps["locations"], out.locations)
    assert_close(maps["extents"], out.extents)


def test_ntm_records_its_read_and_write_weightings_of_every_step():
    torch.manual_seed(0)
    model = NTM(4, 3, controller_size=8, n_rows=6, n_cols=5).eval()
    x = torch.rand(2, 7, 4, generator=G())
    kept = model(x, record=True)
    with record_maps(nn.Sequential(model)) as maps:  # under a name, inside another model
        out = model(x)
    assert_close(out.logits, kept.logits)
    assert out.read_weights is not None  # the recording asked for every step
    assert_close(maps["0.read_weights"], kept.read_weights)
    assert_close(maps["0.write_weights"], kept.write_weights)
    assert maps["0.read_weights"].shape == (2, 7, 1, 6)


def test_draw_records_the_boxes_it_read_and_wrote_at_every_step():
    torch.manual_seed(0)
    model = DRAW((12, 10), 1, steps=3, enc_size=8, dec_size=8, z_size=2, read_size=2, write_size=3).eval()
    x = (torch.rand(2, 1, 12, 10, generator=G()) > 0.5).float()
    noise = torch.randn(3, 2, 2, generator=G(1))
    steps = model(x, noise=noise, return_steps=True)
    with record_maps(model) as maps:
        out = model(x, noise=noise)
    assert out.read_params is None  # what was asked is returned; the recording kept the rest
    assert_close(out.logits, steps.logits)
    assert_close(maps["read_boxes"], model.box(steps.read_params, 2))
    assert_close(maps["write_boxes"], model.box(steps.write_params, 3))
    assert maps["read_boxes"].shape == (3, 2, 4)
    with record_maps(model) as maps:
        drawn = model.generate(4, generator=G())
    assert set(maps) == {"write_boxes"}  # a generation reads nothing
    assert_close(maps["write_boxes"], model.box(drawn.write_params, 3))


def test_draw_without_attention_records_nothing():
    model = DRAW((8, 8), 1, steps=2, enc_size=8, dec_size=8, z_size=2, attention=False).eval()
    with record_maps(model) as maps:
        model((torch.rand(2, 1, 8, 8, generator=G()) > 0.5).float())
    assert maps == {}
