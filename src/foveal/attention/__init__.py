"""Attention operators and modules: pure torch, no training code."""

from foveal.attention._kernels import KERNELS, KernelChoice
from foveal.attention.channel import ChannelAttention, ChannelAttentionOutput, CrossLayerAttention, CrossLayerOutput
from foveal.attention.coattention import (
    AlternatingCoAttention,
    CoAttentionOutput,
    HopCoAttention,
    ParallelCoAttention,
)
from foveal.attention.context import ContextOutput, GridBiLSTM, ResidualSelfAttention
from foveal.attention.coords import AddCoords, add_coords, box_weights, grid_coords
from foveal.attention.core import (
    NORMALIZERS,
    Additive,
    AttentionOutput,
    Bilinear,
    Concatenation,
    attend,
    choose_kernel,
    fused_attention,
    fused_attention_enabled,
    score_logits,
    set_fused_attention,
)
from foveal.attention.dropin import MultiheadAttention, TimmAttention, swap_attention
from foveal.attention.fusion import FusionOutput, TransformerFusion
from foveal.attention.gate import GateOutput, gate
from foveal.attention.grid import (
    NON_LOCAL_SIMILARITIES,
    MapAttention,
    MapAttentionOutput,
    NonLocalBlock,
    flatten_grid,
    unflatten_grid,
)
from foveal.attention.maps import RecordedMaps, attention_rollout, record_maps, register_map_module
from foveal.attention.multihead import Attention
from foveal.attention.normalizers import masked_softmax, sparsemax
from foveal.attention.spatial import SpatialAttention
from foveal.attention.stacked import StackedAttention, StackedOutput

__all__ = [
    "KERNELS",
    "NON_LOCAL_SIMILARITIES",
    "NORMALIZERS",
    "AddCoords",
    "Additive",
    "AlternatingCoAttention",
    "Attention",
    "AttentionOutput",
    "Bilinear",
    "ChannelAttention",
    "ChannelAttentionOutput",
    "CoAttentionOutput",
    "Concatenation",
    "ContextOutput",
    "CrossLayerAttention",
    "CrossLayerOutput",
    "FusionOutput",
    "GateOutput",
    "GridBiLSTM",
    "HopCoAttention",
    "KernelChoice",
    "MapAttention",
    "MapAttentionOutput",
    "MultiheadAttention",
    "NonLocalBlock",
    "ParallelCoAttention",
    "RecordedMaps",
    "ResidualSelfAttention",
    "SpatialAttention",
    "StackedAttention",
    "StackedOutput",
    "TimmAttention",
    "TransformerFusion",
    "add_coords",
    "attend",
    "attention_rollout",
    "box_weights",
    "choose_kernel",
    "flatten_grid",
    "fused_attention",
    "fused_attention_enabled",
    "gate",
    "grid_coords",
    "masked_softmax",
    "record_maps",
    "register_map_module",
    "score_logits",
    "set_fused_attention",
    "sparsemax",
    "swap_attention",
    "unflatten_grid",
]
