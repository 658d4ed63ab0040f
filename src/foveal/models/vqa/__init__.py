"""Visual question answering with a CNN grid, an LSTM question and a choice of attention head (seeds 000, 002).

The image goes through a small CNN trained from scratch; its last feature map ``(B, C, h, w)`` is
unfolded into ``N = h w`` region vectors and projected to ``d`` (seed 002's ``v_I``, stored as rows
``(B, N, d)``). The question goes through an embedding and a BiLSTM whose final forward and
backward states are concatenated (seed 002's ``v_Q``), or a one-way LSTM's final state (seed 000's
``h_Q``). A head combines them into ``phi`` and an MLP maps ``phi`` to answer logits:

- ``none``: the vanilla baseline, ``phi = mean_i v_i + v_Q`` (global average pooling);
- ``spatial``: one additive hop (seed 000), ``phi = v_filt + v_Q``;
- ``dot`` / ``cosine``: one parameter-free hop (seed 002), ``phi = v_filt + v_Q``;
- ``stacked``: K hops (seed 002, stacked attention networks); each hop's ``phi`` is the next
  hop's query; ``stacked-dot``: the same with the parameter-free dot score in every hop;
- the seed 002 family: ``channel``, ``cross-layer``, ``coattention-*``, ``context-*``, ``transformer``.

Modules: :mod:`~foveal.models.vqa.encoders` (:class:`GridEncoder`, :class:`QuestionEncoder`),
:mod:`~foveal.models.vqa.heads` (every head, one calling convention ``head(V, v_Q, inputs)``, each
head's options, e.g. :class:`StackedOptions`, and the registry :data:`VQA_HEADS`),
:mod:`~foveal.models.vqa.model` (:class:`VQA` and its options, :class:`VQASpec`, whose ``head_options``
hold the head's). New heads are added with :func:`register_head` (see ``docs/vqa.md``).
"""

from foveal.models.vqa.answer import Answer
from foveal.models.vqa.encoders import GridEncoder, QuestionEncoder, QuestionStates
from foveal.models.vqa.heads import (
    VQA_HEADS,
    AlternatingHead,
    BiLSTMContextHead,
    ChannelHead,
    ContextStackedHead,
    CrossLayerHead,
    HeadFactory,
    HeadInputs,
    HeadOutput,
    HeadSizes,
    HopCoAttentionHead,
    HopsOptions,
    IndependentCoAttentionHead,
    JointCoAttentionHead,
    NoOptions,
    OneStepCoAttentionHead,
    ParallelLearnedHead,
    ParallelMaxHead,
    PoolHead,
    SelfContextHead,
    SingleHopHead,
    StackedHead,
    StackedOptions,
    TransformerHead,
    TransformerOptions,
    VQAHead,
    head_options,
    register_head,
)
from foveal.models.vqa.model import VQA, VQAOutput, VQASpec

__all__ = [
    "VQA",
    "VQA_HEADS",
    "AlternatingHead",
    "Answer",
    "BiLSTMContextHead",
    "ChannelHead",
    "ContextStackedHead",
    "CrossLayerHead",
    "GridEncoder",
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
    "QuestionEncoder",
    "QuestionStates",
    "SelfContextHead",
    "SingleHopHead",
    "StackedHead",
    "StackedOptions",
    "TransformerHead",
    "TransformerOptions",
    "VQAHead",
    "VQAOutput",
    "VQASpec",
    "head_options",
    "register_head",
]
