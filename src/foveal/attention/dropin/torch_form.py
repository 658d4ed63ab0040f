"""foveal's attention with ``nn.MultiheadAttention``'s constructor, forward, attributes and masks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch
from torch import Tensor, nn

from foveal.attention import maps
from foveal.attention.core import AttentionOutput
from foveal.attention.dropin._scores import causal, check_mask_dtype, combine, layer_state
from foveal.attention.multihead import Attention
from foveal.errors import FovealError

__all__ = ["MultiheadAttention", "multihead_refusal"]


class MultiheadAttention(Attention):
    """:class:`Attention` with ``nn.MultiheadAttention``'s constructor, forward, attributes and masks.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) -> (output, weights)`` as torch's: sequence first unless
    ``batch_first``; bool masks True where a query may *not* attend, float masks added to the scaled scores;
    weights averaged over the heads unless ``average_attn_weights=False``. It has torch's attributes
    (``embed_dim``, ``num_heads``, ``batch_first``, ``in_proj_weight``, ``out_proj``, ...), so
    ``nn.TransformerEncoderLayer`` and ``nn.TransformerDecoderLayer`` take it; in evaluation mode, with
    nothing recording, the encoder layer may run its own fused kernel on these parameters, as it does on
    torch's layer. Build one from torch's layer with :meth:`Attention.from_multihead`; the parameters have
    foveal's names (``qkv`` or ``W_q``/``W_k``/``W_v``, and ``proj``).

    Args:
        embed_dim, num_heads, dropout, bias, kdim, vdim, batch_first, device, dtype: as
            ``nn.MultiheadAttention``'s (``add_bias_kv`` and ``add_zero_attn`` are not supported). The
            weights start as torch's do: Xavier-uniform projections, zero biases.

    Shape:
        - query: ``(L, B, embed_dim)`` (``(B, L, embed_dim)`` if ``batch_first``; ``(L, embed_dim)`` unbatched)
        - key, value: ``(S, B, kdim)``, ``(S, B, vdim)`` likewise
        - key_padding_mask: ``(B, S)``; attn_mask: ``(L, S)`` or ``(B * num_heads, L, S)``
        - output: as the query; weights: ``(B, L, S)``, or ``(B, num_heads, L, S)`` unaveraged, or None

    Example:
        >>> layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True)
        >>> layer.self_attn = Attention.from_multihead(layer.self_attn)
        >>> layer(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """

    merge_masks = nn.MultiheadAttention.merge_masks  # the encoder layer's fused kernel asks for it
    bias_k = bias_v = None
    add_zero_attn = False

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        kdim = embed_dim if kdim is None else kdim
        vdim = embed_dim if vdim is None else vdim
        super().__init__(
            embed_dim,
            key_dim=kdim,
            value_dim=vdim,
            out_dim=embed_dim,
            heads=num_heads,
            qkv=kdim == vdim == embed_dim,
            proj=True,
            bias=bias,
            proj_bias=bias,
            attn_drop=dropout,
            device=device,
            dtype=dtype,
        )
        self.batch_first = batch_first
        for linear in self._in_projections():
            nn.init.xavier_uniform_(linear.weight)
            if linear.bias is not None:
                nn.init.zeros_(linear.bias)
        if self.proj is not None and self.proj.bias is not None:
            nn.init.zeros_(self.proj.bias)

    def _in_projections(self) -> list[nn.Linear]:
        """``[qkv]``, or ``[W_q, W_k, W_v]`` where key and value sizes differ from the query's."""
        names = ("qkv",) if hasattr(self, "qkv") else ("W_q", "W_k", "W_v")
        return [cast(nn.Linear, getattr(self, name)) for name in names]

    # torch's names for what foveal's attributes hold
    @property
    def embed_dim(self) -> int:
        return self.dim

    @property
    def num_heads(self) -> int:
        return self.heads

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @property
    def kdim(self) -> int:
        return self.key_dim

    @property
    def vdim(self) -> int:
        return self.value_dim

    @property
    def dropout(self) -> float:
        return self.attn_drop.p

    @property
    def _qkv_same_embed_dim(self) -> bool:
        return hasattr(self, "qkv")

    @property
    def in_proj_weight(self) -> Tensor | None:
        return self._in_projections()[0].weight if self._qkv_same_embed_dim else None

    @property
    def in_proj_bias(self) -> Tensor | None:
        biases: list[Tensor] = [linear.bias for linear in self._in_projections() if linear.bias is not None]
        return torch.cat(biases) if biases else None

    @property
    def q_proj_weight(self) -> Tensor | None:
        return None if self._qkv_same_embed_dim else self._in_projections()[0].weight

    @property
    def k_proj_weight(self) -> Tensor | None:
        return None if self._qkv_same_embed_dim else self._in_projections()[1].weight

    @property
    def v_proj_weight(self) -> Tensor | None:
        return None if self._qkv_same_embed_dim else self._in_projections()[2].weight

    @property
    def out_proj(self) -> nn.Linear:
        assert self.proj is not None  # always built with proj=True
        return self.proj

    def forward(  # type: ignore[override]
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        check_mask_dtype("key_padding_mask", key_padding_mask)
        check_mask_dtype("attn_mask", attn_mask)
        if query.is_nested:
            return self._nested_self_attention(query, key, value, need_weights, average_attn_weights)
        unbatched = query.dim() == 2

        def batch_first(x: Tensor) -> Tensor:
            return x.unsqueeze(0) if unbatched else x if self.batch_first else x.transpose(0, 1)

        # torch passes one tensor three times for self-attention: keep it one, so qkv is one product
        same_key, same_value = key is query, value is key
        query = batch_first(query)
        key = query if same_key else batch_first(key)
        value = key if same_value else batch_first(value)
        if unbatched and key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
        out, weights = self._attend_batch_first(query, key, value, key_padding_mask, attn_mask, is_causal, need_weights)
        if unbatched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights or weights is None:
            return out, None
        weights = weights.mean(dim=1) if average_attn_weights else weights
        return out, weights.squeeze(0) if unbatched else weights

    def _attend_batch_first(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None,
        attn_mask: Tensor | None,
        is_causal: bool,
        need_weights: bool,
    ) -> AttentionOutput:
        """Attention on ``(B, L, E)`` tensors with torch's masks; reports the ``(B, heads, L, S)`` maps."""
        batch, n, m = query.shape[0], query.shape[1], key.shape[1]
        parts = []  # each True (or 0) where a query may attend
        if key_padding_mask is not None:
            kpm = key_padding_mask.reshape(batch, 1, 1, m)
            parts.append(~kpm if kpm.dtype == torch.bool else kpm)
        if attn_mask is not None:
            am = attn_mask.reshape(batch, self.heads, n, m) if attn_mask.dim() == 3 else attn_mask
            parts.append(~am if am.dtype == torch.bool else am)
        elif is_causal:
            parts.append(causal(n, m, query.device))
        mask, score = combine(parts, query.dtype)
        out = self._attend(query, key, value, mask, need_weights, score)
        maps.report(self, out)
        return out

    def _nested_self_attention(
        self, x: Tensor, key: Tensor, value: Tensor, need_weights: bool, average_attn_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Self-attention over a nested tensor of ``(L_i, E)`` sequences, padded and unpadded around it.

        ``nn.TransformerEncoder`` in evaluation turns a padded batch into one (its own fused layers take
        it); a layer with a forward hook, as under :func:`~foveal.attention.record_maps`, then gets it.
        """
        if key is not x or value is not x:
            raise FovealError("a nested query is taken for self-attention only (query, key and value one tensor)")
        lengths = [part.shape[0] for part in x.unbind()]
        padded = torch.nested.to_padded_tensor(x, 0.0)  # (B, L, E)
        padding = (
            torch.arange(padded.shape[1], device=padded.device) >= torch.tensor(lengths, device=padded.device)[:, None]
        )
        out, weights = self._attend_batch_first(padded, padded, padded, padding, None, False, need_weights)
        nested = torch.nested.nested_tensor([o[:n] for o, n in zip(out, lengths, strict=True)])
        if not need_weights or weights is None:
            return nested, None
        return nested, weights.mean(dim=1) if average_attn_weights else weights

    @classmethod
    def from_multihead(
        cls, layer: nn.Module | Mapping[str, Tensor], heads: int | None = None, **options: object
    ) -> MultiheadAttention:
        """The layer that computes what ``nn.MultiheadAttention`` ``layer`` computes, with its weights.

        Args:
            layer: an ``nn.MultiheadAttention`` (its heads, dropout and ``batch_first`` are read from
                it), or its state dict.
            heads: its ``num_heads``; needed with a state dict.
            options: ``dropout``, ``batch_first``, ``device``.
        """
        state, heads, read = layer_state("from_multihead", layer, heads, multihead_refusal, _multihead_options)
        merged: dict[str, Any] = {**read, **options}
        if "bias_k" in state or "bias_v" in state:
            raise FovealError("state_dict: add_bias_kv (bias_k, bias_v) has no counterpart in Attention")
        if "out_proj.weight" not in state:
            raise FovealError(
                f"state_dict: expected nn.MultiheadAttention keys (out_proj.weight, ...), got {sorted(state)}"
            )
        out_weight = state["out_proj.weight"]
        dim = out_weight.shape[0]
        bias = state.get("in_proj_bias")
        fused = "in_proj_weight" in state
        kdim = dim if fused else state["k_proj_weight"].shape[1]
        vdim = dim if fused else state["v_proj_weight"].shape[1]
        factory = {"dtype": out_weight.dtype, "device": out_weight.device}
        module = cls(dim, heads, bias=bias is not None, kdim=kdim, vdim=vdim, **{**factory, **merged})
        ours = {"proj.weight": out_weight}
        if "out_proj.bias" in state:
            ours["proj.bias"] = state["out_proj.bias"]
        if fused:
            ours["qkv.weight"] = state["in_proj_weight"]
            if bias is not None:
                ours["qkv.bias"] = bias
        else:
            for name, i in (("q", 0), ("k", 1), ("v", 2)):
                ours[f"W_{name}.weight"] = state[f"{name}_proj_weight"]
                if bias is not None:
                    ours[f"W_{name}.bias"] = bias[i * dim : (i + 1) * dim]
        module.load_state_dict(ours, strict=True)
        return module


def _multihead_options(layer: nn.Module) -> dict[str, object]:
    return {"dropout": layer.dropout, "batch_first": layer.batch_first}


def multihead_refusal(layer: nn.Module) -> str | None:
    """Why :class:`MultiheadAttention` cannot compute what torch layer ``layer`` computes, or None."""
    if type(layer) is not nn.MultiheadAttention:
        return f"{type(layer).__module__}.{type(layer).__name__} is not torch's nn.MultiheadAttention itself"
    if layer.bias_k is not None or layer.add_zero_attn:
        return "nn.MultiheadAttention with add_bias_kv or add_zero_attn has no counterpart in foveal's attention"
    return None
