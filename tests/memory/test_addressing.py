"""NTM addressing held to seed 004's equations, written literally (Python loops over i and j)."""

import math

import pytest
import torch

from foveal.memory import (
    MemoryInit,
    address,
    circular_shift,
    content_weights,
    cosine_similarity,
    head_param_size,
    interpolate,
    read,
    sharpen,
    shift_offsets,
    split_head_params,
    write,
)

B, H, R, C = 2, 3, 7, 5
f64 = torch.float64


def rand(*shape, low=None):
    x = torch.randn(*shape, dtype=f64)
    return x if low is None else x.abs() + low


def simplex(*shape):
    return torch.rand(*shape, dtype=f64).softmax(-1)


# ---- references, one per seed equation ---------------------------------------------------------


def ref_cosine(u, v):
    dot = sum(u[c] * v[c] for c in range(len(u)))
    return dot / (math.sqrt(sum(x * x for x in u)) * math.sqrt(sum(x * x for x in v)))


def ref_content(key, memory, beta):
    # w_c(i) = exp(beta K(k, M(i))) / sum_j exp(beta K(k, M(j)))
    out = torch.zeros(B, H, R, dtype=f64)
    for b in range(B):
        for h in range(H):
            num = [math.exp(beta[b, h] * ref_cosine(key[b, h].tolist(), memory[b, i].tolist())) for i in range(R)]
            for i in range(R):
                out[b, h, i] = num[i] / sum(num)
    return out


def ref_shift(w, s):
    # w~(i) = sum_j w(j) s(i - j), indices mod R; s given over offsets -k..k and 0 elsewhere
    offsets = shift_offsets(s.shape[-1])
    out = torch.zeros_like(w)
    for b in range(w.shape[0]):
        for h in range(w.shape[1]):
            for i in range(R):
                for j in range(R):
                    d = (i - j) % R
                    for n, off in enumerate(offsets):
                        if off % R == d:
                            out[b, h, i] += w[b, h, j] * s[b, h, n]
    return out


def ref_sharpen(w, gamma):
    # w(i) = w~(i)^gamma / sum_j w~(j)^gamma
    out = torch.zeros_like(w)
    for b in range(B):
        for h in range(H):
            den = sum(w[b, h, j] ** gamma[b, h] for j in range(R))
            for i in range(R):
                out[b, h, i] = w[b, h, i] ** gamma[b, h] / den
    return out


def ref_read(memory, w):
    # r = sum_i w(i) M(i)
    out = torch.zeros(B, H, C, dtype=f64)
    for b in range(B):
        for h in range(H):
            for i in range(R):
                out[b, h] += w[b, h, i] * memory[b, i]
    return out


def ref_write(memory, w, erase, add):
    # M'(i) = M(i)(1 - w(i) e) for every head in turn, then M(i) = M'(i) + w(i) a for every head
    out = memory.clone()
    for b in range(B):
        for h in range(w.shape[1]):
            for i in range(R):
                out[b, i] = out[b, i] * (1 - w[b, h, i] * erase[b, h])
        for h in range(w.shape[1]):
            for i in range(R):
                out[b, i] = out[b, i] + w[b, h, i] * add[b, h]
    return out


# ---- fast path == reference -----------------------------------------------------------------------


def test_cosine_matches_reference():
    key, memory = rand(B, H, C), rand(B, R, C)
    expected = torch.zeros(B, H, R, dtype=f64)
    for b in range(B):
        for h in range(H):
            for i in range(R):
                expected[b, h, i] = ref_cosine(key[b, h].tolist(), memory[b, i].tolist())
    torch.testing.assert_close(cosine_similarity(key, memory, eps=0.0), expected)
    torch.testing.assert_close(cosine_similarity(key, memory), expected, atol=1e-6, rtol=1e-6)


def test_content_weights_match_reference():
    key, memory, beta = rand(B, H, C), rand(B, R, C), rand(B, H, low=0.0) * 5
    torch.testing.assert_close(content_weights(key, memory, beta, eps=0.0), ref_content(key, memory, beta))


def test_interpolate_matches_equation():
    wc, wp, g = simplex(B, H, R), simplex(B, H, R), torch.rand(B, H, dtype=f64)
    expected = torch.zeros(B, H, R, dtype=f64)
    for b in range(B):
        for h in range(H):
            for i in range(R):
                expected[b, h, i] = g[b, h] * wc[b, h, i] + (1 - g[b, h]) * wp[b, h, i]
    torch.testing.assert_close(interpolate(wc, wp, g), expected)


@pytest.mark.parametrize("n_shifts", [1, 3, 5])
def test_circular_shift_matches_reference(n_shifts):
    w, s = simplex(B, H, R), simplex(B, H, n_shifts)
    torch.testing.assert_close(circular_shift(w, s), ref_shift(w, s))


@pytest.mark.parametrize("n_shifts", [1, 3, 5])
def test_circular_shift_traced_matches_the_reference_with_gradients(n_shifts, monkeypatch):
    # While a graph is traced the shift's index is built afresh, not taken from the cache: held to the literal sum
    import foveal.memory.addressing as addressing

    w, s = simplex(B, H, R).requires_grad_(), simplex(B, H, n_shifts).requires_grad_()
    monkeypatch.setattr(addressing, "tracing", lambda: True)
    torch.testing.assert_close(circular_shift(w, s), ref_shift(w, s))
    assert torch.autograd.gradcheck(circular_shift, (w, s))


def test_circular_shift_moves_and_wraps():
    w = torch.zeros(1, 1, R)
    w[0, 0, R - 1] = 1.0
    plus_one = torch.tensor([[[0.0, 0.0, 1.0]]])
    minus_one = torch.tensor([[[1.0, 0.0, 0.0]]])
    assert circular_shift(w, plus_one)[0, 0].argmax() == 0  # wraps from the last row to the first
    assert circular_shift(w, minus_one)[0, 0].argmax() == R - 2


def test_circular_shift_rejects_too_many_shifts():
    with pytest.raises(ValueError, match="rows"):
        circular_shift(simplex(1, 1, 3), simplex(1, 1, 5))
    with pytest.raises(ValueError, match="odd"):
        shift_offsets(4)


def test_sharpen_matches_reference():
    w, gamma = simplex(B, H, R), 1 + rand(B, H, low=0.0) * 3
    torch.testing.assert_close(sharpen(w, gamma, eps=0.0), ref_sharpen(w, gamma))
    torch.testing.assert_close(sharpen(w, gamma), ref_sharpen(w, gamma), atol=1e-6, rtol=1e-6)


def test_address_composes_the_four_steps():
    key, memory, beta = rand(B, H, C), rand(B, R, C), rand(B, H, low=0.0)
    g, s, gamma, wp = torch.rand(B, H, dtype=f64), simplex(B, H, 3), 1 + rand(B, H, low=0.0), simplex(B, H, R)
    expected = ref_sharpen(ref_shift(g[..., None] * ref_content(key, memory, beta) + (1 - g[..., None]) * wp, s), gamma)
    torch.testing.assert_close(address(key, beta, g, s, gamma, memory, wp, eps=0.0), expected)


def test_read_matches_reference():
    memory, w = rand(B, R, C), simplex(B, H, R)
    torch.testing.assert_close(read(memory, w), ref_read(memory, w))


@pytest.mark.parametrize("n_heads", [1, 3])
def test_write_matches_reference(n_heads):
    memory, w = rand(B, R, C), simplex(B, n_heads, R)
    erase, add = torch.rand(B, n_heads, C, dtype=f64), rand(B, n_heads, C)
    torch.testing.assert_close(write(memory, w, erase, add), ref_write(memory, w, erase, add))


def test_write_with_full_erase_replaces_the_row():
    memory = rand(1, R, C)
    w = torch.zeros(1, 1, R, dtype=f64)
    w[0, 0, 2] = 1.0
    add = rand(1, 1, C)
    new = write(memory, w, torch.ones(1, 1, C, dtype=f64), add)
    torch.testing.assert_close(new[0, 2], add[0, 0])
    torch.testing.assert_close(new[0, :2], memory[0, :2])  # other rows untouched


def test_weightings_are_distributions():
    out = address(
        rand(B, H, C), rand(B, H, low=0.0), torch.rand(B, H, dtype=f64), simplex(B, H, 3),
        1 + rand(B, H, low=0.0), rand(B, R, C), simplex(B, H, R),
    )  # fmt: skip
    assert (out >= 0).all()
    torch.testing.assert_close(out.sum(-1), torch.ones(B, H, dtype=f64))


def test_beta_zero_is_uniform_and_large_beta_picks_the_best_match():
    memory = rand(B, R, C)
    key = memory[:, 4:5].expand(B, H, C).clone()
    uniform = torch.full((B, H, R), 1 / R, dtype=f64)
    torch.testing.assert_close(content_weights(key, memory, torch.zeros(B, H, dtype=f64)), uniform)
    assert (content_weights(key, memory, torch.full((B, H), 500.0, dtype=f64)).argmax(-1) == 4).all()


def test_gradcheck_address_read_write():
    key, memory, beta = rand(1, 2, 3), rand(1, 4, 3), rand(1, 2, low=0.1)
    g, s, gamma, wp = torch.rand(1, 2, dtype=f64), simplex(1, 2, 3), 1 + rand(1, 2, low=0.1), simplex(1, 2, 4)
    erase, add = torch.rand(1, 2, 3, dtype=f64), rand(1, 2, 3)
    inputs = [t.requires_grad_() for t in (key, beta, g, s, gamma, memory, wp, erase, add)]

    def step(key, beta, g, s, gamma, memory, wp, erase, add):
        w = address(key, beta, g, s, gamma, memory, wp)
        return read(write(memory, w, erase, add), w)

    assert torch.autograd.gradcheck(step, inputs)


# ---- divide-by-zero guards: outputs AND gradients finite ----------------------------------------


def _all_finite_after_backward(output, inputs):
    output.sum().backward() if output.dim() else output.backward()
    assert torch.isfinite(output).all()
    for t in inputs:
        assert t.grad is not None and torch.isfinite(t.grad).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_zero_key_and_zero_memory(dtype):
    key = torch.zeros(B, H, C, dtype=dtype, requires_grad=True)
    memory = torch.zeros(B, R, C, dtype=dtype, requires_grad=True)
    beta = torch.ones(B, H, dtype=dtype, requires_grad=True)
    w = content_weights(key, memory, beta)
    torch.testing.assert_close(w, torch.full_like(w, 1 / R))
    (w * torch.randn_like(w)).sum().backward()
    for t in (key, memory, beta):
        assert torch.isfinite(t.grad).all()


def test_zero_memory_row_among_others():
    memory = torch.randn(B, R, C)
    memory[:, 3] = 0
    memory.requires_grad_()
    key = torch.randn(B, H, C, requires_grad=True)
    beta = torch.full((B, H), 10.0, requires_grad=True)
    w = content_weights(key, memory, beta)
    _all_finite_after_backward(w * torch.randn_like(w), [memory, key, beta])


@pytest.mark.parametrize("gamma_value", [1.0, 50.0, 1e4])
def test_sharpen_zero_weighting_and_large_gamma(gamma_value):
    w = torch.zeros(B, H, R)
    w[0, 0, 1] = 1.0  # a one-hot row: the other entries are exactly 0 (0^gamma)
    w.requires_grad_()
    gamma = torch.full((B, H), gamma_value, requires_grad=True)
    out = sharpen(w, gamma)
    torch.testing.assert_close(out.sum(-1), torch.ones(B, H))
    assert out[0, 0, 1] > 0.99  # a one-hot stays one-hot
    torch.testing.assert_close(out[1, 0], torch.full((R,), 1 / R))  # an all-zero row becomes uniform
    _all_finite_after_backward(out * torch.randn_like(out), [w, gamma])


def test_large_gamma_on_a_flat_weighting_does_not_underflow():
    # (1/128)^1000 underflows to 0 in float32; the naive formula would give 0/0.
    w = torch.full((1, 1, 128), 1 / 128, requires_grad=True)
    gamma = torch.full((1, 1), 1000.0, requires_grad=True)
    out = sharpen(w, gamma)
    torch.testing.assert_close(out, torch.full_like(out, 1 / 128))
    _all_finite_after_backward(out * torch.randn_like(out), [w, gamma])


def test_full_step_from_zero_everything_is_finite():
    memory = torch.zeros(B, R, C, requires_grad=True)
    raw = torch.zeros(B, H, head_param_size(C, 3, write=True), requires_grad=True)
    p = split_head_params(raw, C, 3, write=True)
    wp = torch.zeros(B, H, R, requires_grad=True)  # even a (non-normalised) zero previous weighting
    w = address(p.key, p.beta, p.gate, p.shift, p.gamma, memory, wp)
    out = read(write(memory, w, p.erase, p.add), w)
    _all_finite_after_backward(out * torch.randn_like(out), [memory, raw, wp])


# ---- head parameters and initial memory ----------------------------------------------------------


def test_split_head_params_ranges():
    raw = torch.randn(B, H, head_param_size(C, 3, write=True)) * 10
    p = split_head_params(raw, C, 3, write=True)
    assert (p.beta >= 0).all() and (p.gate >= 0).all() and (p.gate <= 1).all()
    assert (p.gamma >= 1).all() and (p.erase >= 0).all() and (p.erase <= 1).all()
    torch.testing.assert_close(p.shift.sum(-1), torch.ones(B, H))
    assert p.key.shape == p.add.shape == (B, H, C)
    assert split_head_params(raw[..., : head_param_size(C, 3, write=False)], C, 3, write=False).erase is None


def test_memory_init_kinds():
    assert (MemoryInit(R, C)(B) == 1e-6).all()
    learned = MemoryInit(R, C, kind="learned")
    assert any(p.requires_grad for p in learned.parameters())
    g = torch.Generator().manual_seed(0)
    m1 = MemoryInit(R, C, kind="random")(B, generator=g)
    m2 = MemoryInit(R, C, kind="random")(B, generator=torch.Generator().manual_seed(0))
    assert m1.shape == (B, R, C) and m1.std() > 0.1
    torch.testing.assert_close(m1, m2)
    with pytest.raises(ValueError, match="memory init"):
        MemoryInit(R, C, kind="zeros")


def test_learned_memory_can_start_with_rows_that_differ():
    torch.manual_seed(0)
    state = torch.random.get_rng_state()
    same = MemoryInit(R, C, kind="learned")(B)
    assert (same == 1e-6).all() and torch.equal(torch.random.get_rng_state(), state)  # no draw by default
    rows = MemoryInit(R, C, kind="learned", learned_std=0.5).memory
    assert rows.requires_grad and rows.std() > 0.1 and not torch.allclose(rows[0], rows[1])


def test_shape_errors_name_the_tensor():
    with pytest.raises(ValueError, match="w: expected"):
        read(torch.zeros(B, R, C), torch.zeros(B, H, R + 1))
    with pytest.raises(ValueError, match="erase"):
        write(torch.zeros(B, R, C), torch.zeros(B, H, R), torch.zeros(B, H, C + 1), torch.zeros(B, H, C))
