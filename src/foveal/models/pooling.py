"""Max pooling that a compiled graph runs as element-wise work.

Inductor lowers the backward of ``max_pool2d`` to a scatter through the saved indices, a scalar loop
with index arithmetic per element, which was the largest single cost of the VQA models' compiled
step. For the common 2 x 2, stride-2 pool the max of a window is the max of four strided views, and
its backward a choice among four: both fuse with the BatchNorm and ReLU around them.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from foveal._checks import tracing


class MaxPool2d(nn.MaxPool2d):
    """:class:`torch.nn.MaxPool2d`; while a graph is traced, a 2 x 2 stride-2 pool is computed by
    :class:`WindowMax` instead of the library's kernel.

    The values and the gradient are the library's: the gradient of each window goes to its first
    maximum in row-major order, as ``max_pool2d``'s does. Eager code, other pool settings and symbolic
    image sizes take the library's kernel.

    Shape:
        - input: ``(B, C, H, W)``
        - output: ``(B, C, H // 2, W // 2)`` for the 2 x 2 pool

    Example:
        >>> pool = MaxPool2d(2)
        >>> pool(torch.arange(16.0).view(1, 1, 4, 4)).flatten().tolist()
        [5.0, 7.0, 13.0, 15.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        H, W = input.shape[-2:]
        plain = (
            _pair(self.kernel_size) == (2, 2)
            and _pair(self.stride) == (2, 2)
            and _pair(self.padding) == (0, 0)
            and _pair(self.dilation) == (1, 1)
            and not self.ceil_mode
            and not self.return_indices
        )
        if plain and tracing() and isinstance(H, int) and isinstance(W, int) and input.dim() == 4:
            # like the library's pool, an odd last row or column is left out
            return WindowMax.apply(input[..., : H - H % 2, : W - W % 2])
        return super().forward(input)


def _pair(value: Any) -> tuple[Any, Any]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


def _corners(x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The four elements of every 2 x 2 window, in row-major order, as strided views."""
    return x[..., 0::2, 0::2], x[..., 0::2, 1::2], x[..., 1::2, 0::2], x[..., 1::2, 1::2]


class WindowMax(torch.autograd.Function):
    """The max of each 2 x 2 window (stride 2) of an even-sized ``(B, C, H, W)`` map, and its gradient to
    the window's first maximum in row-major order. A NaN in a window makes its max NaN, and its
    gradient goes to the window's last element."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        top_left, top_right, bottom_left, bottom_right = _corners(x)
        window_max = torch.maximum(torch.maximum(top_left, top_right), torch.maximum(bottom_left, bottom_right))
        ctx.save_for_backward(x, window_max)
        return window_max

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        x, window_max = ctx.saved_tensors
        top_left, top_right, bottom_left, _ = _corners(x)
        first = top_left == window_max
        second = (top_right == window_max) & ~first
        third = (bottom_left == window_max) & ~(first | second)
        fourth = ~(first | second | third)
        zero = grad.new_zeros(())
        top = torch.stack([torch.where(first, grad, zero), torch.where(second, grad, zero)], dim=-1)
        bottom = torch.stack([torch.where(third, grad, zero), torch.where(fourth, grad, zero)], dim=-1)
        # (B, C, H/2, 2, W/2, 2): window row, row within it, window column, column within it
        return torch.stack([top, bottom], dim=3).reshape(x.shape)
