"""Expectations ported from DeepMind's DNC addressing tests, held to foveal's NTM addressing.

Source: google-deepmind/dnc ``dnc/addressing_test.py`` (``WeightedSoftmaxTest``, ``CosineWeightsTest``:
``testShape``, ``testValues``, ``testDivideByZero``; the bounds and one-hot checks of ``TemporalLinkageTest`` and
``FreenessTest``). Inputs and properties are ported, not code. The DNC's temporal linkage and usage-based allocation
are not part of the NTM; the NTM's location addressing (interpolation, circular shift, sharpening; Graves et al.
2014, sec. 3.3.2) has no DNC test, so its properties are checked here in the same style: bounds, sums, one-hot
cases. What differs on purpose (the strength is taken as given, ``beta >= 0``, where the DNC applies a softplus
inside; the cosine's guard) is listed in docs/ntm.md.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from foveal.memory import (
    address,
    circular_shift,
    content_weights,
    interpolate,
    sharpen,
    split_head_params,
    write,
)


def test_unit_strength_gives_the_plain_softmax_of_the_similarities():
    """``WeightedSoftmaxTest.testValues``: batch 5, 3 heads, 7 rows; with strength 1 the weighting is the plain
    softmax of the activations (here: the cosine similarities)."""
    g = torch.Generator().manual_seed(0)
    key, memory = torch.randn(5, 3, 4, generator=g), torch.randn(5, 7, 4, generator=g)
    cosine = F.cosine_similarity(key[:, :, None], memory[:, None], dim=-1)
    torch.testing.assert_close(content_weights(key, memory, torch.ones(5, 3)), cosine.softmax(-1))


def test_content_weights_have_one_row_per_head_and_location():
    """``CosineWeightsTest.testShape``: batch 5, 3 heads, 7 rows of 2 give weights ``(5, 3, 7)``."""
    assert content_weights(torch.randn(5, 3, 2), torch.randn(5, 7, 2), torch.rand(5, 3)).shape == (5, 3, 7)


def test_content_weights_are_the_softmax_of_strength_times_cosine():
    """``CosineWeightsTest.testValues``: batch 5, 4 heads, 10 rows of 2; rows ``[1, 2], [3, 4], [5, 6]`` and keys
    ``[5, 6], [1, 2], [5, 6], [3, 4]`` in the first sample, the rest random; the strengths are the DNC's
    ``softplus(random)`` (the DNC applies it inside, foveal takes ``beta`` as given). Compared with the formula in
    NumPy, to 1e-4."""
    rng = np.random.default_rng(0)
    memory = rng.standard_normal((5, 10, 2))
    memory[0, :3] = [[1, 2], [3, 4], [5, 6]]
    keys = rng.standard_normal((5, 4, 2))
    keys[0] = [[5, 6], [1, 2], [5, 6], [3, 4]]
    strengths = np.log1p(np.exp(rng.standard_normal((5, 4))))
    weights = content_weights(*(torch.tensor(a, dtype=torch.float32) for a in (keys, memory, strengths))).numpy()
    for b in range(5):
        for h in range(4):
            key = keys[b, h]
            similarity = memory[b] @ key / (np.linalg.norm(memory[b], axis=1) * np.linalg.norm(key))
            expected = np.exp(similarity * strengths[b, h])
            np.testing.assert_allclose(weights[b, h], expected / expected.sum(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_zero_rows_and_keys_give_no_nan_in_weights_or_gradients(dtype):
    """``CosineWeightsTest.testDivideByZero``: batch 5, 4 heads, 10 rows of 2, the first row ones and the others
    zero, random keys and strengths (through a softplus): no NaN in the weights or in the gradients of memory, keys
    and strengths. Also a zero key, and the same in float16."""
    g = torch.Generator().manual_seed(1)
    memory = torch.cat([torch.ones(5, 1, 2), torch.zeros(5, 9, 2)], dim=1).to(dtype).requires_grad_()
    keys = torch.randn(5, 4, 2, generator=g)
    keys[0, 0] = 0
    keys = keys.to(dtype).requires_grad_()
    raw_strengths = torch.randn(5, 4, generator=g).to(dtype).requires_grad_()
    weights = content_weights(keys, memory, F.softplus(raw_strengths))
    assert not weights.isnan().any()
    for grad in torch.autograd.grad(weights.float().square().sum(), (memory, keys, raw_strengths)):
        assert not grad.isnan().any()


def test_a_full_write_replaces_its_row_and_no_write_changes_nothing():
    """``FreenessTest.testModule``'s special values, for the NTM's write: a full write (weight 1, erase 1) at batch 1,
    row 3 makes that row the add vector, bounded as the DNC's usage is; a head that writes nothing (weight 0) leaves
    the memory as it was, as ``testPrecedenceWeights``' "no writing" head leaves its state."""
    g = torch.Generator().manual_seed(2)
    memory = torch.rand(5, 11, 4, generator=g)
    w = torch.rand(5, 1, 11, generator=g).softmax(-1)
    w[1] = 0
    w[1, 0, 3] = 1
    w[2] = 0
    erase, add = torch.rand(5, 1, 4, generator=g), torch.rand(5, 1, 4, generator=g)
    erase[1] = 1
    new = write(memory, w, erase, add)
    torch.testing.assert_close(new[1, 3], add[1, 0])
    torch.testing.assert_close(new[1, [0, 1, 2, *range(4, 11)]], memory[1, [0, 1, 2, *range(4, 11)]])
    torch.testing.assert_close(new[2], memory[2], rtol=0, atol=0)


def random_params(B: int, H: int, R: int, C: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    raw = torch.randn(B, H, C + 3 + 3, generator=g) * 3
    return split_head_params(raw, C, 3, write=False), torch.randn(B, R, C, generator=g)


def test_every_weighting_is_bounded_and_sums_to_one():
    """The bounds the DNC's tests check of every weighting (``link``, ``usage``, allocation weights in ``[0, 1]``,
    rows summing to at most or close to 1), for each NTM addressing step: content, gated, shifted, sharpened."""
    p, memory = random_params(7, 3, 13, 5, seed=3)
    w_prev = torch.rand(7, 3, 13).softmax(-1)
    content = content_weights(p.key, memory, p.beta)
    gated = interpolate(content, w_prev, p.gate)
    shifted = circular_shift(gated, p.shift)
    for w in (content, gated, shifted, sharpen(shifted, p.gamma), address(*p[:5], memory, w_prev)):
        assert w.min() >= 0 and w.max() <= 1
        torch.testing.assert_close(w.sum(-1), torch.ones(7, 3))


def test_interpolation_keeps_one_or_the_other_at_its_ends():
    """Graves et al. eq. (7), in the style of the DNC's one-hot checks: gate 1 keeps the content weighting, gate 0
    the previous one."""
    content, previous = torch.rand(2, 3, 6).softmax(-1), torch.rand(2, 3, 6).softmax(-1)
    torch.testing.assert_close(interpolate(content, previous, torch.ones(2, 3)), content, rtol=0, atol=0)
    torch.testing.assert_close(interpolate(content, previous, torch.zeros(2, 3)), previous, rtol=0, atol=0)


@pytest.mark.parametrize("offset", [-1, 0, 1])
def test_a_one_hot_shift_rolls_the_weighting_around_the_memory(offset):
    """Graves et al. eq. (8): a shift kernel that is one-hot at offset ``d`` moves every weight ``d`` rows on,
    wrapping around the ends (``TemporalLinkageTest``'s one-hot transitions 0 -> 1 and 3 -> 2, for a shift)."""
    w = torch.rand(2, 3, 5).softmax(-1)
    kernel = F.one_hot(torch.tensor(offset + 1), 3).float().expand(2, 3, 3)
    torch.testing.assert_close(circular_shift(w, kernel), torch.roll(w, offset, dims=-1))


def test_sharpening_by_one_changes_nothing_and_by_much_picks_the_largest():
    """Graves et al. eq. (9): ``gamma = 1`` leaves a weighting as it is; a large ``gamma`` concentrates it on its
    largest entry (as the DNC's allocation concentrates on the least-used row)."""
    w = torch.tensor([[[0.1, 0.5, 0.3, 0.1]]])
    torch.testing.assert_close(sharpen(w, torch.ones(1, 1)), w, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sharpen(w, torch.full((1, 1), 200.0)), torch.tensor([[[0.0, 1.0, 0.0, 0.0]]]))


def test_addressing_gradients_match_finite_differences():
    """``testWriteAllocationWeightsGradient`` and ``testAllocationGradient`` check the DNC's gradients against finite
    differences; here the whole NTM addressing step, in float64."""
    g = torch.Generator().manual_seed(4)
    raw = torch.randn(2, 2, 4 + 3 + 3, dtype=torch.float64, generator=g, requires_grad=True)
    memory = torch.randn(2, 6, 4, dtype=torch.float64, generator=g, requires_grad=True)
    w_prev = torch.rand(2, 2, 6, dtype=torch.float64, generator=g).softmax(-1).requires_grad_()

    def step(raw, memory, w_prev):
        return address(*split_head_params(raw, 4, 3, write=False)[:5], memory, w_prev)

    assert torch.autograd.gradcheck(step, (raw, memory, w_prev), fast_mode=True)
