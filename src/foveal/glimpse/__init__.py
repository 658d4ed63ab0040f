"""Glimpses: hard crops, Gaussian filterbanks (seed 003 and DRAW) and spatial transformers (seed 004).

Seed 003's image-sized Gaussian attention mask (:func:`gaussian_attention`) sits beside them: the
same Gaussians, multiplied into the image instead of cut out of it.

Every function documents its coordinate convention in a ``Convention:`` block. In short:
crops and Gaussian glimpses take pixel coordinates (seed 003: 0-based, ``y`` parameters first;
DRAW: 1-based, ``x`` first, as the paper writes them); spatial transformers take normalised
``[-1, 1]`` coordinates, ``x`` first, with ``theta`` mapping the output grid into the input and
``align_corners=False`` unless asked otherwise.
"""

from foveal.glimpse.crop import crop
from foveal.glimpse.gaussian import (
    DrawWindow,
    Filterbank,
    ReadOutput,
    WriteOutput,
    draw_window,
    filterbank,
    gaussian_glimpse,
    gaussian_mask,
    gaussian_read,
    gaussian_write,
)
from foveal.glimpse.heads import GaussianRead, GaussianWrite
from foveal.glimpse.mask import GaussianAttentionOutput, gaussian_attention, gaussian_attention_mask
from foveal.glimpse.sampler import BilinearSampler, affine_grid, base_grid, bilinear_sample, projective_grid
from foveal.glimpse.transformer import (
    SpatialTransformer,
    TransformerOutput,
    gaussian_params,
    init_identity_regressor,
    stn_glimpse,
    transform_matrix,
    warp,
)

__all__ = [
    "BilinearSampler",
    "DrawWindow",
    "Filterbank",
    "GaussianAttentionOutput",
    "GaussianRead",
    "GaussianWrite",
    "ReadOutput",
    "SpatialTransformer",
    "TransformerOutput",
    "WriteOutput",
    "affine_grid",
    "base_grid",
    "bilinear_sample",
    "crop",
    "draw_window",
    "filterbank",
    "gaussian_attention",
    "gaussian_attention_mask",
    "gaussian_glimpse",
    "gaussian_mask",
    "gaussian_params",
    "gaussian_read",
    "gaussian_write",
    "init_identity_regressor",
    "projective_grid",
    "stn_glimpse",
    "transform_matrix",
    "warp",
]
