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
from foveal.attention.gate import GateOutput, gate
from foveal.attention.grid import MapAttention, MapAttentionOutput, NonLocalBlock, flatten_grid, unflatten_grid
from foveal.attention.multihead import Attention
from foveal.attention.spatial import SpatialAttention
from foveal.attention.stacked import StackedAttention, StackedOutput

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
