"""attend's one kernel rule: choose_kernel names the kernel a call runs and, when it is not the fused one,
the reason; and attend runs what it names."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from foveal.attention import KERNELS, Additive, KernelChoice, attend, choose_kernel, core, fused_attention


def _qkv(*lead: int, n: int = 3, m: int = 4, d: int = 5) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*lead, size, d, generator=g, dtype=torch.float64) for size in (n, m, m))


def _ran(monkeypatch, q, k, v, **options) -> str:
    """Which kernel attend ran, read from the calls it made."""
    calls = []
    sdpa, count = F.scaled_dot_product_attention, core._count_linear
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **kw: calls.append("fused") or sdpa(*a, **kw))
    monkeypatch.setattr(core, "_count_linear", lambda *a, **kw: calls.append("count_linear") or count(*a, **kw))
    attend(q, k, v, **options)
    monkeypatch.undo()
    assert len(calls) <= 1
    return calls[0] if calls else "plain"


# (options, the kernel, words of the reason); the options are attend's, on 3-D inputs
NOT_FUSED = {
    "fused=False": (dict(fused=False), "plain", "fused=False was passed"),
    "need_weights": (dict(need_weights=True), "plain", "need_weights=True"),
    "callable score": (dict(score=Additive(5, 5, 4).double()), "plain", "score is a callable"),
    "count": (dict(score="dot", normalize="count"), "count_linear", "normalize='count'"),
    "count with a mask": (
        dict(score="dot", normalize="count", mask=torch.ones(3, 4, dtype=torch.bool)),
        "plain",
        "normalize='count'",
    ),
    "sparsemax": (dict(normalize="sparsemax"), "plain", "normalize='sparsemax'"),
    "fused forced on, weights asked": (dict(fused=True, need_weights=True), "plain", "need_weights=True"),
}


@pytest.mark.parametrize("case", NOT_FUSED)
def test_each_reason_the_fused_kernel_is_not_taken(monkeypatch, case):
    options, kernel, words = NOT_FUSED[case]
    q, k, v = _qkv(2)
    choice = choose_kernel(q, k, v, **options)
    assert choice.kernel == kernel and kernel in KERNELS
    assert choice.reason is not None and choice.reason.startswith(words)
    assert _ran(monkeypatch, q, k, v, **options) == kernel
    assert_close(attend(q, k, v, **options).output, attend(q, k, v, **{**options, "fused": False}).output)


def test_the_library_switch_is_a_reason_and_a_call_may_override_it(monkeypatch):
    q, k, v = _qkv(2)
    with fused_attention(False):
        choice = choose_kernel(q, k, v)
        assert choice.kernel == "plain" and choice.reason is not None and "set_fused_attention" in choice.reason
        assert _ran(monkeypatch, q, k, v) == "plain"
        assert choose_kernel(q, k, v, fused=True) == KernelChoice("fused", None)
        assert _ran(monkeypatch, q, k, v, fused=True) == "fused"
    assert choose_kernel(q, k, v) == KernelChoice("fused", None)  # the cache keys on the switch too


@pytest.mark.parametrize("empty", ["query", "key"])
def test_an_empty_sequence_is_a_reason(monkeypatch, empty):
    q, k, v = _qkv(2, n=0 if empty == "query" else 3, m=0 if empty == "key" else 4)
    choice = choose_kernel(q, k, v)
    assert choice.kernel == "plain" and choice.reason is not None and "empty" in choice.reason
    assert _ran(monkeypatch, q, k, v) == "plain"


@pytest.mark.parametrize(
    ("lead", "options"),
    [
        ((2, 3), {}),  # SDPA's own layout: the direct call
        ((2,), {}),  # folded into it
        ((2, 3), dict(score="cosine", temperature=0.5)),
        ((2,), dict(mask=torch.rand(3, 4, generator=torch.Generator().manual_seed(1)) < 0.7, dropout=0.0)),
        ((2,), dict(fused=True, score="dot")),
    ],
)
def test_the_fused_kernel_is_taken_with_no_reason(monkeypatch, lead, options):
    q, k, v = _qkv(*lead)
    assert choose_kernel(q, k, v, **options) == KernelChoice("fused", None)
    assert _ran(monkeypatch, q, k, v, **options) == "fused"
    assert_close(attend(q, k, v, **options).output, attend(q, k, v, **options, need_weights=True).output)


def test_choose_kernel_refuses_what_attend_refuses():
    q, k, v = _qkv(2)
    with pytest.raises(ValueError, match="unknown normalize 'softmin'"):
        choose_kernel(q, k, v, normalize="softmin")
    with pytest.raises(ValueError, match=r"key: expected shape"):
        choose_kernel(q, k[..., :4], v)
