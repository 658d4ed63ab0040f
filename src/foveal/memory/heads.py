"""Head parameters from a controller's output, and the initial memory of a sequence.

A head reads (or writes) with the addressing parameters of :func:`foveal.memory.addressing.address`;
a controller emits them unbounded, as one vector per head, and :func:`split_head_params` maps
each piece into its range:

============  ==========  ===================  ===========================
parameter     size        map                  range
============  ==========  ===================  ===========================
key ``k``     ``C``       identity             any real
beta          1           softplus             ``>= 0``
gate ``g``    1           sigmoid              ``[0, 1]``
shift ``s``   ``S``       softmax              simplex over shifts ``-k..k``
gamma         1           1 + softplus         ``>= 1``
erase ``e``   ``C``       sigmoid              ``[0, 1]^C`` (write heads)
add ``a``     ``C``       identity             any real (write heads)
============  ==========  ===================  ===========================
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from foveal._checks import check_floating, check_int, check_number, check_shape, check_tensor
from foveal.errors import FovealError
from foveal.memory.addressing import shift_offsets

MEMORY_INITS = ("constant", "learned", "random")


class HeadParams(NamedTuple):
    """Addressing (and, for write heads, writing) parameters of ``H`` heads, already in range."""

    key: Tensor  # (B, H, C)
    beta: Tensor  # (B, H)
    gate: Tensor  # (B, H)
    shift: Tensor  # (B, H, S)
    gamma: Tensor  # (B, H)
    erase: Tensor | None = None  # (B, H, C)
    add: Tensor | None = None  # (B, H, C)


def head_param_size(n_cols: int, n_shifts: int, *, write: bool) -> int:
    """How many controller outputs one head needs: ``C + 1 + 1 + S + 1`` (``+ 2C`` to write).

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): ``n_cols`` below 1, ``n_shifts`` not odd and >= 1.

    Example:
        >>> head_param_size(20, 3, write=False), head_param_size(20, 3, write=True)
        (26, 66)
    """
    n_cols = check_int("n_cols", n_cols)
    shift_offsets(n_shifts)
    return n_cols + 3 + n_shifts + (2 * n_cols if write else 0)


def split_head_params(raw: Tensor, n_cols: int, n_shifts: int, *, write: bool) -> HeadParams:
    """Split raw controller outputs into each head's parameters and map them into range.

    Args:
        raw: unbounded outputs, one row of :func:`head_param_size` numbers per head.
        n_cols: ``C``, the width of a memory row.
        n_shifts: ``S``, the number of allowed shifts (odd).
        write: whether the heads write (then ``erase`` and ``add`` follow the addressing part).

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): ``raw`` not ``(B, H, P)`` or not floating
            point, sizes as in :func:`head_param_size`.

    Shape:
        - raw: ``(B, H, P)`` with ``P = head_param_size(C, S, write=write)``, floating point
        - output: see :class:`HeadParams`

    Example:
        >>> p = split_head_params(torch.zeros(2, 1, 26), 20, 3, write=False)
        >>> p.key.shape, p.gate[0, 0].item(), p.gamma[0, 0].item() >= 1
        (torch.Size([2, 1, 20]), 0.5, True)
    """
    check_shape("raw", check_tensor("raw", raw), ("B", "H", head_param_size(n_cols, n_shifts, write=write)))
    check_floating(raw=raw)
    sizes = [n_cols, 1, 1, n_shifts, 1] + ([n_cols, n_cols] if write else [])
    parts = raw.split(sizes, dim=-1)
    key, beta, gate, shift, gamma = parts[:5]
    params = HeadParams(
        key=key,
        beta=F.softplus(beta.squeeze(-1)),
        gate=torch.sigmoid(gate.squeeze(-1)),
        shift=shift.softmax(dim=-1),
        gamma=1 + F.softplus(gamma.squeeze(-1)),
    )
    if write:
        params = params._replace(erase=torch.sigmoid(parts[5]), add=parts[6])
    return params


class MemoryInit(nn.Module):
    """The memory a sequence starts from, ``M_0``: constant, learned, or random.

    * ``"constant"``: every entry ``value`` (1e-6 by default). Collier & Beel (2018) found this
      converges about twice as fast as the next best scheme; a small non-zero value also keeps
      the cosine of the first content lookups away from 0/0.
    * ``"learned"``: a parameter ``(R, C)``, initialised at ``value``, shared by the batch.
    * ``"random"``: a fresh draw ``N(0, std^2)`` per sequence (from ``generator`` if given).

    Args:
        n_rows: ``R``, the number of memory locations.
        n_cols: ``C``, the width of each location.
        kind: one of ``"constant"``, ``"learned"``, ``"random"``.
        value: the constant (and the learned initial) value.
        std: the standard deviation of ``"random"``.
        learned_std: ``"learned"`` starts at ``value + N(0, learned_std^2)`` (drawn once) rather
            than at ``value`` everywhere, so its rows differ and a content key can tell them apart
            from the first step (0: every row the same, as before).

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): ``n_rows`` or ``n_cols`` below 1, an unknown
            ``kind``, ``value`` not finite, ``std`` or ``learned_std`` negative or not finite; in
            ``forward``, a negative ``batch_size`` or a ``generator`` that is not a ``torch.Generator``.

    Shape:
        - output of ``forward(batch_size)``: ``(B, R, C)``

    Example:
        >>> MemoryInit(4, 3)(2).shape
        torch.Size([2, 4, 3])
    """

    def __init__(
        self,
        n_rows: int,
        n_cols: int,
        *,
        kind: str = "constant",
        value: float = 1e-6,
        std: float = 0.5,
        learned_std: float = 0.0,
    ):
        super().__init__()
        if not (isinstance(kind, str) and kind in MEMORY_INITS):
            raise FovealError(f"kind: unknown memory init {kind!r}; choose from: {', '.join(MEMORY_INITS)}")
        n_rows, n_cols = check_int("n_rows", n_rows), check_int("n_cols", n_cols)
        check_number("value", value, bound=None)
        check_number("std", std, bound=">= 0")
        check_number("learned_std", learned_std, bound=">= 0")
        self.n_rows, self.n_cols, self.kind, self.std = n_rows, n_cols, kind, std
        initial = torch.full((n_rows, n_cols), value)
        if kind == "learned":
            if learned_std > 0:  # drawn only when asked for, so the default consumes no random numbers
                initial = initial + learned_std * torch.randn(n_rows, n_cols)
            self.memory = nn.Parameter(initial)
        else:
            self.register_buffer("memory", initial, persistent=False)

    def forward(self, batch_size: int, generator: torch.Generator | None = None) -> Tensor:
        batch_size = check_int("batch_size", batch_size, minimum=0)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise FovealError(f"generator: expected a torch.Generator or None, got {type(generator).__name__}")
        shape = (batch_size, self.n_rows, self.n_cols)
        if self.kind == "random":
            noise = torch.randn(shape, generator=generator, device=self.memory.device, dtype=self.memory.dtype)
            return noise * self.std
        return self.memory.unsqueeze(0).expand(shape)
