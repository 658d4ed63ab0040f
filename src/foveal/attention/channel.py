"""Attention as conditional feature selection over channels and over CNN layers (seed 002, SCA-CNN).

Seed 002: "conditionally filter not just within the image regions but also within channels in
the image embedding by computing the affinity matrix as before but then pooling across the spatial
dimension to arrive at an attention weight for each channel"; and "compute attention weights
across all tensors, sum the weights within a tensor and then softmax across the layers".

:class:`ChannelAttention` follows SCA-CNN (Chen et al., CVPR 2017, eqs. 7-8)::

    b     = tanh((W_c (x) v_bar + b_c) (+) W_hc h)      v_bar = mean over space of V, (x) outer product
    beta  = softmax(W_i' b + b_i')                        one weight per channel

The affinity of channel ``c`` at region ``i`` is ``e_ci = W_c v_ic + b_c + W_hc h`` (a k-vector);
it is linear in ``v_ic``, so pooling it across space (the seed's order) and pooling ``V`` first
(SCA-CNN's order) are the same number; the tanh comes after the pooling.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, cast

import torch
from torch import Tensor, nn

from foveal._checks import check_int, check_ints, check_module_dtype, check_shape
from foveal._torch_private import exportable_output
from foveal.attention.core import Additive
from foveal.attention.maps import register_map_module
from foveal.attention.normalizers import masked_softmax
from foveal.errors import FovealError
from foveal.registry import ATTENTION


@exportable_output
class ChannelAttentionOutput(NamedTuple):
    """``output`` (B, N, C): the regions with every channel rescaled; ``weights`` (B, C): beta."""

    output: Tensor
    weights: Tensor


@ATTENTION.register("channel")
@register_map_module
class ChannelAttention(nn.Module):
    """Question-conditioned channel weights for a set of region vectors (SCA-CNN's channel-wise attention).

    Implements the formula in the module docstring, with one change from SCA-CNN: ``b_c`` is a
    separate k-vector per channel (SCA-CNN shares one), because with a shared bias a channel's score
    depends only on its mean activation and ``h``, so the question could not pick channels by what
    they encode. The output is ``C * beta_c * v_ic``: the factor ``C`` makes uniform weights the
    identity, so the regions keep their scale (SCA-CNN multiplies by ``beta`` alone).

    Args:
        dim: number of channels ``C`` of each region vector.
        q_dim: size of the question vector ``h`` (default ``dim``).
        k_dim: size ``k`` of the joint embedding.

    Shape:
        - V: ``(B, N, C)`` region vectors (a grid flattened row-major); with ``N = 0`` the mean region
          ``v_bar`` is taken as zero, so the weights depend on the question alone
        - h_Q: ``(B, q_dim)``
        - output: ``(B, N, C)``
        - weights: ``(B, C)``, non-negative, summing to 1 over ``C``

    Example:
        >>> attn = ChannelAttention(16, q_dim=8, k_dim=4)
        >>> out, beta = attn(torch.randn(2, 49, 16), torch.randn(2, 8))
        >>> out.shape, beta.shape
        (torch.Size([2, 49, 16]), torch.Size([2, 16]))
    """

    def __init__(self, dim: int, *, q_dim: int | None = None, k_dim: int = 32) -> None:
        super().__init__()
        q_dim = dim if q_dim is None else q_dim
        check_ints(dim=dim, q_dim=q_dim, k_dim=k_dim)
        self.W_c = nn.Parameter(torch.randn(k_dim) / math.sqrt(k_dim))
        self.b_c = nn.Parameter(torch.randn(dim, k_dim) / math.sqrt(k_dim))
        self.W_hc = nn.Linear(q_dim, k_dim, bias=False)
        self.W_i = nn.Linear(k_dim, 1)  # W_i' and b_i'

    def forward(self, V: Tensor, h_Q: Tensor) -> ChannelAttentionOutput:
        check_module_dtype(self, V=V, h_Q=h_Q)
        sizes = check_shape("V", V, ("B", "N", self.b_c.shape[0]))
        check_shape("h_Q", h_Q, ("B", self.W_hc.in_features), sizes)
        # The mean of no regions is 0/0; zero (as for an all-masked set) keeps beta defined.
        v_bar = V.mean(dim=1) if sizes["N"] else V.new_zeros(sizes["B"], V.shape[-1])  # (B, C)
        b = torch.tanh(v_bar.unsqueeze(-1) * self.W_c + self.b_c + self.W_hc(h_Q).unsqueeze(1))  # (B, C, k)
        beta = self.W_i(b).squeeze(-1).softmax(dim=-1)  # (B, C)
        return ChannelAttentionOutput(V * (beta * V.shape[-1]).unsqueeze(1), beta)

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        V = torch.randn(batch, 9, self.b_c.shape[0], generator=generator)
        return V, torch.randn(batch, self.W_hc.in_features, generator=generator)


@exportable_output
class CrossLayerOutput(NamedTuple):
    """``output`` (B, dim); ``weights`` (B, L): one per layer; ``region_weights``: per layer (B, N_l)."""

    output: Tensor
    weights: Tensor
    region_weights: tuple[Tensor, ...]


@ATTENTION.register("cross-layer")
@register_map_module
class CrossLayerAttention(nn.Module):
    """Attention that chooses among the feature maps of several CNN layers (seed 002).

    Each layer's regions are projected to ``dim`` (``u_li = P_l v_li``) and scored against the
    question with one additive score ``e_li = w^T tanh(W_k u_li + W_q h + b)``. Seed 002's recipe,
    "compute attention weights across all tensors, sum the weights within a tensor and then softmax
    across the layers", is read with the weights of a tensor being ``exp(e_li)``::

        s_l     = log sum_i exp(e_li)                   sum of the weights within layer l (in log space)
        gamma_l = softmax_l(s_l) = sum_i softmax_{l,i}(e)   = the joint weights summed within the layer
        alpha_l = softmax_i(e_l)                         where to look inside layer l
        output  = sum_l gamma_l sum_i alpha_li u_li

    so ``gamma_l * alpha_li`` is a softmax over every region of every layer.

    Args:
        dim: size of the common space the layers are projected to (and of the output).
        layer_dims: channels ``C_l`` of each layer (default: two layers of ``dim`` channels).
        q_dim: size of the question vector (default ``dim``).
        k_dim: hidden size of the additive score.

    Shape:
        - layers: a sequence of ``L`` tensors ``(B, N_l, C_l)`` (each grid flattened row-major). A
          layer with no regions (``N_l = 0``) gets ``gamma_l = 0``; if every layer is empty the
          output and the weights are zeros (nothing to attend)
        - h_Q: ``(B, q_dim)``
        - output: ``(B, dim)``
        - weights: ``(B, L)``; region_weights: ``L`` tensors ``(B, N_l)``

    Example:
        >>> attn = CrossLayerAttention(16, layer_dims=(8, 32), k_dim=4)
        >>> out, gamma, alphas = attn([torch.randn(2, 64, 8), torch.randn(2, 16, 32)], torch.randn(2, 16))
        >>> out.shape, gamma.shape, [a.shape[-1] for a in alphas]
        (torch.Size([2, 16]), torch.Size([2, 2]), [64, 16])
    """

    def __init__(
        self, dim: int, *, layer_dims: Sequence[int] | None = None, q_dim: int | None = None, k_dim: int = 64
    ) -> None:
        super().__init__()
        layer_dims = (dim, dim) if layer_dims is None else tuple(layer_dims)
        if len(layer_dims) == 0:
            raise FovealError("layer_dims: need at least one layer")
        check_ints(dim=dim, k_dim=k_dim, **({} if q_dim is None else {"q_dim": q_dim}))
        for l, c in enumerate(layer_dims):
            check_int(f"layer_dims[{l}]", c)
        self.project = nn.ModuleList(nn.Linear(c, dim) for c in layer_dims)
        self.score = Additive(dim if q_dim is None else q_dim, dim, k_dim)

    def forward(self, layers: Sequence[Tensor], h_Q: Tensor) -> CrossLayerOutput:
        if isinstance(layers, Tensor) or not isinstance(layers, Sequence):
            shape = f" of shape {tuple(layers.shape)}" if isinstance(layers, Tensor) else ""
            raise FovealError(
                f"layers: expected a sequence of {len(self.project)} tensors (B, N_l, C_l), "
                f"got a {type(layers).__name__}{shape}"
            )
        if len(layers) != len(self.project):
            raise FovealError(f"layers: expected {len(self.project)} tensors, got {len(layers)}")
        check_module_dtype(self, h_Q=h_Q, **{f"layers[{l}]": V for l, V in enumerate(layers)})
        q_dim = self.score.W_q.in_features
        sizes = check_shape("h_Q", h_Q, ("B", q_dim))
        query = h_Q.unsqueeze(1)
        attended: list[Tensor] = []
        logsums: list[Tensor] = []
        alphas: list[Tensor] = []
        for l, (V, project) in enumerate(zip(layers, self.project, strict=True)):
            check_shape(f"layers[{l}]", V, ("B", None, cast(nn.Linear, project).in_features), sizes)
            u = project(V)  # (B, N_l, dim)
            e = self.score(query, u).squeeze(1)  # (B, N_l)
            alpha = e.softmax(dim=-1)
            attended.append((alpha.unsqueeze(1) @ u).squeeze(1))
            logsums.append(e.logsumexp(dim=-1))
            alphas.append(alpha)
        layer_logits = torch.stack(logsums, dim=-1)  # (B, L)
        if all(V.shape[1] for V in layers):
            gamma = layer_logits.softmax(dim=-1)
        else:  # an empty layer's log-sum is -inf; masked_softmax gives it 0 and an all-empty row zeros
            present = torch.tensor([V.shape[1] > 0 for V in layers], device=h_Q.device)
            gamma = masked_softmax(layer_logits, present)
        output = (gamma.unsqueeze(-1) * torch.stack(attended, dim=1)).sum(dim=1)
        return CrossLayerOutput(output, gamma, tuple(alphas))

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[object, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        sizes = [cast(nn.Linear, project).in_features for project in self.project]
        layers = [torch.randn(batch, 16 // 2**l, c, generator=generator) for l, c in enumerate(sizes)]
        return layers, torch.randn(batch, self.score.W_q.in_features, generator=generator)
