"""``torch.compile`` for a model, the way the training loop does it (``loop.compile=true``).

A model compiles one method: ``forward`` by default, or the one its class names in
``compiled_method`` (a name, or a tuple of names each compiled on its own). Recurrent models compile
a step or a few: the NTM names its ``step`` (called once, on the start state) and ``steps``, a run of
``steps_per_call`` time steps, which :func:`compile_model` sets to the class's ``compiled_steps_per_call``;
DRAW names ``run_steps``, a run of drawing steps, and ``step`` for the steps left over. Their Python time loop calls
the graphs, so a sequence of any length runs the same graphs and nothing is recompiled per length
(compiling an unrolled sequence would compile every length anew, and the compile time would grow
with it).

The compiled method is the class's function compiled once per process and bound to the instance,
so models of the same class and options share its graphs, ``copy.deepcopy`` gives a copy that
calls its own weights, and the ``state_dict`` is unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import MethodType
from typing import Any

import torch
from torch import nn

from foveal.errors import FovealError

# torch.compile's modes that foveal passes on: "max-autotune-no-cudagraphs" times inductor's own C++ (or
# Triton) matrix-product kernels against the library's at each product's sizes and keeps the faster, which pays
# where small products dominate a step (DRAW, the VQA model); it compiles for minutes rather than seconds.
# "reduce-overhead" (a GPU only) replays each graph as a CUDA graph: one launch instead of one per kernel, which
# pays where a step is many small kernels (the NTM's).
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead")
CUDA_GRAPH_MODES = ("reduce-overhead",)


@functools.cache
def _compiled(function: Callable[..., Any], mode: str = "default") -> Callable[..., Any]:
    # dynamic=None: a second batch size makes the graph dynamic in it instead of compiling a third time.
    graph = torch.compile(function, dynamic=None, mode=mode)

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        # Without gradients (an evaluation) the eager method runs: a graph of its own would be compiled
        # for it, and an evaluation that runs a few times in a training rarely repays that.
        return graph(*args, **kwargs) if torch.is_grad_enabled() else function(*args, **kwargs)

    return call


def compiled_methods(model: nn.Module) -> tuple[str, ...]:
    """The methods :func:`compile_model` compiles: the class's ``compiled_method`` (a name or a tuple of
    names), else ``("forward",)``."""
    names = getattr(type(model), "compiled_method", "forward")
    return (names,) if isinstance(names, str) else tuple(names)


def compile_model(model: nn.Module, mode: str = "default") -> nn.Module:
    """Compile ``model``'s :func:`compiled_methods` in place (with inductor) and return the model.

    Compiling happens at the first call with gradients, and once again when the batch size changes
    (the second batch size makes the graph dynamic in it). Calls without gradients (evaluation,
    ``torch.no_grad``) run the eager method. :func:`is_compiled` tells
    whether a model was compiled.

    Example:
        >>> model = compile_model(nn.Linear(3, 2))
        >>> is_compiled(model), list(model.state_dict())
        (True, ['weight', 'bias'])
    """
    if mode not in COMPILE_MODES:
        raise ValueError(f"the compile mode must be one of {', '.join(COMPILE_MODES)}, got {mode!r}")
    if any(p.device.type == "cpu" for p in model.parameters()):
        if mode in CUDA_GRAPH_MODES:
            raise FovealError(f"loop.compile_mode={mode} replays CUDA graphs: it needs loop.device=cuda")
        _check_cpu_compiler()
    for name in compiled_methods(model):
        setattr(model, name, MethodType(_compiled(getattr(type(model), name), mode), model))
    per_call = getattr(type(model), "compiled_steps_per_call", None)
    if per_call is not None:
        model.steps_per_call = per_call
    return model


def _check_cpu_compiler() -> None:
    """Inductor writes C++ for the CPU: without a compiler the first call would fail deep in torch."""
    from torch._inductor import cpp_builder

    try:
        cpp_builder.get_cpp_compiler()
    except Exception as e:  # torch's InvalidCxxCompiler, or whatever its search raises
        raise FovealError(
            f"loop.compile needs a C++ compiler for torch.compile on the CPU ({e}); install g++ (or set CXX) "
            "or set loop.compile=false"
        ) from None


def is_compiled(model: nn.Module) -> bool:
    """Whether :func:`compile_model` compiled ``model``."""
    return compiled_methods(model)[0] in vars(model)


def compile_count() -> int:
    """Graphs compiled in this process so far (forward and backward): it grows on every (re)compile."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"]) + int(counters["aot_autograd"]["total"])
