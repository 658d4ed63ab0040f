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
    out, w = attn(query, key, need_weights=True)
    assert out.shape == (2, 5, *query_size)
    assert w.shape == (2, 1, math.prod(query_size), math.prod(key_size))


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_map_attention_is_attention_on_the_unfolded_sets(ndim):
    q_size, k_size = SPATIAL[ndim][1], SPATIAL[ndim][2]
    attn = MapAttention(4, key_dim=6, value_dim=3, heads=1, score="dot")
    query, key, value = torch.randn(2, 4, *q_size), torch.randn(2, 6, *k_size), torch.randn(2, 3, *k_size)
    out, w = attn(query, key, value, need_weights=True)
    ref, ref_w = attn.attention(flatten_grid(query), flatten_grid(key), flatten_grid(value), need_weights=True)
    assert_close(out, unflatten_grid(ref, q_size))
    assert_close(w, ref_w)
    # output position p is computed from query position p alone: moving one query pixel moves its output
    flipped = attn(query.flip(-1), key, value).output
    assert_close(flipped, out.flip(-1))


def test_self_attention_with_one_map():
    attn = MapAttention(4, heads=2)
    x = torch.randn(2, 4, 3, 3)
    assert_close(attn(x).output, attn(x, x, x).output)
    assert attn(x).weights is None
    assert attn(x, need_weights=True).weights.shape == (2, 2, 9, 9)


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
    out, w = block(x, need_weights=True)
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


# --- the non-local paper's four similarities ---------------------------------------------------------


def _non_local(f: str, seed: int = 0) -> NonLocalBlock:
    torch.manual_seed(seed)
    block = NonLocalBlock(6, inner=4, f=f).double()
    with torch.no_grad():
        for p in block.parameters():  # W_z too, so the block is not the identity
            p.normal_(0.0, 0.5)
    return block


def non_local_reference(block: NonLocalBlock, x: torch.Tensor) -> torch.Tensor:
    """Wang et al. (2018) eqs. (1)-(4) and (6), position by position, in float64.

    ``y_i = (1 / C(x)) sum_j f(x_i, x_j) g(x_j)``, ``z_i = W_z y_i + x_i``, with
    gaussian ``f = exp(x_i^T x_j)`` and embedded Gaussian ``f = exp(theta(x_i)^T phi(x_j))``
    (``C = sum_j f``), dot product ``f = theta(x_i)^T phi(x_j)`` and concatenation
    ``f = ReLU(w_f^T [theta(x_i), phi(x_j)])`` (``C = N``).
    """
    attention = block.attention.attention
    rows = flatten_grid(x)
    N = rows.shape[1]
    W_g, W_z, b_z = attention.W_v.weight, block.W_z.weight[:, :, 0], block.W_z.bias
    z = torch.empty_like(rows)
    for b in range(rows.shape[0]):
        for i in range(N):
            fs = []
            for j in range(N):
                x_i, x_j = rows[b, i], rows[b, j]
                if block.f == "gaussian":
                    fs.append(torch.exp(x_i @ x_j))
                    continue
                theta, phi = attention.W_q.weight @ x_i, attention.W_k.weight @ x_j
                if block.f == "embedded_gaussian":
                    fs.append(torch.exp(theta @ phi))
                elif block.f == "dot":
                    fs.append(theta @ phi)
                else:
                    fs.append(torch.relu(attention.score.w.weight[0] @ torch.cat([theta, phi])))
            C = sum(fs) if "gaussian" in block.f else N
            y = sum(f_j * (W_g @ rows[b, j]) for j, f_j in enumerate(fs)) / C
            z[b, i] = W_z @ y + b_z + rows[b, i]
    return unflatten_grid(z, x.shape[2:])


@pytest.mark.parametrize("f", ["gaussian", "embedded_gaussian", "dot", "concatenation"])
def test_non_local_similarities_match_the_paper(f):
    block = _non_local(f)
    x = torch.randn(2, 6, 3, 2, dtype=torch.float64) * 0.5
    out, weights = block(x, need_weights=True)
    assert_close(out, non_local_reference(block, x))
    if "gaussian" in f:
        assert_close(weights.sum(-1), torch.ones(2, 1, 6, dtype=torch.float64))
    # ...and each starts as the identity, like the default
    assert torch.equal(NonLocalBlock(6, f=f)(x.float()).output, x.float())


@pytest.mark.parametrize("f", ["gaussian", "embedded_gaussian", "dot", "concatenation"])
def test_non_local_similarities_gradcheck(f):
    block = _non_local(f)
    x = (torch.randn(1, 6, 2, 2, dtype=torch.float64) * 0.5).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: block(x).output, (x,))


def test_non_local_default_is_the_embedded_gaussian():
    x = torch.randn(2, 8, 3, 3)
    default, named = NonLocalBlock(8, heads=2), NonLocalBlock(8, heads=2, f="embedded_gaussian")
    assert default.state_dict().keys() == named.state_dict().keys()
    named.load_state_dict(default.state_dict())
    with torch.no_grad():
        default.W_z.weight.normal_()
        named.W_z.weight.copy_(default.W_z.weight)
    assert torch.equal(default(x).output, named(x).output)
    gaussian = NonLocalBlock(8, heads=2, f="gaussian")  # no theta, phi: only g and W_z learn
    assert {name.split(".")[-2] for name, _ in gaussian.named_parameters()} == {"W_v", "W_z"}


def test_non_local_option_errors():
    with pytest.raises(ValueError, match=r"unknown f 'softmax'; choose from: gaussian, embedded_gaussian"):
        NonLocalBlock(8, f="softmax")
    with pytest.raises(ValueError, match=r"score: f='concatenation' has its own score"):
        NonLocalBlock(8, f="concatenation", score="cosine")
    with pytest.raises(ValueError, match=r"qk_dim=6 is not divisible by heads=4"):
        NonLocalBlock(6, inner=4, heads=4, f="gaussian")  # the raw channels are split among the heads


def test_map_attention_takes_every_option_of_attention():
    options = {"heads": 2, "qkv": True, "proj": True, "bias": True, "dtype": torch.float64}
    attn = MapAttention(4, **options)
    assert attn.attention.extra_repr() == Attention(4, **options).extra_repr() and attn.attention.proj is not None
    x = torch.randn(2, 4, 3, 2, dtype=torch.float64)
    assert_close(attn(x).output, unflatten_grid(attn.attention(flatten_grid(x)).output, (3, 2)))
    with pytest.raises(TypeError, match="keys"):
        MapAttention(4, keys=3)
