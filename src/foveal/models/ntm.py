"""The Neural Turing Machine (Graves et al. 2014; seed 004): a controller with a memory it addresses.

One time step, for the whole batch at once (only time is a Python loop)::

    h_t          = controller([x_t, r_{t-1}])                       LSTM cell or feed-forward layer
    params       = split(W_heads h_t + b)                            every head's k, beta, g, s, gamma (e, a)
    w^write_t    = address(params, M_{t-1}, w^write_{t-1});  M_t = write(M_{t-1}, w^write_t, e, a)
    w^read_t     = address(params, M_t, w^read_{t-1});       r_t = read(M_t, w^read_t)
    y_t          = W_out [h_t, r_t] + b_out                         logits; sigmoid(y_t) are the bits

The heads write before they read (as in the DNC), so a read can see what this step wrote. Each
sequence starts from the same state: the controller state, the read vectors and the head
weightings are learned bias vectors (``initial_state="learned"``, the paper's scheme) or fixed
(``"constant"``: zeros and a weighting on row 0), and the memory comes from
:class:`foveal.memory.MemoryInit` (constant 1e-6 by default).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Literal, NamedTuple

import torch
from torch import Tensor, nn

from foveal._checks import check_choice, check_int, check_ints, check_number, check_shape
from foveal._torch_private import exportable_output
from foveal.attention.maps import register_map_module, wants_maps
from foveal.compiling import CompilePlan
from foveal.errors import FovealError
from foveal.memory import MemoryInit, address, head_param_size, read, shift_offsets, split_head_params, write
from foveal.registry import MODELS
from foveal.specs import resolve_spec

CONTROLLERS = ("lstm", "feedforward")
INITIAL_STATES = ("learned", "constant")
OUTPUT_FROM = ("both", "reads")
ShiftFunction = Callable[[Tensor, Tensor], Tensor]  # (w, shift) -> the circular shift of w


@exportable_output
class NTMOutput(NamedTuple):
    """What :class:`NTM` returns; the last three are None unless ``record=True``."""

    logits: Tensor  # (B, T, O): sigmoid gives the output bits
    read_weights: Tensor | None = None  # (B, T, H_read, R)
    write_weights: Tensor | None = None  # (B, T, H_write, R)
    memory: Tensor | None = None  # (B, T, R, C): the memory after each step's write


class NTMState(NamedTuple):
    """What one time step hands the next."""

    h: Tensor  # (B, controller_size): the controller's output
    c: Tensor  # (B, controller_size): the LSTM's cell (unused by the feed-forward controller)
    reads: Tensor  # (B, H_read, C): the read vectors
    w_read: Tensor  # (B, H_read, R)
    w_write: Tensor  # (B, H_write, R)
    memory: Tensor  # (B, R, C)


@dataclass
class NTMSpec:
    """The options of :class:`NTM`, each with its default."""

    controller: Literal["lstm", "feedforward"] = "lstm"  # an LSTM cell, or one tanh layer
    controller_size: int = 100  # hidden size of the controller (100 in the paper's copy experiment)
    n_rows: int = 128  # R, memory locations (128 in the paper)
    n_cols: int = 20  # C, width of a location (20 in the paper)
    n_read_heads: int = 1  # heads that read memory (at least one)
    n_write_heads: int = 1  # heads that erase and add (zero or more)
    n_shifts: int = 3  # allowed shifts -k..k (3: -1, 0, +1)
    memory_init: Literal["constant", "learned", "random"] = "constant"  # see foveal.memory.MemoryInit
    memory_value: float = 1e-6  # the constant (and learned initial) memory value
    memory_learned_std: float = 0.0  # noise added once to the learned initial memory: rows that differ
    initial_state: Literal["learned", "constant"] = "learned"  # learned bias vectors, or a fixed starting state
    # the output layer sees [h_t, r_t] ("both") or r_t only ("reads": inputs reach the output only through memory)
    output_from: Literal["both", "reads"] = "both"
    eps: float = 1e-8  # guard of the cosine similarity and the sharpening
    gate_bias: float = 0.0  # initial interpolation-gate logit bias; negative keeps the previous weighting
    still_bias: float = 0.0  # initial bias of the shift-0 logit; positive starts the heads standing still
    gamma_bias: float = 0.0  # initial sharpening logit bias (gamma = 1 + softplus(gamma_bias))
    read_gate_bias: float | None = None  # the read heads' gate bias (None: gate_bias)
    read_still_bias: float | None = None  # the read heads' still bias (None: still_bias)
    read_gamma_bias: float | None = None  # the read heads' sharpening bias (None: gamma_bias)
    write_walk_bias: float = 0.0  # initial bias of the write heads' shift +1 logit: consecutive rows
    read_walk_bias: float = 0.0  # initial bias of the read heads' shift +1 logit (copy's feed-forward start)
    forget_bias: float | None = None  # the LSTM controller's initial forget-gate bias (None: PyTorch's)


def circular_shift_by_rolls(w: Tensor, shift: Tensor) -> Tensor:
    """:func:`foveal.memory.circular_shift` as one roll of ``w`` per allowed shift: ``w~ = sum_d s(d) roll(w, d)``.

    The same values as the circular shift's one gather, and the shift the NTM's compiled graphs take (its
    ``compile_plan``): a roll's gradient is the opposite roll, which inductor fuses with the element-wise work
    around it, where the gather's gradient is a scatter-add that the compiled CPU backward runs as a scalar
    loop. Eagerly the one gather is fewer operations than ``S`` rolls, so the eager step keeps it.

    Shape:
        - w: ``(B, H, R)``
        - shift: ``(B, H, S)`` with ``S = 2k + 1 <= R`` (as :func:`foveal.memory.address` checks it)
        - output: ``(B, H, R)``

    Example:
        >>> circular_shift_by_rolls(torch.tensor([[[1.0, 0.0, 0.0]]]), torch.tensor([[[0.0, 0.0, 1.0]]]))
        tensor([[[0., 1., 0.]]])
    """
    offsets = shift_offsets(shift.shape[-1])
    shifted = shift[..., 0, None] * w.roll(offsets[0], dims=-1)
    for n, d in enumerate(offsets[1:], start=1):
        shifted = shifted + shift[..., n, None] * w.roll(d, dims=-1)
    return shifted


@MODELS.register("ntm")
@register_map_module
class NTM(nn.Module):
    """A Neural Turing Machine with an LSTM or feed-forward controller and batched heads.

    Args:
        input_size: width of each input vector ``x_t``.
        output_size: width of each output vector ``y_t``.
        spec: the options (:class:`NTMSpec`); single options may also be given by name.

    Shape:
        - x: ``(B, T, input_size)``
        - output: :class:`NTMOutput`, ``logits`` ``(B, T, output_size)``

    Example:
        >>> ntm = NTM(4, 3, controller_size=8, n_rows=6, n_cols=5)
        >>> out = ntm(torch.zeros(2, 7, 4), record=True)
        >>> out.logits.shape, out.read_weights.shape, out.memory.shape
        (torch.Size([2, 7, 3]), torch.Size([2, 7, 1, 6]), torch.Size([2, 7, 6, 5]))
    """

    compile_plan: ClassVar[CompilePlan] = CompilePlan(
        "a call of one step is bound by the cost of calling a graph, so a run of steps shares one call; the "
        "first step, from the broadcast start state, is a graph of its own; the graphs shift by rolls, whose "
        "compiled backward fuses, where the gather's is a scalar scatter loop (benchmarks/compile.py, ntm-copy)",
        methods=("step", "steps"),
        steps_per_call=4,
        keywords=MappingProxyType({"shift_function": circular_shift_by_rolls}),
    )
    steps_per_call = 1  # time steps per call of ``steps`` (the plan's once compiled)

    def __init__(self, input_size: int, output_size: int, spec: NTMSpec | None = None, **options: Any) -> None:
        super().__init__()
        self.spec = spec = resolve_spec(NTMSpec, spec, options)
        controller, controller_size = spec.controller, spec.controller_size
        n_rows, n_cols, n_shifts = spec.n_rows, spec.n_cols, spec.n_shifts
        n_read_heads, n_write_heads = spec.n_read_heads, spec.n_write_heads
        initial_state, output_from, eps = spec.initial_state, spec.output_from, spec.eps
        gate_bias, still_bias = spec.gate_bias, spec.still_bias
        check_ints(input_size=input_size, output_size=output_size, controller_size=controller_size)
        check_ints(n_rows=n_rows, n_cols=n_cols, n_read_heads=n_read_heads)
        check_int("n_write_heads", n_write_heads, minimum=0)
        shift_offsets(n_shifts)
        if n_shifts > n_rows:  # a circular shift by more than the memory's length reads rows twice
            raise FovealError(f"n_shifts: {n_shifts} shifts need at least as many memory rows, got n_rows={n_rows}")
        check_choice("controller", controller, CONTROLLERS)
        check_choice("initial_state", initial_state, INITIAL_STATES)
        check_choice("output_from", output_from, OUTPUT_FROM)
        check_number("eps", eps, bound=">= 0")
        check_number("memory_value", spec.memory_value, bound=None)
        check_number("memory_learned_std", spec.memory_learned_std, bound=">= 0")
        for name in ("gate_bias", "still_bias", "gamma_bias", "write_walk_bias", "read_walk_bias"):
            check_number(name, getattr(spec, name), bound=None)
        for name in ("read_gate_bias", "read_still_bias", "read_gamma_bias", "forget_bias"):
            if getattr(spec, name) is not None:
                check_number(name, getattr(spec, name), bound=None)
        self.input_size, self.output_size = input_size, output_size
        self.controller_kind, self.controller_size = controller, controller_size
        self.n_rows, self.n_cols, self.n_shifts = n_rows, n_cols, n_shifts
        self.n_read_heads, self.n_write_heads, self.eps = n_read_heads, n_write_heads, eps
        self.gate_bias, self.still_bias, self.gamma_bias = gate_bias, still_bias, spec.gamma_bias
        self.read_gate_bias = gate_bias if spec.read_gate_bias is None else spec.read_gate_bias
        self.read_still_bias = still_bias if spec.read_still_bias is None else spec.read_still_bias
        self.read_gamma_bias = spec.gamma_bias if spec.read_gamma_bias is None else spec.read_gamma_bias
        self.write_walk_bias, self.read_walk_bias = spec.write_walk_bias, spec.read_walk_bias
        self.forget_bias = spec.forget_bias

        ctrl_in = input_size + n_read_heads * n_cols
        if controller == "lstm":
            self.controller: nn.LSTMCell | nn.Linear = nn.LSTMCell(ctrl_in, controller_size)
        else:
            self.controller = nn.Linear(ctrl_in, controller_size)
        self.read_param_size = head_param_size(n_cols, n_shifts, write=False)
        self.write_param_size = head_param_size(n_cols, n_shifts, write=True)
        self.heads = nn.Linear(
            controller_size, n_read_heads * self.read_param_size + n_write_heads * self.write_param_size
        )
        self.output_from = output_from
        out_in = n_read_heads * n_cols + (controller_size if output_from == "both" else 0)
        self.out = nn.Linear(out_in, output_size)
        self.memory_init = MemoryInit(
            n_rows, n_cols, kind=spec.memory_init, value=spec.memory_value, learned_std=spec.memory_learned_std
        )

        # The starting state of every sequence. Weightings are stored as logits and start peaked on
        # row 0, so shifting from them walks through memory from the first step on.
        n_heads = n_read_heads + n_write_heads
        h0 = torch.zeros(controller_size)
        r0 = torch.zeros(n_read_heads, n_cols)
        w0 = torch.full((n_heads, n_rows), -10.0)
        w0[:, 0] = 10.0
        if initial_state == "learned":
            self.h0, self.c0, self.r0 = nn.Parameter(h0), nn.Parameter(h0.clone()), nn.Parameter(r0)
            self.w0_logits = nn.Parameter(w0)
        else:
            self.register_buffer("h0", h0, persistent=False)
            self.register_buffer("c0", h0.clone(), persistent=False)
            self.register_buffer("r0", r0, persistent=False)
            self.register_buffer("w0_logits", w0, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # Small head and output weights: the first steps address softly and output ~0.5 bits.
        nn.init.xavier_uniform_(self.heads.weight, gain=0.5)
        nn.init.zeros_(self.heads.bias)
        with torch.no_grad():  # each head's block: key C, beta, gate, shift S, gamma (, erase C, add C)
            C, S = self.n_cols, self.n_shifts
            sizes = [self.read_param_size] * self.n_read_heads + [self.write_param_size] * self.n_write_heads
            is_read = [True] * self.n_read_heads + [False] * self.n_write_heads
            for start, reads in zip(torch.tensor([0, *sizes[:-1]]).cumsum(0).tolist(), is_read, strict=True):
                self.heads.bias[start + C + 1] = self.read_gate_bias if reads else self.gate_bias
                self.heads.bias[start + C + 2 + S // 2] = self.read_still_bias if reads else self.still_bias
                if S > 1:
                    self.heads.bias[start + C + 2 + S // 2 + 1] = self.read_walk_bias if reads else self.write_walk_bias
                self.heads.bias[start + C + 2 + S] = self.read_gamma_bias if reads else self.gamma_bias
        if self.forget_bias is not None and isinstance(self.controller, nn.LSTMCell):
            with torch.no_grad():  # gates are ordered input, forget, cell, output
                H = self.controller_size
                self.controller.bias_ih[H : 2 * H] = self.forget_bias
                self.controller.bias_hh[H : 2 * H] = 0.0
        nn.init.xavier_uniform_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def initial_state(self, batch: int, dtype: torch.dtype = torch.float32) -> NTMState:
        """The state every sequence starts from, for ``batch`` sequences."""
        w0 = self.w0_logits.softmax(dim=-1).expand(batch, -1, -1)
        return NTMState(
            self.h0.expand(batch, -1),
            self.c0.expand(batch, -1),
            self.r0.expand(batch, -1, -1),
            w0[:, : self.n_read_heads],
            w0[:, self.n_read_heads :],
            self.memory_init(batch).to(dtype),
        )

    def step(
        self, x_t: Tensor, state: NTMState, *, shift_function: ShiftFunction | None = None
    ) -> tuple[Tensor, NTMState]:
        """One time step: the logits ``(B, O)`` for input ``x_t`` ``(B, input_size)``, and the next state.

        ``shift_function`` computes the heads' circular shift (:func:`foveal.memory.address`; None: its gather).
        """
        return self._step(x_t, state, shift_function)

    def _step(
        self, x_t: Tensor, state: NTMState, shift_function: ShiftFunction | None = None
    ) -> tuple[Tensor, NTMState]:
        """:meth:`step`, never compiled on its own: the runs of steps and the recorded loop call it."""
        h, c, reads, w_read, w_write, memory = state
        batch = x_t.shape[0]
        Hr, Hw = self.n_read_heads, self.n_write_heads
        ctrl_in = torch.cat([x_t, reads.flatten(1)], dim=-1)
        if self.controller_kind == "lstm":
            h, c = self.controller(ctrl_in, (h, c))
        else:
            h = torch.tanh(self.controller(ctrl_in))
        raw = self.heads(h)
        raw_read, raw_write = raw.split([Hr * self.read_param_size, Hw * self.write_param_size], dim=-1)
        if Hw:
            p = split_head_params(
                raw_write.view(batch, Hw, self.write_param_size), self.n_cols, self.n_shifts, write=True
            )
            w_write = address(
                p.key, p.beta, p.gate, p.shift, p.gamma, memory, w_write, self.eps, shift_function=shift_function
            )
            assert p.erase is not None and p.add is not None  # a write head's parameters have both
            memory = write(memory, w_write, p.erase, p.add)
        p = split_head_params(raw_read.view(batch, Hr, self.read_param_size), self.n_cols, self.n_shifts, write=False)
        w_read = address(
            p.key, p.beta, p.gate, p.shift, p.gamma, memory, w_read, self.eps, shift_function=shift_function
        )
        reads = read(memory, w_read)
        out_in = torch.cat([h, reads.flatten(1)], dim=-1) if self.output_from == "both" else reads.flatten(1)
        return self.out(out_in), NTMState(h, c, reads, w_read, w_write, memory)

    def steps(
        self, x: Tensor, state: NTMState, *, shift_function: ShiftFunction | None = None
    ) -> tuple[Tensor, NTMState]:
        """``x.shape[0]`` time steps from ``state``: their logits ``(T, B, O)`` for inputs ``x`` ``(T, B, input_size)``
        and the state after the last (``shift_function`` as in :meth:`step`)."""
        logits = []
        for x_t in x:
            logit, state = self._step(x_t, state, shift_function)
            logits.append(logit)
        return torch.stack(logits), state

    def example_inputs(self, batch: int, generator: torch.Generator) -> tuple[Tensor]:
        """Random inputs of five time steps, for tests and examples."""
        return (torch.randn(batch, 5, self.input_size, generator=generator),)

    def forward(self, x: Tensor, *, record: bool = False) -> NTMOutput:
        check_shape("x", x, ("B", "T", self.input_size))
        length = x.shape[1]
        if length == 0:
            raise FovealError(f"x: expected at least one time step, got shape {tuple(x.shape)}")
        record = record or wants_maps(self)  # a recording reads the weightings of every step
        state = self.initial_state(x.shape[0], x.dtype)
        # Time-major and contiguous: every step's input has the same strides whatever the length.
        x = x.transpose(0, 1).contiguous()
        logit, state = self.step(x[0], state)
        logits, states = [logit.unsqueeze(0)], [state]
        if record:  # every state is kept, so one step at a time
            for x_t in x[1:]:
                logit, state = self._step(x_t, state)
                logits.append(logit.unsqueeze(0))
                states.append(state)
        elif length > 1:
            # Zero inputs after the end pad the rest to whole calls: the steps they add come after every
            # real step, so no real output depends on them.
            rest, per_call = x[1:], self.steps_per_call
            if len(rest) % per_call:
                rest = torch.cat([rest, rest.new_zeros(per_call - len(rest) % per_call, *rest.shape[1:])])
            for chunk in rest.split(per_call):
                chunk_logits, state = self.steps(chunk, state)
                logits.append(chunk_logits)
        out = NTMOutput(torch.cat(logits)[:length].transpose(0, 1))
        if record:
            out = out._replace(
                read_weights=torch.stack([s.w_read for s in states], dim=1),
                write_weights=torch.stack([s.w_write for s in states], dim=1),
                memory=torch.stack([s.memory for s in states], dim=1),
            )
        return out
