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


def count_flops(call: Callable[[], object]) -> int:
    """FLOPs of one ``call()`` (forward and, if it runs one, backward), by torch's counter."""
    with FlopCounterMode(display=False) as counter:
        call()
    return counter.get_total_flops()


def gemm_call(generator: torch.Generator | None = None) -> Callable[[], torch.Tensor]:
    """A ``GEMM_SIZE``-cubed float32 matmul to time beside the arms."""
    a = torch.randn(GEMM_SIZE, GEMM_SIZE, generator=generator)
    b = torch.randn(GEMM_SIZE, GEMM_SIZE, generator=generator)
    return lambda: a @ b


def gemm_gflops(seconds: float) -> float:
    """The GEMM's rate for one timed call."""
    return 2 * GEMM_SIZE**3 / seconds / 1e9


def roofline(flops: int, seconds: float, peak_gflops: float) -> str:
    """``"12.3 GFLOP/s, 45% of peak"`` for a call of ``flops`` that took ``seconds``."""
    rate = flops / seconds / 1e9
    return f"{rate:.2f} GFLOP/s, {100 * rate / peak_gflops:.1f}% of peak"
