"""Every mechanism that computes otherwise while a graph is traced, or that a model's compile plan gives its
graphs instead of the eager one, compiled against its eager self.

One case per mechanism with such a path, at small sizes: the compiled function's values and gradients (inputs
and weights) must be the eager ones. What each traced path is for:

- ``circular-shift``: the memory's shift, compiled in a graph of ``address``, builds its gather index afresh
  (the cache is for eager calls).
- ``shift-by-rolls``: the shift the NTM's compiled graphs take instead (its compile plan's keyword), one roll
  per allowed shift; the gather's gradient is a scatter-add, which the compiled CPU backward runs as a scalar
  loop. Eagerly it is held to the gather here too, in value and gradient; its gain is in
  results/compile-fast-paths.jsonl (studies/ntm-compile-speed).
- ``glimpse-window``: a traced glimpse takes the dense product, exact at any parameters; eagerly ``"auto"`` may
  take the window, whose size is read from the parameter values.
- ``question-encoder``: the LSTM over every position with the lengths as a mask; packing reads the lengths
  on the host, which a graph cannot.

Compiling with inductor generates C++ (seconds per graph), so those runs are ``slow``; the default run keeps
one, the shift traced by ``aot_eager`` (the traced path, without code generation), and the rolls held to the
gather eagerly.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import Tensor, nn

from foveal.glimpse import gaussian_glimpse
from foveal.memory import circular_shift
from foveal.models.ntm import circular_shift_by_rolls
from foveal.models.vqa.encoders import QuestionEncoder

Built = tuple[Callable[..., Tensor], tuple[Tensor, ...], list[nn.Parameter]]


def _circular_shift(generator: torch.Generator) -> Built:
    w = torch.rand(3, 2, 7, generator=generator, dtype=torch.float64).softmax(-1)
    shift = torch.rand(3, 2, 3, generator=generator, dtype=torch.float64).softmax(-1)
    return circular_shift, (w, shift), []


def _shift_by_rolls(generator: torch.Generator) -> Built:
    _, inputs, weights = _circular_shift(generator)
    return circular_shift_by_rolls, inputs, weights


def _glimpse(generator: torch.Generator) -> Built:
    images = torch.rand(2, 1, 24, 24, generator=generator, dtype=torch.float64)
    # narrow Gaussians (eagerly "auto" takes their window) and wide ones, (mean_y, std_y, d_y, mean_x, std_x, d_x)
    params = torch.tensor([[3.0, 0.5, 1.0, -2.0, 0.5, 1.2], [0.0, 3.0, 6.0, 1.0, 3.0, 5.0]], dtype=torch.float64)
    return (lambda i, p: gaussian_glimpse(i, p, (3, 3))), (images, params), []


def _question_encoder(generator: torch.Generator) -> Built:
    torch.manual_seed(0)
    encoder = QuestionEncoder(9, 8, embed_dim=4).double()
    length = torch.tensor([5, 2, 3])
    tokens = torch.randint(1, 9, (3, 5), generator=generator)
    question = torch.where(torch.arange(5) < length[:, None], tokens, 0)
    return (lambda q, n: encoder.states(q, n).words), (question, length), list(encoder.parameters())


CASES: dict[str, Callable[[torch.Generator], Built]] = {
    "circular-shift": _circular_shift,
    "shift-by-rolls": _shift_by_rolls,
    "glimpse-window": _glimpse,
    "question-encoder": _question_encoder,
}


def _values_and_gradients(function: Callable[..., Tensor], inputs: tuple[Tensor, ...], weights: list[nn.Parameter]):
    leaves = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    out = function(*leaves)
    wrt = [x for x in leaves if x.requires_grad] + weights
    direction = torch.randn(out.shape, generator=torch.Generator().manual_seed(7), dtype=out.dtype)
    return [out.detach(), *torch.autograd.grad((out * direction).sum(), wrt)]


def _assert_compiled_equals_eager(case: str, backend: str) -> None:
    torch._dynamo.reset()  # another test's graphs and recompile counts must not decide this one's
    function, inputs, weights = CASES[case](torch.Generator().manual_seed(0))
    compiled = torch.compile(function, backend=backend, fullgraph=True)
    expected = _values_and_gradients(function, inputs, weights)
    got = _values_and_gradients(compiled, inputs, weights)
    assert len(got) == len(expected) > 1
    for index, (value, want) in enumerate(zip(got, expected, strict=True)):
        torch.testing.assert_close(value, want, rtol=1e-9, atol=1e-10, msg=f"{case}: output/gradient {index}")


def test_the_traced_circular_shift_equals_the_eager_one():
    _assert_compiled_equals_eager("circular-shift", "aot_eager")


@pytest.mark.parametrize("n_shifts", [1, 3, 5, 7])  # 7: as many shifts as memory rows
def test_the_ntm_graphs_shift_by_rolls_equals_the_circular_shift_in_value_and_gradient(n_shifts):
    generator = torch.Generator().manual_seed(0)
    w = torch.rand(3, 2, 7, generator=generator, dtype=torch.float64)  # any weighting, not only a simplex
    shift = torch.rand(3, 2, n_shifts, generator=generator, dtype=torch.float64).softmax(-1)
    got = _values_and_gradients(circular_shift_by_rolls, (w, shift), [])
    expected = _values_and_gradients(circular_shift, (w, shift), [])
    for index, (value, want) in enumerate(zip(got, expected, strict=True)):
        torch.testing.assert_close(value, want, rtol=1e-12, atol=1e-14, msg=f"output/gradient {index}")
    assert torch.autograd.gradcheck(circular_shift_by_rolls, (w.requires_grad_(), shift.requires_grad_()))


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch's own jit.script_method, inside inductor
def test_compiled_mechanism_equals_eager(case, backend):
    _assert_compiled_equals_eager(case, backend)
