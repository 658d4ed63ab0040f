"""Property tests of every public boundary of ``foveal.attention``: what it refuses, and what padding cannot do.

Three properties, drawn by hypothesis over shapes, ranks, dtypes and masks:

- an invalid input (a wrong rank, size, batch, dtype or mask; a bad constructor argument) raises
  ``ValueError`` from foveal's own code, with a message that names the argument, never an error from
  inside torch;
- an empty set (no keys, regions or words) gives a finite, defined result;
- a NaN or Inf at a masked (padded) position changes neither the output nor any gradient: the
  poisoned run equals the clean one, and the gradient at the poisoned position is zero.

Every test counts its cases per boundary in ``CASES`` (``FOVEAL_CASE_COUNTS``: see tests/_boundaries.py, which
holds what this suite shares with the glimpse and memory ones).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import Tensor, nn
from torch.testing import assert_close

import foveal  # noqa: F401  (importing the package registers every module)
from _boundaries import DTYPES, POISONS, assert_refused, counted_cases, examples
from foveal.attention import (
    NON_LOCAL_SIMILARITIES,
    NORMALIZERS,
    AddCoords,
    Additive,
    AlternatingCoAttention,
    Attention,
    Bilinear,
    ChannelAttention,
    CrossLayerAttention,
    GridBiLSTM,
    HopCoAttention,
    MapAttention,
    NonLocalBlock,
    ParallelCoAttention,
    ResidualSelfAttention,
    SpatialAttention,
    StackedAttention,
    TransformerFusion,
    add_coords,
    attend,
    box_weights,
    flatten_grid,
    gate,
    grid_coords,
    masked_softmax,
    score_logits,
    unflatten_grid,
)
from foveal.attention.coattention import masked_mean
from foveal.registry import ATTENTION

CASES, _report_case_counts = counted_cases("attention")
# Examples per test (per parametrised case); the whole module runs in about half a minute on one core.
MANY, SOME, FEW = examples(100), examples(60), examples(25)
SEEDS = st.integers(0, 2**16)


# --- helpers -------------------------------------------------------------------------------------


def _randn(generator: torch.Generator, *shape: int, dtype: torch.dtype = torch.float64) -> Tensor:
    return torch.randn(*shape, generator=generator, dtype=dtype)


def _randomised(module: nn.Module, seed: int, dtype: torch.dtype = torch.float64) -> nn.Module:
    # Random parameters everywhere (zero-initialised ones too), so no gradient is zero by accident.
    generator = torch.Generator().manual_seed(seed)
    module = module.to(dtype)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.5)
    return module


def _poison(x: Tensor, where: Tensor, value: float) -> Tensor:
    """``x`` with the vectors at ``where`` (bool, ``x``'s shape without its last dim) set to ``value``."""
    return torch.where(where.unsqueeze(-1), torch.full_like(x, value), x)


def _run(
    fn: Callable[..., object],
    tensors: dict[str, Tensor],
    pick: Callable[[object], Sequence[Tensor | None]],
    module: nn.Module | None = None,
) -> tuple[list[Tensor | None], dict[str, Tensor | None]]:
    """Outputs chosen by ``pick`` and the gradients of a fixed random projection of them."""
    leaves = {name: t.detach().clone().requires_grad_(t.is_floating_point()) for name, t in tensors.items()}
    if module is not None:
        module.zero_grad(set_to_none=True)
    outputs = list(pick(fn(**leaves)))
    generator = torch.Generator().manual_seed(123)
    loss = torch.zeros((), dtype=torch.float64)
    for out in outputs:
        if out is not None and out.requires_grad:
            loss = loss + (out * torch.randn(out.shape, generator=generator, dtype=out.dtype)).sum().double()
    if loss.requires_grad:
        loss.backward()
    grads = {name: leaf.grad for name, leaf in leaves.items() if leaf.requires_grad}
    if module is not None:
        grads.update({f"param {name}": p.grad for name, p in module.named_parameters()})
    return [None if out is None else out.detach() for out in outputs], grads


def assert_poison_inert(clean: tuple, poisoned: tuple, **tolerance: float) -> None:
    """The poisoned run's outputs and gradients are finite and equal the clean run's."""
    (clean_out, clean_grads), (dirty_out, dirty_grads) = clean, poisoned
    for i, (a, b) in enumerate(zip(clean_out, dirty_out, strict=True)):
        if a is None:
            assert b is None
            continue
        assert torch.isfinite(b).all(), f"output {i} is not finite"
        assert_close(b, a, msg=f"output {i}", **tolerance)
    for name, a in clean_grads.items():
        b = dirty_grads[name]
        if a is None or b is None:
            assert a is None and b is None, name
            continue
        assert torch.isfinite(b).all(), f"gradient of {name} is not finite"
        assert_close(b, a, msg=f"gradient of {name}", **tolerance)


def _tolerance(dtype: torch.dtype) -> dict[str, float]:
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-9, "atol": 1e-10}


# --- attend, score_logits, masked_softmax ----------------------------------------------------------

SCORES = ("dot", "scaled_dot", "cosine", "additive", "bilinear")


def _score(name: str, d: int, seed: int, dtype: torch.dtype):
    if name == "additive":
        return _randomised(Additive(d, d, hidden=3), seed, dtype)
    if name == "bilinear":
        return _randomised(Bilinear(d, d), seed, dtype)
    return name


@st.composite
def attend_cases(draw) -> dict:
    case = dict(
        B=draw(st.integers(1, 3)),
        heads=draw(st.sampled_from([None, 2])),
        n=draw(st.integers(1, 4)),
        m=draw(st.integers(1, 6)),
        d=draw(st.integers(1, 4)),
        p=draw(st.integers(1, 3)),
        score=draw(st.sampled_from(SCORES)),
        per_query=draw(st.booleans()),
        dtype=draw(DTYPES),
        seed=draw(SEEDS),
        temperature=draw(st.sampled_from([1.0, 0.25, 4.0])),
        normalize=draw(st.sampled_from(NORMALIZERS)),
    )
    return case


def _attend_tensors(case: dict) -> tuple[dict[str, Tensor], Tensor]:
    """query, key, value and a mask; returns them and the padded keys ``(B, m)`` (no query may attend them)."""
    g = torch.Generator().manual_seed(case["seed"])
    lead = (case["B"],) if case["heads"] is None else (case["B"], case["heads"])
    n, m, dtype = case["n"], case["m"], case["dtype"]
    tensors = {
        "query": _randn(g, *lead, n, case["d"], dtype=dtype),
        "key": _randn(g, *lead, m, case["d"], dtype=dtype),
        "value": _randn(g, *lead, m, case["p"], dtype=dtype),
    }
    padded = torch.rand(case["B"], m, generator=g) < 0.4
    rows = n if case["per_query"] else 1
    mask = (torch.rand(case["B"], rows, m, generator=g) < 0.8) & ~padded.unsqueeze(1)
    if case["heads"] is not None:
        mask = mask.unsqueeze(1)  # one mask for every head
    tensors["mask"] = mask
    return tensors, padded


@MANY
@given(case=attend_cases(), poison=POISONS, target=st.sampled_from(["key", "value", "both"]), path=st.integers(0, 2))
def test_attend_poisoned_padding_is_inert(case, poison, target, path):
    CASES["attend (poisoned padding)"] += 1
    tensors, padded = _attend_tensors(case)
    score = _score(case["score"], case["d"], case["seed"], case["dtype"])
    module = score if isinstance(score, nn.Module) else None
    fused, need_weights = [(False, True), (True, False), (None, False)][path]
    run = dict(
        score=score,
        temperature=case["temperature"],
        fused=fused,
        need_weights=need_weights,
        normalize=case["normalize"],
    )

    def call(query, key, value, mask):
        return attend(query, key, value, mask=mask, **run)

    where = padded if case["heads"] is None else padded.unsqueeze(1).expand(-1, case["heads"], -1)
    dirty = dict(tensors)
    for name in ("key", "value") if target == "both" else (target,):
        dirty[name] = _poison(tensors[name], where, poison)
    clean = _run(call, tensors, tuple, module)
    assert_poison_inert(clean, _run(call, dirty, tuple, module), **_tolerance(case["dtype"]))
    # ...and whichever path ran, it agrees with the plain one.
    plain = attend(**tensors, **{**run, "fused": False}).output
    assert_close(clean[0][0], plain.detach(), **_tolerance(case["dtype"]))
    for name in ("key", "value"):  # the poisoned positions get exactly zero gradient
        grad = clean[1][name]
        assert (grad[where] == 0).all()


@MANY
@given(case=attend_cases(), fused=st.booleans())
def test_attend_empty_sets_are_defined(case, fused):
    CASES["attend (empty sets)"] += 1
    tensors, _ = _attend_tensors(case)
    query, key, value = tensors["query"], tensors["key"][..., :0, :], tensors["value"][..., :0, :]
    score = _score(case["score"], case["d"], case["seed"], case["dtype"])
    run = dict(score=score, fused=fused, need_weights=not fused, normalize=case["normalize"])
    out, weights = attend(query, key, value, **run)
    assert out.shape == (*query.shape[:-1], value.shape[-1]) and (out == 0).all()
    assert weights is None or weights.shape == (*query.shape[:-1], 0)
    empty = attend(query[..., :0, :], tensors["key"], tensors["value"], **run).output
    assert empty.shape == (*query.shape[:-2], 0, value.shape[-1])


def _corrupt_attend(case: dict, corruption: str, tensors: dict) -> tuple[dict, tuple[str, ...]]:
    """One invalid change to a valid call of attend; returns the call's keywords and the names the error may use."""
    q, k, v, mask = tensors["query"], tensors["key"], tensors["value"], tensors["mask"]
    other = torch.float32 if case["dtype"] == torch.float64 else torch.float64
    rows = torch.ones(*mask.shape[:-2], case["n"] + 1, case["m"], dtype=torch.bool)  # neither n nor 1
    changes = {
        "query rank 1": (dict(query=q[(0,) * (q.dim() - 1)]), ("query",)),
        "key feature size": (dict(key=torch.cat([k, k[..., :1]], -1)), ("key",)),
        "value length": (dict(value=torch.cat([v, v[..., :1, :]], -2)), ("value",)),
        "key batch": (dict(query=_batch(q, 2), key=_batch(k, 3)), ("key",)),
        "value batch": (dict(query=_batch(q, 2), key=_batch(k, 2), value=_batch(v, 3)), ("value",)),
        "key dtype": (dict(key=k.to(other)), ("key",)),
        "integer query": (dict(query=q.long()), ("query",)),
        "float mask": (dict(mask=mask.to(q.dtype)), ("mask",)),
        "mask length": (dict(mask=torch.cat([mask, mask[..., :1]], -1)), ("mask",)),
        "mask extra dim": (dict(mask=mask.unsqueeze(0).expand(2, *mask.shape)), ("mask",)),
        "mask rows": (dict(mask=rows), ("mask",)),
        "mask not a tensor": (dict(mask=[[True]]), ("mask",)),
        "unknown score": (dict(score="gaussian"), ("score",)),
        "unknown normalize": (dict(normalize="mean"), ("normalize",)),
        "zero temperature": (dict(score="cosine", temperature=0.0), ("temperature",)),
        "negative temperature": (dict(score="cosine", temperature=-1.0), ("temperature",)),
        "nan temperature": (dict(score="cosine", temperature=math.nan), ("temperature",)),
        "no features": (dict(query=q[..., :0], key=k[..., :0]), ("query",)),
    }
    change, names = changes[corruption]
    kwargs = {"query": q, "key": k, "value": v, "mask": mask, "score": "dot", **change}
    if "batch" in corruption:
        kwargs["mask"] = None  # a batch-1 mask would broadcast; the mismatch here is the tensors'
    return kwargs, names


def _batch(x: Tensor, size: int) -> Tensor:
    """``x`` with a batch of ``size`` (the first ``size`` of it repeated), the other leading dims as they are."""
    return x[:1].expand(size, *x.shape[1:])


ATTEND_CORRUPTIONS = [
    "query rank 1",
    "key feature size",
    "value length",
    "key batch",
    "value batch",
    "key dtype",
    "integer query",
    "float mask",
    "mask length",
    "mask extra dim",
    "mask rows",
    "mask not a tensor",
    "unknown score",
    "unknown normalize",
    "zero temperature",
    "negative temperature",
    "nan temperature",
    "no features",
]


@MANY
@given(case=attend_cases(), corruption=st.sampled_from(ATTEND_CORRUPTIONS), fused=st.booleans())
def test_attend_refuses_invalid_inputs(case, corruption, fused):
    CASES["attend (invalid)"] += 1
    tensors, _ = _attend_tensors(case)
    kwargs, names = _corrupt_attend(case, corruption, tensors)
    assert_refused(lambda: attend(**kwargs, fused=fused, need_weights=not fused), *names)


@MANY
@given(
    case=attend_cases(),
    corruption=st.sampled_from(
        [
            "key feature size",
            "key batch",
            "key dtype",
            "integer query",
            "unknown score",
            "zero temperature",
            "nan temperature",
        ]
    ),
)
def test_score_logits_refuses_invalid_inputs(case, corruption):
    CASES["score_logits (invalid)"] += 1
    tensors, _ = _attend_tensors(case)
    kwargs, names = _corrupt_attend(case, corruption, tensors)
    kwargs = {k: kwargs[k] for k in ("query", "key", "score", "temperature") if k in kwargs}
    assert_refused(lambda: score_logits(**kwargs), *names)


@MANY
@given(case=attend_cases(), poison=POISONS)
def test_masked_softmax_poisoned_logits_are_inert(case, poison):
    CASES["masked_softmax (poisoned)"] += 1
    tensors, _ = _attend_tensors(case)
    g = torch.Generator().manual_seed(case["seed"])
    mask = tensors["mask"].expand(*tensors["mask"].shape[:-2], case["n"], case["m"])
    logits = _randn(g, *mask.shape, dtype=case["dtype"])
    dirty = torch.where(mask, logits, poison)
    clean = _run(lambda logits: (masked_softmax(logits, mask),), {"logits": logits}, tuple)
    assert_poison_inert(clean, _run(lambda logits: (masked_softmax(logits, mask),), {"logits": dirty}, tuple))
    weights = clean[0][0]
    assert_close(weights.sum(-1), mask.any(-1).to(weights.dtype))


@MANY
@given(case=attend_cases(), corruption=st.sampled_from(["float mask", "mask length", "mask extra dim", "integer"]))
def test_masked_softmax_refuses_invalid_inputs(case, corruption):
    CASES["masked_softmax (invalid)"] += 1
    tensors, _ = _attend_tensors(case)
    mask = tensors["mask"]
    logits = torch.zeros(*mask.shape[:-2], case["n"], case["m"], dtype=case["dtype"])
    if corruption == "integer":
        assert_refused(lambda: masked_softmax(logits.long(), mask), "logits")
        return
    kwargs, names = _corrupt_attend(case, corruption, tensors)
    assert_refused(lambda: masked_softmax(logits, kwargs["mask"]), *names)


# --- the registered modules: one sweep of invalid inputs -------------------------------------------

NAMES = ATTENTION.names()


def _build(name: str, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return ATTENTION.get(name)(8)


def _arg_names(module: nn.Module, count: int) -> list[str]:
    return list(inspect.signature(module.forward).parameters)[:count]


def _corrupt(x: object, kind: str) -> object:
    """One invalid change to one argument; lists (CrossLayerAttention's layers) change their first tensor."""
    if isinstance(x, list):
        return [_corrupt(x[0], kind), *x[1:]]
    if kind == "extra dims":
        return x[..., None, None].expand(*x.shape, 2, 2)
    if kind == "no batch dim":
        return x[0]
    if kind == "batch + 1":
        return torch.cat([x, x[:1]])
    if kind == "float64":
        return x.double() if x.is_floating_point() else x.float()
    if kind == "integer":
        return x.long()
    raise AssertionError(kind)


@pytest.mark.parametrize("name", NAMES)
@SOME
@given(
    kind=st.sampled_from(["extra dims", "no batch dim", "batch + 1", "float64", "integer"]),
    which=st.integers(0, 3),
    batch=st.integers(2, 3),
    seed=SEEDS,
)
def test_registered_modules_refuse_invalid_inputs(name, kind, which, batch, seed):
    module = _build(name, 0)
    args = list(module.example_inputs(batch, torch.Generator().manual_seed(seed)))
    which = which % len(args)
    if kind == "batch + 1" and which == 0:
        which = 1 if len(args) > 1 else 0
        if len(args) == 1:
            kind = "extra dims"
    CASES[f"{type(module).__name__} (invalid)"] += 1
    names = _arg_names(module, len(args))
    args[which] = _corrupt(args[which], kind)
    allowed = (names[which],) if kind != "batch + 1" else (names[which], names[0])
    assert_refused(lambda: module(*args), *allowed)


@pytest.mark.parametrize("name", NAMES)
@FEW
@given(batch=st.integers(1, 3), seed=SEEDS)
def test_registered_modules_accept_valid_inputs(name, batch, seed):
    module = _build(name, seed)
    CASES[f"{type(module).__name__} (valid)"] += 1
    out = module(*module.example_inputs(batch, torch.Generator().manual_seed(seed)))
    for t in out:
        tensors = t if isinstance(t, tuple) else (t,)
        assert all(torch.isfinite(x).all() for x in tensors if isinstance(x, Tensor) and x.is_floating_point())


# --- constructor arguments -------------------------------------------------------------------------

BAD_SIZES = [0, -1, -8, 2.5, True, "4"]

CONSTRUCTORS: dict[str, tuple[Callable[..., nn.Module], dict, tuple[str, ...]]] = {
    "Attention": (Attention, dict(dim=8), ("dim", "key_dim", "value_dim", "out_dim", "qk_dim", "heads")),
    "MapAttention": (MapAttention, dict(dim=8), ("dim", "heads", "qk_dim")),
    "NonLocalBlock": (NonLocalBlock, dict(channels=8), ("channels", "inner", "heads")),
    "SpatialAttention": (SpatialAttention, dict(c_dim=8), ("c_dim", "q_dim", "k_dim")),
    "StackedAttention": (StackedAttention, dict(dim=8), ("dim", "k_dim", "hops")),
    "ChannelAttention": (ChannelAttention, dict(dim=8), ("dim", "q_dim", "k_dim")),
    "CrossLayerAttention": (CrossLayerAttention, dict(dim=8), ("dim", "q_dim", "k_dim")),
    "HopCoAttention": (HopCoAttention, dict(dim=8), ("dim", "hops", "k_dim")),
    "ParallelCoAttention": (ParallelCoAttention, dict(dim=8), ("dim", "k_dim")),
    "AlternatingCoAttention": (AlternatingCoAttention, dict(dim=8), ("dim", "k_dim")),
    "TransformerFusion": (TransformerFusion, dict(dim=8), ("dim", "heads")),
    "GridBiLSTM": (GridBiLSTM, dict(dim=8), ("dim", "layers")),
    "ResidualSelfAttention": (ResidualSelfAttention, dict(dim=8), ("dim", "k_dim")),
    "Additive": (Additive, dict(query_dim=8, key_dim=8, hidden=4), ("query_dim", "key_dim", "hidden")),
    "Bilinear": (Bilinear, dict(query_dim=8, key_dim=8), ("query_dim", "key_dim")),
}

# Options other than sizes, each with the argument the message must name.
BAD_OPTIONS: list[tuple[str, dict, str]] = [
    ("Attention", dict(heads=3), "heads"),  # 8 is not divisible by 3
    ("Attention", dict(score="gaussian"), "score"),
    ("Attention", dict(score="cosine", temperature=0.0), "temperature"),
    ("Attention", dict(score="cosine", temperature=-2.0), "temperature"),
    ("Attention", dict(score="cosine", temperature=math.nan), "temperature"),
    ("MapAttention", dict(score="cosine", temperature=0.0), "temperature"),
    ("NonLocalBlock", dict(inner=6, heads=4), "heads"),
    ("SpatialAttention", dict(score="cosine", temperature=0.0), "temperature"),
    ("SpatialAttention", dict(score="cosine", temperature=-1.0), "temperature"),
    ("SpatialAttention", dict(score="bilinear"), "score"),
    ("SpatialAttention", dict(score="linear"), "question"),
    ("NonLocalBlock", dict(f="softmax"), "f"),
    ("NonLocalBlock", dict(f="concatenation", score="dot"), "score"),
    ("Attention", dict(normalize="sum"), "normalize"),
    ("Attention", dict(embed=False, qk_dim=4), "qk_dim"),
    ("SpatialAttention", dict(q_dim=4, score="dot"), "q_dim"),
    ("CrossLayerAttention", dict(layer_dims=()), "layer_dims"),
    ("CrossLayerAttention", dict(layer_dims=(8, 0)), "layer_dims"),
    ("ParallelCoAttention", dict(pool="mean"), "pool"),
    ("TransformerFusion", dict(heads=3), "heads"),
    ("TransformerFusion", dict(mlp_ratio=0.0), "mlp_ratio"),
    ("TransformerFusion", dict(mlp_ratio=-1.0), "mlp_ratio"),
    ("TransformerFusion", dict(mlp_ratio=0.01), "mlp_ratio"),
    ("GridBiLSTM", dict(dim=7), "dim"),
]


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
@FEW
@given(which=st.integers(0, 5), bad=st.sampled_from(BAD_SIZES))
def test_constructors_refuse_bad_sizes(name, which, bad):
    CASES[f"{name}() (bad size)"] += 1
    factory, required, sizes = CONSTRUCTORS[name]
    arg = sizes[which % len(sizes)]
    kwargs = {**required, arg: bad}
    positional = [kwargs.pop(k) for k in list(required)]
    assert_refused(lambda: factory(*positional, **kwargs), arg)


@pytest.mark.parametrize(("name", "options", "arg"), BAD_OPTIONS)
def test_constructors_refuse_bad_options(name, options, arg):
    CASES[f"{name}() (bad option)"] += 1
    factory, required, _ = CONSTRUCTORS[name]
    kwargs = {**required, **options}
    positional = [kwargs.pop(k) for k in list(required)]
    assert_refused(lambda: factory(*positional, **kwargs), arg)


# --- Attention and MapAttention: padded keys ---------------------------------------------------------


@SOME
@given(case=attend_cases(), poison=POISONS, fused=st.booleans(), value_is_key=st.booleans())
def test_attention_module_poisoned_padding_is_inert(case, poison, fused, value_is_key):
    CASES["Attention (poisoned padding)"] += 1
    heads = case["heads"] or 1
    d = 2 * case["d"]
    g = torch.Generator().manual_seed(case["seed"])
    B, n, m, dtype = case["B"], case["n"], case["m"], case["dtype"]
    score = _score(case["score"], d // heads, 1, dtype)
    value_dim = 3 if value_is_key else 5
    module = Attention(
        d, key_dim=3, value_dim=value_dim, out_dim=4, heads=heads, score=score, normalize=case["normalize"]
    )
    module = _randomised(module, 2, dtype)
    tensors = {"query": _randn(g, B, n, d, dtype=dtype), "key": _randn(g, B, m, 3, dtype=dtype)}
    if not value_is_key:
        tensors["value"] = _randn(g, B, m, 5, dtype=dtype)
    padded = torch.rand(B, m, generator=g) < 0.4
    rows = n if case["per_query"] else 1
    mask = (torch.rand(B, rows, m, generator=g) < 0.8) & ~padded.unsqueeze(1)
    dirty = {name: _poison(t, padded, poison) if name != "query" else t for name, t in tensors.items()}

    def call(query, key, value=None):
        return module(query, key, value, mask, not fused)

    assert_poison_inert(_run(call, tensors, tuple, module), _run(call, dirty, tuple, module), **_tolerance(dtype))


@SOME
@given(case=attend_cases(), poison=POISONS)
def test_map_attention_poisoned_padding_is_inert(case, poison):
    CASES["MapAttention (poisoned padding)"] += 1
    g = torch.Generator().manual_seed(case["seed"])
    B, dtype = case["B"], case["dtype"]
    module = _randomised(MapAttention(4, key_dim=3, out_dim=4, heads=case["heads"] or 1), 0, dtype)
    query_map = _randn(g, B, 4, 2, case["n"], dtype=dtype)
    key_map = _randn(g, B, 3, case["m"], 2, dtype=dtype)
    padded = torch.rand(B, case["m"] * 2, generator=g) < 0.4  # positions of the flattened key map
    mask = (torch.rand(B, 2 * case["n"], 2 * case["m"], generator=g) < 0.8) & ~padded.unsqueeze(1)
    spot = padded.view(B, 1, case["m"], 2)
    dirty = torch.where(spot, poison, key_map)

    def call(key_map):
        return module(query_map, key_map, None, mask)

    assert_poison_inert(_run(call, {"key_map": key_map}, tuple, module), _run(call, {"key_map": dirty}, tuple, module))


# --- SpatialAttention and StackedAttention: masked regions -------------------------------------------


@st.composite
def region_cases(draw) -> dict:
    return dict(
        B=draw(st.integers(1, 3)),
        N=draw(st.integers(1, 7)),
        questions=draw(st.sampled_from([None, 1, 3])),
        dtype=draw(DTYPES),
        seed=draw(SEEDS),
        with_keys=draw(st.booleans()),
        poison=draw(POISONS),
        target=draw(st.sampled_from(["V", "keys", "both"])),
    )


def _region_tensors(case: dict, C: int) -> tuple[dict[str, Tensor], Tensor, dict[str, Tensor]]:
    g = torch.Generator().manual_seed(case["seed"])
    B, N, dtype = case["B"], case["N"], case["dtype"]
    q_shape = (B, C) if case["questions"] is None else (B, case["questions"], C)
    tensors = {"V": _randn(g, B, N, C, dtype=dtype), "h_Q": _randn(g, *q_shape, dtype=dtype)}
    if case["with_keys"]:
        tensors["keys"] = _randn(g, B, N, C, dtype=dtype)
    mask = torch.rand(B, N, generator=g) < 0.6
    dirty = dict(tensors)
    for name in ("V", "keys") if case["target"] == "both" else (case["target"],):
        if name in tensors:
            dirty[name] = _poison(tensors[name], ~mask, case["poison"])
    return tensors, mask, dirty


@SOME
@given(case=region_cases(), score=st.sampled_from(["additive", "multiplicative", "dot", "cosine"]))
def test_spatial_attention_poisoned_regions_are_inert(case, score):
    CASES["SpatialAttention (poisoned regions)"] += 1
    module = _randomised(SpatialAttention(5, 5, 4, score=score), 0, case["dtype"])
    tensors, mask, dirty = _region_tensors(case, 5)

    def call(V, h_Q, keys=None):
        return module(V, h_Q, mask, keys)

    clean = _run(call, tensors, tuple, module)
    assert_poison_inert(clean, _run(call, dirty, tuple, module), **_tolerance(case["dtype"]))
    weights = clean[0][1]
    assert (weights.transpose(0, -2)[..., ~mask] == 0).all() if weights.dim() == 3 else (weights[~mask] == 0).all()


@SOME
@given(case=region_cases(), score=st.sampled_from(["additive", "dot"]), hops=st.integers(1, 3))
def test_stacked_attention_poisoned_regions_are_inert(case, score, hops):
    CASES["StackedAttention (poisoned regions)"] += 1
    module = _randomised(StackedAttention(5, k_dim=4, hops=hops, score=score), 0, case["dtype"])
    tensors, mask, dirty = _region_tensors(case, 5)
    tensors["v_Q"] = tensors.pop("h_Q")
    dirty["v_Q"] = dirty.pop("h_Q")

    def call(V, v_Q, keys=None):
        return module(V, v_Q, mask, keys)

    assert_poison_inert(
        _run(call, tensors, tuple, module), _run(call, dirty, tuple, module), **_tolerance(case["dtype"])
    )


@MANY
@given(case=region_cases(), score=st.sampled_from(["additive", "multiplicative", "dot", "cosine"]))
def test_spatial_attention_empty_and_fully_masked(case, score):
    CASES["SpatialAttention (empty sets)"] += 1
    module = SpatialAttention(5, 5, 4, score=score).to(case["dtype"])
    tensors, mask, _ = _region_tensors(case, 5)
    out, weights = module(tensors["V"][:, :0], tensors["h_Q"])
    assert (out == 0).all() and weights.shape[-1] == 0
    out, weights = module(tensors["V"], tensors["h_Q"], torch.zeros_like(mask))
    assert (out == 0).all() and (weights == 0).all()


@MANY
@given(
    case=region_cases(),
    corruption=st.sampled_from(["h_Q rank 1", "h_Q rank 4", "mask rank 1", "mask float", "keys length", "V float64"]),
)
def test_spatial_attention_refuses_invalid_inputs(case, corruption):
    CASES["SpatialAttention (invalid)"] += 1
    module = SpatialAttention(5, 5, 4)
    tensors, mask, _ = _region_tensors(case, 5)
    V, h_Q = tensors["V"].float(), tensors["h_Q"].float()
    keys = None
    if corruption == "h_Q rank 1":
        h_Q, name = h_Q.reshape(-1)[:5], "h_Q"
    elif corruption == "h_Q rank 4":
        h_Q, name = h_Q.reshape(*h_Q.shape[:-1], 1, 5)[:, None], "h_Q"
    elif corruption == "mask rank 1":
        mask, name = mask[0], "mask"
    elif corruption == "mask float":
        mask, name = mask.float(), "mask"
    elif corruption == "keys length":
        keys, name = torch.zeros(case["B"], case["N"] + 1, 5), "keys"
    else:
        V, name = V.double(), "V"
    assert_refused(lambda: module(V, h_Q, mask, keys), name)


# --- the co-attention family and the transformer block: padded words ---------------------------------

COATTENTION = {
    "independent": lambda: HopCoAttention(5, hops=2, k_dim=4),
    "joint": lambda: HopCoAttention(5, hops=2, k_dim=4, joint=True),
    "parallel-max": lambda: ParallelCoAttention(5, k_dim=4),
    "parallel-learned": lambda: ParallelCoAttention(5, pool="learned", k_dim=4),
    "alternating": lambda: AlternatingCoAttention(5, k_dim=4),
    "transformer": lambda: TransformerFusion(6, heads=2),
}


@st.composite
def word_cases(draw) -> dict:
    B = draw(st.integers(1, 3))
    T = draw(st.integers(1, 6))
    return dict(
        B=B,
        T=T,
        N=draw(st.integers(1, 6)),
        lengths=draw(st.lists(st.integers(0, T), min_size=B, max_size=B)),
        dtype=draw(DTYPES),
        seed=draw(SEEDS),
        poison=draw(POISONS),
        with_v_Q=draw(st.booleans()),
    )


def _word_tensors(case: dict, d: int, with_v_Q: bool) -> tuple[dict[str, Tensor], Tensor]:
    g = torch.Generator().manual_seed(case["seed"])
    B, T, N, dtype = case["B"], case["T"], case["N"], case["dtype"]
    tensors = {"V": _randn(g, B, N, d, dtype=dtype), "Q": _randn(g, B, T, d, dtype=dtype)}
    if with_v_Q:
        tensors["v_Q"] = _randn(g, B, d, dtype=dtype)
    mask = torch.arange(T) < torch.tensor(case["lengths"]).unsqueeze(1)
    return tensors, mask


@pytest.mark.parametrize("name", sorted(COATTENTION))
@SOME
@given(case=word_cases())
def test_coattention_and_fusion_poisoned_words_are_inert(case, name):
    CASES[
        f"{name} co-attention (poisoned words)" if name != "transformer" else "TransformerFusion (poisoned words)"
    ] += 1
    module = _randomised(COATTENTION[name](), 0, case["dtype"])
    d = 6 if name == "transformer" else 5
    with_v_Q = case["with_v_Q"] and name != "transformer"
    tensors, mask = _word_tensors(case, d, with_v_Q)
    dirty = {**tensors, "Q": _poison(tensors["Q"], ~mask, case["poison"])}

    def call(V, Q, v_Q=None):
        return module(V, Q, mask) if name == "transformer" else module(V, Q, mask, v_Q)

    clean = _run(call, tensors, tuple, module)
    assert_poison_inert(clean, _run(call, dirty, tuple, module), **_tolerance(case["dtype"]))
    word_weights = clean[0][3 if name == "transformer" else 2]  # image_to_words (B, h, N, T) or (B, S, T)
    assert (word_weights.movedim(-1, 1)[~mask] == 0).all()


@pytest.mark.parametrize("name", sorted(COATTENTION))
@FEW
@given(case=word_cases(), empty=st.sampled_from(["words", "regions"]))
def test_coattention_and_fusion_empty_sets_are_defined(case, name, empty):
    CASES[f"{name} co-attention (empty sets)" if name != "transformer" else "TransformerFusion (empty sets)"] += 1
    module = COATTENTION[name]().to(case["dtype"])
    d = 6 if name == "transformer" else 5
    tensors, mask = _word_tensors(case, d, False)
    V, Q = tensors["V"], tensors["Q"]
    if empty == "words":
        Q, mask = Q[:, :0], mask[:, :0]
    else:
        V = V[:, :0]
    for m in (None, mask):
        out = module(V, Q, m)
        for t in out:
            assert t is None or torch.isfinite(t).all()


@MANY
@given(case=word_cases(), poison=POISONS)
def test_masked_mean_poisoned_rows_are_inert(case, poison):
    CASES["masked_mean (poisoned rows)"] += 1
    tensors, mask = _word_tensors(case, 3, False)
    x = tensors["Q"]
    dirty = _poison(x, ~mask, poison)
    clean = _run(lambda x: (masked_mean(x, mask),), {"x": x}, tuple)
    assert_poison_inert(clean, _run(lambda x: (masked_mean(x, mask),), {"x": dirty}, tuple))
    assert (clean[0][0][~mask.any(1)] == 0).all()
    assert (masked_mean(x[:, :0], None) == 0).all() and (masked_mean(x[:, :0], mask[:, :0]) == 0).all()


# --- ResidualSelfAttention: padded regions ---------------------------------------------------------------


@SOME
@given(case=region_cases(), fused=st.booleans())
def test_residual_self_attention_poisoned_regions_are_inert(case, fused):
    CASES["ResidualSelfAttention (poisoned regions)"] += 1
    module = _randomised(ResidualSelfAttention(5, k_dim=3), 0, case["dtype"])
    tensors, mask, _ = _region_tensors(case, 5)
    dirty = _poison(tensors["V"], ~mask, case["poison"])

    def call(V):
        # A padded region's own output row carries its own vector (the residual); the rest must not.
        out, weights = module(V, mask)
        return torch.where(mask.unsqueeze(-1), out, 0), weights

    clean = _run(call, {"V": tensors["V"]}, tuple, module)
    assert_poison_inert(clean, _run(call, {"V": dirty}, tuple, module), **_tolerance(case["dtype"]))


# --- channel and cross-layer attention, the BiLSTM context, the non-local block: empty sets ----------------


@MANY
@given(B=st.integers(1, 3), empty=st.sets(st.integers(0, 2)), dtype=DTYPES, seed=SEEDS)
def test_channel_and_cross_layer_empty_sets_are_defined(B, empty, dtype, seed):
    CASES["ChannelAttention/CrossLayerAttention (empty sets)"] += 1
    g = torch.Generator().manual_seed(seed)
    h_Q = _randn(g, B, 6, dtype=dtype)
    channel = ChannelAttention(6, k_dim=4).to(dtype)
    out, beta = channel(_randn(g, B, 0, 6, dtype=dtype), h_Q)
    assert out.shape == (B, 0, 6) and torch.isfinite(beta).all()
    assert_close(beta.sum(-1), torch.ones(B, dtype=dtype))
    cross = CrossLayerAttention(6, layer_dims=(3, 4, 5), k_dim=4).to(dtype)
    layers = [_randn(g, B, 0 if l in empty else 4, c, dtype=dtype) for l, c in enumerate((3, 4, 5))]
    out, gamma, _ = cross(layers, h_Q)
    assert torch.isfinite(out).all() and torch.isfinite(gamma).all()
    assert (gamma[:, sorted(empty)] == 0).all()
    expected = torch.zeros(B, dtype=dtype) if len(empty) == 3 else torch.ones(B, dtype=dtype)
    assert_close(gamma.sum(-1), expected)


@MANY
@given(
    B=st.integers(1, 3),
    spatial=st.lists(st.integers(0, 3), min_size=1, max_size=3),
    dtype=DTYPES,
    f=st.sampled_from(NON_LOCAL_SIMILARITIES),
)
def test_maps_and_sequences_with_no_positions(B, spatial, dtype, f):
    CASES["NonLocalBlock/MapAttention/GridBiLSTM (empty maps)"] += 1
    x = torch.randn(B, 4, *spatial, dtype=dtype)
    block = _randomised(NonLocalBlock(4, f=f), 0, dtype)
    out, _ = block(x)
    assert out.shape == x.shape and torch.isfinite(out).all()
    attn = MapAttention(4).to(dtype)
    assert attn(torch.randn(B, 4, 2, dtype=dtype), x).output.shape == (B, 4, 2)
    lstm = GridBiLSTM(4).to(dtype)
    flat = flatten_grid(x)
    assert lstm(flat).output.shape == flat.shape


# --- gate, grids and coordinates ---------------------------------------------------------------------


@MANY
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    poison=POISONS,
    dtype=DTYPES,
    seed=SEEDS,
)
def test_hard_gate_poisoned_features_it_drops_are_inert(shape, poison, dtype, seed):
    CASES["gate (poisoned dropped features)"] += 1
    g = torch.Generator().manual_seed(seed)
    features, logits = _randn(g, *shape, dtype=dtype), _randn(g, *shape, dtype=dtype)
    dirty = torch.where(logits > 0, features, poison)

    def call(features):
        return gate(features, logits, hard=True)[:2]

    assert_poison_inert(_run(call, {"features": features}, tuple), _run(call, {"features": dirty}, tuple))


@MANY
@given(
    corruption=st.sampled_from(["scalar", "size", "batch", "integer logits", "not a tensor"]),
    shape=st.lists(st.integers(2, 4), min_size=1, max_size=3),
)
def test_gate_refuses_invalid_inputs(corruption, shape):
    CASES["gate (invalid)"] += 1
    features, logits = torch.randn(*shape), torch.randn(*shape)
    if corruption == "scalar":
        features, names = torch.tensor(1.0), ("features",)
    elif corruption == "size":
        logits, names = torch.randn(*shape[:-1], shape[-1] + 1), ("logits",)
    elif corruption == "batch":
        features, logits, names = torch.randn(3, *shape), torch.randn(4, *shape), ("logits",)
    elif corruption == "integer logits":
        logits, names = logits.long(), ("logits",)
    else:
        features, names = features.tolist(), ("features",)
    assert_refused(lambda: gate(features, logits), *names)


GRID_CORRUPTIONS = [
    "flatten rank 2",
    "unflatten size",
    "unflatten negative",
    "unflatten empty",
    "add_coords rank 3",
    "AddCoords rank 5",
    "grid_coords negative",
    "box_weights last dim",
    "box_weights grid 0",
    "box_weights image size",
    "box_weights integer",
]


@pytest.mark.parametrize("corruption", GRID_CORRUPTIONS)
@FEW
@given(B=st.integers(1, 3), H=st.integers(1, 4), W=st.integers(1, 4))
def test_grid_and_coordinate_helpers_refuse_invalid_inputs(corruption, B, H, W):
    CASES[f"{corruption.split()[0]} (invalid)"] += 1
    x = torch.randn(B, 3, H, W)
    boxes = torch.rand(B, 4) * 10
    calls = {
        "flatten rank 2": (lambda: flatten_grid(x[0, 0]), "x"),
        "unflatten size": (lambda: unflatten_grid(flatten_grid(x), (H + 1, W)), "x"),
        "unflatten negative": (lambda: unflatten_grid(flatten_grid(x), (-H, -W)), "spatial"),
        "unflatten empty": (lambda: unflatten_grid(flatten_grid(x), ()), "spatial"),
        "add_coords rank 3": (lambda: add_coords(x[0]), "x"),
        "AddCoords rank 5": (lambda: AddCoords()(x[None]), "x"),
        "grid_coords negative": (lambda: grid_coords(-H, W), "height"),
        "box_weights last dim": (lambda: box_weights(boxes[:, :3], (10, 10), (H, W)), "boxes"),
        "box_weights grid 0": (lambda: box_weights(boxes, (10, 10), (0, W)), "grid_size"),
        "box_weights image size": (lambda: box_weights(boxes, (10,), (H, W)), "image_size"),
        "box_weights integer": (lambda: box_weights(boxes.long(), (10, 10), (H, W)), "boxes"),
    }
    call, name = calls[corruption]
    assert_refused(call, name)


@MANY
@given(B=st.integers(0, 3), C=st.integers(1, 4), spatial=st.lists(st.integers(0, 4), min_size=1, max_size=3))
def test_flatten_and_unflatten_are_inverse(B, C, spatial):
    CASES["flatten_grid/unflatten_grid (valid)"] += 1
    x = torch.randn(B, C, *spatial)
    assert torch.equal(unflatten_grid(flatten_grid(x), spatial), x)
