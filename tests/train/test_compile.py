"""``loop.compile`` and :mod:`foveal.compiling`: compiled steps give the eager results, one graph per step."""

from __future__ import annotations

import copy
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from foveal.compiling import (
    RECOMPILE_LIMIT,
    CompilePlan,
    MergeSummedProducts,
    compile_count,
    compile_model,
    compiled_methods,
    is_compiled,
)
from foveal.errors import FovealError
from foveal.models.draw import DRAW
from foveal.models.ntm import NTM
from foveal.train import LoopConfig, RunConfig, Task, Trainer


def _grads(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def _assert_same_step(eager: nn.Module, compiled: nn.Module, loss_of) -> None:
    """The loss and every gradient of one step agree between the eager and the compiled model."""
    loss_eager, loss_compiled = loss_of(eager), loss_of(compiled)
    torch.testing.assert_close(loss_compiled, loss_eager, rtol=1e-5, atol=1e-5)
    loss_eager.backward()
    loss_compiled.backward()
    eager_grads, compiled_grads = _grads(eager), _grads(compiled)
    assert eager_grads.keys() == compiled_grads.keys() and eager_grads
    for name, grad in eager_grads.items():
        torch.testing.assert_close(compiled_grads[name], grad, rtol=1e-4, atol=1e-5, msg=name)
    eager.zero_grad()
    compiled.zero_grad()


@pytest.mark.slow  # inductor writes and compiles C++: 40 s to minutes each on a cold cache
@pytest.mark.parametrize("controller", ["lstm", "feedforward"])
def test_compiled_ntm_step_matches_eager_at_every_length_with_one_graph(controller):
    torch.manual_seed(0)
    eager = NTM(5, 4, controller=controller, controller_size=12, n_rows=8, n_cols=6, n_write_heads=1)
    compiled = compile_model(copy.deepcopy(eager))
    assert compiled_methods(compiled) == ("step", "steps") and is_compiled(compiled) and not is_compiled(eager)
    assert compiled.steps_per_call == NTM.compile_plan.steps_per_call > 1 and eager.steps_per_call == 1
    targets = torch.Generator().manual_seed(1)
    counts = []
    for length in (3, 9, 14):  # one graph for the steps, whatever the number of steps (padded or not)
        x = torch.randn(4, length, 5, generator=targets)
        y = torch.rand(4, length, 4, generator=targets)
        _assert_same_step(eager, compiled, lambda m, x=x, y=y: F.binary_cross_entropy_with_logits(m(x).logits, y))
        counts.append(compile_count())
    assert counts[0] == counts[1] == counts[2], f"recompiled for a new length: {counts}"


@pytest.mark.parametrize("steps_per_call", [1, 2, 3])
def test_ntm_steps_per_call_pads_the_sequence_without_changing_any_output(steps_per_call):
    torch.manual_seed(0)
    model = NTM(5, 4, controller_size=12, n_rows=8, n_cols=6).double()
    for length in (1, 2, 7):  # shorter than, equal to and past whole calls
        x = torch.randn(3, length, 5, dtype=torch.float64)
        one_at_a_time = model(x, record=True).logits  # the recorded path runs one step per call
        model.steps_per_call = steps_per_call
        torch.testing.assert_close(model(x).logits, one_at_a_time, rtol=0, atol=0)
        model.steps_per_call = 1


@pytest.mark.slow  # inductor writes and compiles C++: 40 s to minutes each on a cold cache
def test_compiled_draw_step_matches_eager():
    torch.manual_seed(0)
    eager = DRAW((8, 7), 1, steps=4, enc_size=10, dec_size=9, z_size=3, read_size=2, write_size=3)
    compiled = compile_model(copy.deepcopy(eager))
    x = (torch.rand(5, 1, 8, 7, generator=torch.Generator().manual_seed(2)) > 0.5).float()
    noise = torch.randn(4, 5, 3, generator=torch.Generator().manual_seed(3))
    _assert_same_step(eager, compiled, lambda m: m.negative_elbo(x, noise=noise))


@pytest.mark.slow  # inductor writes and compiles C++: 40 s to minutes each on a cold cache
def test_compiled_draw_runs_of_steps_match_eager():
    torch.manual_seed(0)
    eager = DRAW((8, 7), 1, steps=6, enc_size=10, dec_size=9, z_size=3, read_size=2, write_size=3)
    compiled = compile_model(copy.deepcopy(eager))
    assert compiled_methods(compiled) == ("step", "run_steps") and is_compiled(compiled)
    assert compiled.steps_per_call == DRAW.compile_plan.steps_per_call > 1 and eager.steps_per_call == 1
    # Two steps per call: step 0 eager, step 1 the one-step graph left over, steps 2-5 two runs of two
    compiled.steps_per_call = 2
    x = (torch.rand(5, 1, 8, 7, generator=torch.Generator().manual_seed(2)) > 0.5).float()
    noise = torch.randn(6, 5, 3, generator=torch.Generator().manual_seed(3))
    _assert_same_step(eager, compiled, lambda m: m.negative_elbo(x, noise=noise))


@pytest.mark.slow  # inductor writes and compiles C++: 40 s to minutes each on a cold cache
def test_compiled_model_keeps_its_state_dict_and_a_copy_runs_its_own_weights():
    torch.manual_seed(0)
    model = compile_model(NTM(3, 2, controller_size=6, n_rows=5, n_cols=4))
    assert list(model.state_dict()) == list(NTM(3, 2, controller_size=6, n_rows=5, n_cols=4).state_dict())
    twin = copy.deepcopy(model)
    with torch.no_grad():
        twin.out.bias += 1.0
    x = torch.randn(2, 4, 3)
    with torch.enable_grad():
        torch.testing.assert_close(twin(x).logits, model(x).logits + 1.0)


def test_evaluation_without_gradients_runs_eagerly():
    torch.manual_seed(0)
    model = compile_model(NTM(3, 2, controller_size=6, n_rows=5, n_cols=4))
    before = compile_count()
    with torch.no_grad():
        model(torch.randn(2, 4, 3))
    assert compile_count() == before


@pytest.mark.slow  # inductor writes and compiles C++: 40 s to minutes each on a cold cache
def test_loop_compile_trains_as_the_eager_loop_does():
    def run(compiled: bool) -> tuple[list[float], Trainer]:
        torch.manual_seed(0)
        data = torch.utils.data.TensorDataset(torch.randn(16, 6, 3), torch.rand(16, 6, 2))

        def loss(model, batch):
            return F.binary_cross_entropy_with_logits(model(batch[0]).logits, batch[1]), {}

        model = NTM(3, 2, controller_size=7, n_rows=5, n_cols=4)  # sizes no other test compiles
        trainer = Trainer(Task(model, data, loss), RunConfig(loop=LoopConfig(lr=1e-2, compile=compiled)))
        return [trainer.step(data[:8])["loss"] for _ in range(5)], trainer

    eager_losses, eager = run(False)
    compiled_losses, compiled = run(True)
    assert is_compiled(compiled.model) and not is_compiled(eager.model)
    assert compiled.compile_seconds > 0 and eager.compile_seconds == 0
    torch.testing.assert_close(compiled_losses, eager_losses, rtol=1e-4, atol=1e-5)


def test_without_a_cpp_compiler_the_error_says_what_to_do(monkeypatch):
    from foveal import _torch_private

    def missing():
        raise RuntimeError("No working C++ compiler found")

    monkeypatch.setattr(_torch_private, "check_cpp_compiler", missing)
    with pytest.raises(FovealError, match=r"loop\.compile=false"):
        compile_model(nn.Linear(2, 2))


def test_a_torch_without_the_internals_is_refused_naming_its_version(monkeypatch):
    from foveal import _torch_private

    monkeypatch.setattr(_torch_private, "missing", lambda: "cannot import name 'CustomGraphPass'")
    with pytest.raises(FovealError, match=rf"torch {re.escape(torch.__version__)} lacks .*CustomGraphPass"):
        compile_model(nn.Linear(2, 2))
    monkeypatch.setattr(_torch_private, "missing", lambda: None)
    monkeypatch.setattr(_torch_private, "torch_version", lambda: (2, 4))
    with pytest.raises(FovealError, match=r"tested with torch 2\.5"):
        compile_model(nn.Linear(2, 2))


@pytest.mark.slow  # inductor writes and compiles C++: 40 s to minutes each on a cold cache
def test_a_scheduled_temperature_changes_a_compiled_head_without_a_new_graph():
    from foveal.models.vqa import VQA
    from foveal.models.vqa.heads import HeadInputs

    torch.manual_seed(0)
    model = VQA(
        20, 5, head="stacked", head_options={"hops": 1}, channels=(4, 8), dim=16, k_dim=8, embed_dim=8, mlp_hidden=16
    ).eval()
    regions, question = torch.randn(2, model.grid**2, 16), torch.randn(2, 16)
    compiled = torch.compile(model.head)
    cold = compiled(regions, question, HeadInputs(keys=regions)).weights
    graphs = compile_count()
    model.head.attention.temperature = 5.0
    hot = compiled(regions, question, HeadInputs(keys=regions)).weights
    assert compile_count() == graphs  # the temperature is a buffer's value, not a guarded constant
    torch.testing.assert_close(hot, model.head(regions, question, HeadInputs(keys=regions)).weights)
    assert not torch.allclose(cold, hot)


def test_compile_mode_reaches_torch_compile_and_an_unknown_one_is_refused(monkeypatch):
    from foveal import compiling

    seen = []

    def record(function, **kwargs):
        seen.append(kwargs["options"])
        return function

    monkeypatch.setattr(torch, "compile", record)
    compiling._compiled.cache_clear()
    try:
        compile_model(nn.Linear(2, 2), "max-autotune-no-cudagraphs")
    finally:
        compiling._compiled.cache_clear()  # no stub left for the other tests
    # The mode arrives as its inductor options, beside foveal's graph pass, which inductor takes as its own kind
    from torch._inductor.custom_graph_pass import CustomGraphPass

    assert len(seen) == 1 and seen[0]["max_autotune"] is True
    assert isinstance(seen[0]["post_grad_custom_pre_pass"], MergeSummedProducts)
    assert isinstance(seen[0]["post_grad_custom_pre_pass"], CustomGraphPass)
    with pytest.raises(ValueError, match="compile mode must be one of default, max-autotune-no-cudagraphs"):
        compile_model(nn.Linear(2, 2), "max-autotune")


def test_cuda_graphs_are_refused_on_the_cpu_with_the_key_to_change():
    with pytest.raises(ValueError, match=re.escape("loop.compile_mode=reduce-overhead replays CUDA graphs")):
        compile_model(nn.Linear(2, 2), "reduce-overhead")


def _graph_after_the_pass(function, *inputs):
    """``function`` traced to inductor's aten ops (fake values on every node), and the pass run on it."""
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    module = make_fx(function, decomposition_table=select_decomp_table(), tracing_mode="fake")(*inputs)
    MergeSummedProducts()(module.graph)
    module.recompile()
    return module


def _products(module: torch.fx.GraphModule) -> int:
    return sum(node.target is torch.ops.aten.mm.default for node in module.graph.nodes)


def test_summed_products_become_one_product_of_the_stacked_factors():
    # sum_t A_t^T B_t, as autograd writes a weight's gradient over the steps of a recurrent run, plus a
    # term that is not such a product (it stays an addition)
    def weight_gradient(grads, inputs, extra):
        total = extra
        for grad, x in zip(grads, inputs, strict=True):
            total = total + grad.t() @ x
        return total

    generator = torch.Generator().manual_seed(0)
    grads = [torch.randn(4, 6, generator=generator, dtype=torch.float64) for _ in range(5)]
    inputs = [torch.randn(4, 3, generator=generator, dtype=torch.float64) for _ in range(5)]
    extra = torch.randn(6, 3, generator=generator, dtype=torch.float64)
    module = _graph_after_the_pass(weight_gradient, grads, inputs, extra)
    assert _products(module) == 1
    expected = extra + sum(g.t() @ x for g, x in zip(grads, inputs, strict=True))
    torch.testing.assert_close(module(grads, inputs, extra), expected, rtol=1e-12, atol=1e-12)


def test_sums_the_pass_must_not_touch_keep_their_products():
    # The running sum is used on its own after two terms: merging all three would drop that use
    def shared_partial_sum(a, b, c, x):
        partial = a.t() @ x + b.t() @ x
        return partial + c.t() @ x, partial * 2

    # Products whose first factor is not transposed are not a weight's gradient
    def plain_products(a, b, x):
        return a @ x + b @ x

    generator = torch.Generator().manual_seed(1)
    a, b, c = (torch.randn(4, 4, generator=generator, dtype=torch.float64) for _ in range(3))
    x = torch.randn(4, 2, generator=generator, dtype=torch.float64)
    module = _graph_after_the_pass(shared_partial_sum, a, b, c, x)
    total, doubled = module(a, b, c, x)
    torch.testing.assert_close(doubled, 2 * (a.t() @ x + b.t() @ x), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(total, a.t() @ x + b.t() @ x + c.t() @ x, rtol=1e-12, atol=1e-12)
    module = _graph_after_the_pass(plain_products, a, b, x)
    assert _products(module) == 2
    # Products of another dtype are not stacked with each other (their sum promotes)
    module = _graph_after_the_pass(lambda a, b, x, y: a.t() @ x + b.t() @ y, a, b.float(), x, x.float())
    assert _products(module) == 2


def test_a_plans_cpu_options_apply_on_the_cpu_only_and_the_graph_pass_is_an_argument(monkeypatch):
    from foveal import compiling

    class WithOptions(nn.Linear):
        compile_plan = CompilePlan("a test's stand-in for DRAW's", cpu_options={"cpp_wrapper": True})
        steps_per_call = 1

    seen = []
    monkeypatch.setattr(torch, "compile", lambda function, **kwargs: seen.append(kwargs["options"]) or function)
    compiling._compiled.cache_clear()
    try:
        compile_model(WithOptions(2, 2))
        compile_model(WithOptions(2, 2, device="meta"))  # not the CPU: a GPU's compile takes none of them
        compile_model(WithOptions(2, 2), options={"cpp_wrapper": False})  # given options replace the plan's
        compile_model(WithOptions(2, 2), graph_pass=False)
    finally:
        compiling._compiled.cache_clear()
    assert [options.get("cpp_wrapper") for options in seen] == [True, None, False, True]
    assert all(isinstance(options["post_grad_custom_pre_pass"], MergeSummedProducts) for options in seen[:3])
    assert "post_grad_custom_pre_pass" not in seen[3]


def test_a_plans_keywords_reach_the_compiled_graphs_and_not_the_eager_calls(monkeypatch):
    from foveal import compiling

    class WithKeywords(nn.Linear):
        compile_plan = CompilePlan("a test's stand-in for the NTM's", keywords={"path": "graph"})
        steps_per_call = 1

        def forward(self, x, *, path="eager"):
            paths.append(path)
            return super().forward(x)

    paths = []
    monkeypatch.setattr(torch, "compile", lambda function, **kwargs: function)  # the graph runs what it traces
    compiling._compiled.cache_clear()
    try:
        model = compile_model(WithKeywords(2, 2))
        model(torch.zeros(1, 2))
        with torch.no_grad():  # an evaluation runs the eager method
            model(torch.zeros(1, 2))
    finally:
        compiling._compiled.cache_clear()
    assert paths == ["graph", "eager"]


def test_a_plan_without_methods_or_steps_is_refused():
    with pytest.raises(FovealError, match="at least one method"):
        CompilePlan("none", methods=())
    with pytest.raises(FovealError, match="steps_per_call >= 1"):
        CompilePlan("none", steps_per_call=0)


def test_another_backend_takes_no_inductor_mode_or_options():
    with pytest.raises(FovealError, match="inductor's; backend='aot_eager' takes neither"):
        compile_model(nn.Linear(2, 2), "max-autotune-no-cudagraphs", backend="aot_eager")
    with pytest.raises(FovealError, match="inductor's"):
        compile_model(nn.Linear(2, 2), options={"cpp_wrapper": True}, backend="aot_eager")


def test_a_process_compiles_more_configurations_of_one_method_than_dynamo_keeps_by_default():
    # Sequential.forward is one function for every depth: each depth is a graph of its own, and past dynamo's
    # default of 8 the method would run eagerly without a word (a sweep's grid in one process)
    for depth in range(1, RECOMPILE_LIMIT // 4):
        model = compile_model(nn.Sequential(*[nn.Linear(3, 3) for _ in range(depth)]), backend="eager")
        before = compile_count()
        model(torch.randn(2, 3, requires_grad=True))
        assert compile_count() > before, f"depth {depth}: the forward ran without compiling"
