"""Mode-3 unfolding, map attention (output on the query's grid) and the non-local block."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch.testing import assert_close

from foveal import Attention, MapAttention, NonLocalBlock, flatten_grid, unflatten_grid

SPATIAL = {1: ((5,), (3,), (8,)), 2: ((4, 3), (2, 2), (6, 5)), 3: ((3, 2, 2), (2, 1, 2), (4, 3, 3))}


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_flatten_rows_are_mode3_fibres(ndim):
    size = SPATIAL[ndim][0]
    x = torch.randn(2, 4, *size)
    rows = flatten_grid(x)
    assert rows.shape == (2, math.prod(size), 4)
    # row i is the channel vector (mode-3 fibre) at the i-th position in row-major order
    for i, position in enumerate(itertools.product(*map(range, size))):
        assert torch.equal(rows[:, i], x[(slice(None), slice(None), *position)])
    assert torch.equal(unflatten_grid(rows, size), x)


def test_grid_errors():
    with pytest.raises(ValueError, match=r"x: expected shape \(B, C, \*S\)"):
        flatten_grid(torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"x: expected shape \(\*, 12, \*\), got \(2, 10, 4\)"):
        unflatten_grid(torch.zeros(2, 10, 4), (3, 4))


@pytest.mark.parametrize("ndim", [1, 2, 3])
@pytest.mark.parametrize("which", ["same", "smaller", "larger"])
def test_output_takes_the_query_size(ndim, which):
    key_size = SPATIAL[ndim][0]
    query_size = dict(zip(("same", "smaller", "larger"), SPATIAL[ndim], strict=True))[which]
    attn = MapAttention(4, key_dim=6, out_dim=5, heads=1)
    query, key = torch.randn(2, 4, *query_size), torch.randn(2, 6, *key_size)
    out, w = attn(query, key)
    assert out.shape == (2, 5, *query_size)
    assert w.shape == (2, 1, math.prod(query_size), math.prod(key_size))


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_map_attention_is_attention_on_the_unfolded_sets(ndim):
    q_size, k_size = SPATIAL[ndim][1], SPATIAL[ndim][2]
    attn = MapAttention(4, key_dim=6, value_dim=3, heads=1, score="dot")
    query, key, value = torch.randn(2, 4, *q_size), torch.randn(2, 6, *k_size), torch.randn(2, 3, *k_size)
    out, w = attn(query, key, value)
    ref, ref_w = attn.attention(flatten_grid(query), flatten_grid(key), flatten_grid(value))
    assert_close(out, unflatten_grid(ref, q_size))
    assert_close(w, ref_w)
    # output position p is computed from query position p alone: moving one query pixel moves its output
    flipped = attn(query.flip(-1), key, value).output
    assert_close(flipped, out.flip(-1))


def test_self_attention_with_one_map():
    attn = MapAttention(4, heads=2)
    x = torch.randn(2, 4, 3, 3)
    assert_close(attn(x).output, attn(x, x, x).output)
    assert attn(x).weights.shape == (2, 2, 9, 9)


def test_map_attention_errors():
    attn = MapAttention(4, key_dim=6)
    with pytest.raises(ValueError, match=r"query_map: expected shape \(B, 4, \*S\) with 1 to 3 spatial dims"):
        attn(torch.zeros(1, 4, 2, 2, 2, 2), torch.zeros(1, 6, 3))
    with pytest.raises(ValueError, match=r"key_map: expected shape \(B=1, 6, \*S\)"):
        attn(torch.zeros(1, 4, 3), torch.zeros(1, 5, 3))
    with pytest.raises(ValueError, match=r"key_map: expected shape \(B=1, 6, \*S\) .*, got \(2, 6, 3\)"):
        attn(torch.zeros(1, 4, 3), torch.zeros(2, 6, 3))
    with pytest.raises(ValueError, match=r"value_map: expected spatial size \(3,\) \(the key map's\), got \(4,\)"):
        attn(torch.zeros(1, 4, 3), torch.zeros(1, 6, 3), torch.zeros(1, 6, 4))


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_non_local_block_starts_as_identity(ndim):
    block = NonLocalBlock(8, heads=2)
    x = torch.randn(2, 8, *SPATIAL[ndim][0], requires_grad=True)
    out, w = block(x)
    assert torch.equal(out, x)
    assert w.shape == (2, 2, math.prod(SPATIAL[ndim][0]), math.prod(SPATIAL[ndim][0]))
    # it is the identity because W_z is zero, not because nothing flows: W_z gets a gradient ...
    (out * torch.randn_like(out)).sum().backward()
    assert block.W_z.weight.grad.abs().sum() > 0
    # ... and once W_z moves the block adds the attention term
    with torch.no_grad():
        block.W_z.weight.normal_()
    assert not torch.allclose(block(x).output, x)


def test_non_local_block_equation():
    block = NonLocalBlock(6, inner=4)
    with torch.no_grad():
        block.W_z.weight.normal_()
        block.W_z.bias.normal_()
    x = torch.randn(2, 6, 3, 5)
    rows = flatten_grid(x)
    attention: Attention = block.attention.attention
    theta, phi, g = attention.W_q(rows), attention.W_k(rows), attention.W_v(rows)
    y = torch.softmax(theta @ phi.transpose(1, 2), dim=-1) @ g  # embedded Gaussian, seed 001 eq. (2)
    z = rows + y @ block.W_z.weight[:, :, 0].T + block.W_z.bias
    assert_close(block(x).output, unflatten_grid(z, (3, 5)))


def test_non_local_errors():
    with pytest.raises(ValueError, match=r"x: expected shape \(B, 8, \*S\) with 1 to 3 spatial dims, got \(2, 7, 3\)"):
        NonLocalBlock(8)(torch.zeros(2, 7, 3))
