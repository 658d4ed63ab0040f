"""foveal: attention mechanisms for vision in PyTorch, exact, fast, and easy to look inside."""

import importlib as _importlib
import importlib.util as _importlib_util
from types import ModuleType as _ModuleType

from foveal.artifact import from_pretrained, save_pretrained
from foveal.attention import (
    NON_LOCAL_SIMILARITIES,
    NORMALIZERS,
    Additive,
    Attention,
    AttentionOutput,
    Bilinear,
    Concatenation,
    GateOutput,
    MapAttention,
    MapAttentionOutput,
    MultiheadAttention,
    NonLocalBlock,
    SpatialAttention,
    StackedAttention,
    StackedOutput,
    TimmAttention,
    attend,
    attention_rollout,
    flatten_grid,
    fused_attention,
    fused_attention_enabled,
    gate,
    masked_softmax,
    record_maps,
    register_map_module,
    score_logits,
    set_fused_attention,
    swap_attention,
    unflatten_grid,
)
from foveal.glimpse import (
    GaussianRead,
    GaussianWrite,
    SpatialTransformer,
    bilinear_sample,
    crop,
    filterbank,
    gaussian_attention,
    gaussian_attention_mask,
    gaussian_glimpse,
    gaussian_read,
    gaussian_write,
    stn_glimpse,
)
from foveal.preprocess import transform_for
from foveal.shipped import pretrained

__version__ = "0.1.0"

__all__ = [
    "NON_LOCAL_SIMILARITIES",
    "NORMALIZERS",
    "Additive",
    "Attention",
    "AttentionOutput",
    "Bilinear",
    "Concatenation",
    "GateOutput",
    "MapAttention",
    "MapAttentionOutput",
    "MultiheadAttention",
    "NonLocalBlock",
    "SpatialAttention",
    "StackedAttention",
    "StackedOutput",
    "TimmAttention",
    "attend",
    "attention_rollout",
    "flatten_grid",
    "fused_attention",
    "fused_attention_enabled",
    "gate",
    "masked_softmax",
    "record_maps",
    "register_map_module",
    "score_logits",
    "set_fused_attention",
    "swap_attention",
    "unflatten_grid",
]

__all__ += [  # foveal.glimpse
    "GaussianRead",
    "GaussianWrite",
    "SpatialTransformer",
    "bilinear_sample",
    "crop",
    "filterbank",
    "gaussian_attention",
    "gaussian_attention_mask",
    "gaussian_glimpse",
    "gaussian_read",
    "gaussian_write",
    "stn_glimpse",
]


__all__ += ["from_pretrained", "pretrained", "save_pretrained", "transform_for"]


def __getattr__(name: str) -> _ModuleType:
    """A submodule named as an attribute (``foveal.zoo.available()``, ``foveal.runs.export_run``), imported then.

    Importing them all with the package would load the recipes, data and plotting code (and their
    libraries) for every ``import foveal``; this keeps that import to the mechanisms and the saved-model format.
    """
    if not name.startswith("__") and _importlib_util.find_spec(f"{__name__}.{name}") is not None:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
