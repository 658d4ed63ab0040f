"""foveal: attention mechanisms for vision in PyTorch, exact, fast, and easy to look inside."""

from foveal.attention import (
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

__version__ = "0.1.0"

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
