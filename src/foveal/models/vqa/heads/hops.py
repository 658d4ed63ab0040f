"""Heads over the regions and the question vector alone: no attention, one hop, or K stacked hops."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from foveal.attention import SpatialAttention, StackedAttention
from foveal.errors import FovealError
from foveal.models.vqa.heads.base import NO_INPUTS, HeadInputs, HeadOutput, HeadSizes, NoOptions, VQAHead, register_head


class PoolHead(VQAHead):
    """The vanilla baseline: ``phi = mean_i v_i + v_Q`` (no attention)."""

    grouped = True

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        pooled = V.mean(dim=1)
        return HeadOutput((pooled if v_Q.dim() == 2 else pooled.unsqueeze(1)) + v_Q, None)


class SingleHopHead(VQAHead):
    """One attention hop, ``phi = v_filt + v_Q`` (seed 002), around any ``(V, query) -> (v_filt, alpha)`` module."""

    reads = frozenset({"keys"})
    grouped = True

    def __init__(self, attention: nn.Module) -> None:
        super().__init__()
        self.attention = attention

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        v_filt, alpha = self.attention(V, v_Q, keys=inputs.keys)
        return HeadOutput(v_filt + v_Q, alpha.unsqueeze(-2))


READOUTS = ("sum", "last")
GATE_FORMS = ("sigmoid", "linear")


@dataclass
class StackedOptions:
    """The options of the ``stacked`` and ``stacked-dot`` heads (:class:`StackedHead`)."""

    hops: int = 2  # attention hops, each with its own parameters; each hop's phi is the next hop's query
    # phi = every hop's glimpse + v_Q ("sum", seed 002) or the last hop's glimpse + v_Q ("last": what the picture
    # tells the answer passes through the last map, which then shows where the model looked)
    readout: Literal["sum", "last"] = "sum"
    # phi = g * glimpse + v_Q with g = 2 sigmoid(W_g v_Q + b_g), per channel: a shape question can drop the object's
    # colour without looking away from the object
    gate: bool = False
    # with gate (ignored without it): g = 2 sigmoid(W_g v_Q + b_g) ("sigmoid") or the signed g = W_g v_Q + b_g, b_g from
    # 1 ("linear"): a yes/no question compares the colour it names with the glimpse's in one sum of products
    gate_form: Literal["sigmoid", "linear"] = "sigmoid"
    # every hop's score is divided by it before its softmax (or sparsemax); below 1 a hop picks its cells sooner and
    # more sharply
    temperature: float = 1.0
    # how each hop's scores become its map: "softmax" (seed 002) or "sparsemax" (their projection onto the simplex,
    # exactly 0 off the cells that score near the best: no haze over the background)
    normalize: Literal["softmax", "sparsemax"] = "softmax"
    # every hop after the first also scores cells by their distance from where the hop before it looked (toward or
    # away, as its query says) and avoids the cells it looked at: "the object closest to the red one" is then a hop
    # that finds red and a hop that moves from it (foveal's addition; see StackedAttention)
    relate: bool = False
    # every hop's score also reads each cell alone, the same for every question: where objects are, learned from
    # every question, so a question naming what is not in the picture still looks at the object (see StackedAttention)
    prior: bool = False


class StackedHead(VQAHead):
    """K hops of :class:`foveal.attention.StackedAttention`: ``u_0 = v_Q``, ``u_k = v_filt_k + u_{k-1}``.

    The hops' score, temperature, normalisation and relations are the attention module's; the head
    chooses what ``phi`` is.

    Args:
        attention: the :class:`foveal.attention.StackedAttention` whose hops are run.
        readout: what ``phi`` is. ``"sum"`` (seed 002): ``phi = u_K = v_Q + sum_k v_filt_k``, every
            hop's glimpse. ``"last"``: ``phi = v_filt_K + v_Q``; the earlier hops only steer the
            last hop's query, so what the picture tells the answer passes through the last map. With
            ``"sum"`` a later hop may look at the plain background, whose regions are near zero, and
            add nothing: the last map then shows where the model did not look
            (``docs/studies/vqa-easy-attention.md``).
        gate: scale the glimpse(s) in ``phi`` channel by channel by the question,
            ``g = 2 sigmoid(W_g v_Q + b_g)`` (1 at ``W_g = 0, b_g = 0``): ``phi = g * v_filt_K + v_Q``
            (``"last"``) or ``g * sum_k v_filt_k + v_Q`` (``"sum"``); the hops' queries are unchanged.
            A question that needs one property of the object (its shape) can then drop the others
            (its colour) without looking away from it.
        gate_form: ``"sigmoid"`` (the ``g`` above) or ``"linear"``: ``g = W_g v_Q + b_g``, ``b_g`` from 1, a
            signed product of question and glimpse (the Hadamard fusion of later VQA models): "is there a
            red shape?" is then one sum of products, the named colour times the glimpse's.
    """

    reads = frozenset({"keys"})
    grouped = True

    def __init__(
        self, attention: StackedAttention, readout: str = "sum", gate: bool = False, gate_form: str = "sigmoid"
    ) -> None:
        super().__init__()
        for option, value, choices in (("readout", readout, READOUTS), ("gate_form", gate_form, GATE_FORMS)):
            if value not in choices:
                raise FovealError(f"{option} must be one of {', '.join(choices)}, got {value!r}")
        self.attention, self.readout, self.gate_form = attention, readout, gate_form
        self.gate = nn.Linear(attention.dim, attention.dim) if gate else None
        if self.gate is not None and gate_form == "linear":
            nn.init.ones_(self.gate.bias)  # g = 1 + W_g v_Q: the plain sum v_filt + v_Q, give or take

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        glimpses, maps = self.attention.trace(V, v_Q, keys=inputs.keys)
        glimpse = glimpses[-1] if self.readout == "last" else sum(glimpses)
        if self.gate is not None:
            gate = self.gate(v_Q)
            glimpse = (gate if self.gate_form == "linear" else 2 * torch.sigmoid(gate)) * glimpse
        return HeadOutput(glimpse + v_Q, torch.stack(maps, dim=-2))


@register_head("none", NoOptions)
def _none_head(sizes: HeadSizes, options: NoOptions) -> VQAHead:
    return PoolHead()


@register_head("spatial", NoOptions)
def _spatial_head(sizes: HeadSizes, options: NoOptions) -> VQAHead:
    return SingleHopHead(SpatialAttention(sizes.dim, sizes.dim, sizes.k_dim, score="additive"))


@register_head("dot", NoOptions)
def _dot_head(sizes: HeadSizes, options: NoOptions) -> VQAHead:
    return SingleHopHead(SpatialAttention(sizes.dim, sizes.dim, sizes.k_dim, score="dot"))


@register_head("cosine", NoOptions)
def _cosine_head(sizes: HeadSizes, options: NoOptions) -> VQAHead:
    return SingleHopHead(SpatialAttention(sizes.dim, sizes.dim, sizes.k_dim, score="cosine"))


def _stacked(sizes: HeadSizes, options: StackedOptions, score: str) -> VQAHead:
    attention = StackedAttention(
        sizes.dim,
        k_dim=sizes.k_dim,
        hops=options.hops,
        score=score,
        normalize=options.normalize,
        relate=options.relate,
        temperature=options.temperature,
        prior=options.prior,
    )
    return StackedHead(attention, options.readout, options.gate, options.gate_form)


@register_head("stacked", StackedOptions)
def _stacked_head(sizes: HeadSizes, options: StackedOptions) -> VQAHead:
    return _stacked(sizes, options, "additive")


@register_head("stacked-dot", StackedOptions)
def _stacked_dot_head(sizes: HeadSizes, options: StackedOptions) -> VQAHead:
    # Seed 002's parameter-free score in every hop. The additive (tanh) score is nearly linear at
    # initialisation, so the question barely changes which region wins and the hops learn to look
    # for a named colour very slowly; the product v_i * v_Q compares them from the first step.
    return _stacked(sizes, options, "dot")
