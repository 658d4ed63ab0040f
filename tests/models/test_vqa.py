"""The VQA model: every head's shapes, finiteness, gradients, state_dict; padding; a training smoke test."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _grads import assert_every_parameter_learns
from foveal.attention.grid import flatten_grid
from foveal.errors import FovealError
from foveal.models.vqa import (
    VQA,
    VQA_HEADS,
    GridEncoder,
    HeadInputs,
    QuestionEncoder,
    StackedOptions,
    TransformerHead,
    VQASpec,
)
from foveal.models.vqa.model import _slot_in_picture
from foveal.registry import MODELS

VOCAB, ANSWERS = 20, 13
SMALL = {"dim": 16, "k_dim": 8, "channels": (4, 8), "grid": 16, "embed_dim": 8, "mlp_hidden": 16}
HEADS = [("none", 1), ("spatial", 1), ("dot", 1), ("cosine", 1), ("stacked", 1), ("stacked", 2), ("stacked", 3)]
HEADS += [("stacked-dot", 2)]


def inputs(batch: int = 3, generator_seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(generator_seed)
    lengths = torch.tensor([5, 2, 7, 3, 6, 4, 1, 7][:batch])
    question = torch.randint(1, VOCAB, (batch, 7), generator=g)
    question[torch.arange(7) >= lengths[:, None]] = 0  # padding after each question's length
    return torch.randn(batch, 3, 64, 64, generator=g), question, lengths


def test_registered() -> None:
    assert MODELS.get("vqa") is VQA
    assert set(VQA_HEADS.names()) >= {"none", "spatial", "dot", "cosine", "stacked"}


def with_hops(head: str, hops: int) -> dict:
    """The head's options with its hop count (the one-hop heads have no such option)."""
    return {"head_options": {"hops": hops}} if head.startswith("stacked") else {}


@pytest.mark.parametrize(("head", "hops"), HEADS)
def test_forward_shapes_finite_and_weights_are_distributions(head: str, hops: int) -> None:
    model = VQA(VOCAB, ANSWERS, head=head, **with_hops(head, hops), **SMALL)
    logits, attention = model(*inputs())[:2]
    assert logits.shape == (3, ANSWERS) and torch.isfinite(logits).all()
    if head == "none":
        assert attention is None
    else:
        assert attention.shape == (3, hops, 16 * 16)
        assert (attention >= 0).all()
        torch.testing.assert_close(attention.sum(-1), torch.ones(3, hops))


@pytest.mark.parametrize(("head", "hops"), HEADS)
def test_every_parameter_gets_a_gradient(head: str, hops: int) -> None:
    model = VQA(VOCAB, ANSWERS, head=head, **with_hops(head, hops), **SMALL)
    image, question, length = inputs()
    F.cross_entropy(model(image, question, length).logits, torch.tensor([0, 4, 12])).backward()
    assert_every_parameter_learns(model)


@pytest.mark.parametrize("head", ["none", "spatial", "stacked"])
def test_state_dict_round_trip(head: str) -> None:
    model = VQA(VOCAB, ANSWERS, head=head, **SMALL).eval()
    clone = VQA(VOCAB, ANSWERS, head=head, **SMALL).eval()
    clone.load_state_dict(model.state_dict())
    x = inputs()
    assert torch.equal(model(*x).logits, clone(*x).logits)


def test_stacked_head_feeds_phi_to_the_next_hop() -> None:
    # With hops=2 the second map depends on the first hop: changing hop 1's score changes hop 2's map.
    model = VQA(VOCAB, ANSWERS, head="stacked", head_options={"hops": 2}, **SMALL).eval()
    x = inputs()
    before = model(*x).attention[:, 1]
    with torch.no_grad():
        model.head.attention.hops[0].w_a.weight.mul_(5.0)
    assert not torch.allclose(before, model(*x).attention[:, 1])


def dot_hops_reference(V: torch.Tensor, query: torch.Tensor, hops: int) -> tuple[torch.Tensor, torch.Tensor]:
    """phi_t = sum_i softmax_i(v_i . q_{t-1}) v_i + q_{t-1}, q_0 = v_Q; returns phi_hops and the maps (B, hops, N)."""
    maps = []
    for _ in range(hops):
        alpha = torch.softmax((V * query.unsqueeze(1)).sum(-1), dim=-1)
        query = (alpha.unsqueeze(-1) * V).sum(1) + query
        maps.append(alpha)
    return query, torch.stack(maps, 1)


def test_stacked_dot_hops_score_by_the_dot_product() -> None:
    # phi_t = sum_i softmax_i(v_i . q_{t-1}) v_i + q_{t-1}, q_0 = v_Q: seed 002's parameter-free score.
    model = VQA(VOCAB, ANSWERS, head="stacked-dot", head_options={"hops": 2}, **SMALL).eval()
    image, question, length = inputs()
    V = model.project(flatten_grid(model.image_encoder(image)))
    phi, maps = dot_hops_reference(V, model.question_encoder(question, length), hops=2)
    out = model(image, question, length)
    assert_close(out.attention, maps)
    assert_close(out.logits, model.classifier(phi))


def test_context_self_hops_over_the_contextualised_regions() -> None:
    # v_i' = v_i + sum_j softmax_j((W_q v_i) . (W_k v_j) / sqrt(k)) v_j (seed 002), then dot-score hops over v'.
    model = VQA(VOCAB, ANSWERS, head="context-self", head_options={"hops": 2}, **SMALL).eval()
    image, question, length = inputs()
    V = model.project(flatten_grid(model.image_encoder(image)))
    context = model.head.context
    logits = context.W_q(V) @ context.W_k(V).transpose(1, 2) / context.W_q.out_features**0.5
    V_c = V + torch.softmax(logits, dim=-1) @ V
    phi, maps = dot_hops_reference(V_c, model.question_encoder(question, length), hops=2)
    out = model(image, question, length)
    assert_close(out.attention, maps)
    assert_close(out.logits, model.classifier(phi))


@pytest.mark.parametrize("bidirectional", [True, False])
def test_question_encoder_ignores_padding(bidirectional: bool) -> None:
    encoder = QuestionEncoder(VOCAB, 16, embed_dim=8, bidirectional=bidirectional)
    _, question, length = inputs(batch=4)
    longer = torch.cat([question, torch.zeros(4, 3, dtype=torch.long)], dim=1)
    out = encoder(question, length)
    assert out.shape == (4, 16)
    torch.testing.assert_close(encoder(longer, length), out)
    # ... and a token before the length does matter.
    changed = question.clone()
    changed[:, 0] = (changed[:, 0] % (VOCAB - 1)) + 1
    assert not torch.allclose(encoder(changed, length), out)


def test_bilstm_question_vector_is_final_forward_and_backward_states() -> None:
    encoder = QuestionEncoder(VOCAB, 16, embed_dim=8, bidirectional=True)
    question = torch.tensor([[3, 4, 5]])
    out = encoder(question, torch.tensor([3]))
    states, _ = encoder.lstm(encoder.embed(question))  # (1, 3, 2 * 8): [forward | backward]
    torch.testing.assert_close(out[0, :8], states[0, -1, :8])  # forward state after the last word
    torch.testing.assert_close(out[0, 8:], states[0, 0, 8:])  # backward state after the first word


@pytest.mark.parametrize("bidirectional", [True, False])
def test_masked_question_loop_matches_the_packed_lstm_with_its_gradients(bidirectional: bool) -> None:
    torch.manual_seed(0)
    encoder = QuestionEncoder(VOCAB, 16, embed_dim=8, bidirectional=bidirectional).double()
    question = torch.randint(1, VOCAB, (5, 7))
    length = torch.tensor([7, 1, 4, 6, 2])
    question[torch.arange(7) >= length.unsqueeze(1)] = 0

    def run(masked: bool) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        encoder.zero_grad()
        if masked:
            words, h_n = encoder._masked(question, length)
        else:
            words, h_n = encoder._run(question, length, words=True)
        (words.square().sum() + h_n.sin().sum()).backward()
        return words, h_n, {name: p.grad.clone() for name, p in encoder.named_parameters()}

    packed_words, packed_final, packed_grads = run(masked=False)
    masked_words, masked_final, masked_grads = run(masked=True)
    torch.testing.assert_close(masked_words, packed_words)
    torch.testing.assert_close(masked_final, packed_final)
    for name, grad in packed_grads.items():
        torch.testing.assert_close(masked_grads[name], grad, msg=name)


def test_question_encoder_traces_in_one_graph_with_the_eager_results() -> None:
    # The graph capture alone (no code generated): what the inductor test below compiles, in seconds.
    torch.manual_seed(0)
    encoder = QuestionEncoder(VOCAB, 16, embed_dim=8)
    _, question, length = inputs(batch=4)
    traced = torch.compile(encoder.states, fullgraph=True, backend="eager")  # fails on a graph break
    torch.testing.assert_close(traced(question, length), encoder.states(question, length))


@pytest.mark.slow  # inductor writes and compiles C++: 40 s to minutes each on a cold cache
def test_question_encoder_compiles_in_one_graph_with_the_eager_results() -> None:
    torch.manual_seed(0)
    encoder = QuestionEncoder(VOCAB, 16, embed_dim=8)
    _, question, length = inputs(batch=4)
    compiled = torch.compile(encoder.states, fullgraph=True)  # fails on a graph break
    torch.testing.assert_close(compiled(question, length), encoder.states(question, length))


@pytest.mark.slow  # inductor writes and compiles C++: 40 s to minutes each on a cold cache
def test_compiled_grouped_answering_matches_eager_and_stops_recompiling_for_new_question_counts() -> None:
    # The most questions a picture has sizes a tensor: it reaches the graph as a number (dynamic after the
    # second count), not read from a tensor inside it, which made the rest of forward recompile every step.
    from foveal.compiling import compile_count, compile_model

    torch.manual_seed(0)
    eager = VQA(VOCAB, ANSWERS, head="stacked", head_options={"hops": 2}, **SMALL)
    compiled = compile_model(VQA(VOCAB, ANSWERS, head="stacked", head_options={"hops": 2}, **SMALL))
    compiled.load_state_dict(eager.state_dict())
    images, question, length = inputs(batch=8)
    # at most 2, 3, 5 and 6 questions on one picture (not 4: a count equal to the 4 pictures is a case of its own)
    layouts = ([0, 0, 1, 1, 2, 2, 3, 3], [0, 0, 0, 1, 1, 2, 3, 3], [0, 0, 0, 0, 0, 2, 3, 3], [0, 1, 1, 1, 1, 1, 1, 3])
    counts = []
    for layout in layouts:
        image_index = torch.tensor(layout)
        out = compiled(images[:4], question, length, image_index=image_index)
        assert_close(out.logits, eager(images[:4], question, length, image_index=image_index).logits)
        out.logits.sum().backward()
        counts.append(compile_count())
    assert counts[2] == counts[3], f"compiled again for another question count: {counts}"


def test_grid_encoder_pools_to_the_grid_and_rejects_bad_sizes() -> None:
    assert GridEncoder((4, 4, 4), grid=8)(torch.randn(2, 3, 64, 64)).shape == (2, 4, 8, 8)
    assert GridEncoder((4, 4), grid=16, stem_stride=2)(torch.randn(2, 3, 64, 64)).shape == (2, 4, 16, 16)
    with pytest.raises(ValueError, match="cannot pool"):
        GridEncoder((4,), grid=8)
    with pytest.raises(ValueError, match="image"):
        GridEncoder((4, 4), grid=16)(torch.randn(2, 3, 32, 32))


@pytest.mark.parametrize(("stem", "leaks"), [("patch", False), ("pixels", False), ("conv", True)])
def test_patch_stem_regions_see_only_their_own_cell(stem: str, leaks: bool) -> None:
    # Change the pixels of one 4 x 4 cell: with the patch and pixels stems only that region's vector changes;
    # the 3x3 conv stem's receptive field spills into the neighbours (the contrast keeps this test honest).
    encoder = GridEncoder((4, 8), grid=16, stem=stem).eval()
    image = torch.randn(1, 3, 64, 64)
    changed = image.clone()
    changed[..., 20:24, 36:40] += 1.0  # cell (row 5, column 9)
    moved = (encoder(changed) - encoder(image)).abs().sum(1)[0] > 1e-6  # (16, 16)
    assert moved[5, 9]
    assert moved.sum().item() > 1 if leaks else moved.sum().item() == 1
    assert encoder.cell_size == 4
    with pytest.raises(ValueError, match="stem"):
        GridEncoder((4,), grid=16, stem="vit")


@pytest.mark.parametrize(("stem", "coords", "sees_layout"), [("pixels", False, False), ("patch", False, True)])
def test_pixels_stem_sees_what_a_cell_holds_not_where_in_it(stem: str, coords: bool, sees_layout: bool) -> None:
    # Shuffle the pixels inside every cell: the pixels stem (each pixel alone, then the cell's mean) gives the
    # same vectors, while the patch stem's cell-wide kernel tells the layouts apart.
    encoder = GridEncoder((4, 8), grid=16, stem=stem, coords=coords).eval()
    image = torch.randn(1, 3, 64, 64)
    cells = image.view(1, 3, 16, 4, 16, 4).permute(0, 1, 2, 4, 3, 5).reshape(1, 3, 16, 16, 16)
    shuffled = cells[..., torch.randperm(16)].view(1, 3, 16, 16, 4, 4).permute(0, 1, 2, 4, 3, 5).reshape(image.shape)
    assert not torch.equal(shuffled, image)
    assert torch.allclose(encoder(shuffled), encoder(image), atol=1e-5) != sees_layout
    if stem == "pixels":  # the 1x1 blocks at every pixel, then each 4 x 4 cell's mean, written out
        assert_close(encoder(image), F.avg_pool2d(encoder.net[:-1](image), 4))


@pytest.mark.parametrize("stem", ["patch", "pixels"])
def test_cell_stems_leave_the_pixels_past_the_last_whole_cell(stem: str) -> None:
    # 75 px in 9 cells: cells of 8 px cover the top-left 72 px, as the conv stem's pooling does
    encoder = GridEncoder((4,), image_size=75, grid=9, stem=stem, coords=False).eval()
    image = torch.randn(1, 3, 75, 75)
    assert encoder(image).shape == (1, 4, 9, 9) and encoder.cell_size == 8
    changed = image.clone()
    changed[..., 72:, :] += 1.0
    changed[..., :, 72:] += 1.0
    assert_close(encoder(changed), encoder(image))
    with pytest.raises(ValueError, match=f"a {stem} stem cannot cut 75 px into 40 cells"):
        GridEncoder((4,), image_size=75, grid=40, stem=stem)


def test_pixels_keys_have_no_pixel_coordinates() -> None:
    # a pixel's (x, y) would let the 1x1 blocks tell where in its cell a colour is
    model = VQA(VOCAB, ANSWERS, head="stacked", **SMALL, keys="pixels", key_channels=(4, 6))
    assert model.key_encoder.net[0].in_channels == 3
    assert VQA(VOCAB, ANSWERS, head="stacked", **SMALL, keys="patch").key_encoder.net[1].in_channels == 5


@pytest.mark.parametrize("keys_from", ["patch", "pixels"])
@pytest.mark.parametrize("head", ["spatial", "stacked"])
def test_patch_keys_are_scored_and_the_cnn_map_averaged(head: str, keys_from: str) -> None:
    model = VQA(VOCAB, ANSWERS, head=head, **SMALL, keys=keys_from, key_channels=(4, 6))
    out = model(*inputs())
    out.logits.sum().backward()
    assert model.key_project.weight.grad.abs().sum() > 0  # the keys reach the loss through the weights
    # the attention is the head's score of the per-cell encoder's vectors, not of the CNN's
    image, question, length = inputs()
    keys = model.key_project(flatten_grid(model.key_encoder(image)))
    V = model.project(flatten_grid(model.image_encoder(image)))
    v_Q = model.question_encoder(question, length)
    expected = model.head(V, v_Q, HeadInputs(keys=keys)).weights
    assert_close(model(image, question, length).attention, expected)
    assert not torch.allclose(model.head(V, v_Q).weights, expected)
    with pytest.raises(ValueError, match="keys must be"):
        VQA(VOCAB, ANSWERS, head=head, **SMALL, keys="block1")
    with pytest.raises(FovealError, match=re.escape("keys='patch' needs a head whose scores read keys; the 'none'")):
        VQA(VOCAB, ANSWERS, head="none", **SMALL, keys="patch")


def additive_hops_reference(
    model: VQA, V: torch.Tensor, keys: torch.Tensor, v_Q: torch.Tensor, temperature: float = 1.0
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Seed 000's additive hops written out: e_i = (w_a^T tanh(W_v k_i + W_q u + b) + b_a) / T,
    u_k = sum_i alpha_i v_i + u_{k-1}; returns each hop's glimpse and the maps (B, hops, N)."""
    query, glimpses, maps = v_Q, [], []
    for hop in model.head.attention.hops:
        z = torch.tanh(keys @ hop.W_v.weight.T + (query @ hop.W_q.weight.T + hop.W_q.bias).unsqueeze(1))
        alpha = torch.softmax(((z @ hop.w_a.weight.T).squeeze(-1) + hop.w_a.bias) / temperature, dim=-1)
        glimpse = (alpha.unsqueeze(-1) * V).sum(1)
        query = glimpse + query
        glimpses.append(glimpse)
        maps.append(alpha)
    return glimpses, torch.stack(maps, 1)


def parts(model: VQA, image: torch.Tensor, question: torch.Tensor, length: torch.Tensor) -> tuple[torch.Tensor, ...]:
    V = model.project(flatten_grid(model.image_encoder(image)))
    keys = V if model.key_encoder is None else model.key_project(flatten_grid(model.key_encoder(image)))
    return V, keys, model.question_encoder(question, length)


@pytest.mark.parametrize("keys", ["values", "patch"])
def test_readout_last_answers_from_the_last_glimpse_only(keys: str) -> None:
    # readout="sum" (seed 002): phi = v_Q + sum_k v_filt_k; readout="last": phi = v_Q + v_filt_K, the
    # earlier hops only steer the last one's query, so the maps are the same and phi drops hop 1's glimpse.
    torch.manual_seed(0)
    summed = VQA(VOCAB, ANSWERS, head="stacked", head_options={"hops": 2}, keys=keys, **SMALL).eval()
    last = VQA(VOCAB, ANSWERS, head="stacked", head_options={"hops": 2, "readout": "last"}, keys=keys, **SMALL).eval()
    last.load_state_dict(summed.state_dict())  # same parameters: the readout has none
    x = inputs()
    V, k, v_Q = parts(last, *x)
    glimpses, maps = additive_hops_reference(last, V, k, v_Q)
    assert_close(last(*x).attention, maps)
    assert_close(summed(*x).attention, maps)
    assert_close(last(*x).logits, last.classifier(glimpses[-1] + v_Q))
    assert_close(summed(*x).logits, summed.classifier(glimpses[0] + glimpses[1] + v_Q))


@pytest.mark.parametrize("readout", ["sum", "last"])
def test_gate_scales_the_glimpse_per_channel_by_the_question(readout: str) -> None:
    # phi = g * glimpse + v_Q, g = 2 sigmoid(W_g v_Q + b_g): 1 at W_g = 0, b_g = 0 (the ungated model).
    model = VQA(
        VOCAB, ANSWERS, head="stacked", head_options={"hops": 2, "readout": readout, "gate": True}, **SMALL
    ).eval()
    x = inputs()
    V, k, v_Q = parts(model, *x)
    glimpses, _ = additive_hops_reference(model, V, k, v_Q)
    glimpse = glimpses[-1] if readout == "last" else glimpses[0] + glimpses[1]
    gate = 2 * torch.sigmoid(v_Q @ model.head.gate.weight.T + model.head.gate.bias)
    assert_close(model(*x).logits, model.classifier(gate * glimpse + v_Q))
    ungated = VQA(VOCAB, ANSWERS, head="stacked", head_options={"hops": 2, "readout": readout}, **SMALL).eval()
    ungated.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith("head.gate")})
    with torch.no_grad():
        model.head.gate.weight.zero_()
        model.head.gate.bias.zero_()
    assert_close(model(*x).logits, ungated(*x).logits)


def test_linear_gate_is_a_signed_product_that_starts_at_one() -> None:
    # phi = (W_g v_Q + b_g) * glimpse + v_Q, b_g = 1 at the start; at W_g = 0 the ungated model.
    torch.manual_seed(0)
    model = VQA(
        VOCAB,
        ANSWERS,
        head="stacked",
        head_options={"hops": 1, "readout": "last", "gate": True, "gate_form": "linear"},
        **SMALL,
    ).eval()
    assert torch.equal(model.head.gate.bias, torch.ones_like(model.head.gate.bias))
    with torch.no_grad():
        model.head.gate.bias.normal_()  # a trained gate: signed, some channels below zero
    x = inputs()
    V, k, v_Q = parts(model, *x)
    glimpses, _ = additive_hops_reference(model, V, k, v_Q)
    gate = v_Q @ model.head.gate.weight.T + model.head.gate.bias
    assert (gate < 0).any()
    assert_close(model(*x).logits, model.classifier(gate * glimpses[-1] + v_Q))
    ungated = VQA(VOCAB, ANSWERS, head="stacked", head_options={"hops": 1, "readout": "last"}, **SMALL).eval()
    ungated.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith("head.gate")})
    with torch.no_grad():
        model.head.gate.weight.zero_()
        model.head.gate.bias.fill_(1.0)
    assert_close(model(*x).logits, ungated(*x).logits)
    with pytest.raises(ValueError, match="gate_form must be one of sigmoid, linear"):
        VQA(VOCAB, ANSWERS, head="stacked", head_options={"gate": True, "gate_form": "tanh"}, **SMALL)


def test_temperature_divides_every_hops_additive_score() -> None:
    torch.manual_seed(0)
    cold = VQA(VOCAB, ANSWERS, head="stacked", head_options={"hops": 2, "temperature": 0.25}, **SMALL).eval()
    warm = VQA(VOCAB, ANSWERS, head="stacked", head_options={"hops": 2}, **SMALL).eval()
    warm.load_state_dict(cold.state_dict())  # the same parameter names: checkpoints load either way
    x = inputs()
    V, k, v_Q = parts(cold, *x)
    _, maps = additive_hops_reference(cold, V, k, v_Q, temperature=0.25)
    assert_close(cold(*x).attention, maps)
    # sharper for the same parameters: each map's largest weight grows
    assert (cold(*x).attention.amax(-1) > warm(*x).attention.amax(-1)).all()


def test_setting_the_temperature_matches_building_with_it() -> None:
    torch.manual_seed(0)
    built = VQA(VOCAB, ANSWERS, head="stacked", head_options={"hops": 2, "temperature": 0.25}, **SMALL).eval()
    scheduled = VQA(VOCAB, ANSWERS, head="stacked", head_options={"hops": 2}, **SMALL).eval()
    assert scheduled.state_dict().keys() == built.state_dict().keys()
    scheduled.load_state_dict(built.state_dict())
    x = inputs()
    scheduled.head.attention.temperature = 0.25
    assert_close(scheduled(*x).attention, built(*x).attention)
    assert all(hop.temperature == 0.25 for hop in scheduled.head.attention.hops)
    scheduled.head.attention.temperature = 30.0  # hot: every map close to uniform over the grid's cells
    assert (scheduled(*x).attention.amax(-1) < 2.0 / scheduled.grid**2).all()
    with pytest.raises(ValueError, match="temperature: expected a finite number > 0"):
        scheduled.head.attention.temperature = 0.0


def test_stacked_dot_hops_divide_their_dot_score_by_the_temperature() -> None:
    # e_i = (v_i . u) / T in every hop
    torch.manual_seed(0)
    model = VQA(VOCAB, ANSWERS, head="stacked-dot", head_options={"hops": 2, "temperature": 0.5}, **SMALL).eval()
    x = inputs()
    V, _, query = parts(model, *x)
    maps = []
    for _ in range(2):
        alpha = torch.softmax((V @ query.unsqueeze(-1)).squeeze(-1) / 0.5, dim=-1)
        query = (alpha.unsqueeze(-1) * V).sum(1) + query
        maps.append(alpha)
    assert_close(model(*x).attention, torch.stack(maps, 1))


# Every head with an option it lacks: the model's head_options, or the same option given flat.
LACKING = [
    ("none", "gate", True),
    ("spatial", "hops", 5),
    ("dot", "readout", "last"),
    ("cosine", "temperature", 0.5),
    ("stacked", "heads", 2),
    ("stacked-dot", "heads", 2),
    ("channel", "readout", "last"),
    ("cross-layer", "hops", 2),
    ("coattention-independent", "relate", True),
    ("coattention-joint", "gate", True),
    ("coattention-parallel", "hops", 2),
    ("coattention-parallel-learned", "hops", 2),
    ("coattention-alternating", "hops", 2),
    ("context-bilstm", "temperature", 0.5),
    ("context-self", "relate", True),
    ("transformer", "readout", "last"),
]


def test_every_head_is_checked_for_an_option_it_lacks() -> None:
    missing = set(VQA_HEADS.names()) - {head for head, _, _ in LACKING}
    assert sorted(head for head, _, _ in LACKING) == VQA_HEADS.names(), f"add {sorted(missing)} to LACKING"


@pytest.mark.parametrize(("head", "option", "value"), LACKING)
def test_an_option_the_head_lacks_is_an_error_naming_the_head_and_its_options(head, option, value) -> None:
    options = ", ".join(f.name for f in dataclasses.fields(VQA_HEADS.get(head).options)) or "none"
    message = f"head {head!r} has no option {option!r}; "
    with pytest.raises(
        FovealError, match=re.escape(message) + r"(did you mean .*\? )?" + re.escape(f"its options: {options}") + "$"
    ):
        VQA(VOCAB, ANSWERS, head=head, head_options={option: value}, **SMALL)
    with pytest.raises(FovealError, match=re.escape(message)):
        VQA(VOCAB, ANSWERS, VQASpec(head=head, head_options={option: value}, **SMALL))


def test_a_head_option_given_flat_says_where_it_goes() -> None:
    with pytest.raises(FovealError, match=re.escape("'hops' is an option of the 'stacked' head: pass head_options=")):
        VQA(VOCAB, ANSWERS, hops=3, **SMALL)
    with pytest.raises(FovealError, match="unknown option 'hops' of VQASpec"):
        VQA(VOCAB, ANSWERS, head="spatial", hops=3, **SMALL)


def test_bad_values_of_head_options_are_named() -> None:
    with pytest.raises(ValueError, match="readout must be one of sum, last"):
        VQA(VOCAB, ANSWERS, head="stacked", head_options={"readout": "mean"}, **SMALL)
    with pytest.raises(ValueError, match="temperature: expected a finite number > 0"):
        VQA(VOCAB, ANSWERS, head="stacked", head_options={"temperature": 0.0}, **SMALL)
    with pytest.raises(FovealError, match="the options of head 'stacked' must be a mapping"):
        VQA(VOCAB, ANSWERS, head="stacked", head_options=3, **SMALL)


def test_the_spec_records_every_option_of_the_head() -> None:
    model = VQA(VOCAB, ANSWERS, head="stacked", head_options={"hops": 3}, **SMALL)
    assert model.head_options == StackedOptions(hops=3)
    assert model.spec.head_options == dataclasses.asdict(StackedOptions(hops=3))


def test_a_spec_and_single_options_build_the_same_model() -> None:
    torch.manual_seed(0)
    from_spec = VQA(VOCAB, ANSWERS, VQASpec(head="spatial", **SMALL)).eval()
    torch.manual_seed(0)
    from_options = VQA(VOCAB, ANSWERS, head="spatial", **SMALL).eval()
    assert from_spec.spec == from_options.spec
    assert torch.equal(from_spec(*inputs()).logits, from_options(*inputs()).logits)
    # single options replace fields of a given spec
    assert VQA(VOCAB, ANSWERS, VQASpec(head="spatial", **SMALL), k_dim=4).spec.k_dim == 4
    with pytest.raises(ValueError, match="unknown option 'k_dm' of VQASpec; did you mean 'k_dim'"):
        VQA(VOCAB, ANSWERS, k_dm=2)


def test_unknown_head_is_one_clear_error() -> None:
    with pytest.raises(
        ValueError, match=r"unknown VQA attention head .sparse.; choose from: .*cosine, .*dot, .*none, .*spatial, "
    ):
        VQA(VOCAB, ANSWERS, head="sparse", **SMALL)


def test_training_smoke_loss_decreases() -> None:
    model = VQA(VOCAB, ANSWERS, head="stacked", head_options={"hops": 2}, **SMALL)
    image, question, length = inputs(batch=8, generator_seed=1)
    answer = torch.arange(8) % ANSWERS
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(25):
        loss = F.cross_entropy(model(image, question, length).logits, answer)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize(
    ("head", "extra"),
    [
        ("none", {}),
        ("spatial", {}),
        ("stacked", {}),
        ("stacked", {"keys": "patch"}),
        ("stacked", {"keys": "patch", "head_options": {"readout": "last", "gate": True, "temperature": 0.5}}),
        ("channel", {}),
    ],
)
def test_image_index_shares_pictures_between_questions(head: str, extra: dict) -> None:
    # Five questions about two pictures, in any order, give what five copies of the pictures give
    # (our heads answer them on a (pictures, questions) layout; family heads on copies).
    model = VQA(VOCAB, ANSWERS, head=head, **SMALL, **extra).eval()
    image, question, length = inputs(batch=5)
    index = torch.tensor([1, 0, 1, 1, 0])
    shared = model(image[:2], question, length, index)
    copied = model(image[:2][index], question, length)
    assert_close(shared.logits, copied.logits)
    if head != "none":
        assert_close(shared.attention, copied.attention)


def test_slot_in_picture() -> None:
    assert _slot_in_picture(torch.tensor([0, 0, 1, 1, 0]), 2).tolist() == [0, 1, 0, 1, 2]
    assert _slot_in_picture(torch.tensor([2, 0, 2]), 3).tolist() == [0, 0, 1]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"question": torch.tensor([[1, 2, 99], [1, 2, 3]])}, r"question: expected integers in \[0, 19\], got .* 99"),
        ({"question": torch.tensor([[1, -1, 0], [1, 2, 3]])}, r"question: expected integers in \[0, 19\]"),
        ({"length": torch.tensor([0, 3])}, r"length: expected integers in \[1, 3\]"),
        ({"length": torch.tensor([4, 3])}, r"length: expected integers in \[1, 3\]"),
        ({"question": torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])}, "question: expected an integer tensor"),
        ({"image_index": torch.tensor([0, 2])}, r"image_index: expected integers in \[0, 1\]"),
        ({"image_index": torch.tensor([0])}, "image_index"),
        ({"image": torch.rand(3, 3, 64, 64)}, "one picture per question"),
    ],
)
def test_bad_questions_lengths_and_picture_indices_are_named(change: dict, message: str) -> None:
    model = VQA(VOCAB, ANSWERS, **SMALL)
    inputs = {
        "image": torch.rand(2, 3, 64, 64),
        "question": torch.tensor([[1, 2, 3], [4, 5, 0]]),
        "length": torch.tensor([3, 2]),
        "image_index": None,
    }
    model(**inputs)  # the valid call works
    with pytest.raises(ValueError, match=message):
        model(**(inputs | change))


@pytest.mark.parametrize("head", ["stacked", "stacked-dot"])
def test_relate_reaches_the_stacked_hops(head: str) -> None:
    torch.manual_seed(0)
    related = VQA(VOCAB, ANSWERS, head=head, head_options={"hops": 2, "relate": True}, **SMALL)
    assert related.head.attention.relate and len(related.head.attention.relations) == 1
    plain = VQA(VOCAB, ANSWERS, head=head, head_options={"hops": 2}, **SMALL)
    plain.load_state_dict(related.state_dict(), strict=False)  # the same model but for the relation
    with torch.no_grad():
        related.head.attention.relations[0].bias.copy_(torch.tensor([5.0, 3.0]))
    x = inputs()
    first, second = related(*x).attention, plain(*x).attention
    assert_close(first[:, 0], second[:, 0])  # hop 1 has nothing to relate to
    assert not torch.allclose(first[:, 1], second[:, 1], atol=1e-3)


@pytest.mark.parametrize("head", sorted(VQA_HEADS.names()))
def test_an_empty_batch_gives_empty_outputs(head):
    # Packing questions takes no empty batch, and neither does the most questions any picture has.
    model = VQA(20, 12, head=head, dim=16, k_dim=8, channels=(4, 4), pointing=True)
    no_questions = torch.zeros(0, 3, dtype=torch.long), torch.zeros(0, dtype=torch.long)
    for image_index in (None, torch.zeros(0, dtype=torch.long)):
        out = model(torch.randn(0, 3, 64, 64), *no_questions, image_index=image_index, boxes=torch.zeros(0, 4, 4))
        assert out.logits.shape == (0, 12) and out.candidate_logits.shape == (0, 4)


def test_transformer_head_without_the_words_names_what_it_needs() -> None:
    head = TransformerHead(8, k_dim=4, hops=1, heads=2)
    with pytest.raises(FovealError, match=r"TransformerHead: expected inputs\.words and inputs\.word_mask"):
        head(torch.randn(2, 5, 8), torch.randn(2, 8))
