"""StackedAttention: seed 002's multi-hop attention, u_{t+1} = v_filt_t + u_t."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from foveal import SpatialAttention, StackedAttention
from foveal.attention.normalizers import sparsemax
from foveal.errors import FovealError


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


# --- relate: hops after the first move relative to where the hop before looked ----------------------


def _grid_inputs(B=2, side=4, d=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, side * side, d, generator=g), torch.randn(B, d, generator=g)


def test_relate_follows_its_equation():
    san = StackedAttention(8, k_dim=5, hops=3, relate=True)
    with torch.no_grad():  # away from the zero-ish initialisation, so every term matters
        for relation in san.relations:
            relation.weight.normal_(0, 0.5)
            relation.bias.normal_(0, 1.0)
    V, v_Q = _grid_inputs()
    phi, maps = san(V, v_Q)
    # the cell centres of a 4 x 4 grid, row-major: x along a row, y down the rows, at (2 j + 1) / 4 - 1
    axis = torch.tensor([-0.75, -0.25, 0.25, 0.75])
    x = torch.stack([axis.repeat(4), axis.repeat_interleave(4)], dim=-1)  # (16, 2)
    u, previous = v_Q, None
    for t, hop in enumerate(san.hops):
        e = hop.w_a(torch.tanh(hop.W_v(V) + hop.W_q(u)[:, None, :]))[..., 0]  # (B, N)
        if t > 0:
            toward, avoid = san.relations[t - 1](u).unbind(-1)
            c = (previous[..., None] * x).sum(1)  # where hop t - 1 looked
            for b in range(V.shape[0]):
                for i in range(x.shape[0]):
                    distance2 = ((x[i] - c[b]) ** 2).sum()
                    seen = previous[b, i] / previous[b].max()
                    e[b, i] = e[b, i] - toward[b] * distance2 - torch.log1p(torch.exp(avoid[b])) * seen
        alpha = torch.softmax(e, dim=1)
        assert_close(maps[:, t], alpha)
        u, previous = (alpha[..., None] * V).sum(1) + u, alpha
    assert_close(phi, u)


def _pointing_hop(san, toward, avoid):
    """Make the first hop look at cell 0 only and the second hop's content score flat."""
    with torch.no_grad():
        for hop in san.hops:
            for p in hop.parameters():
                p.zero_()
        san.relations[0].weight.zero_()
        san.relations[0].bias.copy_(torch.tensor([toward, avoid]))
    bias = torch.full((16,), -30.0)
    bias[0] = 0.0
    return bias


@pytest.mark.parametrize(("toward", "expected"), [(20.0, {1, 4}), (-20.0, {15})])
def test_relate_moves_toward_or_away_from_what_the_last_hop_found(toward, expected):
    san = StackedAttention(8, k_dim=5, hops=2, relate=True)
    first_bias = _pointing_hop(san, toward, avoid=30.0)
    V, v_Q = _grid_inputs(B=1)
    glimpses, maps = [], []
    u = v_Q
    for t, hop in enumerate(san.hops):  # hop 1 gets a bias that pins it to the top-left cell
        bias = first_bias[None] if t == 0 else san.relation_bias(t, u, maps[-1], san._positions(V, None))
        v_filt, alpha = hop(V, u, bias=bias)
        u = v_filt + u
        glimpses.append(v_filt)
        maps.append(alpha)
    assert maps[0][0, 0] > 0.999
    second = maps[1][0]
    # toward: the nearest cells other than the one seen (its right and lower neighbours); away: the far corner
    assert set(torch.nonzero(second > 0.3).flatten().tolist()) == expected
    assert second[0] < 1e-6  # the cell hop 1 looked at is avoided


def test_relate_without_avoid_returns_to_the_same_cell():
    san = StackedAttention(8, k_dim=5, hops=2, relate=True)
    first_bias = _pointing_hop(san, toward=20.0, avoid=-30.0)  # softplus(-30) ~ 0: nothing avoided
    V, v_Q = _grid_inputs(B=1)
    _, first = san.hops[0](V, v_Q, bias=first_bias[None])
    bias = san.relation_bias(1, v_Q, first, san._positions(V, None))
    assert bias[0].argmax() == 0


def test_relate_needs_positions_off_a_square_grid():
    san = StackedAttention(8, k_dim=5, hops=2, relate=True)
    V, v_Q = _inputs(N=6)
    with pytest.raises(ValueError, match="6 cells are not a square grid; pass positions"):
        san(V, v_Q)
    positions = torch.linspace(-1, 1, 6)[:, None].repeat(1, 2)
    phi, maps = san(V, v_Q, positions=positions)
    assert maps.shape == (3, 2, 6) and torch.isfinite(phi).all()
    with pytest.raises(ValueError, match=r"positions: expected shape \(6, 2\)"):
        san(V, v_Q, positions=positions[:5])


def test_relate_off_keeps_the_parameters_of_seed_002():
    plain, related = StackedAttention(8, k_dim=5, hops=3), StackedAttention(8, k_dim=5, hops=3, relate=True)
    extra = set(related.state_dict()) - set(plain.state_dict())
    assert plain.relations is None and not plain.relate
    assert extra == {f"relations.{t}.{name}" for t in range(2) for name in ("weight", "bias")}


def test_relate_answers_several_questions_per_image_one_at_a_time():
    san = StackedAttention(8, k_dim=5, hops=3, relate=True)
    V, _ = _grid_inputs()
    questions = torch.randn(2, 3, 8)
    phi, maps = san(V, questions)
    for j in range(3):
        single = san(V, questions[:, j])
        assert_close(phi[:, j], single.output)
        assert_close(maps[:, j], single.weights)


def test_temperature_reaches_every_hop_and_divides_its_score():
    # hop t: alpha_t = softmax(e_t / T); setting the module's temperature sets every hop's
    torch.manual_seed(0)
    stacked = StackedAttention(8, k_dim=4, hops=2, temperature=0.5).double()
    assert [hop.temperature for hop in stacked.hops] == [0.5, 0.5]
    V, v_Q = torch.randn(2, 6, 8, dtype=torch.float64), torch.randn(2, 8, dtype=torch.float64)
    query, maps = v_Q, []
    for hop in stacked.hops:
        z = torch.tanh(hop.W_v(V) + hop.W_q(query).unsqueeze(1))
        alpha = torch.softmax(hop.w_a(z).squeeze(-1) / 0.5, dim=-1)
        query = (alpha.unsqueeze(-1) * V).sum(1) + query
        maps.append(alpha)
    assert_close(stacked(V, v_Q).weights, torch.stack(maps, 1))
    stacked.temperature = 2.0
    assert stacked.temperature == 2.0 and all(hop.temperature == 2.0 for hop in stacked.hops)


def test_prior_adds_one_question_free_term_of_each_cell_to_every_hop_divided_by_the_temperature():
    # e_{t,i} += w_p^T tanh(W_p k_i + b_p); alpha_t = softmax(e_t / T)
    torch.manual_seed(0)
    stacked = StackedAttention(8, k_dim=4, hops=2, temperature=0.5, prior=True).double()
    V, v_Q = torch.randn(2, 6, 8, dtype=torch.float64), torch.randn(2, 8, dtype=torch.float64)
    keys = torch.randn(2, 6, 8, dtype=torch.float64)
    W_p, w_p = stacked.prior[0], stacked.prior[2]
    prior = w_p(torch.tanh(W_p(keys))).squeeze(-1)  # (B, N), the same for every question
    query, maps = v_Q, []
    for hop in stacked.hops:
        e = hop.w_a(torch.tanh(hop.W_v(keys) + hop.W_q(query).unsqueeze(1))).squeeze(-1)
        alpha = torch.softmax((e + prior) / 0.5, dim=-1)
        query = (alpha.unsqueeze(-1) * V).sum(1) + query
        maps.append(alpha)
    assert_close(stacked(V, v_Q, keys=keys).weights, torch.stack(maps, 1))
    # several questions per picture: each sees the same prior, as one at a time
    questions = torch.randn(2, 3, 8, dtype=torch.float64)
    together = stacked(V, questions, keys=keys).weights
    for j in range(3):
        assert_close(together[:, j], stacked(V, questions[:, j], keys=keys).weights)
    # off by default: seed 002's parameters only
    assert StackedAttention(8, k_dim=4).prior is None
    assert {k for k in stacked.state_dict() if k.startswith("prior.")} == {
        "prior.0.weight",
        "prior.0.bias",
        "prior.2.weight",
        "prior.2.bias",
    }


def test_normalize_set_on_the_module_reaches_every_hop_and_is_checked():
    torch.manual_seed(0)
    stacked = StackedAttention(8, k_dim=4, hops=2)
    V, v_Q = _inputs()
    stacked.normalize = "sparsemax"
    assert [hop.normalize for hop in stacked.hops] == ["sparsemax", "sparsemax"]
    query = v_Q
    for t, hop in enumerate(stacked.hops):  # each hop's map is now its scores' sparsemax: exact zeros
        e = hop.w_a(torch.tanh(hop.W_v(V) + hop.W_q(query).unsqueeze(1))).squeeze(-1)
        alpha = sparsemax(e)
        assert_close(stacked(V, v_Q).weights[:, t], alpha)
        query = (alpha.unsqueeze(-1) * V).sum(1) + query
    with pytest.raises(FovealError, match="unknown normalize 'entmax'"):
        stacked.normalize = "entmax"
    assert stacked.normalize == "sparsemax"
