"""Gaussian glimpses in a traced graph: exported and compiled glimpses match eager at any parameters.

Eager ``truncate="auto"`` sizes its window from the parameters' values; a graph traced at one set of
parameters is run at others, so it must hold a product that does not depend on them (the dense one).
Each graph here is traced at wide Gaussians and run at narrow, zoomed-in ones, where eager reads a
small window (checked by counting the windowed product's calls), and the other way round.
"""

import math

import pytest
import torch
from torch import Tensor, nn
from torch._dynamo.testing import CompileCounter

import foveal.glimpse.separable as separable
from foveal.errors import FovealError
from foveal.glimpse import GaussianRead, gaussian_glimpse, gaussian_read
from foveal.models.draw import DRAW, DRAWSpec

SIZE = (4, 4)
TRACED = "reads the size of its window from the parameter values"

# seed 003's (mean_y, std_y, d_y, mean_x, std_x, d_x) on a 64 x 64 image, 4 x 4 Gaussians
WIDE = torch.tensor([[0.0, 4.0, 20.0, 0.0, 4.0, 20.0], [5.0, 8.0, 15.0, 10.0, 6.0, 18.0], [-10, 3, 25, 0, 10, 20]])
NARROW = torch.tensor([[10.0, 0.5, 1.0, 30.0, 0.5, 1.2], [40.0, 0.3, 0.8, 5.0, 0.4, 1.0], [50, 0.6, 1, 50, 0.6, 1]])
NARROW_ELSEWHERE = torch.tensor([[2.5, 0.9, 2.0, 55.0, 0.2, 0.5], [30, 0.5, -1, 30, 0.5, 1], [0.0, 0.4, 1, 61, 0.4, 1]])
# a narrow pair beside a sample with NaN parameters (eager reads it densely, the others through a
# window), and narrow Gaussians far off the image (they read zeros)
NAN_BESIDE_NARROW = torch.tensor([[10.0, 0.5, 1.0, 30.0, 0.5, 1.0], [math.nan] * 6, [20, 0.5, 1, 20, 0.5, 1]])
OFF_IMAGE = torch.tensor([[-200.0, 0.5, 1.0, 300.0, 0.5, 1.0], [90.0, 0.5, 1, -50, 0.5, 1], [10, 0.5, 1, 10, 0.5, 1]])

# DRAW's (g~_X, g~_Y, log sigma^2, log delta~, log gamma), N = 4 on 64 x 64: centred and spanning the
# image, or sigma^2 = e^-2 and a stride of ~1 px (a window of ~9 px), at three places
DRAW_WIDE = torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0], [0.2, -0.1, 1.0, -0.5, 0.3], [-0.3, 0.4, 2.0, 0.2, -0.2]])
DRAW_NARROW = torch.tensor([[0.0, 0.0, -2.0, -3.0, 0.3], [-0.6, 0.5, -2.5, -3.0, 0.0], [0.7, -0.7, -2.0, -3.5, -0.4]])


class Glimpse(nn.Module):
    """:func:`gaussian_glimpse` as a module, for :func:`torch.export.export`."""

    def __init__(self, truncate: object = "auto") -> None:
        super().__init__()
        self.truncate = truncate

    def forward(self, images: Tensor, params: Tensor) -> Tensor:
        return gaussian_glimpse(images, params, SIZE, truncate=self.truncate)


class Read(nn.Module):
    """DRAW's read of the image and the error image, :func:`gaussian_read`, as a module."""

    def forward(self, images: Tensor, params: Tensor, error_images: Tensor) -> Tensor:
        return gaussian_read(images, params, 4, error_images).output


@pytest.fixture(autouse=True)
def _fresh_compiler():
    # Compiled frames and their recompile counts are global: other tests' compiles must not decide ours.
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def windowed_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the windowed product has run since the test began (eager only: a graph has none)."""
    calls: list[int] = []
    original = separable._windowed

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(separable, "_windowed", counted)
    return calls


@pytest.fixture(scope="module")
def images() -> Tensor:
    return torch.rand(3, 2, 64, 64, generator=torch.Generator().manual_seed(1))


def eager_glimpse(images: Tensor, params: Tensor, calls: list[int], *, windowed: bool) -> Tensor:
    """Eager ``truncate="auto"``, checking that it took the window (or not), as the test means it to."""
    before = len(calls)
    out = gaussian_glimpse(images, params, SIZE)
    assert (len(calls) > before) == windowed
    return out


@pytest.mark.parametrize("traced_at", ["wide", "narrow"])
def test_exported_glimpse_matches_eager_at_parameters_it_was_not_traced_with(images, windowed_calls, traced_at):
    program = torch.export.export(Glimpse(), (images, WIDE if traced_at == "wide" else NARROW)).module()
    for params, windowed in ((NARROW, True), (WIDE, False), (NARROW_ELSEWHERE, True), (OFF_IMAGE, True)):
        expected = eager_glimpse(images, params, windowed_calls, windowed=windowed)
        torch.testing.assert_close(program(images, params), expected)
    # The NaN sample is NaN in both; the narrow ones beside it are unchanged by it.
    expected = eager_glimpse(images, NAN_BESIDE_NARROW, windowed_calls, windowed=True)
    torch.testing.assert_close(program(images, NAN_BESIDE_NARROW), expected, equal_nan=True)
    assert torch.isfinite(expected[[0, 2]]).all()


def test_exported_draw_read_matches_eager_at_other_parameters(images, windowed_calls):
    error_images = images - 0.5
    program = torch.export.export(Read(), (images, DRAW_WIDE, error_images)).module()
    for params, windowed in ((DRAW_NARROW, True), (DRAW_WIDE.flip(0), False), (DRAW_NARROW + 0.1, True)):
        before = len(windowed_calls)
        expected = gaussian_read(images, params, 4, error_images).output
        assert (len(windowed_calls) > before) == windowed
        torch.testing.assert_close(program(images, params, error_images), expected)


def test_exported_gaussian_read_module_matches_eager_at_other_states(images, windowed_calls):
    read = GaussianRead(5, 4)
    with torch.no_grad():  # h is the five parameters themselves
        read.params.weight.copy_(torch.eye(5))
        read.params.bias.zero_()
    error_images = images - 0.5
    program = torch.export.export(read, (images, DRAW_WIDE, error_images)).module()
    for h in (DRAW_NARROW, DRAW_WIDE + 0.05):
        expected = read(images, h, error_images)
        out = program(images, h, error_images)
        torch.testing.assert_close(out[0], expected.output)
        torch.testing.assert_close(tuple(out[1]), tuple(expected.window))
    assert windowed_calls, "the narrow state never took the window in eager: the test would not test it"


def test_compiled_glimpse_is_one_graph_that_matches_eager_at_every_parameter(images, windowed_calls):
    counter = CompileCounter()
    compiled = torch.compile(lambda i, p: gaussian_glimpse(i, p, SIZE), fullgraph=True, backend=counter)
    for params, windowed in ((WIDE, False), (NARROW, True), (OFF_IMAGE, True), (NARROW_ELSEWHERE, True)):
        expected = eager_glimpse(images, params, windowed_calls, windowed=windowed)
        torch.testing.assert_close(compiled(images, params), expected)
    torch.testing.assert_close(
        compiled(images, NAN_BESIDE_NARROW), gaussian_glimpse(images, NAN_BESIDE_NARROW, SIZE), equal_nan=True
    )
    assert counter.frame_count == 1  # no recompilation for new parameter values


def test_compiled_and_exported_glimpses_follow_new_batch_and_image_sizes(windowed_calls):
    compiled = torch.compile(lambda i, p: gaussian_glimpse(i, p, SIZE), fullgraph=True, backend="eager")
    batch, side = torch.export.Dim("batch"), torch.export.Dim("side", min=8, max=512)
    example = torch.rand(2, 1, 32, 32), WIDE[:2]
    shapes = ({0: batch, 2: side, 3: side}, {0: batch})
    program = torch.export.export(Glimpse(), example, dynamic_shapes=shapes).module()
    for B, H in ((2, 32), (3, 64), (5, 40)):
        images = torch.rand(B, 1, H, H)
        params = torch.cat([NARROW, NARROW_ELSEWHERE])[:B]
        expected = eager_glimpse(images, params, windowed_calls, windowed=True)
        torch.testing.assert_close(compiled(images, params), expected)
        torch.testing.assert_close(program(images, params), expected)


def test_compiled_glimpse_gradients_match_eager(images):
    target = torch.randn(3, 2, *SIZE, generator=torch.Generator().manual_seed(2))
    compiled = torch.compile(lambda i, p: gaussian_glimpse(i, p, SIZE), fullgraph=True, backend="aot_eager")
    grads = []
    for glimpse in (compiled, lambda i, p: gaussian_glimpse(i, p, SIZE)):
        leaves = images.clone().requires_grad_(), NARROW.clone().requires_grad_()
        (glimpse(*leaves) * target).sum().backward()
        grads.append([leaf.grad for leaf in leaves])
    (compiled_images, compiled_params), (eager_images, eager_params) = grads
    assert compiled_params.abs().sum() > 0
    torch.testing.assert_close(compiled_images, eager_images)
    torch.testing.assert_close(compiled_params, eager_params)


def test_truncate_true_is_refused_while_tracing_with_a_clear_error(images):
    with pytest.raises(FovealError, match=TRACED):
        torch.export.export(Glimpse(truncate=True), (images, NARROW))
    with pytest.raises(FovealError, match=TRACED):
        torch.export.export(GaussianRead(5, 4, truncate=True), (images, DRAW_NARROW))
    # A compile that may break the graph stops at the error too, rather than freezing a window size.
    with pytest.raises(FovealError, match=TRACED):
        torch.compile(lambda i, p: gaussian_glimpse(i, p, SIZE, truncate=True), backend="eager")(images, NARROW)
    # fullgraph=True reports it as its own error, with the message in it.
    with pytest.raises(RuntimeError, match=TRACED):
        torch.compile(lambda i, p: gaussian_glimpse(i, p, SIZE, truncate=True), fullgraph=True, backend="eager")(
            images, NARROW
        )
    # Outside a trace it is the windowed product, as before.
    torch.testing.assert_close(gaussian_glimpse(images, NARROW, SIZE, truncate=True), Glimpse()(images, NARROW))


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::torch.jit.TracerWarning")
def test_jit_trace_keeps_the_dense_product_too(images, windowed_calls):
    # Traced at narrow Gaussians, a recorded window would be too small for wide ones.
    traced = torch.jit.trace(Glimpse(), (images, NARROW))
    for params, windowed in ((WIDE, False), (NARROW_ELSEWHERE, True)):
        expected = eager_glimpse(images, params, windowed_calls, windowed=windowed)
        torch.testing.assert_close(traced(images, params), expected)
    with pytest.raises(FovealError, match=TRACED):
        torch.jit.trace(Glimpse(truncate=True), (images, NARROW))


def test_compiled_draw_forward_is_one_graph_that_matches_eager():
    model = DRAW((8, 8), 1, DRAWSpec(steps=3, enc_size=8, dec_size=8, z_size=2, read_size=2, write_size=3))
    x = (torch.rand(4, 1, 8, 8) > 0.5).float()
    noise = torch.randn(3, 4, 2)
    counter = CompileCounter()
    compiled = torch.compile(lambda x, noise: model(x, noise=noise), fullgraph=True, backend=counter)
    expected, out = model(x, noise=noise), compiled(x, noise)
    for field in ("logits", "nll", "kl", "log_weight"):
        torch.testing.assert_close(getattr(out, field), getattr(expected, field))
    # The binary check reads every pixel, so the graph leaves it out; eager still makes it.
    compiled(x * 0.5, noise)
    with pytest.raises(ValueError, match="binary"):
        model(x * 0.5, noise=noise)
    assert counter.frame_count == 1


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch's own jit.script_method, inside inductor
def test_inductor_compiled_glimpse_and_gradients_match_eager(images):
    # torch.compile's default backend generates C++ (a few seconds per graph on one core).
    compiled = torch.compile(lambda i, p: gaussian_glimpse(i, p, SIZE), fullgraph=True)
    target = torch.randn(3, 2, *SIZE, generator=torch.Generator().manual_seed(3))
    for params in (WIDE, NARROW, NARROW_ELSEWHERE):
        grads = []
        for glimpse in (compiled, lambda i, p: gaussian_glimpse(i, p, SIZE)):
            leaves = images.clone().requires_grad_(), params.clone().requires_grad_()
            out = glimpse(*leaves)
            (out * target).sum().backward()
            grads.append([out.detach(), *(leaf.grad for leaf in leaves)])
        for compiled_value, eager_value in zip(*grads, strict=True):
            torch.testing.assert_close(compiled_value, eager_value)
