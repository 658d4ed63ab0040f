"""Attention: seed 001 eq. (2) with learned theta, phi, g, per head."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from foveal import Additive, Attention


def _module(**options) -> Attention:
    torch.manual_seed(1)
    module = Attention(6, **options).double()
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0, 0.5)
    return module


def eq2_module(module: Attention, query, key, value):
    """``O = W_v V softmax((W_k K)^T W_q Q)`` per head, in seed 001's column notation.

    ``nn.Linear.weight`` is ``(out, in)``, the seed's ``W`` orientation, so ``W @ column`` is the
    seed's product. Head ``h`` uses rows ``h*s:(h+1)*s`` of each ``W`` (its slice of theta, phi, g);
    the head outputs are stacked along the rows of ``O``. Column softmax over keys = our last-axis softmax.
    """
    H = module.heads
    outputs = []
    for b in range(query.shape[0]):
        Q, K, V = query[b].T, key[b].T, value[b].T
        heads = []
        for W_q, W_k, W_v in zip(
            module.W_q.weight.chunk(H), module.W_k.weight.chunk(H), module.W_v.weight.chunk(H), strict=True
        ):
            S = (W_k @ K).T @ (W_q @ Q)  # m x n
            heads.append(W_v @ V @ torch.softmax(S, dim=0))
        outputs.append(torch.cat(heads).T)
    return torch.stack(outputs)


def _inputs(n=4, m=5, key_dim=6, value_dim=6):
    g = torch.Generator().manual_seed(0)
    return (
        torch.randn(2, n, 6, generator=g, dtype=torch.float64),
        torch.randn(2, m, key_dim, generator=g, dtype=torch.float64),
        torch.randn(2, m, value_dim, generator=g, dtype=torch.float64),
    )


@pytest.mark.parametrize("heads", [1, 2, 3])
def test_matches_eq2_with_learned_projections(heads):
    module = _module(key_dim=5, value_dim=7, out_dim=6 * heads, qk_dim=6, heads=heads, score="dot")
    q, k, v = _inputs(key_dim=5, value_dim=7)
    out, w = module(q, k, v, need_weights=True)
    assert out.shape == (2, 4, 6 * heads) and w.shape == (2, heads, 4, 5)
    assert_close(out, eq2_module(module, q, k, v))
    assert_close(w.sum(-1), torch.ones(2, heads, 4, dtype=torch.float64))


def test_self_attention_is_q_k_v_equal():
    module = _module(heads=2, score="dot")
    x = _inputs()[0]
    assert_close(module(x).output, eq2_module(module, x, x, x))
    assert_close(module(x).output, module(x, x, x).output)


def test_scaled_dot_divides_by_head_size():
    dot, scaled = _module(heads=2, score="dot"), _module(heads=2, score="scaled_dot")
    x = _inputs()[0]
    with torch.no_grad():
        dot.W_q.weight /= 3**0.5  # head size 3
    assert_close(scaled(x).output, dot(x).output)


@pytest.mark.parametrize("score", ["dot", "scaled_dot", "cosine"])
def test_need_weights_false_matches(score):
    module = _module(heads=2, score=score)
    q, k, v = _inputs()
    mask = torch.rand(2, 4, 5) < 0.6
    plain, _ = module(q, k, v, mask=mask, need_weights=True)
    fast, none = module(q, k, v, mask=mask, need_weights=False)
    assert none is None
    assert_close(fast, plain)


def test_mask_is_shared_by_heads_and_removes_keys():
    module = _module(heads=3)
    q, k, v = _inputs()
    mask = torch.ones(2, 1, 5, dtype=torch.bool)
    mask[..., -2:] = False
    out, w = module(q, k, v, mask=mask, need_weights=True)
    assert (w[..., -2:] == 0).all()
    k2, v2 = k.clone(), v.clone()
    k2[:, -2:], v2[:, -2:] = 7.0, -7.0
    assert_close(module(q, k2, v2, mask=mask).output, out)
    assert not torch.allclose(module(q, k, v).output, out)


def test_callable_score_per_head():
    score = Additive(3, 3, hidden=4).double()
    module = _module(heads=2, score=score)
    assert any(p is score.w_a.weight for p in module.parameters())  # the score's parameters are the module's
    out, w = module(_inputs()[0], need_weights=True)
    assert out.shape == (2, 4, 6) and w.shape == (2, 2, 4, 4)


def test_bias_option():
    assert Attention(4).W_q.bias is None
    assert Attention(4, bias=True).W_v.bias is not None


def test_gradcheck():
    module = _module(heads=2, score="scaled_dot")
    q, k, v = (t[:1, :3].requires_grad_(True) for t in _inputs())
    assert torch.autograd.gradcheck(lambda q, k, v: module(q, k, v).output, (q, k, v))


@pytest.mark.parametrize(
    ("build", "call", "message"),
    [
        (dict(heads=4), None, r"qk_dim=6 is not divisible by heads=4"),
        (dict(qk_dim=4, heads=2, out_dim=5), None, r"out_dim=5 is not divisible by heads=2"),
        (dict(score="gauss"), None, r"unknown score 'gauss'"),
        ({}, dict(query=torch.zeros(2, 4, 5)), r"query: expected shape \(B, n, 6\), got \(2, 4, 5\)"),
        ({}, dict(key=torch.zeros(3, 5, 6)), r"key: expected shape \(B=2, m, 6\), got \(3, 5, 6\)"),
        ({}, dict(value=torch.zeros(2, 4, 6)), r"value: expected shape \(B=2, m=5, 6\), got \(2, 4, 6\)"),
        ({}, dict(mask=torch.ones(2, 1, 4, 5, dtype=torch.bool)), r"mask: expected shape \(B, n, m\)"),
    ],
)
def test_errors(build, call, message):
    with pytest.raises(ValueError, match=message):
        module = Attention(6, **build)
        args = dict(query=torch.zeros(2, 4, 6), key=torch.zeros(2, 5, 6), value=torch.zeros(2, 5, 6))
        args.update(call or {})
        module(**args)


@pytest.mark.parametrize("heads", [1, 2])
def test_count_normaliser_per_head(heads):
    # seed 001 eq. (1) with f = theta(q)^T phi(k) and C = N (the non-local paper's dot product), per head
    module = _module(key_dim=5, value_dim=7, out_dim=6, heads=heads, score="dot", normalize="count")
    q, k, v = _inputs(key_dim=5, value_dim=7)
    mask = torch.rand(2, 4, 5, generator=torch.Generator().manual_seed(3)) < 0.6
    out = module(q, k, v, mask).output
    s = 6 // heads
    for b in range(2):
        for j in range(4):
            attendable = [i for i in range(5) if mask[b, j, i]]
            for h in range(heads):
                rows = slice(h * s, (h + 1) * s)
                theta = module.W_q.weight[rows] @ q[b, j]
                total = torch.zeros(s, dtype=torch.float64)
                for i in attendable:
                    total = total + (theta @ (module.W_k.weight[rows] @ k[b, i])) * (module.W_v.weight[rows] @ v[b, i])
                assert_close(out[b, j, rows], total / len(attendable) if attendable else total)


def test_without_embedding_queries_and_keys_are_compared_as_given():
    module = _module(heads=2, score="dot", embed=False)
    assert [name for name, _ in module.named_parameters()] == ["W_v.weight"]
    q, k, v = _inputs()
    w = module(q, k, v, need_weights=True).weights
    # the non-local paper's Gaussian f = exp(q^T k), per head on the raw halves of the vectors
    logits = torch.stack([q[..., :3] @ k[..., :3].mT, q[..., 3:] @ k[..., 3:].mT], 1)
    assert_close(w, logits.softmax(-1))
    with pytest.raises(ValueError, match=r"qk_dim: without theta and phi \(embed=False\) it is dim=6, got 4"):
        Attention(6, qk_dim=4, embed=False)
    with pytest.raises(ValueError, match=r"key_dim: score='dot' compares queries and keys as given"):
        Attention(6, key_dim=5, score="dot", embed=False)
    with pytest.raises(ValueError, match=r"unknown normalize 'mean'"):
        Attention(6, normalize="mean")
