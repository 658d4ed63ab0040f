"""The VQA model (seeds 000 and 002): CNN grid + LSTM question + a head from :data:`VQA_HEADS` + answer MLP."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import torch
from torch import Tensor, nn

from foveal._checks import check_floating, check_index, check_ints, check_shape
from foveal._torch_private import eager_when_compiled, exportable_output
from foveal.attention import Additive, box_weights
from foveal.attention.coords import add_coords
from foveal.attention.grid import flatten_grid
from foveal.errors import FovealError
from foveal.models.vqa.answer import Answer, answer
from foveal.models.vqa.encoders import GridEncoder, QuestionEncoder
from foveal.models.vqa.heads import (
    VQA_HEADS,
    HeadInputs,
    HeadOutput,
    HeadSizes,
    VQAHead,
    head_options,
    head_options_type,
)
from foveal.registry import MODELS
from foveal.specs import options_of, resolve_spec


@dataclass
class VQASpec:
    """The options of :class:`VQA`, each with its default."""

    # a name in VQA_HEADS: none, spatial, dot, cosine, stacked, stacked-dot, channel, cross-layer, context-bilstm,
    # context-self, transformer, coattention-independent, -joint, -parallel, -parallel-learned, -alternating
    head: str = "stacked"
    # the head's own options by name (hops, readout, gate...: its spec, e.g. StackedOptions; `foveal config` lists
    # them); one it does not have is an error; unset ones keep the head's defaults
    head_options: dict[str, Any] = field(default_factory=dict, metadata=options_of("head", head_options_type))
    dim: int = 64  # d, the size of the region vectors, of v_Q and of phi
    k_dim: int = 64  # joint-embedding size of the attention scores
    channels: tuple[int, ...] = (16, 32, 32, 32)  # output channels of each CNN block (see GridEncoder)
    grid: int = 16  # the CNN's output map is grid x grid regions
    coords: bool = True  # append each pixel's (x, y) to the CNN's input (CoordConv)
    grid_coords: bool = False  # append each cell's (x, y) to its region vector: relations need positions
    stem_stride: int = 1  # stride of the CNN's first convolution
    # the CNN's first layers: "conv" (3x3 blocks and pooling) or "patch" (a cell x cell patch embedding,
    # then 1x1 blocks: each region sees only its own cell) or "pixels" (1x1 blocks, then each cell's mean)
    stem: Literal["conv", "patch", "pixels"] = "conv"
    # what the scores read for each region: "values" (the region vectors themselves), "patch" (a separate
    # per-cell encoder: what is in the cell, not what is near it) or "pixels" (each pixel encoded alone, then the
    # cell's mean: what the cell holds, not where in it); the heads that read keys (spatial, dot, cosine, stacked(-dot))
    keys: Literal["values", "patch", "pixels"] = "values"
    key_channels: tuple[int, ...] = (32, 32)  # block widths of the keys="patch" or "pixels" encoder
    embed_dim: int = 32  # word-embedding size
    bidirectional: bool = True  # BiLSTM question encoder (seed 002) or one-way LSTM (seed 000)
    mlp_hidden: int = 64  # hidden width of the answer MLP
    image_size: int = 64  # input height and width, in pixels (fixed by the data)
    pointing: bool = False  # add the candidate-box scorer (pointing questions pass boxes to forward)
    # add to each candidate box's score the log of the last map's mean weight inside the box: the pointing
    # answer is where the model looked, so the pointing loss trains the attention directly
    point_by_attention: bool = False


@exportable_output
class VQAOutput(NamedTuple):
    """The answer logits and every map the head computed.

    Shape:
        - logits: ``(B, num_answers)``
        - attention: ``(B, hops, N)`` (one map per hop over the ``N = h w`` grid cells, row-major),
          or None for the ``none`` head
        - word_weights: ``(B, S, T)``, weights over the question's words per step, or None
        - channel_weights: ``(B, dim)`` for the ``channel`` head, else None
        - layer_weights: ``(B, L)`` for the ``cross-layer`` head, else None
        - candidate_logits: ``(B, K)``, a score per candidate box when ``boxes`` were given, else None
    """

    logits: Tensor
    attention: Tensor | None
    word_weights: Tensor | None = None
    channel_weights: Tensor | None = None
    layer_weights: Tensor | None = None
    candidate_logits: Tensor | None = None


def _slot_in_picture(image_index: Tensor, pictures: int) -> Tensor:
    """Each question's position among its picture's questions: ``[0, 0, 1, 1, 0] -> [0, 1, 0, 1, 2]``."""
    order = torch.argsort(image_index, stable=True)
    # scatter_add rather than bincount: its size is known before the values are (a compiled graph needs that)
    counts = image_index.new_zeros(pictures).scatter_add_(0, image_index, torch.ones_like(image_index))
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.empty_like(image_index)
    slot[order] = torch.arange(len(image_index), device=image_index.device) - starts[image_index[order]]
    return slot


@eager_when_compiled
def _slots_in_pictures(image_index: Tensor, pictures: int) -> tuple[Tensor, int]:
    """:func:`_slot_in_picture` and the most questions a picture has. Run eagerly under ``torch.compile``: the
    count sizes a tensor, so the graph takes it as a number rather than reading it from a tensor inside."""
    slot = _slot_in_picture(image_index, pictures)
    return slot, int(slot.max()) + 1 if len(slot) else 0


@MODELS.register("vqa")
class VQA(nn.Module):
    """CNN grid + LSTM question + attention head + answer MLP (seeds 000 and 002).

    The image goes through :class:`GridEncoder`; its ``grid x grid`` map is unfolded into ``N`` region
    vectors and projected to ``d`` (``V``). The question goes through :class:`QuestionEncoder` (``v_Q``).
    The head (:data:`VQA_HEADS`, called as ``head(V, v_Q, inputs)``) gives ``phi``; an MLP maps ``phi``
    to the answer logits.

    Args:
        vocab_size: question vocabulary size (token 0 is padding).
        num_answers: number of answer classes.
        spec: the options (:class:`VQASpec`); single options may also be given by name. The head's own
            options go in ``head_options`` (``{"hops": 3}``), checked against the head's spec
            (:func:`foveal.models.vqa.heads.head_options`); the model keeps them resolved as ``head_options``.

    Pointing (Visual7W "which" answers): each candidate box pools the regions the head saw with
    :func:`foveal.attention.box_weights`, and an additive score compares it with ``phi``:
    ``s_k = w^T tanh(W_c c_k + W_p phi + b)``; the loss is a cross-entropy over the ``K`` candidates.
    With ``point_by_attention``, ``s_k + log(sum_i B_ki alpha_i)`` where ``B_k`` are the box's pooling
    weights and ``alpha`` the last map: without it the attention learns only through the answer, and
    from scratch it never found the named object on ``shapes`` (docs/studies/vqa-shapes-attention.md).

    Shape:
        - image: ``(B, 3, image_size, image_size)``
        - question: int64 ``(B, L)`` padded with 0; length: int64 ``(B,)``
        - image_index: optional int64 ``(B,)``; then ``image`` is ``(I, 3, size, size)`` and question
          ``b`` is about ``image[image_index[b]]``
        - boxes: optional float ``(B, K, 4)``, candidate boxes ``(x0, y0, x1, y1)`` in pixels
        - output: :class:`VQAOutput`, logits ``(B, num_answers)``, attention ``(B, hops, grid * grid)``

    Convention:
        Attention weights index the grid row-major (``i = row * grid + col``), row 0 at the top of
        the image, as :func:`foveal.attention.grid.flatten_grid` unfolds it. Boxes are pixels,
        half-open, ``x`` right and ``y`` down; the grid covers the top-left ``grid * cell_size``
        pixels of the image (max-pooling floors odd sizes), and boxes are pooled on that extent.

    Example:
        >>> model = VQA(20, 13, head="stacked", head_options={"hops": 2}, dim=16, k_dim=8, channels=(4, 4), grid=16)
        >>> out = model(torch.randn(2, 3, 64, 64), torch.tensor([[3, 4, 0], [5, 6, 7]]), torch.tensor([2, 3]))
        >>> out.logits.shape, out.attention.shape
        (torch.Size([2, 13]), torch.Size([2, 2, 256]))
        >>> spec = VQASpec(head="coattention-alternating", dim=16, k_dim=8, channels=(4, 4), pointing=True)
        >>> model = VQA(20, 12, spec)
        >>> out = model(torch.randn(2, 3, 64, 64), torch.tensor([[3, 4, 0], [5, 6, 7]]), torch.tensor([2, 3]),
        ...             boxes=torch.tensor([[[0.0, 0, 8, 8], [8, 8, 16, 16], [0, 8, 8, 16], [40, 40, 50, 50]]] * 2))
        >>> out.candidate_logits.shape, out.word_weights.shape
        (torch.Size([2, 4]), torch.Size([2, 2, 3]))
    """

    def __init__(self, vocab_size: int, num_answers: int, spec: VQASpec | None = None, **options: Any) -> None:
        super().__init__()
        head = options.get("head", VQASpec.head if spec is None else spec.head)
        misplaced = sorted(options.keys() & {f.name for f in dataclasses.fields(head_options_type(head))})
        if misplaced:  # the head's own option given as the model's: say where it goes
            raise FovealError(f"{misplaced[0]!r} is an option of the {head!r} head: pass head_options={{...}}")
        spec = resolve_spec(VQASpec, spec, options)
        check_ints(vocab_size=vocab_size, num_answers=num_answers, dim=spec.dim, k_dim=spec.k_dim)
        check_ints(embed_dim=spec.embed_dim, mlp_hidden=spec.mlp_hidden)
        self.vocab_size, self.num_answers = vocab_size, num_answers
        channels, dim, grid = tuple(spec.channels), spec.dim, spec.grid
        self.grid, self.grid_coords = grid, spec.grid_coords
        self.image_encoder = GridEncoder(
            channels,
            image_size=spec.image_size,
            grid=grid,
            coords=spec.coords,
            stem_stride=spec.stem_stride,
            stem=spec.stem,
        )
        self.project = nn.Linear(channels[-1] + 2 * spec.grid_coords, dim)
        self.question_encoder = QuestionEncoder(
            vocab_size, dim, embed_dim=spec.embed_dim, bidirectional=spec.bidirectional
        )
        self.head_options = head_options(spec.head, spec.head_options)
        # the spec records every option of the head, so a saved model rebuilds as it was whatever defaults become
        self.spec = dataclasses.replace(spec, head_options=dataclasses.asdict(self.head_options))
        sizes = HeadSizes(dim, spec.k_dim, channels)
        self.head = VQA_HEADS.get(spec.head).build(sizes, self.head_options)
        if not isinstance(self.head, VQAHead):
            raise FovealError(f"the {spec.head!r} head must be a VQAHead, got {type(self.head).__name__}")
        if spec.keys != "values" and "keys" not in self.head.reads:
            raise FovealError(
                f"keys={spec.keys!r} needs a head whose scores read keys; the {spec.head!r} head's do not"
            )
        if self.head.grouped and self.head.reads & {"words", "layers"}:
            raise FovealError(
                f"the {spec.head!r} head is grouped, so it may read only keys, not {sorted(self.head.reads)}"
            )
        if spec.keys not in ("values", "patch", "pixels"):
            raise FovealError(f"keys must be 'values', 'patch' or 'pixels', got {spec.keys!r}")
        self.key_encoder: GridEncoder | None = None
        if spec.keys != "values":
            key_channels = tuple(spec.key_channels)
            # no pixel coordinates for "pixels": they would tell its blocks where in the cell a colour lies
            coords = spec.coords and spec.keys == "patch"
            self.key_encoder = GridEncoder(
                key_channels, image_size=spec.image_size, grid=grid, coords=coords, stem=spec.keys
            )
            self.key_project = nn.Linear(key_channels[-1], dim)
        self.classifier = nn.Sequential(
            nn.Linear(dim, spec.mlp_hidden), nn.ReLU(), nn.Linear(spec.mlp_hidden, num_answers)
        )
        self.pointer = Additive(dim, dim, spec.k_dim) if spec.pointing else None
        self.point_by_attention = spec.point_by_attention
        self.covered = grid * self.image_encoder.cell_size  # pixels the grid covers, per side

    def answer(self, image: Any, question: str, boxes: Tensor | None = None) -> Answer:
        """The answer to ``question`` (words) about ``image``, and where each hop looked.

        ``image`` is one picture as :func:`foveal.transform_for` takes it: a PIL image, a uint8 tensor in
        0-255 or a float one in [0, 1], ``(3, H, W)`` or channels last, resized to the model's size. The
        question is split into words and looked up in the model's vocabulary (``labels["vocab"]``, which
        :func:`foveal.pretrained` loads with the model). With
        ``boxes`` (``(K, 4)`` candidate boxes in pixels, a pointing model), the answer is the box chosen.

        Returns:
            :class:`~foveal.models.vqa.answer.Answer`: ``text``, the answer's name, and ``maps``,
            ``(hops, grid, grid)``.
        """
        return answer(self, image, question, boxes)

    def example_inputs(self, batch: int, generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
        """Random pictures and questions of one to five words (zero-padded), for tests and examples."""
        words, size = 5, self.spec.image_size
        length = torch.randint(1, words + 1, (batch,), generator=generator)
        tokens = torch.randint(
            1, max(2, self.question_encoder.embed.num_embeddings), (batch, words), generator=generator
        )
        question = torch.where(torch.arange(words) < length[:, None], tokens, 0)
        return torch.rand(batch, 3, size, size, generator=generator), question, length

    def forward(
        self,
        image: Tensor,
        question: Tensor,
        length: Tensor,
        image_index: Tensor | None = None,
        boxes: Tensor | None = None,
    ) -> VQAOutput:
        check_floating(image=image)
        if image_index is not None:
            check_shape("image_index", image_index, (question.shape[0],))
            check_index("image_index", image_index, 0, image.shape[0] - 1)
        elif image.shape[0] != question.shape[0]:
            raise FovealError(
                f"image: expected one picture per question ({question.shape[0]}), got {image.shape[0]}; "
                "pass image_index to share pictures"
            )
        reads = self.head.reads
        layers = self.image_encoder.block_outputs(image) if "layers" in reads else [self.image_encoder(image)]
        grid_map = add_coords(layers[-1]) if self.grid_coords else layers[-1]
        V = self.project(flatten_grid(grid_map))  # (I, N, d)
        keys = None if self.key_encoder is None else self.key_project(flatten_grid(self.key_encoder(image)))
        # which picture, and which of its questions, each row is (grouped answering), for pooling boxes per picture
        grouping: tuple[Tensor, Tensor, int] | None = None
        if image_index is not None and self.head.grouped:
            slot, slots = _slots_in_pictures(image_index, V.shape[0])
            out = self._answer_grouped(V, keys, question, length, image_index, slot, slots)
            grouping = (image_index, slot, slots)
        else:
            if image_index is not None:  # one question per row: copy each question's picture
                V = V[image_index]  # (B, N, d)
                keys = None if keys is None else keys[image_index]
                layers = [layer[image_index] for layer in layers] if "layers" in reads else layers
            if "words" in reads:
                v_Q, words, word_mask = self.question_encoder.states(question, length)
            else:
                v_Q, words, word_mask = self.question_encoder(question, length), None, None
            inputs = HeadInputs(keys, words, word_mask, tuple(layers) if "layers" in reads else ())
            out = self.head(V, v_Q, inputs)
        candidate_logits = None
        if boxes is not None:
            if self.pointer is None:
                raise FovealError("boxes given to a VQA model built without pointing=True")
            check_shape("boxes", boxes, (question.shape[0], None, 4))
            regions = V if out.regions is None else out.regions
            pool = box_weights(boxes, (self.covered, self.covered), (self.grid, self.grid))  # (B, K, N)
            candidate_logits = self.pointer(out.phi.unsqueeze(1), _pool_regions(pool, regions, grouping)).squeeze(1)
            if self.point_by_attention and out.weights is not None:
                mass = (pool * out.weights[:, -1:]).sum(-1)  # (B, K): the last map's mean weight in each box
                candidate_logits = candidate_logits + mass.clamp_min(torch.finfo(mass.dtype).tiny).log()
        return VQAOutput(
            self.classifier(out.phi),
            out.weights,
            out.word_weights,
            out.channel_weights,
            out.layer_weights,
            candidate_logits,
        )

    def _answer_grouped(
        self,
        V: Tensor,
        keys: Tensor | None,
        question: Tensor,
        length: Tensor,
        image_index: Tensor,
        slot: Tensor,
        slots: int,
    ) -> HeadOutput:
        """Answer every question against its picture's regions in one pass, on a (pictures, questions
        per picture) layout, instead of copying the regions once per question.

        Shape:
            - V: ``(I, N, d)``; keys: ``(I, N, d)`` or None; question: ``(B, L)``; length, image_index, slot: ``(B,)``
            - output: :class:`HeadOutput` per question, ``phi`` ``(B, d)``, ``weights`` ``(B, hops, N)``,
              ``regions`` per picture ``(I, N, d)`` (or None)
        """
        questions = self.question_encoder(question, length)
        v_Q = questions.new_zeros(V.shape[0], slots, questions.shape[-1])
        v_Q[image_index, slot] = questions
        out = self.head(V, v_Q, HeadInputs(keys=keys))
        weights = None if out.weights is None else out.weights[image_index, slot]
        return HeadOutput(out.phi[image_index, slot], weights, regions=out.regions)


def _pool_regions(pool: Tensor, regions: Tensor, grouping: tuple[Tensor, Tensor, int] | None) -> Tensor:
    """Each question's box-pooled regions, ``pool_b @ regions``, with the regions of its picture when grouped.

    Grouped, the pooling weights go on the (pictures, questions per picture) layout and each picture's
    questions share one product with its regions: copying the regions once per question would cost a
    ``(B, N, d)`` copy, and its gradient an outer product over the ``K`` boxes per question.

    Shape:
        - pool: ``(B, K, N)``; regions: ``(B, N, d)``, or ``(I, N, d)`` with ``grouping`` (image_index,
          slot, slots)
        - output: ``(B, K, d)``
    """
    if grouping is None:
        return pool @ regions
    image_index, slot, slots = grouping
    _, K, N = pool.shape
    pictures = regions.shape[0]
    by_picture = pool.new_zeros(pictures, slots, K, N)
    by_picture[image_index, slot] = pool
    pooled = (by_picture.view(pictures, slots * K, N) @ regions).view(pictures, slots, K, regions.shape[-1])
    return pooled[image_index, slot]
