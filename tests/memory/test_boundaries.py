"""Property tests of every public boundary of ``foveal.memory``: what it refuses, and where a poison stays.

Drawn by hypothesis over batch, head, row and column counts, ranks, dtypes and poisoned samples:

- a valid call returns finite values (weightings on the simplex where they should be);
- an invalid input (a wrong rank or batch size, an integer or mixed dtype, a list for a tensor, a
  size below 1, an even shift kernel, a bad constructor argument) raises ``ValueError`` from foveal's
  own code, with a message that names the argument, never an error from inside torch;
- a NaN or infinity in one sample raises nothing and stays in that sample: every other sample's
  output and input gradients are finite and exactly what they are without it;
- float16 addressing is finite wherever float32 is (a zero key, a zero memory, a zero weighting).

Every test counts its cases per boundary in ``CASES`` (``FOVEAL_CASE_COUNTS``: see tests/_boundaries.py, which
holds what this suite shares with the attention and glimpse ones).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import Tensor

from _boundaries import DTYPES, POISONS, Boundary, assert_refused, batch_leaves, counted_cases, examples
from foveal.memory import (
    MemoryInit,
    address,
    circular_shift,
    content_weights,
    cosine_similarity,
    head_param_size,
    interpolate,
    read,
    sharpen,
    shift_offsets,
    split_head_params,
    write,
)

CASES, _report_case_counts = counted_cases("memory")
MANY, FEW = examples(40), examples(12)


@dataclass(frozen=True)
class Case:
    """Sizes, dtype and a seed from which each boundary builds one valid call."""

    B: int
    H: int
    R: int
    C: int
    S: int
    dtype: torch.dtype
    seed: int


@st.composite
def cases(draw, min_batch: int = 1, dtypes=DTYPES) -> Case:
    R = draw(st.integers(1, 9))
    return Case(
        B=draw(st.integers(min_batch, 3)),
        H=draw(st.integers(1, 3)),
        R=R,
        C=draw(st.integers(1, 6)),
        S=draw(st.sampled_from([s for s in (1, 3, 5) if s <= R])),
        dtype=draw(dtypes),
        seed=draw(st.integers(0, 2**16)),
    )


def _tensors(case: Case, zero: float = 0.0) -> dict[str, Tensor]:
    """Every tensor an addressing step takes, in range; ``zero`` is the chance that a key or a memory row is 0."""
    g = torch.Generator().manual_seed(case.seed)
    B, H, R, C, S = case.B, case.H, case.R, case.C, case.S

    def randn(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    def simplex(*shape: int) -> Tensor:
        return (2 * randn(*shape)).softmax(-1)

    key, memory = randn(B, H, C), randn(B, R, C)
    key = key * (torch.rand(B, H, 1, generator=g, dtype=torch.float64) >= zero)
    memory = memory * (torch.rand(B, R, 1, generator=g, dtype=torch.float64) >= zero)
    tensors = dict(
        key=key,
        memory=memory,
        beta=torch.rand(B, H, generator=g, dtype=torch.float64) * 20,
        gate=torch.rand(B, H, generator=g, dtype=torch.float64),
        shift=simplex(B, H, S),
        gamma=1 + torch.rand(B, H, generator=g, dtype=torch.float64) * 30,
        w_prev=simplex(B, H, R),
        w_content=simplex(B, H, R),
        erase=torch.rand(B, H, C, generator=g, dtype=torch.float64),
        add=randn(B, H, C),
    )
    if zero:  # a weighting that is exactly 0 somewhere, or everywhere
        tensors["w_prev"] = tensors["w_prev"] * (torch.rand(B, H, R, generator=g, dtype=torch.float64) >= zero)
    return {name: t.to(case.dtype) for name, t in tensors.items()}


def _args(*names: str, **extra) -> Callable[[Case], dict]:
    def make(case: Case) -> dict:
        tensors = _tensors(case)
        return {name: tensors[name] for name in names} | extra

    return make


def _make_split(case: Case) -> dict:
    g = torch.Generator().manual_seed(case.seed)
    write_heads = bool(case.seed % 2)
    P = head_param_size(case.C, case.S, write=write_heads)
    raw = torch.randn(case.B, case.H, P, generator=g, dtype=torch.float64).to(case.dtype)
    return dict(raw=raw, n_cols=case.C, n_shifts=case.S, write=write_heads)


BAD_EPS = (-1e-3, math.nan, math.inf, "tiny")
BAD_COUNTS = (0, -1, 2.5, True, "3", None)
BAD_SHIFTS = (0, -1, 2, 4, 2.5, True, "3", None)

BOUNDARIES = [
    Boundary("cosine_similarity", _args("key", "memory"), cosine_similarity, ("key", "memory"), bad={"eps": BAD_EPS}),
    Boundary(
        "content_weights", _args("key", "memory", "beta"), content_weights, ("key", "memory", "beta"), {"eps": BAD_EPS}
    ),
    Boundary("interpolate", _args("w_content", "w_prev", "gate"), interpolate, ("w_content", "w_prev", "gate")),
    Boundary(
        "circular_shift",
        lambda c: dict(w=_tensors(c)["w_prev"], shift=_tensors(c)["shift"]),
        circular_shift,
        ("w", "shift"),
    ),
    Boundary(
        "sharpen",
        lambda c: dict(w=_tensors(c)["w_prev"], gamma=_tensors(c)["gamma"]),
        sharpen,
        ("w", "gamma"),
        bad={"eps": BAD_EPS},
    ),
    Boundary(
        "address",
        _args("key", "beta", "gate", "shift", "gamma", "memory", "w_prev"),
        address,
        ("key", "beta", "gate", "shift", "gamma", "memory", "w_prev"),
        bad={"eps": BAD_EPS},
    ),
    Boundary("read", lambda c: dict(memory=_tensors(c)["memory"], w=_tensors(c)["w_prev"]), read, ("memory", "w")),
    Boundary(
        "write",
        lambda c: dict(
            memory=_tensors(c)["memory"], w=_tensors(c)["w_prev"], erase=_tensors(c)["erase"], add=_tensors(c)["add"]
        ),
        write,
        ("memory", "w", "erase", "add"),
    ),
    Boundary(
        "split_head_params",
        _make_split,
        split_head_params,
        ("raw",),
        bad={"n_cols": BAD_COUNTS, "n_shifts": BAD_SHIFTS},
    ),
]


# --- valid calls ----------------------------------------------------------------------------------


@pytest.mark.parametrize("boundary", BOUNDARIES, ids=repr)
@MANY
@given(case=cases(), zero=st.sampled_from([0.0, 0.5, 1.0]))
def test_valid_calls_give_finite_values(boundary, case, zero):
    CASES[f"{boundary.name} (valid)"] += 1
    kwargs = boundary.make(case)
    if zero:  # zero keys, rows and weightings: every guard in play
        tensors = _tensors(case, zero)
        kwargs = {k: tensors.get(k, v) if k in tensors else v for k, v in kwargs.items()}
    outputs = batch_leaves(boundary.call(**kwargs), case.B)
    assert outputs
    for out in outputs:
        assert out.dtype == case.dtype and torch.isfinite(out).all()
    if boundary.name in ("content_weights", "sharpen", "address"):
        torch.testing.assert_close(out.sum(-1), torch.ones_like(out[..., 0]))


# --- invalid calls --------------------------------------------------------------------------------


@pytest.mark.parametrize("boundary", BOUNDARIES, ids=repr)
@MANY
@given(case=cases(), data=st.data())
def test_a_wrong_rank_is_refused_by_name(boundary, case, data):
    CASES[f"{boundary.name} (rank)"] += 1
    boundary.refuses_a_wrong_rank(boundary.make(case), data)


SHAPES = {
    "key": "BHC",
    "memory": "BRC",
    "beta": "BH",
    "gate": "BH",
    "gamma": "BH",
    "shift": "BHS",
    "w_prev": "BHR",
    "w_content": "BHR",
    "w": "BHR",
    "erase": "BHC",
    "add": "BHC",
    "raw": "BHP",
}
"""Each tensor's dims by name (``P``, the head's parameter count, is fixed by ``n_cols`` and ``n_shifts``)."""


@pytest.mark.parametrize("boundary", BOUNDARIES, ids=repr)
@MANY
@given(case=cases(), data=st.data())
def test_sizes_that_differ_are_refused_by_name(boundary, case, data):
    CASES[f"{boundary.name} (sizes)"] += 1
    kwargs = boundary.make(case)
    name = data.draw(st.sampled_from(boundary.batch), label="tensor")
    dims = SHAPES[name]
    dim = data.draw(st.sampled_from([i for i, d in enumerate(dims) if d != "S"]), label="dim")  # S: its own test
    tensor = kwargs[name]
    kwargs[name] = torch.cat([tensor, tensor.narrow(dim, 0, 1)], dim)
    sharing = [n for n in boundary.batch if dims[dim] in SHAPES[n] and n != name]
    if sharing or dims[dim] == "P":
        assert_refused(lambda: boundary.call(**kwargs), name, *sharing)
    else:  # a size no other tensor holds is free
        boundary.call(**kwargs)


@pytest.mark.parametrize("boundary", BOUNDARIES, ids=repr)
@MANY
@given(case=cases(), data=st.data())
def test_integer_or_mixed_dtypes_are_refused_by_name(boundary, case, data):
    CASES[f"{boundary.name} (dtype)"] += 1
    boundary.refuses_a_wrong_dtype(boundary.make(case), data, boundary.batch)


@pytest.mark.parametrize("boundary", [b for b in BOUNDARIES if b.bad], ids=repr)
@MANY
@given(case=cases(), data=st.data())
def test_bad_numbers_are_refused_by_name(boundary, case, data):
    CASES[f"{boundary.name} (sizes, options)"] += 1
    boundary.refuses_a_bad_value(boundary.make(case), data)


@FEW
@given(case=cases(), extra=st.sampled_from([1, 2]), through=st.sampled_from(["circular_shift", "address"]))
def test_an_even_or_long_shift_kernel_is_refused(case, extra, through):
    CASES[f"{through} (shift kernel)"] += 1
    tensors = _tensors(case)
    S = case.S + extra if extra == 1 else case.R + 1 + (case.R % 2)  # even, or odd but longer than R
    tensors["shift"] = torch.full((case.B, case.H, S), 1.0 / S, dtype=case.dtype)
    if through == "circular_shift":
        assert_refused(lambda: circular_shift(tensors["w_prev"], tensors["shift"]), "shift")
    else:
        names = ("key", "beta", "gate", "shift", "gamma", "memory", "w_prev")
        assert_refused(lambda: address(**{n: tensors[n] for n in names}), "shift")


@FEW
@given(value=st.sampled_from(BAD_SHIFTS))
def test_shift_offsets_and_head_param_size_refuse_bad_counts(value):
    CASES["shift_offsets (sizes)"] += 1
    CASES["head_param_size (sizes)"] += 1
    assert_refused(lambda: shift_offsets(value), "n_shifts")
    assert_refused(lambda: head_param_size(4, value, write=False), "n_shifts")
    if value not in (2, 4):  # even column counts are fine
        assert_refused(lambda: head_param_size(value, 3, write=True), "n_cols")


BAD_INITS = {
    "n_rows": (0, -2, 2.5, None),
    "n_cols": (0, -2, 2.5, None),
    "kind": ("zeros", None, 1),
    "value": (math.nan, math.inf, "1", None),
    "std": (-0.5, math.nan, math.inf, None),
    "learned_std": (-0.5, math.nan, None),
}


@FEW
@given(data=st.data())
def test_memory_init_refuses_bad_arguments_by_name(data):
    CASES["MemoryInit (constructor)"] += 1
    name = data.draw(st.sampled_from(sorted(BAD_INITS)), label="argument")
    kwargs = dict(n_rows=4, n_cols=3, kind="learned") | {name: data.draw(st.sampled_from(BAD_INITS[name]))}
    assert_refused(lambda: MemoryInit(**kwargs), name)


@FEW
@given(kind=st.sampled_from(["constant", "learned", "random"]), batch=st.sampled_from([-1, 2.5, None, "2"]))
def test_memory_init_forward_refuses_bad_batch_sizes(kind, batch):
    CASES["MemoryInit (forward)"] += 1
    init = MemoryInit(4, 3, kind=kind)
    assert_refused(lambda: init(batch), "batch_size")
    assert_refused(lambda: init(2, generator=0), "generator")
    assert init(0).shape == (0, 4, 3)


# --- poisoned samples -----------------------------------------------------------------------------


@pytest.mark.parametrize("boundary", BOUNDARIES, ids=repr)
@MANY
@given(case=cases(min_batch=2), data=st.data(), poison=POISONS)
def test_a_poisoned_sample_stays_in_its_sample(boundary, case, data, poison):
    CASES[f"{boundary.name} (poisoned sample)"] += 1
    boundary.keeps_a_poison_in_its_sample(boundary.make(case), case.B, data, poison)


# --- float16 --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cosine_similarity", "content_weights", "sharpen", "address"])
@MANY
@given(case=cases(dtypes=st.just(torch.float32)), zero=st.sampled_from([0.5, 1.0]))
def test_float16_addressing_is_finite_where_float32_is(name, case, zero):
    CASES[f"{name} (float16)"] += 1
    boundary = next(b for b in BOUNDARIES if b.name == name)
    tensors = _tensors(case, zero)
    kwargs = {k: tensors.get(k, v) if k in tensors else v for k, v in boundary.make(case).items()}
    if name == "sharpen":
        kwargs["w"] = tensors["w_prev"]
    half = {k: v.half() for k, v in kwargs.items()}
    reference = boundary.call(**{k: v.float() for k, v in half.items()})
    result = boundary.call(**half)
    assert result.dtype == torch.float16
    assert torch.isfinite(reference).all() and torch.isfinite(result).all()
    torch.testing.assert_close(result.float(), reference, rtol=1e-2, atol=2e-3)
    # Gradients: finite wherever float32's fit in float16 (the cosine's slope at a zero key is ~1/sqrt(eps),
    # which float16 cannot hold however it is computed).
    grads = {}
    for dtype in (torch.float32, torch.float16):
        leaves = {k: v.to(dtype).requires_grad_(True) for k, v in half.items()}
        boundary.call(**leaves).float().square().sum().backward()
        grads[dtype] = {k: leaf.grad.float() for k, leaf in leaves.items()}
    for k, reference in grads[torch.float32].items():
        representable = torch.isfinite(reference) & (reference.abs() < 6e4)
        assert torch.isfinite(grads[torch.float16][k][representable]).all(), f"gradient of {k}"
