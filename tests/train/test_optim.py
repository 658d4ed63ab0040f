"""Optimiser choice, learning-rate schedules and gradient clipping."""

import math

import pytest
import torch
from torch import nn

from foveal.train import LoopConfig, build_optimizer, build_scheduler, clip_gradients, lr_factor, parameter_groups


@pytest.mark.parametrize(
    ("name", "cls"), [("adam", torch.optim.Adam), ("adamw", torch.optim.AdamW), ("rmsprop", torch.optim.RMSprop)]
)
def test_optimizer_from_config(name, cls):
    loop = LoopConfig(optimizer=name, lr=0.01, weight_decay=0.1, momentum=0.9, rmsprop_alpha=0.95)
    opt = build_optimizer(nn.Linear(2, 2).parameters(), loop)
    assert type(opt) is cls
    assert opt.defaults["lr"] == 0.01 and opt.defaults["weight_decay"] == 0.1
    if name == "rmsprop":
        assert opt.defaults["momentum"] == 0.9 and opt.defaults["alpha"] == 0.95


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_compiled_loops_fuse_the_update_and_match_the_reference(name):
    """loop.compile=true takes the fused kernel; its weights stay within rounding of the eager update's."""
    weights = {}
    for compiled in (False, True):
        torch.manual_seed(0)
        layer = nn.Linear(7, 5)
        start = layer.weight.detach().clone()
        loop = LoopConfig(optimizer=name, lr=0.01, weight_decay=0.1, compile=compiled)
        opt = build_optimizer(layer.parameters(), loop)
        assert bool(opt.defaults["fused"]) is compiled
        grads = torch.Generator().manual_seed(1)
        for _ in range(20):
            for p in layer.parameters():
                p.grad = torch.randn(p.shape, generator=grads)
            opt.step()
        weights[compiled] = layer.weight.detach()
        assert (weights[compiled] - start).abs().mean() > 0.01  # the steps moved the weights
    torch.testing.assert_close(weights[True], weights[False], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("compile_", "fused_optimizer", "fused"),
    [(False, None, False), (True, None, True), (True, False, False), (False, True, True)],
)
def test_the_fused_update_is_its_own_key_following_compile_by_default(compile_, fused_optimizer, fused):
    loop = LoopConfig(optimizer="adam", compile=compile_, fused_optimizer=fused_optimizer)
    assert bool(build_optimizer(nn.Linear(2, 2).parameters(), loop).defaults["fused"]) is fused


def test_rmsprop_momentum_changes_the_update():
    def second_update(momentum):
        p = nn.Parameter(torch.ones(1))
        opt = build_optimizer([p], LoopConfig(optimizer="rmsprop", lr=0.1, momentum=momentum))
        for _ in range(2):
            p.grad = torch.ones(1)
            before = p.detach().clone()
            opt.step()
        return (before - p.detach()).item()

    assert second_update(0.9) > second_update(0.0) * 1.5


def test_schedules_by_formula():
    warm = LoopConfig(steps=100, warmup_steps=4)
    assert [lr_factor(s, warm) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    cos = LoopConfig(steps=104, warmup_steps=4, schedule="cosine")
    for s in (4, 30, 54, 80, 104):
        assert lr_factor(s, cos) == pytest.approx(0.5 * (1 + math.cos(math.pi * (s - 4) / 100)))
    step = LoopConfig(steps=100, schedule="step", step_size=10, gamma=0.5)
    assert [lr_factor(s, step) for s in (0, 9, 10, 25)] == [1.0, 1.0, 0.5, 0.25]


def test_scheduler_sets_the_optimizer_lr_each_step():
    loop = LoopConfig(steps=10, lr=0.2, warmup_steps=2, schedule="cosine")
    p = nn.Parameter(torch.zeros(1))
    opt = build_optimizer([p], loop)
    sched = build_scheduler(opt, loop)
    seen = []
    for _ in range(5):
        seen.append(opt.param_groups[0]["lr"])
        p.grad = torch.zeros(1)
        opt.step()
        sched.step()
    assert seen == pytest.approx([0.2 * lr_factor(s, loop) for s in range(5)])


def test_clipping_by_value_then_norm():
    a, b = nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(1))
    a.grad, b.grad = torch.tensor([5.0, -0.5]), torch.tensor([-3.0])
    assert clip_gradients([a, b], LoopConfig()) is None
    assert a.grad.tolist() == [5.0, -0.5]
    clip_gradients([a, b], LoopConfig(clip_value=1.0))
    assert a.grad.tolist() == [1.0, -0.5] and b.grad.tolist() == [-1.0]
    norm = clip_gradients([a, b], LoopConfig(clip_norm=0.5))
    assert norm == pytest.approx(1.5)
    total = torch.linalg.vector_norm(torch.cat([a.grad, b.grad]))
    assert total.item() == pytest.approx(0.5, rel=1e-5)
    # Direction is kept by norm clipping.
    assert a.grad[0] / b.grad[0] == pytest.approx(-1.0)


def test_scheduler_scale_is_read_every_step():
    # A task's lr_scale (the NTM recipes' anneal on mastery) multiplies the schedule from the next step on.
    loop = LoopConfig(steps=10, lr=0.2)
    p = nn.Parameter(torch.zeros(1))
    opt = build_optimizer([p], loop)
    state = {"scale": 1.0}
    sched = build_scheduler(opt, loop, scale=lambda: state["scale"])
    seen = []
    for step in range(4):
        seen.append(opt.param_groups[0]["lr"])
        state["scale"] = 0.1 if step >= 1 else 1.0
        p.grad = torch.zeros(1)
        opt.step()
        sched.step()
    assert seen == pytest.approx([0.2, 0.2, 0.02, 0.02])


def test_parameter_groups_scale_a_part_and_the_scheduler_keeps_the_ratio():
    model = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1)))
    loop = LoopConfig(steps=10, lr=0.1, schedule="cosine")
    groups = parameter_groups(model, {"1.1": 0.25}, loop.lr)
    opt = build_optimizer(groups, loop)
    sched = build_scheduler(opt, loop)
    scaled = {id(p) for p in model[1][1].parameters()}
    assert [{id(p) for p in g["params"]} == scaled for g in opt.param_groups] == [False, True]
    assert sum(len(g["params"]) for g in opt.param_groups) == len(list(model.parameters()))
    for _ in range(3):
        opt.step()
        sched.step()
    full, part = (g["lr"] for g in opt.param_groups)
    assert full < 0.1 and part == pytest.approx(full / 4)


def test_a_scaled_part_moves_by_its_rate():
    """Adam's first step moves every weight by about its group's rate: the scaled part by a quarter."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
    before = [p.detach().clone() for p in model.parameters()]
    opt = build_optimizer(parameter_groups(model, {"1": 0.25}, 0.01), LoopConfig(lr=0.01))
    model(torch.randn(8, 4)).square().mean().backward()
    opt.step()
    moved = [(p.detach() - b).abs().max().item() for p, b in zip(model.parameters(), before, strict=True)]
    assert moved[0] == pytest.approx(0.01, rel=1e-3) and moved[2] == pytest.approx(0.0025, rel=1e-3)


@pytest.mark.parametrize(
    ("scales", "match"),
    [({"2": 0.5}, "no submodule '2'"), ({"0": 0.0}, "positive"), ({"1": 0.5, "1.0": 0.5}, "inside '1'")],
)
def test_parameter_groups_name_what_is_wrong(scales, match):
    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 1)))
    with pytest.raises(ValueError, match=match):
        parameter_groups(model, scales, 1e-3)
