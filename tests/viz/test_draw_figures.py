"""DRAW's figures: drawn for a DRAW model (or a wrapper holding one as ``module``), refused for another model."""

from typing import NamedTuple

import pytest
import torch
from torch import Tensor, nn

from foveal.errors import FovealError
from foveal.models.draw import DRAW
from foveal.viz.draw import show_draw


class Images(NamedTuple):
    images: Tensor

    def __len__(self) -> int:
        return len(self.images)


class Holder(nn.Module):
    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module


def test_show_draw_draws_a_wrapped_draw_model(tmp_path):
    torch.manual_seed(0)
    model = DRAW((6, 5), 1, steps=3, enc_size=4, dec_size=5, z_size=2, read_size=2, write_size=2)
    images = (torch.rand(4, 1, 6, 5) > 0.5).float()
    with torch.no_grad():
        paths = show_draw(Holder(model), Images(images), tmp_path, samples=2)
    assert [p.name for p in paths] == ["generation.png", "generation.gif", "reconstruction.png"]
    assert all(p.stat().st_size > 0 for p in paths)


def test_show_draw_refuses_a_model_that_is_not_draw(tmp_path):
    with pytest.raises(FovealError, match=r"expected a DRAW model.*got Linear"):
        show_draw(nn.Linear(2, 2), Images(torch.zeros(1, 1, 6, 5)), tmp_path)
