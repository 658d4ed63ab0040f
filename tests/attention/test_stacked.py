"""StackedAttention: seed 002's multi-hop attention, u_{t+1} = v_filt_t + u_t."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from foveal import SpatialAttention, StackedAttention


def _inputs(B=3, N=6, d=8):
    g = torch.Generator().manual_seed(0)
    return torch.randn(B, N, d, generator=g), torch.randn(B, d, generator=g)


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_hops_follow_the_recurrence(hops):
    san = StackedAttention(8, k_dim=5, hops=hops)
    V, v_Q = _inputs()
    phi, maps = san(V, v_Q)
    assert phi.shape == (3, 8) and maps.shape == (3, hops, 6)
    u = v_Q  # hop 1's query is the question
    for t in range(hops):
        hop = san.hops[t]
        # one hop of seed 000 / 002 written out: alpha = softmax(w_a tanh(W_v v_i + W_q u)), v_filt = sum alpha_i v_i
        e = hop.w_a(torch.tanh(hop.W_v(V) + hop.W_q(u)[:, None, :]))[..., 0]
        alpha = torch.softmax(e, dim=1)
        assert_close(maps[:, t], alpha)
        u = (alpha[..., None] * V).sum(1) + u  # phi = v_filt + v_Q is the next query
    assert_close(phi, u)


def test_each_hop_has_its_own_parameters():
    san = StackedAttention(8, k_dim=5, hops=2)
    assert all(isinstance(h, SpatialAttention) for h in san.hops)
    assert san.hops[0].W_v.weight.data_ptr() != san.hops[1].W_v.weight.data_ptr()
    assert len(list(san.parameters())) == 2 * len(list(san.hops[0].parameters()))


def test_mask_applies_to_every_hop():
    san = StackedAttention(8, k_dim=5, hops=2)
    V, v_Q = _inputs()
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[:, -2:] = False
    phi, maps = san(V, v_Q, mask)
    assert (maps[..., -2:] == 0).all()
    assert_close(phi, san(V[:, :-2], v_Q).output)
    assert not torch.allclose(san(V, v_Q).output, phi)


@pytest.mark.parametrize("score", ["multiplicative", "dot", "cosine"])
def test_other_scores(score):
    phi, maps = StackedAttention(8, hops=2, score=score)(*_inputs())
    assert phi.shape == (3, 8) and torch.isfinite(phi).all()
    assert_close(maps.sum(-1), torch.ones(3, 2))


def test_errors():
    san = StackedAttention(8)
    with pytest.raises(ValueError, match=r"v_Q: expected shape \(B=3, 8\), got \(3, 7\)"):
        san(torch.zeros(3, 6, 8), torch.zeros(3, 7))
    with pytest.raises(ValueError, match=r"V: expected shape \(B, N, 8\)"):
        san(torch.zeros(3, 8), torch.zeros(3, 8))
    with pytest.raises(ValueError, match=r"hops: expected an integer >= 1, got 0"):
        StackedAttention(8, hops=0)


def test_keys_reach_every_hop():
    san = StackedAttention(8, k_dim=5, hops=2)
    V, v_Q = _inputs()
    keys = torch.randn_like(V)
    phi, maps = san(V, v_Q, keys=keys)
    u = v_Q
    for t, hop in enumerate(san.hops):
        alpha = torch.softmax(hop.w_a(torch.tanh(hop.W_v(keys) + hop.W_q(u)[:, None, :]))[..., 0], dim=1)
        assert_close(maps[:, t], alpha)
        u = (alpha[..., None] * V).sum(1) + u
    assert_close(phi, u)


def test_several_questions_per_image_equal_one_at_a_time():
    san = StackedAttention(8, k_dim=5, hops=2)
    V, _ = _inputs()
    questions = torch.randn(3, 4, 8)
    phi, maps = san(V, questions)
    assert phi.shape == (3, 4, 8) and maps.shape == (3, 4, 2, 6)
    for j in range(4):
        single = san(V, questions[:, j])
        assert_close(phi[:, j], single.output)
        assert_close(maps[:, j], single.weights)
