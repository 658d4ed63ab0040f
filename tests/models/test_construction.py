"""Every model refuses, at construction, the options it cannot work with: one FovealError line naming the option.

A size below 1, a probability outside ``[0, 1)``, a NaN bias or an unknown choice is known when the model
is built; it must not wait for the first forward pass (or surface as torch's "negative dimension").
"""

import math

import pytest

from foveal.errors import FovealError
from foveal.models.draw import DRAW
from foveal.models.ntm import NTM
from foveal.models.ram import RAM
from foveal.models.stn_classifier import CNN, STCNN, GlimpseCNN
from foveal.models.vqa import VQA

SMALL_VQA = {"dim": 16, "k_dim": 8, "channels": (4, 4)}

BAD = [
    ("image_size", lambda: DRAW((0, 8), 1)),
    ("image_size", lambda: DRAW((8,), 1)),
    ("channels", lambda: DRAW((8, 8), 0)),
    ("z_size", lambda: DRAW((8, 8), 1, z_size=-1)),
    ("in_channels", lambda: RAM(-1, 16, 10)),
    ("glimpses", lambda: RAM(1, 16, 10, glimpses=0)),
    ("scales", lambda: RAM(1, 16, 10, scales=-1)),
    ("std", lambda: RAM(1, 16, 10, std=math.nan)),
    ("core", lambda: RAM(1, 16, 10, core="gru")),
    ("classes", lambda: CNN(1, 28, 0)),
    ("width", lambda: CNN(1, 28, 10, width=-1)),
    ("dropout", lambda: CNN(1, 28, 10, dropout=1.0)),
    ("in_size", lambda: CNN(1, 3, 10)),
    ("in_channels", lambda: STCNN(-1, 28, 10)),
    ("loc_hidden", lambda: STCNN(1, 28, 10, loc_hidden=0)),
    ("transform", lambda: STCNN(1, 28, 10, transform="shear")),
    ("in_size", lambda: GlimpseCNN(1, 8, 10)),
    ("filters", lambda: GlimpseCNN(1, 60, 10, filters=0)),
    ("vocab_size", lambda: VQA(0, 12, **SMALL_VQA)),
    ("num_answers", lambda: VQA(20, -1, **SMALL_VQA)),
    ("dim", lambda: VQA(20, 12, **{**SMALL_VQA, "dim": 0})),
    ("stem_stride", lambda: VQA(20, 12, **SMALL_VQA, stem_stride=0)),
    ("channels", lambda: VQA(20, 12, **{**SMALL_VQA, "channels": ()})),
    ("heads", lambda: VQA(20, 12, **SMALL_VQA, head="transformer", head_options={"heads": 0})),
    ("n_shifts", lambda: NTM(4, 3, n_rows=2, n_shifts=3)),
    ("gate_bias", lambda: NTM(4, 3, gate_bias=math.nan)),
]


@pytest.mark.parametrize(("option", "build"), BAD, ids=[f"{i}-{option}" for i, (option, _) in enumerate(BAD)])
def test_an_option_that_cannot_work_is_refused_at_construction(option, build):
    with pytest.raises(FovealError) as error:
        build()
    message = str(error.value)
    assert option in message and "\n" not in message
