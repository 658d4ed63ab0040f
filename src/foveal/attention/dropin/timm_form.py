"""foveal's attention with timm's ViT ``Attention`` forward: ``(x, attn_mask=None, is_causal=False) -> Tensor``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch
from torch import Tensor, nn

from foveal.attention import maps
from foveal.attention.dropin._scores import causal, check_mask_dtype, combine, layer_state
from foveal.attention.multihead import Attention
from foveal.errors import FovealError

__all__ = ["TimmAttention", "is_timm_attention", "timm_refusal"]

TIMM_KEYS = {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"}


class TimmAttention(Attention):
    """:class:`Attention` with timm's ``Attention.forward(x, attn_mask=None, is_causal=False) -> Tensor``.

    The parameters have timm's names (``qkv``, ``proj``), so a timm checkpoint loads into a model whose
    layers were swapped. Build one from a timm layer with :meth:`Attention.from_timm`.

    Args:
        dim: the tokens' size.
        heads: timm's ``num_heads``.
        qkv_bias, proj_bias: give ``qkv`` and ``proj`` biases (timm's names).
        attn_drop, proj_drop: dropout on the weights and after ``proj``, in training.
        device, dtype: where and in what dtype to create the parameters.

    Shape:
        - x: ``(B, N, dim)``
        - attn_mask: bool (True = may attend) or float (added to the scaled scores), broadcastable to
          ``(B, heads, N, N)``
        - output: ``(B, N, dim)``

    Example:
        >>> layer = TimmAttention(16, heads=4, qkv_bias=True)
        >>> layer(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(
        self,
        dim: int,
        heads: int = 8,
        *,
        qkv_bias: bool = False,
        proj_bias: bool = True,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(
            dim,
            heads=heads,
            qkv=True,
            proj=True,
            bias=qkv_bias,
            proj_bias=proj_bias,
            attn_drop=attn_drop,
            proj_drop=proj_drop,
            device=device,
            dtype=dtype,
        )

    @property
    def num_heads(self) -> int:
        return self.heads

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    def forward(  # type: ignore[override]
        self, x: Tensor, attn_mask: Tensor | None = None, is_causal: bool = False
    ) -> Tensor:
        check_mask_dtype("attn_mask", attn_mask)
        parts = [] if attn_mask is None else [attn_mask]
        if is_causal:
            parts.append(causal(x.shape[-2], x.shape[-2], x.device))
        mask, score = combine(parts, x.dtype)
        out = self._attend(x, x, x, mask, False, score)
        maps.report(self, out)
        return out.output

    @classmethod
    def from_timm(
        cls, layer: nn.Module | Mapping[str, Tensor], heads: int | None = None, **options: object
    ) -> TimmAttention:
        """The layer that computes what timm's ViT ``Attention`` ``layer`` computes, with its weights.

        Args:
            layer: a timm ``Attention`` (its heads and dropout are read from it), or its state dict
                (``qkv.weight``, ``proj.weight`` and the biases it has).
            heads: the number of heads; needed with a state dict, which does not say it.
            options: ``attn_drop``, ``proj_drop``, ``device``.
        """
        state, heads, read = layer_state("from_timm", layer, heads, timm_refusal, _timm_options)
        merged: dict[str, Any] = {**read, **options}
        extra = sorted(set(state) - TIMM_KEYS)
        if "qkv.weight" not in state or "proj.weight" not in state or extra:
            raise FovealError(
                "state_dict: expected timm Attention keys qkv.weight, proj.weight (and their biases), "
                f"got {sorted(state)}" + (" (q_norm/k_norm layers are not supported)" if extra else "")
            )
        weight = state["qkv.weight"]
        dim = weight.shape[1]
        if tuple(weight.shape) != (3 * dim, dim) or tuple(state["proj.weight"].shape) != (dim, dim):
            raise FovealError(
                f"qkv.weight, proj.weight: expected shapes (3 dim, dim) and (dim, dim), got "
                f"{tuple(weight.shape)} and {tuple(state['proj.weight'].shape)} (attn_head_dim and dim_out "
                "other than dim are not supported)"
            )
        module = cls(
            dim,
            heads,
            qkv_bias="qkv.bias" in state,
            proj_bias="proj.bias" in state,
            **{"dtype": weight.dtype, "device": weight.device, **merged},
        )
        module.load_state_dict(state, strict=True)
        return module


def _timm_options(layer: nn.Module) -> dict[str, object]:
    return {"attn_drop": layer.attn_drop.p, "proj_drop": layer.proj_drop.p}  # type: ignore[union-attr]


def is_timm_attention(module: nn.Module) -> bool:
    """Whether ``module`` is timm's ViT ``Attention`` itself (not a subclass or another variant)."""
    cls = type(module)
    return cls.__module__ == "timm.layers.attention" and cls.__name__ == "Attention"


def timm_refusal(layer: nn.Module) -> str | None:
    """Why :class:`TimmAttention` cannot compute what timm layer ``layer`` computes, or None if it can."""
    name = type(layer).__name__
    if not is_timm_attention(layer):
        return f"{type(layer).__module__}.{name} is not timm's Attention, and foveal has no form of it"
    for part, option in (("q_norm", "qk_norm"), ("k_norm", "qk_norm"), ("norm", "scale_norm")):
        if not isinstance(getattr(layer, part, None), nn.Identity | None):
            return f"timm Attention with {option}=True (a {part} layer): foveal's attention has no such norm"
    if getattr(layer, "gate", None) is not None:
        return "timm Attention with gated=True: foveal's attention has no output gate"
    qkv, proj = cast(nn.Linear, layer.qkv), cast(nn.Linear, layer.proj)
    if qkv.out_features != 3 * qkv.in_features or proj.out_features != qkv.in_features:
        return "timm Attention with attn_head_dim or dim_out other than dim is not supported"
    return None
