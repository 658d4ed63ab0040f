"""The heads of :class:`foveal.models.vqa.VQA`: what combines the regions and the question into ``phi``.

Every head is called as ``head(V, v_Q, inputs) -> HeadOutput`` (``inputs``: :class:`HeadInputs`, the score's
keys, the words, the CNN's layers), names what it reads in :attr:`VQAHead.reads` and says in
:attr:`VQAHead.grouped` whether it answers several questions about one picture in one pass. The attention
modules come from :mod:`foveal.attention`; a head here only adapts their outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, NamedTuple, Protocol, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from foveal.attention import (
    AlternatingCoAttention,
    ChannelAttention,
    CrossLayerAttention,
    GridBiLSTM,
    HopCoAttention,
    ParallelCoAttention,
    ResidualSelfAttention,
    SpatialAttention,
    StackedAttention,
    TransformerFusion,
)
from foveal.attention.coattention import masked_mean
from foveal.attention.grid import flatten_grid
from foveal.errors import FovealError
from foveal.registry import Registry


class HeadInputs(NamedTuple):
    """What a head may read besides the regions ``V`` and the question vector ``v_Q``.

    :class:`foveal.models.vqa.VQA` fills only the fields the head names in :attr:`VQAHead.reads`
    (``"keys"``, ``"words"`` for words and word_mask, ``"layers"``); the others stay empty. Shape:
        - keys: ``(B, N, d)``, what the score reads for each region (None: the regions themselves)
        - words: ``(B, T, d)``, the encoder's state at every word; word_mask: bool ``(B, T)``, True = a word
        - layers: each CNN block's output map ``(B, C_l, h_l, w_l)``, the last one the grid of ``V``
    """

    keys: Tensor | None = None
    words: Tensor | None = None
    word_mask: Tensor | None = None
    layers: tuple[Tensor, ...] = ()


NO_INPUTS = HeadInputs()


class HeadOutput(NamedTuple):
    """What a VQA head returns: the fused vector and one attention map per hop (None: no attention).

    Shape:
        - phi: ``(B, d)``
        - weights: ``(B, hops, N)`` or None
        - word_weights: ``(B, S, T)``, the question-word weights of each step, or None
        - channel_weights: ``(B, d)``, channel attention's weights, or None
        - layer_weights: ``(B, L)``, cross-layer attention's weight of each CNN layer, or None
        - regions: ``(B, N, d)``, the region vectors as the head saw them (contextualised,
          channel-scaled...), pooled inside the candidate boxes of pointing questions; None = ``V``
    """

    phi: Tensor
    weights: Tensor | None
    word_weights: Tensor | None = None
    channel_weights: Tensor | None = None
    layer_weights: Tensor | None = None
    regions: Tensor | None = None


class VQAHead(nn.Module):
    """Base of every VQA head: ``head(V, v_Q, inputs) -> HeadOutput``.

    A subclass sets two class attributes:

    - ``reads``: the :class:`HeadInputs` it uses, among ``"keys"``, ``"words"`` and ``"layers"``.
      The model runs :meth:`QuestionEncoder.states` only for heads that read the words and keeps
      every CNN block's map only for heads that read the layers; ``keys="patch"`` needs ``"keys"``.
    - ``grouped``: the head also takes ``v_Q`` as ``(I, n, d)``, ``n`` questions about each of ``I``
      pictures (``V`` stays ``(I, N, d)``), and returns ``phi`` ``(I, n, d)``, ``weights``
      ``(I, n, hops, N)`` and ``regions`` ``(I, N, d)``: the picture's regions are then never
      copied once per question. A grouped head reads no words and no layers.

    Shape:
        - V: ``(B, N, d)``; v_Q: ``(B, d)``; inputs: :class:`HeadInputs`
        - output: :class:`HeadOutput`
    """

    reads: ClassVar[frozenset[str]] = frozenset()
    grouped: ClassVar[bool] = False

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        raise NotImplementedError


class HeadFactory(Protocol):
    """``factory(dim, *, k_dim, hops, heads, layer_dims, readout, gate, gate_form, temperature, normalize,
    relate) -> VQAHead``; a factory takes what it needs and ignores the rest (``**_``)."""

    def __call__(
        self,
        dim: int,
        *,
        k_dim: int,
        hops: int,
        heads: int,
        layer_dims: tuple[int, ...],
        readout: str,
        gate: bool,
        gate_form: str,
        temperature: float,
        normalize: str,
        relate: bool,
    ) -> VQAHead: ...


VQA_HEADS: Registry[HeadFactory] = Registry("VQA attention head")
"""Head name -> :class:`HeadFactory`; :class:`foveal.models.vqa.VQA` builds its head by name from here."""


# --- Heads over (V, v_Q): one hop, K stacked hops, or none -------------------------------------


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


class _DividedLinear(nn.Linear):
    """``nn.Linear`` divided by a constant: the additive score's ``w_a`` under a temperature, with the
    same parameter names (``weight``, ``bias``), so checkpoints keep their keys."""

    divisor: Tensor

    def __init__(self, linear: nn.Linear, temperature: float) -> None:
        super().__init__(linear.in_features, linear.out_features, bias=linear.bias is not None)
        self.load_state_dict(linear.state_dict())
        # A buffer, not a float: a schedule changing it during training does not recompile a compiled model.
        self.register_buffer("divisor", torch.tensor(float(temperature)), persistent=False)

    @property
    def temperature(self) -> float:
        return float(self.divisor)

    @temperature.setter
    def temperature(self, value: float) -> None:
        self.divisor.fill_(value)

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x) / self.divisor


class StackedHead(VQAHead):
    """K hops of :class:`foveal.attention.StackedAttention`: ``u_0 = v_Q``, ``u_k = v_filt_k + u_{k-1}``.

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
        temperature: every hop's additive score is divided by it, ``e_i = (w_a^T z_i + b_a) / T``:
            below 1 a hop's map is sharper for the same ``w_a``, and its logits move ``1 / T`` times
            faster under Adam, so a hop picks its cells instead of spreading over the background.
    """

    reads = frozenset({"keys"})
    grouped = True

    def __init__(
        self,
        attention: StackedAttention,
        readout: str = "sum",
        gate: bool = False,
        temperature: float = 1.0,
        gate_form: str = "sigmoid",
    ) -> None:
        super().__init__()
        for option, value, choices in (("readout", readout, READOUTS), ("gate_form", gate_form, GATE_FORMS)):
            if value not in choices:
                raise FovealError(f"{option} must be one of {', '.join(choices)}, got {value!r}")
        self.attention, self.readout, self.gate_form = attention, readout, gate_form
        self.normalize = attention.normalize
        self.gate = nn.Linear(attention.dim, attention.dim) if gate else None
        if self.gate is not None and gate_form == "linear":
            nn.init.ones_(self.gate.bias)  # g = 1 + W_g v_Q: the plain sum v_filt + v_Q, give or take
        for hop in attention.hops:
            if hop.score == "additive":  # wrapped at 1 too, so a schedule can change it during training
                hop.w_a = _DividedLinear(cast(nn.Linear, hop.w_a), 1.0)  # an additive hop's w_a is a Linear
        self.temperature = temperature

    @property
    def temperature(self) -> float:
        """What every hop's additive score is divided by; setting it (a schedule in training) changes every hop."""
        return self._temperature

    @temperature.setter
    def temperature(self, value: float) -> None:
        if not value > 0:
            raise FovealError(f"temperature must be > 0, got {value!r}")
        if value != 1.0:
            for hop in self.attention.hops:
                if hop.score != "additive":
                    raise FovealError(f"temperature applies to the additive score, not {hop.score!r}")
        for hop in self.attention.hops:
            w_a = getattr(hop, "w_a", None)
            if isinstance(w_a, _DividedLinear):
                w_a.temperature = value
        self._temperature = value

    @property
    def relate(self) -> bool:
        return self.attention.relate

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        glimpses, maps = self.attention.trace(V, v_Q, keys=inputs.keys)
        glimpse = glimpses[-1] if self.readout == "last" else sum(glimpses)
        if self.gate is not None:
            gate = self.gate(v_Q)
            glimpse = (gate if self.gate_form == "linear" else 2 * torch.sigmoid(gate)) * glimpse
        return HeadOutput(glimpse + v_Q, torch.stack(maps, dim=-2))


@VQA_HEADS.register("none")
def _none_head(dim: int, **_: object) -> VQAHead:
    return PoolHead()


@VQA_HEADS.register("spatial")
def _spatial_head(dim: int, *, k_dim: int, **_: object) -> VQAHead:
    return SingleHopHead(SpatialAttention(dim, dim, k_dim, score="additive"))


@VQA_HEADS.register("dot")
def _dot_head(dim: int, *, k_dim: int, **_: object) -> VQAHead:
    return SingleHopHead(SpatialAttention(dim, dim, k_dim, score="dot"))


@VQA_HEADS.register("cosine")
def _cosine_head(dim: int, *, k_dim: int, **_: object) -> VQAHead:
    return SingleHopHead(SpatialAttention(dim, dim, k_dim, score="cosine"))


@VQA_HEADS.register("stacked")
def _stacked_head(
    dim: int,
    *,
    k_dim: int,
    hops: int,
    readout: str = "sum",
    gate: bool = False,
    gate_form: str = "sigmoid",
    temperature: float = 1.0,
    normalize: str = "softmax",
    relate: bool = False,
    **_: object,
) -> VQAHead:
    attention = StackedAttention(dim, k_dim=k_dim, hops=hops, normalize=normalize, relate=relate)
    return StackedHead(attention, readout, gate, temperature, gate_form)


@VQA_HEADS.register("stacked-dot")
def _stacked_dot_head(
    dim: int,
    *,
    k_dim: int,
    hops: int,
    readout: str = "sum",
    gate: bool = False,
    gate_form: str = "sigmoid",
    normalize: str = "softmax",
    relate: bool = False,
    **_: object,
) -> VQAHead:
    # Seed 002's parameter-free score in every hop. The additive (tanh) score is nearly linear at
    # initialisation, so the question barely changes which region wins and the hops learn to look
    # for a named colour very slowly; the product v_i * v_Q compares them from the first step.
    attention = StackedAttention(dim, k_dim=k_dim, hops=hops, score="dot", normalize=normalize, relate=relate)
    return StackedHead(attention, readout, gate, gate_form=gate_form)


# --- The seed 002 family: channels, CNN layers, question words, context, fusion --------------------


@VQA_HEADS.register("channel")
class ChannelHead(VQAHead):
    """SCA-CNN's channel-then-spatial order: question-conditioned channel weights, then ``hops`` stacked
    hops with the dot score (see ``stacked-dot``)."""

    def __init__(self, dim: int, *, k_dim: int, hops: int, **_: object) -> None:
        super().__init__()
        self.channel = ChannelAttention(dim, k_dim=k_dim)
        self.spatial = StackedAttention(dim, k_dim=k_dim, hops=hops, score="dot")

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        V_c, beta = self.channel(V, v_Q)
        phi, weights = self.spatial(V_c, v_Q)
        return HeadOutput(phi, weights, channel_weights=beta, regions=V_c)


@VQA_HEADS.register("cross-layer")
class CrossLayerHead(VQAHead):
    """Attention across the CNN's layers, ``phi = output + v_Q``; one map per layer, resampled to the grid.

    Each layer's map ``alpha_l`` is area-resampled onto the last layer's grid and renormalised, so
    ``weights[:, l]`` is where layer ``l`` looked; ``layer_weights`` holds ``gamma_l``.
    """

    reads = frozenset({"layers"})

    def __init__(self, dim: int, *, k_dim: int, layer_dims: Sequence[int], **_: object) -> None:
        super().__init__()
        self.attention = CrossLayerAttention(dim, layer_dims=layer_dims, k_dim=k_dim)

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        layers = inputs.layers
        output, gamma, alphas = self.attention([flatten_grid(layer) for layer in layers], v_Q)
        grid = (int(layers[-1].shape[-2]), int(layers[-1].shape[-1]))
        maps = []
        for alpha, layer in zip(alphas, layers, strict=True):
            resampled = F.adaptive_avg_pool2d(alpha.view(-1, 1, *layer.shape[-2:]), grid).flatten(1)
            maps.append(resampled / resampled.sum(-1, keepdim=True).clamp_min(torch.finfo(alpha.dtype).tiny))
        return HeadOutput(output + v_Q, torch.stack(maps, 1), layer_weights=gamma)


class HopCoAttentionHead(VQAHead):
    """``hops`` hops of attention over regions and words (:class:`foveal.attention.HopCoAttention`)."""

    reads = frozenset({"words"})
    joint = False

    def __init__(self, dim: int, *, k_dim: int, hops: int, **_: object) -> None:
        super().__init__()
        self.attention = HopCoAttention(dim, hops=hops, k_dim=k_dim, joint=self.joint)

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        out = self.attention(V, inputs.words, inputs.word_mask, v_Q)
        return HeadOutput(out.output, out.weights, word_weights=out.word_weights)


@VQA_HEADS.register("coattention-independent")
class IndependentCoAttentionHead(HopCoAttentionHead):
    """Independent conditioning: per hop the question attends to the regions, the image to the words."""


@VQA_HEADS.register("coattention-joint")
class JointCoAttentionHead(HopCoAttentionHead):
    """Joint conditioning: both attentions of a hop are conditioned on the sum of the two states."""

    joint = True


class OneStepCoAttentionHead(VQAHead):
    """A one-step co-attention module, ``phi = image + question + v_Q`` (seed 002's ``+ v_Q`` residual)."""

    reads = frozenset({"words"})

    def __init__(self, attention: nn.Module) -> None:
        super().__init__()
        self.attention = attention

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        out = self.attention(V, inputs.words, inputs.word_mask)
        return HeadOutput(out.output + v_Q, out.weights, word_weights=out.word_weights)


@VQA_HEADS.register("coattention-parallel")
class ParallelMaxHead(OneStepCoAttentionHead):
    """Parallel co-attention, affinity pooled by a max (parameter-free)."""

    def __init__(self, dim: int, *, k_dim: int, **_: object) -> None:
        super().__init__(ParallelCoAttention(dim, pool="max", k_dim=k_dim))


@VQA_HEADS.register("coattention-parallel-learned")
class ParallelLearnedHead(OneStepCoAttentionHead):
    """Parallel co-attention, affinity pooled by Lu et al.'s small network."""

    def __init__(self, dim: int, *, k_dim: int, **_: object) -> None:
        super().__init__(ParallelCoAttention(dim, pool="learned", k_dim=k_dim))


@VQA_HEADS.register("coattention-alternating")
class AlternatingHead(OneStepCoAttentionHead):
    """Alternating co-attention: summarise the question, attend to the image, attend to the question."""

    def __init__(self, dim: int, *, k_dim: int, **_: object) -> None:
        super().__init__(AlternatingCoAttention(dim, k_dim=k_dim))


class ContextStackedHead(VQAHead):
    """Contextualise the regions (every region sees the rest of the image), then ``hops`` stacked hops.

    The context does not depend on the question, so it runs once per picture and the hops answer all
    of a picture's questions together (``grouped``). The hops use the dot score for the reason given
    at ``stacked-dot``; their scores read the contextualised regions, not separate keys.
    """

    grouped = True

    def __init__(self, context: nn.Module, dim: int, *, k_dim: int, hops: int) -> None:
        super().__init__()
        self.attention = StackedAttention(dim, k_dim=k_dim, hops=hops, score="dot")
        self.context = context

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        V_c = self.context(V).output
        phi, weights = self.attention(V_c, v_Q)
        return HeadOutput(phi, weights, regions=V_c)


@VQA_HEADS.register("context-bilstm")
class BiLSTMContextHead(ContextStackedHead):
    """A BiLSTM over the grid (row-major), then stacked attention."""

    def __init__(self, dim: int, *, k_dim: int, hops: int, **_: object) -> None:
        super().__init__(GridBiLSTM(dim), dim, k_dim=k_dim, hops=hops)


@VQA_HEADS.register("context-self")
class SelfContextHead(ContextStackedHead):
    """Residual self-attention over the regions, then stacked attention."""

    def __init__(self, dim: int, *, k_dim: int, hops: int, **_: object) -> None:
        super().__init__(ResidualSelfAttention(dim, k_dim=k_dim), dim, k_dim=k_dim, hops=hops)


@VQA_HEADS.register("transformer")
class TransformerHead(VQAHead):
    """``hops`` :class:`foveal.attention.TransformerFusion` blocks, then one additive read-out hop.

    The read-out query is the mean of the fused real words ``q``; ``phi = v_filt + q``. Maps: block
    ``k``'s words -> image weights averaged over heads and real words, then the read-out's map
    (``hops + 1`` maps); word weights: block ``k``'s image -> words weights averaged over heads
    and regions.
    """

    reads = frozenset({"words"})

    def __init__(self, dim: int, *, k_dim: int, hops: int, heads: int = 4, **_: object) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(TransformerFusion(dim, heads=heads) for _ in range(hops))
        self.readout = SpatialAttention(dim, dim, k_dim)

    def forward(self, V: Tensor, v_Q: Tensor, inputs: HeadInputs = NO_INPUTS) -> HeadOutput:
        word_mask, y = inputs.word_mask, inputs.words
        if y is None or word_mask is None:
            raise FovealError(f"{type(self).__name__}: expected inputs.words and inputs.word_mask, got None")
        x = V
        real = word_mask.to(V.dtype)
        image_maps, word_maps = [], []
        for block in self.blocks:
            out = block(x, y, word_mask)
            x, y = out.output, out.question
            per_word = out.weights.mean(1)  # (B, T, N)
            image_maps.append((real.unsqueeze(-1) * per_word).sum(1) / real.sum(1, keepdim=True).clamp_min(1.0))
            word_maps.append(out.image_to_words.mean((1, 2)))  # (B, T)
        q = masked_mean(y, word_mask)
        v_filt, alpha = self.readout(x, q)
        weights = torch.stack([*image_maps, alpha], 1)
        return HeadOutput(v_filt + q, weights, word_weights=torch.stack(word_maps, 1), regions=x)
