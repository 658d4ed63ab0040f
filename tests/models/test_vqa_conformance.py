"""Every registered VQA head (the seed 002 family included): shapes, no NaN, gradients, state_dict, pointing."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from _grads import assert_every_parameter_learns
from foveal.models.vqa import (
    VQA,
    VQA_HEADS,
    GridEncoder,
    HeadFactory,
    HeadInputs,
    HeadOutput,
    NoOptions,
    QuestionEncoder,
    VQAHead,
)

VOCAB, ANSWERS, SIZE, GRID = 20, 12, 32, 8
TINY = {"dim": 16, "k_dim": 8, "channels": (4, 6), "grid": GRID, "embed_dim": 8, "mlp_hidden": 16}
HEADS = VQA_HEADS.names()


def inputs(batch: int = 3, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    length = torch.tensor([5, 2, 7, 3, 6][:batch])
    question = torch.randint(1, VOCAB, (batch, 7), generator=g)
    question[torch.arange(7) >= length[:, None]] = 0
    corner = torch.randint(0, SIZE - 8, (batch, 4, 2), generator=g).float()
    boxes = torch.cat([corner, corner + 8], dim=-1)
    return {
        "image": torch.randn(2, 3, SIZE, SIZE, generator=g),
        "question": question,
        "length": length,
        "image_index": torch.tensor([0, 1, 0, 1, 1][:batch]),
        "boxes": boxes,
    }


def build(head: str, hops: int = 2, **options) -> VQA:
    """A tiny model with ``head``: ``hops`` hops (blocks) and 2 attention heads where the head has such options."""
    names = {f.name for f in dataclasses.fields(VQA_HEADS.get(head).options)}
    head_options = {key: value for key, value in {"hops": hops, "heads": 2}.items() if key in names}
    return VQA(
        VOCAB,
        ANSWERS,
        head=head,
        head_options=head_options,
        image_size=SIZE,
        pointing=True,
        grid_coords=True,
        **TINY,
        **options,
    )


def test_the_seed_002_family_is_registered() -> None:
    family = {
        "channel",
        "cross-layer",
        "coattention-independent",
        "coattention-joint",
        "coattention-parallel",
        "coattention-parallel-learned",
        "coattention-alternating",
        "context-bilstm",
        "context-self",
        "transformer",
    }
    assert family <= set(HEADS)
    # The context heads need only (V, v_Q): their context is per picture, so they take the grouped path.
    grouped = {name for name in HEADS if build(name).head.grouped}
    assert grouped == {"none", "spatial", "dot", "cosine", "stacked", "stacked-dot", "context-bilstm", "context-self"}


@pytest.mark.parametrize("head", HEADS)
def test_every_head_gets_what_it_reads_and_nothing_else(head: str) -> None:
    # One calling convention, head(V, v_Q, inputs): the model fills only the inputs the head names.
    model = build(head).eval()
    seen: list[HeadInputs] = []
    model.head.register_forward_pre_hook(lambda module, args: seen.append(args[2]))
    model(**inputs())
    (given,) = seen
    assert isinstance(model.head, VQAHead) and model.head.reads <= {"keys", "words", "layers"}
    assert (given.words is not None) == (given.word_mask is not None) == ("words" in model.head.reads)
    assert len(given.layers) == (len(TINY["channels"]) if "layers" in model.head.reads else 0)
    assert given.keys is None  # keys="values": the scores read the regions


def test_a_new_head_needs_only_the_one_signature(monkeypatch) -> None:
    # A head registered by name with the spec of its options is built from the model's sizes and its options.
    class Mean(VQAHead):
        grouped = True

        def forward(self, V, v_Q, inputs=None):
            return HeadOutput(V.mean(-2) + v_Q, None)

    monkeypatch.setitem(VQA_HEADS._entries, "test-mean", HeadFactory(NoOptions, lambda sizes, options: Mean()))
    x = inputs()
    out = build("test-mean")(**x)
    assert out.logits.shape == (3, ANSWERS) and out.attention is None
    with pytest.raises(ValueError, match="keys='patch' needs a head whose scores read keys; the 'test-mean' head's"):
        build("test-mean", keys="patch")


@pytest.mark.parametrize("head", HEADS)
def test_shapes_distributions_and_no_nan(head: str) -> None:
    torch.manual_seed(0)
    x = inputs()
    out = build(head)(**x)
    assert out.logits.shape == (3, ANSWERS) and out.candidate_logits.shape == (3, 4)
    for name, value in out._asdict().items():
        assert value is None or torch.isfinite(value).all(), name
    if head == "none":
        assert out.attention is None
    else:
        assert out.attention.shape[0] == 3 and out.attention.shape[-1] == GRID * GRID
        assert (out.attention >= 0).all()
        torch.testing.assert_close(out.attention.sum(-1), torch.ones(out.attention.shape[:2]))
    if out.word_weights is not None:
        padded = torch.arange(7) >= x["length"][:, None]
        assert out.word_weights.shape[::2] == (3, 7)
        assert (out.word_weights.transpose(0, 1)[:, padded] == 0).all()  # padding gets no weight
        torch.testing.assert_close(out.word_weights.sum(-1), torch.ones(out.word_weights.shape[:2]))
    if head == "channel":
        assert out.channel_weights.shape == (3, TINY["dim"])
    if head == "cross-layer":
        assert out.layer_weights.shape == (3, len(TINY["channels"]))


@pytest.mark.parametrize("head", HEADS)
def test_pointing_by_attention_trains_every_parameter(head: str) -> None:
    # The shapes-vqa default: a pointing answer also scores where the last map looked.
    torch.manual_seed(0)
    model = build(head, point_by_attention=True)
    out = model(**inputs())
    assert torch.isfinite(out.candidate_logits).all()
    loss = F.cross_entropy(out.logits, torch.tensor([0, 5, 11])) + F.cross_entropy(
        out.candidate_logits, torch.tensor([0, 3, 1])
    )
    loss.backward()
    assert_every_parameter_learns(model)


def test_maps_have_the_documented_steps() -> None:
    x = inputs()
    assert build("stacked", hops=3)(**x).attention.shape[1] == 3
    assert build("transformer", hops=2)(**x).attention.shape[1] == 3  # two blocks and the final hop
    assert build("coattention-alternating")(**x).word_weights.shape[1] == 2  # summary, then final
    assert build("cross-layer")(**x).attention.shape[1] == len(TINY["channels"])  # one map per layer


@pytest.mark.parametrize("head", HEADS)
def test_every_parameter_gets_a_gradient(head: str) -> None:
    torch.manual_seed(0)
    model = build(head)
    out = model(**inputs())
    loss = F.cross_entropy(out.logits, torch.tensor([0, 5, 11])) + F.cross_entropy(
        out.candidate_logits, torch.tensor([0, 3, 1])
    )
    loss.backward()
    assert_every_parameter_learns(model)


@pytest.mark.parametrize("head", HEADS)
def test_state_dict_round_trip(head: str) -> None:
    torch.manual_seed(0)
    model = build(head).eval()
    torch.manual_seed(1)
    clone = build(head).eval()
    clone.load_state_dict(model.state_dict())
    x = inputs()
    a, b = model(**x), clone(**x)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.candidate_logits, b.candidate_logits)


@pytest.mark.parametrize("head", ["stacked", "context-self", "context-bilstm", "coattention-parallel", "transformer"])
def test_image_index_equals_repeating_the_images(head: str) -> None:
    model = build(head).eval()
    x = inputs()
    repeated = dict(x, image=x["image"][x["image_index"]], image_index=None)
    torch.testing.assert_close(model(**x).candidate_logits, model(**repeated).candidate_logits)


def test_candidate_scores_read_the_regions_inside_each_box() -> None:
    model = build("stacked").eval()
    x = inputs()
    before = model(**x).candidate_logits
    moved = x["boxes"].clone()
    moved[:, 2] = torch.tensor([SIZE - 8.0, SIZE - 8.0, SIZE, SIZE])  # candidate 2 moves, the others stay
    after = model(**dict(x, boxes=moved)).candidate_logits
    torch.testing.assert_close(after[:, [0, 1, 3]], before[:, [0, 1, 3]])
    assert not torch.allclose(after[:, 2], before[:, 2])


@pytest.mark.parametrize("head", ["stacked", "stacked-dot", "transformer"])
def test_point_by_attention_adds_the_log_of_the_last_maps_mass_in_each_box(head: str) -> None:
    from foveal.attention import box_weights

    torch.manual_seed(0)
    plain = build(head).eval()
    model = build(head, point_by_attention=True).eval()
    model.load_state_dict(plain.state_dict())
    x = inputs()
    out = model(**x)
    mass = (box_weights(x["boxes"], (model.covered,) * 2, (GRID, GRID)) * out.attention[:, -1:]).sum(-1)
    torch.testing.assert_close(out.candidate_logits, plain(**x).candidate_logits + mass.log())
    # The pointing loss reaches the attention itself, not only through phi: with the pointer's
    # score zeroed the answer is the box where the last map put the most weight.
    with torch.no_grad():
        model.pointer.w_a.weight.zero_()
        model.pointer.w_a.bias.zero_()
    assert torch.equal(model(**x).candidate_logits.argmax(-1), mass.argmax(-1))


def test_boxes_need_the_pointer() -> None:
    model = VQA(VOCAB, ANSWERS, head="none", image_size=SIZE, **TINY)
    with pytest.raises(ValueError, match="pointing=True"):
        model(**inputs())


def test_question_states_match_the_vector_and_ignore_padding() -> None:
    encoder = QuestionEncoder(VOCAB, 16, embed_dim=8)
    x = inputs()
    states = encoder.states(x["question"], x["length"])
    torch.testing.assert_close(states.vector, encoder(x["question"], x["length"]))
    assert states.words.shape == (3, 7, 16) and torch.equal(states.mask, x["question"] > 0)
    assert (states.words[~states.mask] == 0).all()
    longer = torch.cat([x["question"], torch.zeros(3, 2, dtype=torch.long)], dim=1)
    torch.testing.assert_close(encoder.states(longer, x["length"]).words[:, :7], states.words)


def test_block_outputs_end_with_the_grid_and_cell_size_counts_the_pools() -> None:
    encoder = GridEncoder((4, 6, 8), image_size=75, grid=9, stem_stride=2).eval()
    image = torch.randn(1, 3, 75, 75)
    maps = encoder.block_outputs(image)
    assert [m.shape[-1] for m in maps] == [19, 9, 9]  # a padded stride-2 conv rounds 75 / 2 up
    torch.testing.assert_close(maps[-1], encoder(image))
    assert encoder.cell_size == 8  # 2 (stride) * 2 * 2 (pools): the grid covers 72 of 75 pixels
