"""The traced 2 x 2 max pool: the library's values and gradients, ties and odd sizes included."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from foveal.models.pooling import MaxPool2d, WindowMax


def maps(dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Maps with ties: flat regions (as a synthetic scene gives) and the zeros a ReLU leaves."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 7, 9, generator=generator, dtype=dtype)
    x[0, 0, :4, :4] = 1.5  # every element of two whole windows equal
    x[1, 2, 2:4, 4:6] = torch.tensor([[0.5, 2.0], [2.0, 2.0]], dtype=dtype)  # a tie after the first element
    return x.relu()


def pooled_and_gradient(pool, x: torch.Tensor, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.clone().requires_grad_()
    out = pool(x)
    (x_grad,) = torch.autograd.grad(out, x, grad)
    return out, x_grad


@pytest.mark.parametrize("channels_last", [False, True])
def test_the_traced_pool_gives_the_librarys_values_and_gradients(channels_last):
    x = maps()
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    grad = torch.randn(2, 3, 3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    expected = pooled_and_gradient(lambda t: F.max_pool2d(t, 2), x, grad)
    traced = torch.compile(MaxPool2d(2), backend="aot_eager", fullgraph=True)
    for got, want in zip(pooled_and_gradient(traced, x, grad), expected, strict=True):
        assert torch.equal(got, want)
    # each tied window's gradient went to one element (the first), not split among them
    assert torch.equal(expected[1][0, 0, :2, :2], torch.tensor([[grad[0, 0, 0, 0], 0.0], [0.0, 0.0]]))


def test_the_traced_pool_runs_no_max_pool_kernel_and_others_keep_it():
    def targets(module):
        exported = torch.export.export(module, (maps(torch.float32),))
        return {str(node.target) for node in exported.graph.nodes}

    assert not any("max_pool2d" in target for target in targets(MaxPool2d(2)))
    # other settings take the library's kernel
    assert any("max_pool2d" in target for target in targets(MaxPool2d(3, stride=2)))
    assert any("max_pool2d" in target for target in targets(MaxPool2d(2, ceil_mode=True)))


def test_window_max_gradcheck():
    # without ties, the gradient is the derivative (gradcheck perturbs each element)
    x = torch.randn(2, 2, 4, 6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert torch.autograd.gradcheck(WindowMax.apply, (x.requires_grad_(),))


def test_eager_pool_is_the_library_module():
    pool = MaxPool2d(2)
    assert isinstance(pool, nn.MaxPool2d)
    x = maps()
    assert torch.equal(pool(x), F.max_pool2d(x, 2))
