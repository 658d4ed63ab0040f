"""foveal's :class:`~foveal.attention.Attention` in the forms timm's and torch's transformer blocks call.

A timm ``Block`` calls ``self.attn(x, attn_mask=..., is_causal=...)`` and adds the tensor it returns; an
``nn.TransformerEncoderLayer`` calls ``self.self_attn(x, x, x, attn_mask=..., key_padding_mask=...,
need_weights=False, is_causal=...)[0]`` and reads ``batch_first``. :class:`TimmAttention` and
:class:`MultiheadAttention` are :class:`Attention` with those signatures, so one assignment swaps them in,
and :func:`swap_attention` swaps a whole model::

    block.attn = Attention.from_timm(block.attn)            # a TimmAttention
    layer.self_attn = Attention.from_multihead(layer.self_attn)  # a MultiheadAttention
    swap_attention(vit)                                     # every one of them, in place

Being :class:`Attention`, they run the fused kernel unless maps are asked for, and
:func:`~foveal.attention.record_maps` records their ``(B, heads, n, m)`` maps like any foveal module's.

Masks follow the replaced layer's convention, not foveal's: timm's bool ``attn_mask`` is True where a
query may attend (``F.scaled_dot_product_attention``'s), torch's bool masks are True where it may not, and
a float mask of either is added to the scaled scores. A bool mask keeps the fused kernel; a float mask
runs the path that builds the scores. A query with nothing to attend gets a zero output, where torch's
kernels give NaN.
"""

from __future__ import annotations

from torch import nn

from foveal.attention.dropin.timm_form import TimmAttention, timm_refusal
from foveal.attention.dropin.torch_form import MultiheadAttention, multihead_refusal
from foveal.attention.multihead import Attention
from foveal.errors import FovealError

__all__ = ["MultiheadAttention", "TimmAttention", "swap_attention"]


def _foveal_form(module: nn.Module) -> tuple[type[Attention] | None, str | None]:
    """The drop-in class for ``module`` (or None where it is no attention foveal replaces), and why not."""
    if isinstance(module, TimmAttention | MultiheadAttention):
        return None, None  # already foveal's
    if isinstance(module, nn.MultiheadAttention):
        return MultiheadAttention, multihead_refusal(module)
    cls = type(module)
    if cls.__module__.startswith("timm.") and "Attention" in cls.__name__:
        return TimmAttention, timm_refusal(module)
    return None, None


def swap_attention(model: nn.Module, *, strict: bool = True) -> list[str]:
    """Replace, in place, every timm ``Attention`` and ``nn.MultiheadAttention`` in ``model`` by foveal's form.

    Each new layer holds the old one's weights and computes what it computed (:class:`TimmAttention`,
    :class:`MultiheadAttention`), so the model's outputs and gradients are unchanged, and
    :func:`~foveal.attention.record_maps` then records every layer's maps.

    Args:
        model: any module holding the layers (not a layer itself: assign ``Attention.from_timm(layer)``).
        strict: refuse the whole swap, changing nothing, if any attention layer cannot be taken (timm's
            with qk-norm, scale-norm or a gate; timm's attention variants foveal has no form of; torch's
            with ``add_bias_kv``), naming each and why. False swaps the others and leaves those.

    Returns:
        The names of the swapped layers, in the model's order.

    Example:
        >>> model = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), 2)
        >>> swap_attention(model)
        ['layers.0.self_attn', 'layers.1.self_attn']
    """
    if not isinstance(model, nn.Module):
        raise FovealError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if _foveal_form(model)[0] is not None:
        raise FovealError(
            "model: swap_attention replaces the layers inside a model; for a layer on its own use "
            "Attention.from_timm(layer) or Attention.from_multihead(layer)"
        )
    swaps, refused = [], []
    for name, module in model.named_modules():
        form, reason = _foveal_form(module)
        if form is None:
            continue
        if reason:
            refused.append(f"{name}: {reason}")
        else:
            swaps.append((name, module, form))
    if refused and strict:
        raise FovealError("swap_attention changed nothing; it cannot take:\n  " + "\n  ".join(refused))
    for name, module, form in swaps:
        parent, _, child = name.rpartition(".")
        new = TimmAttention.from_timm(module) if form is TimmAttention else MultiheadAttention.from_multihead(module)
        new.train(module.training)
        setattr(model.get_submodule(parent), child, new)
    return [name for name, _, _ in swaps]
