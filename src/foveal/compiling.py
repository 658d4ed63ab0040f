"""``torch.compile`` for a model, the way the training loop does it (``loop.compile=true``).

A model compiles ``forward``, unless its class declares a :class:`CompilePlan` (the :class:`Compilable`
protocol): which methods to compile, each on its own, how many time steps one call of a compiled run takes,
the inductor options it needs on the CPU, and why. Recurrent models compile a step or a run of a few: the
NTM compiles its ``step`` (called once, on the start state) and ``steps``, a run of ``steps_per_call`` time
steps; DRAW compiles ``run_steps``, a run of drawing steps, and ``step`` for the steps left over. Their
Python time loop calls the graphs, so a sequence of any length runs the same graphs and nothing is
recompiled per length (compiling an unrolled sequence would compile every length anew, and the compile
time would grow with it). Inside a compiled method a model calls its eager methods by name (``_step``),
so a run traces one graph, never a graph calling another. A plan may name keyword arguments the graphs
call the methods with, and the eager calls do not: the NTM's graphs shift its weightings by rolls, whose
compiled backward is faster than the gather the eager step takes.

The compiled method is the class's function compiled once per process and bound to the instance,
so models of the same class and options share its graphs, ``copy.deepcopy`` gives a copy that
calls its own weights, and the ``state_dict`` is unchanged.

Inductor is given one pass of foveal's own, :class:`MergeSummedProducts` (``graph_pass=False`` leaves it
out): in a run of recurrent steps, a weight's gradient is a sum over the steps of one product each,
``sum_t dY_t^T X_t``, and the generated backward would add them one ``addmm`` at a time (each reading and
writing the whole sum so far, with ``K`` = the batch). The pass makes it the one product
``[dY_1; ..; dY_k]^T [X_1; ..; X_k]``: the same sum, rounded in another order.

The torch internals this needs (the pass's base class, a mode's options, the C++ compiler's search, the
graph counter) are reached through :mod:`foveal._torch_private` only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType, MethodType
from typing import Any, ClassVar, Protocol, runtime_checkable

import torch
from torch import fx, nn

from foveal import _torch_private
from foveal.errors import FovealError

aten = torch.ops.aten

# torch.compile's modes that foveal passes on: "max-autotune-no-cudagraphs" times inductor's own C++ (or
# Triton) matrix-product kernels against the library's at each product's sizes and keeps the faster, which pays
# where small products dominate a step (DRAW, the VQA model); it compiles for minutes rather than seconds.
# "reduce-overhead" (a GPU only) replays each graph as a CUDA graph: one launch instead of one per kernel, which
# pays where a step is many small kernels (the NTM's).
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead")
CUDA_GRAPH_MODES = ("reduce-overhead",)


@dataclass(frozen=True)
class CompilePlan:
    """How :func:`compile_model` compiles a model of a class that declares one (see :class:`Compilable`).

    Attributes:
        reason: why the class compiles other than ``forward`` or with options of its own (for the reader).
        methods: the methods compiled, each on its own; the others run eagerly.
        steps_per_call: the time steps one call of the compiled run takes (the model's ``steps_per_call``
            once compiled); 1 for a model that is no recurrent run.
        cpu_options: inductor options on top of the mode's, on the CPU only (where they were measured).
        keywords: keyword arguments the compiled graphs call each method with, never the eager calls: a
            formulation that compiles to a faster step than the eager one, equal to it in value and gradient.

    Example:
        >>> plan = CompilePlan("one step per graph call", methods=("step",))
        >>> plan.methods, plan.steps_per_call, dict(plan.cpu_options)
        (('step',), 1, {})
    """

    reason: str
    methods: tuple[str, ...] = ("forward",)
    steps_per_call: int = 1
    cpu_options: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    keywords: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not self.methods or self.steps_per_call < 1:
            raise FovealError(
                f"a CompilePlan needs at least one method and steps_per_call >= 1, got methods={self.methods} "
                f"and steps_per_call={self.steps_per_call}"
            )


FORWARD = CompilePlan("the default: the whole forward in one graph")
"""The plan of a model whose class declares none."""


@runtime_checkable
class Compilable(Protocol):
    """A model that declares how it is compiled: its class's ``compile_plan``, and ``steps_per_call``, which
    its forward reads (1 eagerly; :func:`compile_model` sets it to the plan's)."""

    compile_plan: ClassVar[CompilePlan]
    steps_per_call: int


class MergeSummedProducts:
    """An inductor graph pass: a sum of products ``sum_t A_t^T B_t`` becomes one product of the stacked
    factors, ``[A_1; ..; A_k]^T [B_1; ..; B_k]``.

    That is how autograd writes the gradient of a weight used at every step of a recurrent run: one
    product per step (its inner size ``K`` the batch), added one after another. Stacked, the library runs one
    product with ``K`` = steps x batch, and the sum is not read and written once per step. The result is
    the same sum, its terms rounded in another order. Only sums whose every inner node is an addition
    used by nothing else are rewritten, and only the terms that are such products of one shape, dtype and
    device.

    Inductor takes it as one of its custom graph passes (``CustomGraphPass``): :func:`compile_model` registers
    the class as one before it compiles, so that importing this module imports no compiler.
    """

    def __call__(self, graph: fx.Graph) -> None:
        for root in reversed(list(graph.nodes)):
            if not _is_add(root) or any(_is_add(user) for user in root.users):
                continue  # not the top of a sum
            terms = [term for arg in root.args for term in _summands(arg)]
            candidates = [t for t in terms if _is_transposed_product(t)]
            products = [t for t in candidates if _kind(t) == _kind(candidates[0])] if candidates else []
            if len(products) < 2:
                continue
            rest = [t for t in terms if t not in products]
            with graph.inserting_before(root):
                lefts = _call(graph, aten.cat.default, [t.args[0].args[0] for t in products], 0)
                rights = _call(graph, aten.cat.default, [t.args[1] for t in products], 0)
                total = _call(graph, aten.mm.default, _call(graph, aten.permute.default, lefts, [1, 0]), rights)
                for term in rest:
                    total = _call(graph, aten.add.Tensor, total, term)
            root.replace_all_uses_with(total)
        graph.eliminate_dead_code()

    def uuid(self) -> str:
        # Part of inductor's cache key: a change to the pass must change it.
        return "foveal-merge-summed-products-2"


_GRAPH_PASS = MergeSummedProducts()


def _is_add(node: fx.Node) -> bool:
    return node.target is aten.add.Tensor and len(node.args) == 2 and not node.kwargs


def _summands(node: Any) -> list[Any]:
    """The terms of the sum below ``node``: it and its arguments' terms when it is an addition used
    only by the sum, else ``node`` itself."""
    if isinstance(node, fx.Node) and _is_add(node) and len(node.users) == 1:
        return [term for arg in node.args for term in _summands(arg)]
    return [node]


def _is_transposed_product(node: Any) -> bool:
    """Whether ``node`` is ``A^T B``, a 2-D product used only by the sum, its first factor transposed."""
    if not isinstance(node, fx.Node) or node.target is not aten.mm.default or len(node.users) != 1:
        return False
    left = node.args[0]
    if not isinstance(left, fx.Node):
        return False
    # A product of a symbolic shape (a dynamic batch) is left alone: comparing shapes would guard on it.
    static = all(isinstance(size, int) for size in node.meta["val"].shape)
    return static and left.target is aten.permute.default and left.args[1] in ([1, 0], (1, 0))


def _kind(node: fx.Node) -> tuple[Any, ...]:
    """What products must share to be stacked: the result's shape, dtype and device."""
    value = node.meta["val"]
    return tuple(value.shape), value.dtype, value.device


def _call(graph: fx.Graph, target: Any, *args: Any) -> fx.Node:
    """A new node of ``graph``, with the fake value inductor reads each node's shape and strides from."""
    node = graph.call_function(target, args)
    values = fx.node.map_arg(args, lambda arg: arg.meta["val"])
    with _torch_private.fake_mode(values):
        node.meta["val"] = target(*values)
    return node


@functools.cache
def _compiled(
    function: Callable[..., Any],
    mode: str = "default",
    options: tuple[tuple[str, Any], ...] = (),
    keywords: tuple[tuple[str, Any], ...] = (),
    backend: str = "inductor",
) -> Callable[..., Any]:
    bound = dict(keywords)

    def traced(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs, **bound)

    # dynamic=None: a second batch size makes the graph dynamic in it instead of compiling a third time.
    if backend == "inductor":
        # The mode is given as its inductor options (torch.compile takes a mode or options, not both).
        inductor_options = {**_torch_private.mode_options(mode), **dict(options)}
        graph = torch.compile(traced if bound else function, dynamic=None, options=inductor_options)
    else:
        graph = torch.compile(traced if bound else function, dynamic=None, backend=backend)

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        # Without gradients (an evaluation) the eager method runs: a graph of its own would be compiled
        # for it, and an evaluation that runs a few times in a training rarely repays that.
        return graph(*args, **kwargs) if torch.is_grad_enabled() else function(*args, **kwargs)

    return call


RECOMPILE_LIMIT = 64
"""Graphs of one compiled method a process keeps (dynamo's default: 8, past which it runs the method eagerly)."""


def compile_plan(model: nn.Module) -> CompilePlan:
    """The :class:`CompilePlan` of ``model``'s class, else :data:`FORWARD`."""
    return model.compile_plan if isinstance(model, Compilable) else FORWARD


def compiled_methods(model: nn.Module) -> tuple[str, ...]:
    """The methods :func:`compile_model` compiles (its :func:`compile_plan`'s)."""
    return compile_plan(model).methods


def compile_model(
    model: nn.Module,
    mode: str = "default",
    options: Mapping[str, Any] | None = None,
    *,
    graph_pass: bool = True,
    backend: str = "inductor",
) -> nn.Module:
    """Compile ``model``'s :func:`compiled_methods` in place (with inductor) and return the model.

    ``options`` are inductor options on top of the mode's; None takes the plan's ``cpu_options`` on the CPU
    (where they were measured) and none on a GPU. ``graph_pass=False`` leaves :class:`MergeSummedProducts`
    out, to compare. Compiling a model again replaces its compiled methods.

    ``backend`` is torch.compile's: another than inductor (``"aot_eager"``: the traced forward and backward
    graphs run by eager torch, no code generated) compiles the same methods with the plan's keywords, in
    seconds, and takes no mode, options or graph pass, which are inductor's.

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
        raise FovealError(f"the compile mode must be one of {', '.join(COMPILE_MODES)}, got {mode!r}")
    inductor = backend == "inductor"
    if not inductor and (mode != "default" or options):
        raise FovealError(f"a compile mode and options are inductor's; backend={backend!r} takes neither")
    _torch_private.require()
    _torch_private.allow_recompiles(RECOMPILE_LIMIT)
    on_cpu = any(p.device.type == "cpu" for p in model.parameters())
    if on_cpu and mode in CUDA_GRAPH_MODES:
        raise FovealError(f"loop.compile_mode={mode} replays CUDA graphs: it needs loop.device=cuda")
    plan = compile_plan(model)
    merged: tuple[tuple[str, Any], ...] = ()
    if inductor:
        _torch_private.register_graph_pass(MergeSummedProducts)
        if on_cpu:
            _check_cpu_compiler()
        if options is None:
            options = plan.cpu_options if on_cpu else {}
        passes = {"post_grad_custom_pre_pass": _GRAPH_PASS} if graph_pass else {}
        # A tuple, for _compiled's cache: models of a class compiled alike share its graphs.
        merged = tuple(sorted({**passes, **options}.items()))
    keywords = tuple(sorted(plan.keywords.items()))
    for name in plan.methods:
        method = _compiled(getattr(type(model), name), mode, merged, keywords, backend)
        setattr(model, name, MethodType(method, model))
    if isinstance(model, Compilable):
        model.steps_per_call = plan.steps_per_call
    return model


def _check_cpu_compiler() -> None:
    """Inductor writes C++ for the CPU: without a compiler the first call would fail deep in torch."""
    try:
        _torch_private.check_cpp_compiler()
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
    return _torch_private.graphs_compiled()
