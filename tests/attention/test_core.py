"""attend(): held to seed 001's eq. (1) and eq. (2), its mask rule, its fused path and its invariants."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

import foveal.attention.core as core
from foveal import Additive, attend, fused_attention, masked_softmax, score_logits, set_fused_attention
from foveal.attention import Concatenation, sparsemax

from ._refs import SCORE_NAMES, eq1, eq2, make_score

BUILTIN = ("dot", "scaled_dot", "cosine")


def _inputs(B=2, n=3, m=4, d=5, e=5, p=3, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(B, n, d, generator=g, dtype=dtype),
        torch.randn(B, m, e, generator=g, dtype=dtype),
        torch.randn(B, m, p, generator=g, dtype=dtype),
        g,
    )


def _key_dim(name: str) -> int:
    # The learned scores may compare vectors of different sizes; test that they do.
    return 4 if name in ("additive", "bilinear") else 5


def test_hand_computed_dot():
    q = torch.tensor([[[1.0, 0.0]]])
    k = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    v = torch.tensor([[[1.0], [0.0]]])
    out, w = attend(q, k, v, score="dot", need_weights=True)
    e = math.e
    assert_close(w, torch.tensor([[[e / (1 + e), 1 / (1 + e)]]]))
    assert_close(out, torch.tensor([[[e / (1 + e)]]]))


@pytest.mark.parametrize("name", SCORE_NAMES)
@pytest.mark.parametrize("masked", [False, True])
def test_matches_eq1(name, masked):
    q, k, v, g = _inputs(e=_key_dim(name))
    score, pair = make_score(name, 5, _key_dim(name), g)
    mask = None
    if masked:
        mask = torch.rand(2, 3, 4, generator=g) > 0.4
        mask[0, 1] = False  # one query with nothing to attend
    out, w = attend(q, k, v, score=score, mask=mask, need_weights=True)
    assert_close(out, eq1(q, k, v, pair, mask))
    # weights are the f / C of eq. (1): recover them with one-hot values
    eye = torch.eye(4, dtype=torch.float64).expand(2, 4, 4)
    assert_close(w, eq1(q, k, eye, pair, mask))


@pytest.mark.parametrize("name", SCORE_NAMES)
def test_matches_eq2_column_form(name):
    q, k, v, g = _inputs(e=_key_dim(name))
    score, pair = make_score(name, 5, _key_dim(name), g)
    assert_close(attend(q, k, v, score=score).output, eq2(q, k, v, score, pair))


def test_self_attention_q_k_v_equal():
    x, _, _, _ = _inputs()
    assert_close(attend(x, x, x, score="dot").output, eq2(x, x, x, "dot", None))


@pytest.mark.parametrize("name", SCORE_NAMES)
def test_gradcheck(name):
    q, k, v, g = _inputs(B=1, n=2, m=3, d=3, e=3 if name in BUILTIN else 2, p=2)
    score, _ = make_score(name, 3, k.shape[-1], g)
    mask = torch.tensor([[[True, False, True], [False, False, False]]])
    for t in (q, k, v):
        t.requires_grad_(True)
    for need_weights in (True, False):
        assert torch.autograd.gradcheck(
            lambda q, k, v, nw=need_weights: attend(q, k, v, score=score, mask=mask, need_weights=nw).output, (q, k, v)
        )


PAIR_SCORES = {
    "dot": lambda a, b: a @ b,
    "scaled_dot": lambda a, b: (a @ b) / math.sqrt(a.shape[-1]),
    "cosine": lambda a, b: (a @ b) / (a.norm() * b.norm()),
}


@pytest.mark.parametrize("score", [*PAIR_SCORES, "callable"])
def test_temperature_divides_every_score_before_the_softmax(score):
    q, k, v, _ = _inputs(e=5)
    if score == "callable":
        weight = torch.randn(5, 5, dtype=q.dtype, generator=torch.Generator().manual_seed(1))
        named, pair = (lambda a, b: a @ weight @ b.transpose(-2, -1)), (lambda a, b: a @ weight @ b)
    else:
        named, pair = score, PAIR_SCORES[score]
    assert_close(score_logits(q, k, named, temperature=0.5), 2 * score_logits(q, k, named))
    expected = eq1(q, k, v, lambda a, b: pair(a, b) / 0.5)
    assert_close(attend(q, k, v, score=named, temperature=0.5, need_weights=True).output, expected)
    assert_close(attend(q, k, v, score=named, temperature=0.5, fused=True).output, expected)
    q4, k4, v4 = (x.view(1, *x.shape) for x in (q, k, v))  # SDPA's own layout: the direct call
    assert_close(attend(q4, k4, v4, score=named, temperature=0.5).output[0], expected)


@pytest.mark.parametrize("score", list(PAIR_SCORES))
def test_temperature_divides_the_count_normalisers_score(score):
    q, k, v, _ = _inputs(e=5)
    expected = eq1_count(q, k, v, lambda a, b: PAIR_SCORES[score](a, b) / 4.0)
    assert_close(attend(q, k, v, score=score, temperature=4.0, normalize="count").output, expected)
    assert_close(attend(q, k, v, score=score, temperature=4.0, normalize="count", need_weights=True).output, expected)


# --- properties --------------------------------------------------------------------------------

sizes = st.tuples(st.integers(1, 3), st.integers(1, 5), st.integers(1, 6), st.integers(1, 4), st.integers(0, 2**31 - 1))


@settings(max_examples=30, deadline=None)
@given(sizes=sizes, score=st.sampled_from(BUILTIN), p_keep=st.sampled_from([0.0, 0.5, 1.0]))
def test_weights_are_distributions_over_unmasked_keys(sizes, score, p_keep):
    B, n, m, d, seed = sizes
    q, k, v, g = _inputs(B, n, m, d, d, 2, seed)
    mask = torch.rand(B, n, m, generator=g) < p_keep
    w = attend(q, k, v, score=score, mask=mask, need_weights=True).weights
    assert (w >= 0).all()
    assert (w[~mask] == 0).all()
    expected = mask.any(-1).to(w.dtype)  # 1 where anything may be attended, 0 for an empty row
    assert_close(w.sum(-1), expected)


@settings(max_examples=30, deadline=None)
@given(sizes=sizes, score=st.sampled_from(BUILTIN), fused=st.booleans())
def test_permuting_keys_leaves_output_unchanged(sizes, score, fused):
    B, n, m, d, seed = sizes
    q, k, v, g = _inputs(B, n, m, d, d, 2, seed)
    mask = torch.rand(B, n, m, generator=g) < 0.7
    perm = torch.randperm(m, generator=g)
    run = dict(score=score, need_weights=not fused, fused=fused)
    out = attend(q, k, v, mask=mask, **run).output
    assert_close(attend(q, k[:, perm], v[:, perm], mask=mask[..., perm], **run).output, out)


@settings(max_examples=30, deadline=None)
@given(sizes=sizes, score=st.sampled_from(BUILTIN), fused=st.booleans())
def test_permuting_queries_permutes_output(sizes, score, fused):
    B, n, m, d, seed = sizes
    q, k, v, g = _inputs(B, n, m, d, d, 2, seed)
    mask = torch.rand(B, n, m, generator=g) < 0.7
    perm = torch.randperm(n, generator=g)
    run = dict(score=score, need_weights=not fused, fused=fused)
    out = attend(q, k, v, mask=mask, **run).output
    assert_close(attend(q[:, perm], k, v, mask=mask[:, perm], **run).output, out[:, perm])


# --- masks -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("score", BUILTIN)
def test_mask_really_removes_keys(fused, score):
    q, k, v, g = _inputs(B=2, n=3, m=6)
    mask = torch.ones(2, 1, 6, dtype=torch.bool)
    mask[..., 3:] = False  # the last three keys are invisible to every query
    run = dict(score=score, mask=mask, need_weights=not fused, fused=fused)
    out = attend(q, k, v, **run).output
    k2, v2 = k.clone(), v.clone()
    k2[:, 3:] = torch.randn(2, 3, 5, generator=g) * 10
    v2[:, 3:] = torch.randn(2, 3, 3, generator=g) * 10
    assert_close(attend(q, k2, v2, **run).output, out)
    # ...and is the same as leaving those keys out, and not the same as not masking
    assert_close(attend(q, k[:, :3], v[:, :3], score=score).output, out)
    assert not torch.allclose(attend(q, k, v, score=score).output, out)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("score", BUILTIN)
def test_fully_masked_rows_give_zeros_with_finite_gradients(fused, score):
    q, k, v, _ = _inputs()
    for t in (q, k, v):
        t.requires_grad_(True)
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    mask[0, 1] = False
    mask[1] = False
    out, w = attend(q, k, v, score=score, mask=mask, need_weights=not fused, fused=fused)
    assert (out[0, 1] == 0).all() and (out[1] == 0).all()
    assert out[0, 0].abs().sum() > 0
    if w is not None:
        assert (w[0, 1] == 0).all() and (w[1] == 0).all()
    out.sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert (q.grad[1] == 0).all()


def test_masked_softmax_all_masked_gradient_finite():
    logits = torch.randn(2, 3, requires_grad=True)
    w = masked_softmax(logits, torch.zeros(2, 3, dtype=torch.bool))
    assert (w == 0).all()
    w.sum().backward()
    assert torch.isfinite(logits.grad).all()


def test_cosine_of_zero_vectors_is_finite():
    q = torch.zeros(1, 2, 3, requires_grad=True)
    k = torch.zeros(1, 4, 3, requires_grad=True)
    v = torch.randn(1, 4, 2)
    for fused in (False, True):
        out = attend(q, k, v, score="cosine", need_weights=not fused, fused=fused).output
        out.sum().backward()
        assert torch.isfinite(out).all() and torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all()
        q.grad = k.grad = None


# --- the fused path ------------------------------------------------------------------------------


@pytest.mark.parametrize("score", BUILTIN)
@pytest.mark.parametrize("masked", [False, True])
def test_fused_matches_plain_against_float64_golden(score, masked):
    # As PyTorch's test_transformers: both float32 paths are compared with a float64 golden, and the
    # fused one may drift from it by no more than a small multiple of the plain float32 drift.
    q, k, v, g = _inputs(B=2, n=64, m=96, d=32, e=32, p=16, dtype=torch.float64)
    mask = (torch.rand(2, 64, 96, generator=g) < 0.8) if masked else None
    golden = attend(q, k, v, score=score, mask=mask, fused=False).output
    q32, k32, v32 = q.float(), k.float(), v.float()
    plain = attend(q32, k32, v32, score=score, mask=mask, need_weights=False, fused=False).output
    fused = attend(q32, k32, v32, score=score, mask=mask, need_weights=False, fused=True).output
    drift = (plain.double() - golden).abs().max().item()
    tol = 4 * drift + 1e-6
    assert_close(fused.double(), golden, atol=tol, rtol=0)


def test_fused_switch_and_override(monkeypatch):
    calls = []
    real = core.F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(core.F, "scaled_dot_product_attention", spy)
    q, k, v, _ = _inputs()
    attend(q, k, v, need_weights=False)
    assert len(calls) == 1
    attend(q, k, v, need_weights=True)  # weights asked for: never fused
    attend(q, k, v, need_weights=False, score=Additive(5, 5, 4).double())  # callable score: never fused
    assert len(calls) == 1
    with fused_attention(False):
        attend(q, k, v, need_weights=False)
        assert len(calls) == 1
        attend(q, k, v, need_weights=False, fused=True)  # per-call override wins
        assert len(calls) == 2
    assert core.fused_attention_enabled()
    set_fused_attention(False)
    try:
        attend(q, k, v, need_weights=False)
        assert len(calls) == 2
    finally:
        set_fused_attention(True)


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (dict(key=torch.zeros(2, 4, 6)), r"key: expected shape \(\.\.\., m, d=5\), got \(2, 4, 6\)"),
        (dict(value=torch.zeros(2, 5, 3)), r"value: expected shape \(\.\.\., m=4, p\), got \(2, 5, 3\)"),
        (dict(query=torch.zeros(5)), r"query: expected shape \(\.\.\., n, d\), got \(5,\)"),
        (dict(mask=torch.ones(2, 3, 4)), r"mask must be bool"),
        (dict(mask=torch.ones(2, 3, 5, dtype=torch.bool)), r"mask: expected a shape broadcastable to \(2, 3, 4\)"),
        (dict(score="gaussian"), r"unknown score 'gaussian'"),
    ],
)
@pytest.mark.parametrize("fused", [False, True])
def test_shape_errors(change, message, fused):
    args = dict(query=torch.zeros(2, 3, 5), key=torch.zeros(2, 4, 5), value=torch.zeros(2, 4, 3))
    kwargs = {name: change[name] for name in ("mask", "score") if name in change}
    args.update({name: t for name, t in change.items() if name not in kwargs})
    with pytest.raises(ValueError, match=message):
        attend(args["query"], args["key"], args["value"], need_weights=not fused, fused=fused, **kwargs)


def _sdpa_kernels(fn) -> set[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return {e.key for e in prof.key_averages() if e.key.startswith("aten::_scaled_dot_product")}


@pytest.mark.parametrize("shape", [(40, 8), (2, 40, 8), (2, 3, 40, 8), (2, 3, 2, 40, 8)])
@pytest.mark.parametrize("masked", [False, True])
def test_fused_path_avoids_the_math_kernel(shape, masked):
    # SDPA runs its O(n m)-memory math kernel for anything but (batch, heads, n, d) inputs; attend
    # must fold other layouts so that the fused path really is the memory-efficient one.
    q = torch.randn(*shape)
    four_d = torch.randn(2, 3, 40, 8)
    flash = _sdpa_kernels(lambda: torch.nn.functional.scaled_dot_product_attention(four_d, four_d, four_d))
    if "aten::_scaled_dot_product_attention_math" in flash:
        pytest.skip("this torch build has no memory-efficient CPU kernel")
    mask = (torch.rand(*shape[:-1], 40) < 0.7) if masked else None
    kernels = _sdpa_kernels(lambda: attend(q, q, q, mask=mask, need_weights=False, fused=True))
    assert kernels and "aten::_scaled_dot_product_attention_math" not in kernels
    assert_close(attend(q, q, q, mask=mask, need_weights=False, fused=True).output, attend(q, q, q, mask=mask).output)


# --- the normaliser: seed 001's general form, o_j = (1/C_j) sum_i f(q_j, k_i) v_i ------------------


def eq1_count(query, key, value, pair_score, mask=None):
    """Seed 001 eq. (1) with ``f = score`` (no exponential) and ``C_j = N_j``, the number of keys ``j`` may attend.

    The non-local paper's dot-product and concatenation forms. A query with no key left has
    ``C = 0`` and, by our rule, ``o_j = 0``.
    """
    B, n, m = query.shape[0], query.shape[1], key.shape[1]
    out = torch.zeros(B, n, value.shape[-1], dtype=value.dtype)
    for b in range(B):
        for j in range(n):
            attendable = [i for i in range(m) if mask is None or mask[b, j, i]]
            total = torch.zeros(value.shape[-1], dtype=value.dtype)
            for i in attendable:
                total = total + pair_score(query[b, j], key[b, i]) * value[b, i]
            out[b, j] = total / len(attendable) if attendable else total
    return out


def _concatenation(d: int, e: int, generator: torch.Generator):
    module = Concatenation(d, e).double()
    with torch.no_grad():
        module.w.weight.copy_(torch.randn(module.w.weight.shape, generator=generator, dtype=torch.float64))
    w = module.w.weight[0]
    # Wang et al. eq. (4): f = ReLU(w_f^T [theta(x_i), phi(x_j)]), the concatenation written out
    return module, lambda q, k: torch.relu(w @ torch.cat([q, k]))


@pytest.mark.parametrize("name", (*SCORE_NAMES, "concatenation"))
@pytest.mark.parametrize("masked", [False, True])
def test_count_normaliser_matches_eq1(name, masked):
    q, k, v, g = _inputs(e=_key_dim(name))
    if name == "concatenation":
        score, pair = _concatenation(5, _key_dim(name), g)
    else:
        score, pair = make_score(name, 5, _key_dim(name), g)
    mask = None
    if masked:
        mask = torch.rand(2, 3, 4, generator=g) > 0.4
        mask[0, 1] = False  # one query with nothing to attend: zeros
    out, w = attend(q, k, v, score=score, mask=mask, normalize="count", need_weights=True)
    assert_close(out, eq1_count(q, k, v, pair, mask))
    eye = torch.eye(4, dtype=torch.float64).expand(2, 4, 4)
    assert_close(w, eq1_count(q, k, eye, pair, mask))  # the weights are f / C
    if masked:
        assert (out[0, 1] == 0).all() and (w[0, 1] == 0).all() and (w[~mask] == 0).all()


def test_count_normaliser_hand_computed():
    # f = q . k, C = number of keys: (1*1 + 1*(-2) + 1*3) / 3 over values (1, 1, 1) -> 2/3
    q = torch.tensor([[[1.0]]])
    k = torch.tensor([[[1.0], [-2.0], [3.0]]])
    v = torch.ones(1, 3, 1)
    out, w = attend(q, k, v, score="dot", normalize="count", need_weights=True)
    assert_close(w, torch.tensor([[[1.0, -2.0, 3.0]]]) / 3)
    assert_close(out, torch.tensor([[[2.0 / 3.0]]]))
    # with the middle key masked, C = 2
    out = attend(q, k, v, score="dot", normalize="count", mask=torch.tensor([True, False, True])).output
    assert_close(out, torch.tensor([[[2.0]]]))


@pytest.mark.parametrize("name", ("dot", "scaled_dot", "cosine", "bilinear", "concatenation"))
def test_count_normaliser_gradcheck(name):
    q, k, v, g = _inputs(B=1, n=2, m=3, d=3, e=3, p=2)
    score = _concatenation(3, 3, g)[0] if name == "concatenation" else make_score(name, 3, 3, g)[0]
    mask = torch.tensor([[[True, False, True], [False, False, False]]])
    for t in (q, k, v):
        t.requires_grad_(True)
    for m in (None, mask):
        assert torch.autograd.gradcheck(
            lambda q, k, v, m=m: attend(q, k, v, score=score, mask=m, normalize="count").output, (q, k, v)
        )


def test_count_normaliser_never_takes_the_fused_path(monkeypatch):
    calls = []
    real = core.F.scaled_dot_product_attention
    monkeypatch.setattr(core.F, "scaled_dot_product_attention", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    q, k, v, _ = _inputs()
    expected = eq1_count(q, k, v, lambda a, b: a @ b)
    for fused in (None, True):
        out = attend(q, k, v, score="dot", normalize="count", need_weights=False, fused=fused).output
        assert_close(out, expected)
    assert calls == []
    attend(q, k, v, score="dot", need_weights=False, fused=True)  # the softmax still does
    assert calls == [1]


def test_softmax_is_the_default_normaliser():
    q, k, v, _ = _inputs()
    for score in BUILTIN:
        assert torch.equal(
            attend(q, k, v, score=score).output, attend(q, k, v, score=score, normalize="softmax").output
        )
    with pytest.raises(ValueError, match=r"unknown normalize 'sum'; choose from: softmax, count"):
        attend(q, k, v, normalize="sum")


# --- sparsemax: the Euclidean projection onto the simplex --------------------------------------------


def project_onto_simplex(scores: torch.Tensor) -> torch.Tensor:
    """The definition, solved another way: w = max(s - tau, 0), with tau found by bisection so sum w = 1."""
    low = scores.amin(-1, keepdim=True) - 1  # sum(max(s - low, 0)) >= m >= 1
    high = scores.amax(-1, keepdim=True)  # sum(max(s - high, 0)) = 0
    for _ in range(200):
        tau = (low + high) / 2
        too_much = (scores - tau).clamp_min(0).sum(-1, keepdim=True) > 1
        low, high = torch.where(too_much, tau, low), torch.where(too_much, high, tau)
    return (scores - (low + high) / 2).clamp_min(0)


@pytest.mark.parametrize("masked", [False, True])
def test_sparsemax_is_the_projection_onto_the_simplex(masked):
    g = torch.Generator().manual_seed(3)
    logits = 2 * torch.randn(4, 5, 9, generator=g, dtype=torch.float64)
    mask = torch.rand(4, 5, 9, generator=g) > 0.4 if masked else torch.ones(4, 5, 9, dtype=torch.bool)
    mask[0, 0] = True
    weights = sparsemax(logits, mask if masked else None)
    for row, keep, w in zip(logits.reshape(-1, 9), mask.reshape(-1, 9), weights.reshape(-1, 9), strict=True):
        expected = torch.zeros(9, dtype=torch.float64)
        if keep.any():
            expected[keep] = project_onto_simplex(row[keep])
        assert_close(w, expected)
    # The projection is the nearest point of the simplex: no random point of it is nearer.
    w, s = weights[0, 0], logits[0, 0]
    others = torch.distributions.Dirichlet(torch.ones(9, dtype=torch.float64)).sample((2000,))
    assert ((others - s) ** 2).sum(-1).min() >= ((w - s) ** 2).sum()


def test_sparsemax_hand_computed_and_exactly_sparse():
    # Sorted 2, 1.5, 0: k = 2 qualifies (1 + 2 * 1.5 > 3.5), k = 3 does not (1 + 0 < 3.5); tau = (3.5 - 1) / 2 = 1.25.
    assert_close(sparsemax(torch.tensor([2.0, 1.5, 0.0])), torch.tensor([0.75, 0.25, 0.0]))
    # Equal scores: the uniform map; one score far above the rest: all the weight, none elsewhere.
    assert_close(sparsemax(torch.zeros(4)), torch.full((4,), 0.25))
    assert_close(sparsemax(torch.tensor([5.0, 1.0, 0.5])), torch.tensor([1.0, 0.0, 0.0]))
    # Shifting every score changes nothing.
    s = torch.randn(3, 6)
    assert_close(sparsemax(s + 7.5), sparsemax(s))


def test_sparsemax_masks_nan_and_empty_rows():
    logits = torch.tensor([[1.0, float("nan"), 0.5], [float("inf"), float("nan"), 2.0]], requires_grad=True)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    w = sparsemax(logits, mask)
    assert_close(w, torch.tensor([[0.75, 0.0, 0.25], [0.0, 0.0, 0.0]]))
    w.pow(2).sum().backward()
    assert torch.isfinite(logits.grad).all() and (logits.grad[~mask] == 0).all()
    assert sparsemax(torch.zeros(2, 0)).shape == (2, 0)


@pytest.mark.parametrize("masked", [False, True])
def test_sparsemax_gradcheck_and_attend(masked):
    q, k, v, g = _inputs()
    mask = torch.rand(2, 3, 4, generator=g) > 0.3 if masked else None
    # Scores spread enough that supports have several members, and no two scores tie.
    scale = torch.tensor(3.0, dtype=torch.float64)
    for tensor in (q, k, v):
        tensor.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda q, k, v: attend(q * scale, k, v, score="dot", mask=mask, normalize="sparsemax").output, (q, k, v)
    )
    out, w = attend(q, k, v, score="dot", mask=mask, normalize="sparsemax", need_weights=True)
    assert_close(w, sparsemax(q @ k.mT, mask))
    assert_close(out, w @ v)


@pytest.mark.parametrize(
    ("dtype", "big"),
    [(torch.float32, 2.0**24), (torch.float32, 2.0**30), (torch.float64, 2.0**53), (torch.float64, 2.0**60)],
)
def test_sparsemax_of_huge_scores_is_still_the_projection(dtype, big):
    # The support test 1 + k s_(k) > sum s_(i) compares numbers of the size of the scores: from 2^24 in
    # float32 (2^53 in float64) the 1 is below their spacing. The projection itself does not care how
    # large the scores are, only how far apart: each row's answer is read off the definition.
    scores = torch.tensor(
        [[big, 0.0, -big, -big], [big, big, 0.0, -big], [-big, big, big, big], [big, -big, -big, -big]], dtype=dtype
    )
    expected = torch.tensor(
        [[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0], [0.0, 1 / 3, 1 / 3, 1 / 3], [1.0, 0.0, 0.0, 0.0]], dtype=dtype
    )
    weights = sparsemax(scores)
    assert_close(weights, expected)
    assert_close(weights.sum(-1), torch.ones(4, dtype=dtype))
    assert_close(sparsemax(scores, torch.ones(4, 4, dtype=torch.bool)), expected)


def test_sparsemax_at_a_tiny_temperature_picks_the_best_key():
    # Dividing by T = 2^-30 spreads scores a unit or so apart by ~2^30: every row's best key is more than
    # 1 above the next, so the projection puts all the weight on it and the output is its value.
    q, k, v = (t.float() for t in _inputs()[:3])
    logits = q @ k.mT
    top2 = logits.topk(2, dim=-1).values
    assert ((top2[..., 0] - top2[..., 1]) * 2.0**30 > 1).all()
    out, w = attend(q, k, v, score="dot", normalize="sparsemax", temperature=2.0**-30, need_weights=True)
    one_hot = torch.nn.functional.one_hot(logits.argmax(-1), 4).float()
    assert_close(w, one_hot)
    assert_close(out, one_hot @ v)


def _sparsemax_jacobian(weights: torch.Tensor) -> torch.Tensor:
    """diag(s) - s s^T / |S| with s the indicator of the support {w > 0}: the derivative of the projection
    wherever the support does not change, and the one taken where a score sits on the threshold."""
    s = (weights > 0).to(weights.dtype)
    return torch.diag(s) - torch.outer(s, s) / s.sum()


@pytest.mark.parametrize(
    ("scores", "weights"),
    [
        ([2.0, 1.0, 0.0], [1.0, 0.0, 0.0]),  # tau = 1 = the second score
        ([3.0, 2.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]),  # tau = 2 = the second score
        ([2.0, 2.0, 1.5], [0.5, 0.5, 0.0]),  # tau = (4 - 1) / 2 = 1.5 = the third score
        ([1.0, 3.0, 3.0, 2.0, 2.0], [0.0, 0.5, 0.5, 0.0, 0.0]),  # tau = 2.5: no tie, for contrast
    ],
)
def test_sparsemax_jacobian_is_zero_off_the_support_at_ties(scores, weights):
    z = torch.tensor(scores, dtype=torch.float64)
    w = sparsemax(z)
    assert torch.equal(w, torch.tensor(weights, dtype=torch.float64))
    jacobian = torch.autograd.functional.jacobian(sparsemax, z)
    assert_close(jacobian, _sparsemax_jacobian(w), atol=0, rtol=0)
    # A key of weight 0 neither moves nor is moved; and the weights always sum to 1, so their sum has no gradient.
    off = w == 0
    assert (jacobian[off] == 0).all() and (jacobian[:, off] == 0).all()
    z.requires_grad_(True)
    sparsemax(z).sum().backward()
    assert (z.grad == 0).all()


def test_sparsemax_gradcheck_at_tied_integer_scores():
    # Equal scores on the support and equal ones off it, no score on the threshold (2.5, 5/3 and 1/2 here):
    # ties, yet the support stays put under a small change, so finite differences must agree.
    logits = torch.tensor([[3.0, 3.0, 1.0, 1.0], [2.0, 2.0, 2.0, 0.0], [0.0, 0.0, -2.0, -2.0]], dtype=torch.float64)
    assert torch.autograd.gradcheck(sparsemax, (logits.requires_grad_(True),))
    for row in logits.detach():
        assert_close(torch.autograd.functional.jacobian(sparsemax, row), _sparsemax_jacobian(sparsemax(row)))


@pytest.mark.parametrize("masked", [False, True])
def test_sparsemax_gradcheck_at_random_scores_and_its_jacobian_formula(masked):
    # Random scores almost surely have no ties, where the projection is smooth: its gradient must be the
    # finite differences' (masked keys included), and the formula's.
    g = torch.Generator().manual_seed(5)
    logits = 2 * torch.randn(3, 4, 6, generator=g, dtype=torch.float64)
    mask = torch.rand(3, 4, 6, generator=g) > 0.3 if masked else None
    logits.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda s: sparsemax(s, mask), (logits,))
    for row in logits.detach().reshape(-1, 6)[:4]:
        jacobian = torch.autograd.functional.jacobian(sparsemax, row)
        assert_close(jacobian, _sparsemax_jacobian(sparsemax(row)))


# --- scores of -inf: a key that cannot be attended ------------------------------------------------


def _minus_inf_score(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    # A dot score that rules out every key for the second query: exp(-inf) = 0, as a masked key's weight.
    logits = query @ key.mT
    ruled_out = torch.zeros_like(logits, dtype=torch.bool)
    ruled_out[..., 1, :] = True
    ruled_out[..., 0, 0] = True  # and one key of the first query, which keeps the others
    return logits.masked_fill(ruled_out, -torch.inf)


@pytest.mark.parametrize("normalize", ["softmax", "sparsemax"])
def test_a_row_of_minus_inf_scores_is_a_fully_masked_row(normalize):
    q, k, v, _ = _inputs()
    for t in (q, k, v):
        t.requires_grad_(True)
    out, w = attend(q, k, v, score=_minus_inf_score, normalize=normalize, need_weights=True)
    # The same as masking those keys: zero weights and output for the second query, the first one's
    # weights shared among its other keys.
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    mask[:, 1] = False
    mask[:, 0, 0] = False
    masked_out, masked_w = attend(q, k, v, score="dot", mask=mask, normalize=normalize, need_weights=True)
    assert (w[:, 1] == 0).all() and (out[:, 1] == 0).all()
    assert_close(w, masked_w)
    assert_close(out, masked_out)
    out.sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()


def test_masked_softmax_and_sparsemax_of_a_row_of_minus_inf_give_zeros_with_finite_gradients():
    logits = torch.tensor([[-torch.inf, -torch.inf, -torch.inf], [0.0, -torch.inf, 1.0]], requires_grad=True)
    for normalise in (masked_softmax, sparsemax):
        w = normalise(logits)
        assert (w[0] == 0).all()
        assert_close(w[1].sum(), torch.tensor(1.0))
        assert w[1, 1] == 0
        w.pow(2).sum().backward()
        assert torch.isfinite(logits.grad).all() and (logits.grad[0] == 0).all()
        logits.grad = None
