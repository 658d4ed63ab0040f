"""The roofline every benchmark prints: FLOPs of a call, and the machine's float32 GEMM rate now.

A benchmark times a GEMM in the same interleaved rounds as the arms it compares, so "% of peak" is
measured under the same load; the FLOPs of a call are counted by torch's own counter (matmuls and
convolutions; element-wise work is not counted, so for small-op-bound code the % is a floor).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

GEMM_SIZE = 512  # a square float32 matmul, 0.27 GFLOP: short enough to dodge preemption
# On a GPU a 512^3 product is over before its launch is paid for; 4096^3 (137 GFLOP) keeps the GPU busy
GEMM_SIZE_CUDA = 4096


def gemm_size(device: torch.device | str = "cpu") -> int:
    """The side of the square GEMM timed as the roofline on ``device``."""
    return GEMM_SIZE_CUDA if torch.device(device).type == "cuda" else GEMM_SIZE


def synchronize(device: torch.device | str = "cpu") -> None:
    """Wait for the device's queued work: a GPU call returns before it has run, so timers must wait for it."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def count_flops(call: Callable[[], object]) -> int:
    """FLOPs of one ``call()`` (forward and, if it runs one, backward), by torch's counter."""
    with FlopCounterMode(display=False) as counter:
        call()
    return counter.get_total_flops()


def gemm_call(
    generator: torch.Generator | None = None, device: torch.device | str = "cpu"
) -> Callable[[], torch.Tensor]:
    """A :func:`gemm_size`-cubed float32 matmul on ``device`` to time beside the arms."""
    size = gemm_size(device)
    a = torch.randn(size, size, generator=generator).to(device)
    b = torch.randn(size, size, generator=generator).to(device)
    return lambda: a @ b


def gemm_gflops(seconds: float, device: torch.device | str = "cpu") -> float:
    """The GEMM's rate for one timed call on ``device``."""
    return 2 * gemm_size(device) ** 3 / seconds / 1e9


def roofline(flops: int, seconds: float, peak_gflops: float) -> str:
    """``"12.3 GFLOP/s, 45% of peak"`` for a call of ``flops`` that took ``seconds``."""
    rate = flops / seconds / 1e9
    return f"{rate:.2f} GFLOP/s, {100 * rate / peak_gflops:.1f}% of peak"
