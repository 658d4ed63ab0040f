"""Neural Turing Machine memory: addressing, reading, writing, head parameters, initial memory."""

from foveal.memory.addressing import (
    address,
    circular_shift,
    content_weights,
    cosine_similarity,
    interpolate,
    read,
    sharpen,
    shift_offsets,
    write,
)
from foveal.memory.heads import MEMORY_INITS, HeadParams, MemoryInit, head_param_size, split_head_params

__all__ = [
    "MEMORY_INITS",
    "HeadParams",
    "MemoryInit",
    "address",
    "circular_shift",
    "content_weights",
    "cosine_similarity",
    "head_param_size",
    "interpolate",
    "read",
    "sharpen",
    "shift_offsets",
    "split_head_params",
    "write",
]
