"""The NTM model: shapes, batching equals one-by-one, state reset, finite gradients, registry."""

import pytest
import torch

from foveal.errors import FovealError
from foveal.memory import address, read, split_head_params, write
from foveal.models.ntm import NTM, circular_shift_by_rolls
from foveal.registry import MODELS

SMALL = dict(controller_size=12, n_rows=9, n_cols=5)


def small(**kw):
    return NTM(4, 3, **{**SMALL, **kw})


@pytest.mark.parametrize("controller", ["lstm", "feedforward"])
@pytest.mark.parametrize("heads", [(1, 1), (2, 3)])
def test_shapes_and_recorded_state(controller, heads):
    n_read, n_write = heads
    model = small(controller=controller, n_read_heads=n_read, n_write_heads=n_write)
    out = model(torch.rand(2, 6, 4), record=True)
    assert out.logits.shape == (2, 6, 3)
    assert out.read_weights.shape == (2, 6, n_read, 9)
    assert out.write_weights.shape == (2, 6, n_write, 9)
    assert out.memory.shape == (2, 6, 9, 5)
    torch.testing.assert_close(out.read_weights.sum(-1), torch.ones(2, 6, n_read))
    assert model(torch.rand(2, 6, 4)).read_weights is None


def test_batch_equals_one_by_one():
    # No sequence sees another: the batched run equals running each sequence alone.
    model = small(n_read_heads=2, n_write_heads=2)
    x = torch.rand(3, 5, 4)
    batched = model(x, record=True)
    for b in range(3):
        alone = model(x[b : b + 1], record=True)
        torch.testing.assert_close(batched.logits[b : b + 1], alone.logits, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(batched.memory[b : b + 1], alone.memory, atol=1e-5, rtol=1e-5)


def test_state_is_reset_for_each_sequence():
    model = small()
    x = torch.rand(1, 5, 4)
    first = model(x).logits
    model(torch.rand(4, 7, 4))  # another call in between leaves nothing behind
    torch.testing.assert_close(model(x).logits, first)


def test_one_step_follows_the_equations():
    # The model's first step, recomputed by hand from its layers and foveal.memory.
    model = small(controller="feedforward")
    x = torch.rand(2, 1, 4)
    out = model(x, record=True)
    h = torch.tanh(model.controller(torch.cat([x[:, 0], model.r0.expand(2, -1, -1).flatten(1)], -1)))
    raw_read, raw_write = model.heads(h).split([model.read_param_size, model.write_param_size], -1)
    w0 = model.w0_logits.softmax(-1).expand(2, -1, -1)
    memory = model.memory_init(2)
    pw = split_head_params(raw_write.view(2, 1, -1), 5, 3, write=True)
    w_write = address(pw.key, pw.beta, pw.gate, pw.shift, pw.gamma, memory, w0[:, 1:])
    memory = write(memory, w_write, pw.erase, pw.add)
    pr = split_head_params(raw_read.view(2, 1, -1), 5, 3, write=False)
    w_read = address(pr.key, pr.beta, pr.gate, pr.shift, pr.gamma, memory, w0[:, :1])
    logits = model.out(torch.cat([h, read(memory, w_read).flatten(1)], -1))
    torch.testing.assert_close(out.logits[:, 0], logits)
    torch.testing.assert_close(out.memory[:, 0], memory)


@pytest.mark.parametrize("memory_init", ["constant", "learned", "random"])
@pytest.mark.parametrize("initial_state", ["learned", "constant"])
def test_every_parameter_gets_a_finite_gradient(memory_init, initial_state):
    model = small(memory_init=memory_init, initial_state=initial_state)
    model(torch.rand(2, 6, 4)).logits.sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
    n_learned_state = sum(1 for n, _ in model.named_parameters() if n in {"h0", "c0", "r0", "w0_logits"})
    assert n_learned_state == (4 if initial_state == "learned" else 0)


def test_zero_input_and_long_sequence_stay_finite():
    model = small()
    out = model(torch.zeros(2, 60, 4), record=True)
    assert all(torch.isfinite(t).all() for t in out)


def test_output_from_reads_sees_only_the_read_vectors():
    model = small(output_from="reads", n_read_heads=2)
    assert model.out.in_features == 2 * 5
    out = model(torch.rand(2, 4, 4), record=True)
    memory, w = out.memory[:, -1], out.read_weights[:, -1]
    torch.testing.assert_close(out.logits[:, -1], model.out((w @ memory).flatten(1)))


def test_state_dict_round_trip():
    a, b = small(), small()
    b.load_state_dict(a.state_dict())
    x = torch.rand(2, 4, 4)
    torch.testing.assert_close(a(x).logits, b(x).logits)


def test_registry_and_errors():
    assert MODELS.get("ntm") is NTM
    with pytest.raises(ValueError, match="controller"):
        small(controller="gru")
    with pytest.raises(ValueError, match="output_from"):
        small(output_from="controller")
    with pytest.raises(ValueError, match="x: expected"):
        small()(torch.zeros(2, 3, 5))


def test_head_bias_init_sets_gate_shift_and_gamma_of_every_head():
    model = small(n_read_heads=2, n_write_heads=2, gate_bias=-3.0, still_bias=2.0, gamma_bias=1.0)
    Hr, Hw = 2, 2
    read_raw, write_raw = model.heads.bias.split([Hr * model.read_param_size, Hw * model.write_param_size])
    for raw, H, is_write in ((read_raw, Hr, False), (write_raw, Hw, True)):
        p = split_head_params(raw.view(1, H, -1), 5, 3, write=is_write)
        torch.testing.assert_close(p.gate, torch.sigmoid(torch.tensor(-3.0)).expand(1, H))
        torch.testing.assert_close(p.shift, torch.tensor([1.0, torch.e**2, 1.0]).div(2 + torch.e**2).expand(1, H, 3))
        torch.testing.assert_close(p.gamma, (1 + torch.nn.functional.softplus(torch.tensor(1.0))).expand(1, H))
        torch.testing.assert_close(p.beta, torch.nn.functional.softplus(torch.tensor(0.0)).expand(1, H))
        if is_write:
            torch.testing.assert_close(p.erase, torch.full((1, H, 5), 0.5))


def test_read_heads_can_start_with_their_own_gate_shift_and_sharpening_biases():
    model = small(
        n_read_heads=2,
        n_write_heads=1,
        gate_bias=-2.0,
        still_bias=2.0,
        gamma_bias=0.5,
        read_gate_bias=-4.0,
        read_still_bias=4.0,
        read_gamma_bias=3.0,
    )
    read_raw, write_raw = model.heads.bias.split([2 * model.read_param_size, model.write_param_size])
    for raw, H, is_write, g, s, gamma in ((read_raw, 2, False, -4.0, 4.0, 3.0), (write_raw, 1, True, -2.0, 2.0, 0.5)):
        p = split_head_params(raw.view(1, H, -1), 5, 3, write=is_write)
        torch.testing.assert_close(p.gate, torch.sigmoid(torch.tensor(g)).expand(1, H))
        torch.testing.assert_close(p.shift[..., 1], torch.tensor(s).exp().div(2 + torch.tensor(s).exp()).expand(1, H))
        torch.testing.assert_close(p.gamma, (1 + torch.nn.functional.softplus(torch.tensor(gamma))).expand(1, H))


def test_write_walk_bias_favours_shift_plus_one_for_write_heads_only():
    model = small(n_read_heads=1, n_write_heads=2, still_bias=1.0, write_walk_bias=3.0, gamma_bias=0.5)
    read_raw, write_raw = model.heads.bias.split([model.read_param_size, 2 * model.write_param_size])
    for raw, H, is_write in ((read_raw, 1, False), (write_raw, 2, True)):
        p = split_head_params(raw.view(1, H, -1), 5, 3, write=is_write)
        logits = torch.tensor([0.0, 1.0, 3.0 if is_write else 0.0])  # shifts -1, 0, +1
        torch.testing.assert_close(p.shift, logits.softmax(0).expand(1, H, 3))
        torch.testing.assert_close(p.gamma, (1 + torch.nn.functional.softplus(torch.tensor(0.5))).expand(1, H))
    # What the bias means: with the head weights zeroed and the gate shut, the write head starts on
    # row 0 and moves one row forward per step.
    walker = small(n_rows=6, gate_bias=-30.0, write_walk_bias=30.0)
    torch.nn.init.zeros_(walker.heads.weight)
    w_write = walker(torch.zeros(1, 4, 4), record=True).write_weights  # (B, T, H, R)
    assert w_write[0, :, 0].argmax(-1).tolist() == [1, 2, 3, 4]


def test_read_walk_bias_favours_shift_plus_one_for_read_heads_only():
    model = small(n_read_heads=2, n_write_heads=1, still_bias=1.0, read_walk_bias=3.0, write_walk_bias=-1.0)
    read_raw, write_raw = model.heads.bias.split([2 * model.read_param_size, model.write_param_size])
    for raw, H, is_write, walk in ((read_raw, 2, False, 3.0), (write_raw, 1, True, -1.0)):
        p = split_head_params(raw.view(1, H, -1), 5, 3, write=is_write)
        torch.testing.assert_close(p.shift, torch.tensor([0.0, 1.0, walk]).softmax(0).expand(1, H, 3))
    assert small().heads.bias.abs().sum() == 0  # both walk biases default to 0: nothing else moves
    # With the head weights zeroed and the gate shut, the read head starts on row 0 and moves one row
    # forward per step, as the write head does with write_walk_bias.
    walker = small(n_rows=6, gate_bias=-30.0, read_walk_bias=30.0, write_walk_bias=30.0)
    torch.nn.init.zeros_(walker.heads.weight)
    out = walker(torch.zeros(1, 4, 4), record=True)
    assert out.read_weights[0, :, 0].argmax(-1).tolist() == [1, 2, 3, 4]
    assert out.write_weights[0, :, 0].argmax(-1).tolist() == [1, 2, 3, 4]


def test_forget_bias_sets_the_lstm_forget_gate_only():
    default = small()
    model = small(forget_bias=3.0)
    H = model.controller_size
    assert (model.controller.bias_ih[H : 2 * H] == 3.0).all() and (model.controller.bias_hh[H : 2 * H] == 0).all()
    assert not (default.controller.bias_ih[H : 2 * H] == 3.0).any()
    small(controller="feedforward", forget_bias=3.0)  # no forget gate: ignored


def test_more_shift_taps_than_memory_rows_are_refused_at_construction():
    with pytest.raises(FovealError, match=r"n_shifts: 5 shifts need at least as many memory rows, got n_rows=3"):
        NTM(4, 3, controller_size=8, n_rows=3, n_cols=4, n_shifts=5)


@pytest.mark.parametrize(
    "options",
    [
        {"controller_size": 0},
        {"n_rows": 0},
        {"n_read_heads": 0},
        {"n_write_heads": -1},
        {"controller": "gru"},
        {"initial_state": "zeros"},
        {"eps": -1.0},
    ],
)
def test_options_that_cannot_work_are_refused_at_construction_in_one_line(options):
    with pytest.raises(FovealError) as error:
        NTM(4, 3, **options)
    assert next(iter(options)) in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("record", [False, True])
def test_an_empty_batch_gives_empty_outputs(record):
    ntm = NTM(4, 3, controller_size=8, n_rows=6, n_cols=5)
    out = ntm(torch.zeros(0, 3, 4), record=record)
    assert out.logits.shape == (0, 3, 3)
    with pytest.raises(FovealError, match="at least one time step"):
        ntm(torch.zeros(2, 0, 4))


@pytest.mark.parametrize("heads", [(1, 1), (2, 0)])
def test_steps_shift_with_the_function_given_and_the_rolls_give_the_gathers_result(heads):
    # The compiled graphs pass circular_shift_by_rolls (the compile plan's keyword): every head of every step
    # takes it, and the steps' outputs and gradients are the default gather's.
    n_read, n_write = heads
    model = small(n_read_heads=n_read, n_write_heads=n_write).double()
    x = torch.rand(5, 2, 4, dtype=torch.float64)
    calls = []

    def counted(w, shift):
        calls.append(w.shape)
        return circular_shift_by_rolls(w, shift)

    logits, state = model.steps(x, model.initial_state(2, torch.float64), shift_function=counted)
    assert calls == ([(2, n_write, 9)] * bool(n_write) + [(2, n_read, 9)]) * 5  # the write heads address first
    expected, expected_state = model.steps(x, model.initial_state(2, torch.float64))
    torch.testing.assert_close(logits, expected, rtol=1e-12, atol=1e-12)
    for name in ("w_read", "w_write", "memory"):
        torch.testing.assert_close(getattr(state, name), getattr(expected_state, name), rtol=1e-12, atol=1e-12)
    got = torch.autograd.grad(logits.sum(), list(model.parameters()))
    want = torch.autograd.grad(expected.sum(), list(model.parameters()))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)
    assert NTM.compile_plan.keywords == {"shift_function": circular_shift_by_rolls}
