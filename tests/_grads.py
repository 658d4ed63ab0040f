"""Shared gradient check: every parameter learns, except those a softmax makes exactly inert."""

from __future__ import annotations

import torch

# A constant added to every logit of a softmax changes nothing, so the output bias of a score that
# feeds a softmax (an additive score's w_a.bias, alternating co-attention's summary_score.2.bias)
# gets a zero gradient by construction (exactly, or a rounding error of the other terms).
SHIFT_INVARIANT = ("w_a.bias", "summary_score.2.bias")


def assert_every_parameter_learns(module: torch.nn.Module) -> None:
    """After a backward pass: every gradient exists and is finite; shift-invariant biases get ~0, others > 0."""
    for name, p in module.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        if name.endswith(SHIFT_INVARIANT):
            assert p.grad.abs().max() <= 1e-5, f"{name}: a softmax-invariant bias moved ({p.grad})"
        else:
            assert p.grad.abs().sum() > 0, name
