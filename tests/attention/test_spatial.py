"""SpatialAttention: seed 000's class (pasted below as the reference) and seed 002's variants."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

from foveal import SpatialAttention
from foveal.attention import masked_softmax
from foveal.registry import ATTENTION


# Seed 000's layer, verbatim (comments trimmed): the reference our class must reproduce.
class SeedSpatialAttention(nn.Module):
    def __init__(self, c_dim=512, q_dim=256, k_dim=128):
        super(SeedSpatialAttention, self).__init__()  # noqa: UP008
        self.W_v = nn.Linear(c_dim, k_dim, bias=False)
        self.W_q = nn.Linear(q_dim, k_dim, bias=True)
        self.w_a = nn.Linear(k_dim, 1, bias=True)

    def forward(self, V, h_Q):
        B, N, C = V.size()  # noqa: RUF059
        v_proj = self.W_v(V)
        q_proj = self.W_q(h_Q)
        q_exp = q_proj.unsqueeze(1).expand(-1, N, -1)
        z = torch.tanh(v_proj + q_exp)
        e = self.w_a(z).squeeze(2)
        alpha = F.softmax(e, dim=1)
        v_hat = torch.bmm(alpha.unsqueeze(1), V).squeeze(1)
        return v_hat, alpha


def _inputs(B=3, N=7, C=10, d_q=6, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, N, C, generator=g, dtype=dtype), torch.randn(B, d_q, generator=g, dtype=dtype)


def test_seed_state_dict_loads_strictly_and_outputs_match():
    seed = SeedSpatialAttention(c_dim=10, q_dim=6, k_dim=8)
    ours = SpatialAttention(10, 6, 8)
    ours.load_state_dict(seed.state_dict(), strict=True)
    V, h_Q = _inputs()
    v_hat, alpha = ours(V, h_Q)
    ref_v_hat, ref_alpha = seed(V, h_Q)
    assert_close(v_hat, ref_v_hat)
    assert_close(alpha, ref_alpha)
    # and the other way round: our state_dict is the seed's
    SeedSpatialAttention(10, 6, 8).load_state_dict(ours.state_dict(), strict=True)


def test_seed_sizes_and_registry():
    attn = ATTENTION.get("spatial")(512, 256, 128)
    v_hat, alpha = attn(torch.randn(32, 49, 512), torch.randn(32, 256))
    assert v_hat.shape == (32, 512) and alpha.shape == (32, 49)


def test_seed_002_parametric_form_without_tanh_cannot_see_the_question():
    # seed 002: h_att = W^I v_I (+) (W^Q v_Q + b^Q); p_att = softmax(W^h h_att + b^h); columns are regions.
    # W^h (W^Q v_Q + b^Q) is one number for all regions, so the softmax cancels it: two questions, one map.
    torch.manual_seed(0)
    W_I, W_Q, b_Q, W_h, b_h = torch.randn(8, 10), torch.randn(8, 6), torch.randn(8), torch.randn(1, 8), torch.randn(1)
    v_I = torch.randn(10, 7)

    def p_att(v_Q):
        h_att = W_I @ v_I + (W_Q @ v_Q + b_Q)[:, None]
        return torch.softmax(W_h @ h_att + b_h, dim=-1)[0]

    assert (p_att(torch.randn(6)) - p_att(10 * torch.randn(6))).abs().max() < 1e-6
    with pytest.raises(ValueError, match=r"score='linear' cannot depend on the question.*use 'multiplicative'"):
        SpatialAttention(10, 6, 8, score="linear")


def test_multiplicative_matches_its_equation_and_the_question_steers_it():
    attn = SpatialAttention(10, 6, 8, score="multiplicative").double()
    V, v_Q = _inputs(dtype=torch.float64)
    for b in range(V.shape[0]):
        # e_i = w_a^T ((W_v v_i) * (W_q v_Q + b_z)) + b_a, alpha = softmax(e), v_hat = sum_i alpha_i v_i
        u = attn.W_q.weight @ v_Q[b] + attn.W_q.bias
        e = torch.stack([attn.w_a.weight[0] @ ((attn.W_v.weight @ v) * u) + attn.w_a.bias[0] for v in V[b]])
        alpha = torch.softmax(e, dim=0)
        out = attn(V[b : b + 1], v_Q[b : b + 1])
        assert_close(out.weights[0], alpha)
        assert_close(out.output[0], alpha @ V[b])
    other = torch.randn_like(v_Q)
    assert (attn(V, v_Q).weights - attn(V, other).weights).abs().max() > 1e-2


@pytest.mark.parametrize("score", ["dot", "cosine"])
def test_parameter_free_forms(score):
    attn = SpatialAttention(10, score=score)
    assert len(list(attn.parameters())) == 0
    V, v_Q = _inputs(d_q=10, dtype=torch.float64)
    for b in range(V.shape[0]):
        v_I, q = V[b].T, v_Q[b]
        if score == "cosine":
            v_I, q = v_I / v_I.norm(dim=0), q / q.norm()
        p_att = torch.softmax(torch.ones(10, dtype=torch.float64) @ (v_I * q[:, None]), dim=0)  # 1^T (v_I (.) v_Q)
        out = attn(V[b : b + 1], v_Q[b : b + 1])
        assert_close(out.weights[0], p_att)
        assert_close(out.output[0], V[b].T @ p_att)


def test_mask_removes_regions_and_all_masked_gives_zeros():
    attn = SpatialAttention(10, 6, 8)
    V, h_Q = _inputs()
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[:, 4:] = False
    mask[2] = False
    v_hat, alpha = attn(V, h_Q, mask)
    V2 = V.clone()
    V2[:, 4:] = 100.0
    assert_close(attn(V2, h_Q, mask).output, v_hat)
    assert_close(v_hat[:2], attn(V[:2, :4], h_Q[:2]).output)
    assert not torch.allclose(attn(V, h_Q).output[:2], v_hat[:2])
    assert (v_hat[2] == 0).all() and (alpha[2] == 0).all()
    assert_close(alpha.sum(-1), torch.tensor([1.0, 1.0, 0.0]))


@pytest.mark.parametrize("score", ["additive", "multiplicative", "dot", "cosine"])
def test_gradcheck(score):
    attn = SpatialAttention(4, 4, 3, score=score).double()
    V, h_Q = (t.requires_grad_(True) for t in _inputs(B=2, N=3, C=4, d_q=4, dtype=torch.float64))
    mask = torch.tensor([[True, False, True], [False, False, False]])
    assert torch.autograd.gradcheck(lambda V, h: attn(V, h, mask).output, (V, h_Q))


def test_errors():
    attn = SpatialAttention(10, 6, 8)
    with pytest.raises(ValueError, match=r"V: expected shape \(B, N, 10\), got \(3, 7, 9\)"):
        attn(torch.zeros(3, 7, 9), torch.zeros(3, 6))
    with pytest.raises(ValueError, match=r"h_Q: expected shape \(B=3, 6\), got \(2, 6\)"):
        attn(torch.zeros(3, 7, 10), torch.zeros(2, 6))
    with pytest.raises(ValueError, match=r"mask: expected shape \(B=3, N=7\), got \(3, 6\)"):
        attn(torch.zeros(3, 7, 10), torch.zeros(3, 6), torch.ones(3, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"needs q_dim == c_dim, got 6 != 10"):
        SpatialAttention(10, 6, score="dot")
    with pytest.raises(ValueError, match=r"unknown score 'bilinear'"):
        SpatialAttention(10, score="bilinear")


@pytest.mark.parametrize("score", ["additive", "multiplicative", "dot", "cosine"])
def test_keys_are_scored_and_values_averaged(score):
    # seed 001: o = sum_i softmax_i(f(q, k_i)) v_i with keys k_i other than the values v_i
    attn = SpatialAttention(10, 10, 8, score=score).double()
    V, h_Q = _inputs(d_q=10, dtype=torch.float64)
    keys = torch.randn_like(V)
    v_hat, alpha = attn(V, h_Q, keys=keys)
    assert_close(alpha, attn(keys, h_Q).weights)  # the score reads only the keys
    assert_close(v_hat, torch.einsum("bn,bnc->bc", alpha, V))  # the sum reads only the values
    assert_close(attn(V, h_Q, keys=V).output, attn(V, h_Q).output)
    with pytest.raises(ValueError, match="keys"):
        attn(V, h_Q, keys=keys[:, :-1])


@pytest.mark.parametrize("score", ["additive", "multiplicative", "dot"])
def test_several_questions_per_image_equal_one_at_a_time(score):
    attn = SpatialAttention(10, 10, 8, score=score)
    V, _ = _inputs()
    questions = torch.randn(3, 4, 10)  # 4 questions about each of the 3 images
    keys = torch.randn_like(V)
    v_hat, alpha = attn(V, questions, keys=keys)
    assert v_hat.shape == (3, 4, 10) and alpha.shape == (3, 4, 7)
    for j in range(4):
        single = attn(V, questions[:, j], keys=keys)
        assert_close(v_hat[:, j], single.output)
        assert_close(alpha[:, j], single.weights)


def test_sparsemax_normalize_is_the_projection_of_the_additive_scores():
    import foveal.attention.core as core

    torch.manual_seed(0)
    attn = SpatialAttention(6, 5, 4, normalize="sparsemax").double()
    V, h_Q = torch.randn(2, 7, 6, dtype=torch.float64), 3 * torch.randn(2, 5, dtype=torch.float64)
    v_hat, alpha = attn(V, h_Q)
    expected = core.sparsemax(attn._additive_score(h_Q.unsqueeze(1), V)).squeeze(1)
    assert_close(alpha, expected)
    assert_close(v_hat, (alpha.unsqueeze(-1) * V).sum(1))
    with pytest.raises(ValueError, match="unknown normalize 'count'; choose from: softmax, sparsemax"):
        SpatialAttention(6, normalize="count")


@pytest.mark.parametrize("temperature", [0.3, 2.5])
def test_additive_temperature_divides_the_seeds_score(temperature):
    # e_i = (w_a^T tanh(W_v v_i + W_q h_Q + b_z) + b_a) / T, alpha = softmax(e), v_hat = sum_i alpha_i v_i
    seed = SeedSpatialAttention(c_dim=10, q_dim=6, k_dim=8).double()
    ours = SpatialAttention(10, 6, 8, temperature=temperature).double()
    ours.load_state_dict(seed.state_dict(), strict=True)  # the temperature is no parameter
    V, h_Q = _inputs(dtype=torch.float64)
    z = torch.tanh(seed.W_v(V) + seed.W_q(h_Q).unsqueeze(1))
    alpha = torch.softmax((seed.w_a(z).squeeze(-1)) / temperature, dim=-1)
    v_hat, weights = ours(V, h_Q)
    assert_close(weights, alpha)
    assert_close(v_hat, (alpha.unsqueeze(-1) * V).sum(1))


@pytest.mark.parametrize("score", ["additive", "multiplicative", "dot", "cosine"])
def test_temperature_divides_every_score_before_the_bias_and_the_normalisation(score):
    # alpha = softmax(e / T + bias): the same module at T = 1 with the score's own logits divided by T
    torch.manual_seed(0)
    plain = SpatialAttention(10, 10, 8, score=score).double()
    scaled = SpatialAttention(10, 10, 8, score=score, temperature=0.4).double()
    scaled.load_state_dict(plain.state_dict())
    V, h_Q = _inputs(d_q=10, dtype=torch.float64)
    bias = torch.randn(3, 7, dtype=torch.float64)
    logits = torch.log(plain(V, h_Q).weights)  # e + c per row: the softmax forgets c
    assert_close(scaled(V, h_Q, bias=bias).weights, torch.softmax(logits / 0.4 + bias, dim=-1))
    scaled.temperature = 1.0  # settable: a schedule in training
    assert_close(scaled(V, h_Q).weights, plain(V, h_Q).weights)
    assert "divisor" not in scaled.state_dict()


def test_the_default_temperature_changes_no_bit():
    # x / 1 is x: a model trained before the temperature divided every score answers the same
    torch.manual_seed(0)
    attn = SpatialAttention(10, 6, 8)
    V, h_Q = _inputs()
    z = torch.tanh(attn.W_v(V) + attn.W_q(h_Q).unsqueeze(1))
    alpha = masked_softmax(attn.w_a(z).squeeze(-1))
    assert torch.equal(attn(V, h_Q).weights, alpha)
