"""Attention operators and modules: pure torch, no training code."""

from foveal.attention.core import (
    Additive,
    AttentionOutput,
    Bilinear,
    attend,
    fused_attention,
    fused_attention_enabled,
    masked_softmax,
    score_logits,
    set_fused_attention,
)

__all__ = [
    "Additive",
    "AttentionOutput",
    "Bilinear",
    "attend",
    "fused_attention",
    "fused_attention_enabled",
    "masked_softmax",
    "score_logits",
    "set_fused_attention",
]
