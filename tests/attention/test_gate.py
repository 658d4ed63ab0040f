"""gate(): seed 003's a = sigmoid(f(x)), g = a * z, and its hard form g~ = z[a]."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from foveal import gate


def test_soft_is_sigmoid_times_features():
    z, logits = torch.randn(4, 9, dtype=torch.float64), torch.randn(4, 9, dtype=torch.float64)
    g, a, kept = gate(z, logits)
    assert kept is None
    assert_close(a, 1 / (1 + torch.exp(-logits)))
    assert_close(g, a * z)
    assert ((a > 0) & (a < 1)).all()


def test_soft_gradcheck():
    z = torch.randn(2, 5, dtype=torch.float64, requires_grad=True)
    logits = torch.randn(2, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda z, x: gate(z, x).output, (z, logits))


def test_hard_indexes_the_kept_features():
    g = torch.Generator().manual_seed(0)
    z, logits = torch.randn(5, 8, generator=g), torch.randn(5, 8, generator=g)
    logits[3] = -1.0  # a row that keeps nothing
    out, a, kept = gate(z, logits, hard=True)
    counts = (logits > 0).sum(-1)
    assert out.shape == kept.shape == (5, int(counts.max()))
    assert_close(a, (logits > 0).float())
    for b in range(5):
        g_tilde = z[b][logits[b] > 0]  # seed 003: z[a]
        assert torch.equal(out[b, : len(g_tilde)], g_tilde)
        assert kept[b].sum() == len(g_tilde) and kept[b, : len(g_tilde)].all()
        assert (out[b, len(g_tilde) :] == 0).all()
    assert (out[3] == 0).all() and not kept[3].any()


def test_hard_padding_is_zero_even_for_non_finite_features():
    z = torch.tensor([[1.0, float("inf")], [2.0, 3.0]])
    out, _, kept = gate(z, torch.tensor([[1.0, -1.0], [1.0, 1.0]]), hard=True)
    assert torch.equal(out, torch.tensor([[1.0, 0.0], [2.0, 3.0]]))
    assert torch.equal(kept, torch.tensor([[True, False], [True, True]]))


def test_hard_gradient_reaches_kept_features_only():
    z = torch.randn(2, 4, requires_grad=True)
    logits = torch.tensor([[1.0, -1.0, 1.0, -1.0], [-1.0, -1.0, -1.0, 1.0]])
    gate(z, logits, hard=True).output.sum().backward()
    assert torch.equal(z.grad, (logits > 0).float())


def test_broadcast_logits():
    z = torch.randn(3, 4)
    logits = torch.tensor([1.0, -1.0, 1.0, 1.0])  # one gate shared by the batch
    assert_close(gate(z, logits).output, torch.sigmoid(logits) * z)
    out, _, kept = gate(z, logits, hard=True)
    assert torch.equal(out, z[:, [0, 2, 3]]) and kept.all()


def test_errors():
    with pytest.raises(ValueError, match=r"logits: expected shape \(\.\.\., k=4\), got \(3, 5\)"):
        gate(torch.zeros(3, 4), torch.zeros(3, 5))
    with pytest.raises(ValueError, match=r"logits: expected a shape broadcastable to \(3, 4\), got \(2, 4\)"):
        gate(torch.zeros(3, 4), torch.zeros(2, 4))
