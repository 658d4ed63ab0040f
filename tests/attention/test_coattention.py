"""Attention over regions and words (seed 002; Lu et al. 2016), each against loops written from its equations.

The references see only the real words of each question (padding sliced off), so matching them is
also a test that the modules' masks remove the padded words completely.
"""

from __future__ import annotations

import pytest
import torch

from _grads import assert_every_parameter_learns
from foveal.attention.coattention import (
    AlternatingCoAttention,
    HopCoAttention,
    ParallelCoAttention,
)
from foveal.attention.spatial import SpatialAttention
from foveal.registry import ATTENTION

NAMES = ["coattention-independent", "coattention-joint", "coattention-parallel", "coattention-alternating"]
D = 4


def _randomised(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    generator = torch.Generator().manual_seed(seed)
    module = module.double()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.5)
    return module


def _inputs(lengths=(5, 3), N: int = 6, seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    B, T = len(lengths), max(lengths)
    V = torch.randn(B, N, D, generator=generator, dtype=torch.float64)
    Q = torch.randn(B, T, D, generator=generator, dtype=torch.float64)
    mask = torch.arange(T) < torch.tensor(lengths).unsqueeze(1)
    v_Q = torch.randn(B, D, generator=generator, dtype=torch.float64)
    return V, Q, mask, v_Q


def softmax(e: list[torch.Tensor]) -> torch.Tensor:
    f = torch.exp(torch.stack(e))
    return f / f.sum()


def additive_attention(att: SpatialAttention, X: torch.Tensor, g: torch.Tensor):
    """Seed 000 / Lu et al. eq. (6): z_i = tanh(W_x x_i + W_g g + b), a = softmax(w^T z_i + b_a), sum a_i x_i."""
    e = []
    for i in range(X.shape[0]):
        z = torch.tanh(att.W_v.weight @ X[i] + att.W_q.weight @ g + att.W_q.bias)
        e.append(att.w_a.weight[0] @ z + att.w_a.bias[0])
    a = softmax(e)
    return sum(a[i] * X[i] for i in range(X.shape[0])), a


def _pad(weights: torch.Tensor, T: int) -> torch.Tensor:
    return torch.cat([weights, weights.new_zeros(T - len(weights))])


def hop_reference(co: HopCoAttention, V, Q, mask, v_Q):
    outs, image_maps, word_maps = [], [], []
    for b in range(V.shape[0]):
        words = Q[b, mask[b]]  # real words only
        u, m = v_Q[b], V[b].mean(0)
        alphas, betas = [], []
        for image_att, word_att in zip(co.image_hops, co.word_hops, strict=True):
            c_image, c_word = (u + m, u + m) if co.joint else (u, m)  # joint: the sum of both conditioning vectors
            v_t, alpha = additive_attention(image_att, V[b], c_image)
            q_t, beta = additive_attention(word_att, words, c_word)
            u, m = u + v_t, m + q_t
            alphas.append(alpha)
            betas.append(_pad(beta, Q.shape[1]))
        outs.append(u + m)
        image_maps.append(torch.stack(alphas))
        word_maps.append(torch.stack(betas))
    return torch.stack(outs), torch.stack(image_maps), torch.stack(word_maps)


@pytest.mark.parametrize("joint", [False, True])
def test_hop_coattention_matches_the_equations(joint: bool) -> None:
    co = _randomised(HopCoAttention(D, hops=3, k_dim=3, joint=joint))
    V, Q, mask, v_Q = _inputs()
    out = co(V, Q, mask, v_Q)
    ref_out, ref_image, ref_words = hop_reference(co, V, Q, mask, v_Q)
    torch.testing.assert_close(out.output, ref_out)
    torch.testing.assert_close(out.weights, ref_image)
    torch.testing.assert_close(out.word_weights, ref_words)


def test_joint_and_independent_conditioning_differ() -> None:
    V, Q, mask, v_Q = _inputs()
    independent = _randomised(HopCoAttention(D, hops=2, k_dim=3, joint=False))
    joint = _randomised(HopCoAttention(D, hops=2, k_dim=3, joint=True))
    assert not torch.allclose(independent(V, Q, mask, v_Q).output, joint(V, Q, mask, v_Q).output)


def parallel_reference(co: ParallelCoAttention, V, Q, mask):
    """Lu et al. (2016) eqs. (3)-(4) in their column notation: V is d x N, Q is d x T (real words only)."""
    images, questions, a_vs, a_qs, affinities = [], [], [], [], []
    for b in range(V.shape[0]):
        Vc, Qc = V[b].T, Q[b, mask[b]].T
        T, N = Qc.shape[1], Vc.shape[1]
        C = torch.tanh(Qc.T @ co.W_b.weight @ Vc)  # (T, N)
        if co.pool == "max":
            e_v = [max(C[t, n] for t in range(T)) for n in range(N)]  # max over each column: over the words
            e_q = [max(C[t, n] for n in range(N)) for t in range(T)]
        else:
            W_v, W_q = co.W_v.weight, co.W_q.weight
            H_v = torch.tanh(W_v @ Vc + (W_q @ Qc) @ C)  # (k, N)
            H_q = torch.tanh(W_q @ Qc + (W_v @ Vc) @ C.T)  # (k, T)
            e_v = list(co.w_hv.weight[0] @ H_v)
            e_q = list(co.w_hq.weight[0] @ H_q)
        a_v, a_q = softmax(e_v), softmax(e_q)
        images.append(sum(a_v[n] * Vc[:, n] for n in range(N)))
        questions.append(sum(a_q[t] * Qc[:, t] for t in range(T)))
        a_vs.append(a_v)
        a_qs.append(_pad(a_q, Q.shape[1]))
        full = torch.zeros(Q.shape[1], N, dtype=C.dtype)
        full[: C.shape[0]] = C
        affinities.append(full)
    return torch.stack(images), torch.stack(questions), torch.stack(a_vs), torch.stack(a_qs), torch.stack(affinities)


@pytest.mark.parametrize("pool", ["max", "learned"])
def test_parallel_coattention_matches_the_equations(pool: str) -> None:
    co = _randomised(ParallelCoAttention(D, pool=pool, k_dim=3))
    V, Q, mask, _ = _inputs()
    out = co(V, Q, mask)
    image, question, a_v, a_q, C = parallel_reference(co, V, Q, mask)
    torch.testing.assert_close(out.image, image)
    torch.testing.assert_close(out.question, question)
    torch.testing.assert_close(out.output, image + question)
    torch.testing.assert_close(out.weights[:, 0], a_v)
    torch.testing.assert_close(out.word_weights[:, 0], a_q)
    torch.testing.assert_close(out.affinity[mask], C[mask])


def test_alternating_coattention_matches_the_equations() -> None:
    co = _randomised(AlternatingCoAttention(D, k_dim=3))
    V, Q, mask, _ = _inputs()
    out = co(V, Q, mask)
    for b in range(V.shape[0]):
        words = Q[b, mask[b]]
        hidden, score = co.summary_score[0], co.summary_score[2]  # g = 0: z_t = tanh(W_x q_t + b)
        a_s = softmax([score.weight[0] @ torch.tanh(hidden.weight @ q + hidden.bias) + score.bias[0] for q in words])
        s = sum(a_s[t] * words[t] for t in range(len(words)))
        image, a_v = additive_attention(co.attend_image, V[b], s)
        question, a_q = additive_attention(co.attend_question, words, image)
        torch.testing.assert_close(out.image[b], image)
        torch.testing.assert_close(out.question[b], question)
        torch.testing.assert_close(out.output[b], image + question)
        torch.testing.assert_close(out.weights[b, 0], a_v)
        torch.testing.assert_close(out.word_weights[b, 0], _pad(a_s, Q.shape[1]))
        torch.testing.assert_close(out.word_weights[b, 1], _pad(a_q, Q.shape[1]))


@pytest.mark.parametrize("name", NAMES)
def test_padded_words_change_nothing(name: str) -> None:
    co = _randomised(ATTENTION.get(name)(D, k_dim=3))
    V, Q, mask, v_Q = _inputs(lengths=(5, 2))
    out = co(V, Q, mask, v_Q)
    Q_changed = torch.where(mask.unsqueeze(-1), Q, 100 * torch.randn_like(Q))
    changed = co(V, Q_changed, mask, v_Q)
    assert not torch.equal(Q, Q_changed)
    for field in ("output", "weights", "word_weights", "image", "question"):
        torch.testing.assert_close(getattr(changed, field), getattr(out, field))
    assert (out.word_weights.transpose(0, 1)[:, ~mask] == 0).all()
    # the mask does mask: without it, the padded words move the output
    assert not torch.allclose(co(V, Q, None, v_Q).output, co(V, Q_changed, None, v_Q).output)


@pytest.mark.parametrize("name", NAMES)
def test_all_padding_question_gives_finite_outputs_and_gradients(name: str) -> None:
    co = ATTENTION.get(name)(D, k_dim=3)
    V, Q, _, v_Q = (x.float() for x in _inputs())
    Q.requires_grad_(True)
    mask = torch.zeros(Q.shape[:2], dtype=torch.bool)
    out = co(V, Q, mask, v_Q)
    for field in ("output", "weights", "word_weights", "image", "question"):
        assert torch.isfinite(getattr(out, field)).all(), field
    assert (out.word_weights == 0).all()
    out.output.sum().backward()
    assert torch.isfinite(Q.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in co.parameters() if p.grad is not None)


@pytest.mark.parametrize("name", NAMES)
def test_every_parameter_gets_a_gradient(name: str) -> None:
    co = ATTENTION.get(name)(8, k_dim=4)
    out = co(*co.example_inputs(generator=torch.Generator().manual_seed(2)))
    out.output.square().sum().backward()
    assert_every_parameter_learns(co)


@pytest.mark.parametrize("name", NAMES)
def test_shape_errors_name_the_shapes(name: str) -> None:
    co = ATTENTION.get(name)(8, k_dim=4)
    V, Q, mask = torch.randn(2, 9, 8), torch.randn(2, 5, 8), torch.ones(2, 5, dtype=torch.bool)
    with pytest.raises(ValueError, match="V: expected shape"):
        co(torch.randn(2, 9, 7), Q, mask)
    with pytest.raises(ValueError, match="Q: expected shape"):
        co(V, torch.randn(3, 5, 8), mask)
    with pytest.raises(ValueError, match="mask: expected shape"):
        co(V, Q, mask[:, :4])
    with pytest.raises(ValueError, match="mask must be bool"):
        co(V, Q, mask.float())
    with pytest.raises(ValueError, match="v_Q: expected shape"):
        co(V, Q, mask, torch.randn(2, 4))


def test_bad_options_raise() -> None:
    with pytest.raises(ValueError, match=r"hops: expected an integer >= 1, got 0"):
        HopCoAttention(8, hops=0)
    with pytest.raises(ValueError, match="unknown pool"):
        ParallelCoAttention(8, pool="mean")


def test_default_question_vector_is_the_mean_of_the_real_words_and_finite_without_any() -> None:
    co = _randomised(HopCoAttention(D, hops=1, k_dim=3))
    V, Q, mask, _ = _inputs(lengths=(5, 2))
    mean_of_real = torch.stack([Q[b, mask[b]].mean(0) for b in range(2)])
    torch.testing.assert_close(co(V, Q, mask).output, co(V, Q, mask, mean_of_real).output)
    Q = Q.clone().requires_grad_(True)
    out = co(V, Q, torch.zeros_like(mask))  # no real word: v_Q = 0, not 0 / 0
    assert all(torch.isfinite(t).all() for t in out if t is not None)
    out.output.sum().backward()
    assert torch.isfinite(Q.grad).all()
