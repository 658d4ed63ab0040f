"""What the boundary suites of attention, glimpse and memory share: settings, refusals, case counts,
and the property checks that glimpse and memory run on each of their public functions.

Each suite counts its cases per boundary in a ``Counter``; set ``FOVEAL_CASE_COUNTS=path.json`` and
every suite that runs adds its counts to that file when it finishes, under its package's prefix
(``attention.attend (invalid)``, ``glimpse.crop (valid)``, ...).
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from torch import Tensor

POISONS = st.sampled_from([math.nan, math.inf, -math.inf])
DTYPES = st.sampled_from([torch.float32, torch.float64])


def examples(n: int) -> settings:
    """Hypothesis settings for ``n`` examples a test, with no deadline: the suites run on a shared core."""
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_refused(call: Callable[[], object], *names: str) -> str:
    """``call()`` raises ValueError from foveal's code (not torch's) with a message naming one of ``names``."""
    with pytest.raises(ValueError) as info:
        call()
    frame = info.tb
    while frame.tb_next is not None:
        frame = frame.tb_next
    where = frame.tb_frame.f_code.co_filename
    assert f"{os.sep}foveal{os.sep}" in where and "site-packages" not in where, f"raised in {where}: {info.value}"
    message = str(info.value)
    assert any(name in message for name in names), f"{message!r} names none of {names}"
    return message


def counted_cases(prefix: str) -> tuple[Counter[str], Callable]:
    """A suite's case counter, and the module fixture that adds it to ``$FOVEAL_CASE_COUNTS`` under ``prefix``.

    Use as ``CASES, _report_case_counts = counted_cases("glimpse")`` at a test module's top level.
    """
    cases: Counter[str] = Counter()

    @pytest.fixture(scope="module", autouse=True)
    def _report_case_counts():
        yield
        path = os.environ.get("FOVEAL_CASE_COUNTS")
        if path:
            # Merged, not overwritten, so one file holds the counts of every suite of a run.
            counts = json.loads(Path(path).read_text()) if os.path.exists(path) else {}
            counts.update({f"{prefix}.{name}": n for name, n in sorted(cases.items())})
            Path(path).write_text(json.dumps(counts, indent=1))

    return cases, _report_case_counts


# --- one boundary, as the glimpse and memory suites drive it ----------------------------------------


@dataclass(frozen=True)
class Boundary:
    """One public function or module, as the tests drive it, and the properties they check of it.

    ``make`` builds the keyword arguments of a valid call from a drawn case, ``call`` makes it.
    ``batch`` names the batch-first tensors in the order the boundary checks them (the first one
    binds ``B``); ``floats`` those that must be floating point; ``bad`` maps each non-tensor argument
    to values it must refuse; ``window`` names the tensors whose poison takes a sample out of the
    batch's Gaussian window (glimpse only).
    """

    name: str
    make: Callable[..., dict]
    call: Callable[..., object]
    batch: tuple[str, ...] = ()
    floats: tuple[str, ...] = ()
    bad: dict[str, tuple] = field(default_factory=dict)
    window: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return self.name

    def refuses_a_wrong_rank(self, kwargs: dict, data: st.DataObject) -> None:
        """One of the call's tensors with a dim more or a dim less is refused by its name."""
        names = sorted({n for n in (*self.batch, *self.floats) if isinstance(kwargs.get(n), Tensor)})
        name = data.draw(st.sampled_from(names), label="tensor")
        tensor = kwargs[name]
        add = data.draw(st.booleans(), label="add a dim") or tensor.dim() == 0
        kwargs = {**kwargs, name: tensor.unsqueeze(0) if add else tensor[..., 0]}
        assert_refused(lambda: self.call(**kwargs), name)

    def refuses_a_wrong_dtype(self, kwargs: dict, data: st.DataObject, floats: Sequence[str]) -> None:
        """One of ``floats`` as integers, bools, a list or the other float dtype is refused by its name.

        The other float dtype is no mix where that tensor is the call's only floating-point one and
        no module's parameters fix the dtype: then the call goes through.
        """
        present = [n for n in floats if kwargs.get(n) is not None]
        name = data.draw(st.sampled_from(present), label="tensor")
        change = data.draw(st.sampled_from(["int64", "int32", "bool", "other float", "list"]), label="change")
        tensor = kwargs[name]
        other = torch.float64 if tensor.dtype == torch.float32 else torch.float32
        kwargs = {
            **kwargs,
            name: {
                "int64": lambda: tensor.round().long(),
                "int32": lambda: tensor.round().int(),
                "bool": lambda: tensor > 0.5,
                "other float": lambda: tensor.to(other),
                "list": lambda: tensor.tolist(),
            }[change](),
        }
        if change == "other float" and len(present) == 1 and "module" not in kwargs:
            self.call(**kwargs)
            return
        assert_refused(lambda: self.call(**kwargs), name)

    def refuses_a_bad_value(self, kwargs: dict, data: st.DataObject) -> None:
        """One non-tensor argument set to one of its ``bad`` values is refused by its name."""
        name = data.draw(st.sampled_from(sorted(self.bad)), label="argument")
        kwargs = {**kwargs, name: data.draw(st.sampled_from(self.bad[name]), label="value")}
        assert_refused(lambda: self.call(**kwargs), name)

    def keeps_a_poison_in_its_sample(self, kwargs: dict, B: int, data: st.DataObject, poison: float) -> None:
        """A NaN or infinity in one element of one sample raises nothing and leaves the other samples as they were.

        The others' outputs and input gradients are finite and equal, to the bit, those of the clean
        call; for a poison in what sizes the Gaussian window (``window``), those of the batch without
        the poisoned sample.
        """
        targets = [n for n in self.batch if isinstance(kwargs.get(n), Tensor) and kwargs[n].is_floating_point()]
        name = data.draw(st.sampled_from(targets), label="poisoned tensor")
        victim = data.draw(st.integers(0, B - 1), label="victim")
        where = data.draw(st.integers(0, max(kwargs[name][victim].numel() - 1, 0)), label="element")
        poisoned = {**kwargs, name: kwargs[name].clone()}
        poisoned[name][victim].view(-1)[where] = poison  # a view of a fresh tensor: writes through
        others = [i for i in range(B) if i != victim]

        dirty_out, dirty_grads = _run(self, poisoned, B)
        # A poison in what sizes the window takes the sample out of it: the others are as if it were not there.
        clean = _without(self, kwargs, victim, donor=others[0]) if name in self.window else kwargs
        clean_out, clean_grads = _run(self, clean, B)
        assert len(dirty_out) == len(clean_out)
        for i, (dirty, reference) in enumerate(zip(dirty_out, clean_out, strict=True)):
            assert torch.isfinite(reference[others]).all(), f"output {i}: the clean run is not finite"
            torch.testing.assert_close(
                dirty[others], reference[others], rtol=0, atol=0, msg=f"output {i} of the others"
            )
        for grad_name, reference in clean_grads.items():
            dirty = dirty_grads[grad_name]
            assert torch.isfinite(reference[others]).all(), f"gradient of {grad_name}: the clean run is not finite"
            torch.testing.assert_close(dirty[others], reference[others], rtol=0, atol=0, msg=f"gradient of {grad_name}")


def batch_leaves(result: object, B: int) -> list[Tensor]:
    """Every batch-first tensor of a result (a tensor, or NamedTuples of them, nested)."""
    if isinstance(result, Tensor):
        return [result] if result.dim() >= 1 and result.shape[0] == B else []
    if isinstance(result, tuple):
        return [leaf for item in result for leaf in batch_leaves(item, B)]
    return []


def _run(boundary: Boundary, kwargs: dict, B: int) -> tuple[list[Tensor], dict[str, Tensor]]:
    """The boundary's batch-first outputs and the input gradients of a fixed projection of them."""
    leaves = {}
    for name in boundary.batch:
        tensor = kwargs.get(name)
        if isinstance(tensor, Tensor) and tensor.is_floating_point():
            leaves[name] = tensor.detach().clone().requires_grad_(True)
    outputs = batch_leaves(boundary.call(**{**kwargs, **leaves}), B)
    generator = torch.Generator().manual_seed(7)
    loss = 0
    for out in outputs:
        if out.is_floating_point() and out.requires_grad:
            weights = torch.randn(out.shape, generator=generator, dtype=torch.float64).to(out.dtype)
            loss = loss + (out * weights).sum()
    grads = {}
    if isinstance(loss, Tensor):
        found = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
        grads = {name: grad for name, grad in zip(leaves, found, strict=True) if grad is not None}
    return [out.detach() for out in outputs], grads


def _without(boundary: Boundary, kwargs: dict, victim: int, donor: int) -> dict:
    """``kwargs`` with sample ``victim`` a copy of sample ``donor``: for the window, the batch without the victim.

    A copy rather than a smaller batch keeps the batch size, and with it the exact rounding of
    torch's own layers (an ``nn.Linear`` rounds a batch of one differently from a batch of two).
    """
    copied = {}
    for name, value in kwargs.items():
        if name in boundary.batch and isinstance(value, Tensor):
            value = value.clone()
            value[victim] = value[donor]
        copied[name] = value
    return copied
