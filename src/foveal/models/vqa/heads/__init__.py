"""The heads of :class:`foveal.models.vqa.VQA`: what combines the regions and the question into ``phi``.

Every head is called as ``head(V, v_Q, inputs) -> HeadOutput`` (``inputs``: :class:`HeadInputs`, the score's
keys, the words, the CNN's layers), names what it reads in :attr:`VQAHead.reads` and says in
:attr:`VQAHead.grouped` whether it answers several questions about one picture in one pass. The attention
modules come from :mod:`foveal.attention`; a head here only adapts their outputs.

Each head has its own options, a small dataclass (:class:`StackedOptions`, :class:`HopsOptions`,
:class:`TransformerOptions`, :class:`NoOptions`) that its :data:`VQA_HEADS` entry names; the model's spec
holds them as ``head_options`` and :func:`head_options` resolves them, refusing an option the head lacks.
Modules: :mod:`~foveal.models.vqa.heads.base` (the convention and the registry),
:mod:`~foveal.models.vqa.heads.hops` (none, one hop, stacked hops), :mod:`~foveal.models.vqa.heads.family`
(the seed 002 family).
"""

from foveal.models.vqa.heads.base import (
    NO_INPUTS,
    VQA_HEADS,
    HeadFactory,
    HeadInputs,
    HeadOutput,
    HeadSizes,
    HopsOptions,
    NoOptions,
    VQAHead,
    head_options,
    head_options_type,
    register_head,
)
from foveal.models.vqa.heads.family import (
    AlternatingHead,
    BiLSTMContextHead,
    ChannelHead,
    ContextStackedHead,
    CrossLayerHead,
    HopCoAttentionHead,
    IndependentCoAttentionHead,
    JointCoAttentionHead,
    OneStepCoAttentionHead,
    ParallelLearnedHead,
    ParallelMaxHead,
    SelfContextHead,
    TransformerHead,
    TransformerOptions,
)
from foveal.models.vqa.heads.hops import PoolHead, SingleHopHead, StackedHead, StackedOptions

__all__ = [
    "NO_INPUTS",
    "VQA_HEADS",
    "AlternatingHead",
    "BiLSTMContextHead",
    "ChannelHead",
    "ContextStackedHead",
    "CrossLayerHead",
    "HeadFactory",
    "HeadInputs",
    "HeadOutput",
    "HeadSizes",
    "HopCoAttentionHead",
    "HopsOptions",
    "IndependentCoAttentionHead",
    "JointCoAttentionHead",
    "NoOptions",
    "OneStepCoAttentionHead",
    "ParallelLearnedHead",
    "ParallelMaxHead",
    "PoolHead",
    "SelfContextHead",
    "SingleHopHead",
    "StackedHead",
    "StackedOptions",
    "TransformerHead",
    "TransformerOptions",
    "VQAHead",
    "head_options",
    "head_options_type",
    "register_head",
]
