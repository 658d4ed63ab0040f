"""foveal: attention mechanisms for vision in PyTorch, exact, fast, and easy to look inside."""

from foveal.attention import (
    Additive,
    Attention,
    AttentionOutput,
    Bilinear,
    GateOutput,
    MapAttention,
    MapAttentionOutput,
    NonLocalBlock,
    SpatialAttention,
    StackedAttention,
    StackedOutput,
    attend,
    flatten_grid,
    fused_attention,
    fused_attention_enabled,
    gate,
    masked_softmax,
    score_logits,
    set_fused_attention,
    unflatten_grid,
)
from foveal.glimpse import (
    GaussianRead,
    GaussianWrite,
    SpatialTransformer,
    bilinear_sample,
    crop,
    filterbank,
    gaussian_glimpse,
    gaussian_read,
    gaussian_write,
    stn_glimpse,
)

__version__ = "0.1.0"

__all__ = [
    "Additive",
    "Attention",
    "AttentionOutput",
    "Bilinear",
    "GateOutput",
    "MapAttention",
    "MapAttentionOutput",
    "NonLocalBlock",
    "SpatialAttention",
    "StackedAttention",
    "StackedOutput",
    "attend",
    "flatten_grid",
    "fused_attention",
    "fused_attention_enabled",
    "gate",
    "masked_softmax",
    "score_logits",
    "set_fused_attention",
    "unflatten_grid",
]

__all__ += [  # foveal.glimpse
    "GaussianRead",
    "GaussianWrite",
    "SpatialTransformer",
    "bilinear_sample",
    "crop",
    "filterbank",
    "gaussian_glimpse",
    "gaussian_read",
    "gaussian_write",
    "stn_glimpse",
]
