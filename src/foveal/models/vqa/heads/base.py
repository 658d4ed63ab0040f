"""What every VQA head shares: its calling convention, its registry and the options of the simple ones."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, TypeVar

from torch import Tensor, nn

from foveal._torch_private import exportable_output
from foveal.registry import Registry
from foveal.specs import resolve_options


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


@exportable_output
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


class HeadSizes(NamedTuple):
    """The model's sizes every head may build on (the model's own options, not the head's)."""

    dim: int  # d, the size of the region vectors, of v_Q and of phi
    k_dim: int  # joint-embedding size of the attention scores
    layer_dims: tuple[int, ...]  # output channels of each CNN block (the cross-layer head's layers)


OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True)
class HeadFactory:
    """A registered head: the dataclass of its options and ``build(sizes, options) -> VQAHead``."""

    options: type
    build: Callable[[HeadSizes, Any], VQAHead]


VQA_HEADS: Registry[HeadFactory] = Registry("VQA attention head")
"""Head name -> :class:`HeadFactory`; :class:`foveal.models.vqa.VQA` builds its head by name from here."""


def register_head(
    name: str, options: type[OptionsT]
) -> Callable[[Callable[[HeadSizes, OptionsT], VQAHead]], Callable[[HeadSizes, OptionsT], VQAHead]]:
    """Register ``build(sizes, options) -> VQAHead`` in :data:`VQA_HEADS` as head ``name``, with its options' spec."""

    def add(build: Callable[[HeadSizes, OptionsT], VQAHead]) -> Callable[[HeadSizes, OptionsT], VQAHead]:
        VQA_HEADS.register(name)(HeadFactory(options, build))
        return build

    return add


def head_options(head: str, options: Mapping[str, Any]) -> Any:
    """The options of head ``head``: its spec (:attr:`HeadFactory.options`) with ``options`` replacing defaults.

    Raises ``FovealError`` naming the head and its options for an option it does not have.
    """
    return resolve_options("head", head, VQA_HEADS.get(head).options, options)


def head_options_type(head: str) -> type:
    """The dataclass of head ``head``'s options."""
    return VQA_HEADS.get(head).options


@dataclass
class NoOptions:
    """The options of a head that has none (its sizes are the model's ``dim`` and ``k_dim``)."""


@dataclass
class HopsOptions:
    """The options of a head whose only choice is how many hops it runs."""

    hops: int = 2  # attention hops, one map each
