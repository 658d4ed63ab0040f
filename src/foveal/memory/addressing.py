"""Neural Turing Machine addressing, reading and writing (seed 004; Graves et al. 2014, sec. 3).

A memory is ``(B, R, C)``: ``R`` locations (rows) of ``C`` numbers. A head's weighting ``w`` is
``(B, H, R)`` for ``H`` heads: each row is >= 0 and sums to 1. One addressing step, for every head::

    w_c(i)  = exp(beta K(k, M(i))) / sum_j exp(beta K(k, M(j)))      content    (K = cosine)
    w_g     = g w_c + (1 - g) w_prev                                   interpolate
    w~(i)   = sum_j w_g(j) s(i - j)        (indices mod R)             circular shift
    w(i)    = w~(i)^gamma / sum_j w~(j)^gamma                          sharpen

    r       = sum_i w(i) M(i)                                          read
    M'(i)   = M(i) (1 - w(i) e),   M_new(i) = M'(i) + w(i) a           write (erase, then add)

Every division and every power is guarded so that a zero key, a zero memory row, a zero
weighting or a very large ``gamma`` give finite outputs and finite gradients:

* the cosine divides by ``sqrt((|k|^2 + eps)(|M(i)|^2 + eps))``, never by a bare norm (the
  gradient of ``|x|`` at ``x = 0`` is 0/0);
* sharpening is computed as ``softmax(gamma * log(w~ + eps))``, which equals the formula for
  ``w~ > 0`` but cannot underflow to ``0 / 0`` when ``gamma`` is large, and never takes
  ``log 0`` (whose gradient, times ``0^gamma``, would be ``0 * inf``).

The functions take ``beta >= 0``, ``g`` in ``[0, 1]``, ``s`` on the simplex and ``gamma >= 1``
as given; :func:`foveal.memory.heads.split_head_params` maps a controller's unbounded outputs
into those ranges (softplus, sigmoid, softmax, 1 + softplus).

Every function checks its arguments (shapes, floating point, one dtype) and raises a ``ValueError``
(:class:`~foveal.errors.FovealError` or the shape check's) naming the argument. The guards above need
a dtype that holds ``eps``: float16 rounds 1e-8 to 0, so a zero key or a zero weighting would give
``0 * inf``. The cosine, the content weights and the sharpening (and :func:`address` as a whole) are
therefore computed in float32 for 16-bit inputs and cast back. Each sample is addressed on its own: a
NaN in one sample's key, memory or parameters makes that sample's weighting NaN and no other's.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable

import torch
from torch import Tensor

from foveal._checks import check_floating, check_number, check_shape, check_tensor, tracing, work_dtype
from foveal.errors import FovealError

EPS = 1e-8
"""Default guard added under every square root, division and log."""


def cosine_similarity(key: Tensor, memory: Tensor, eps: float = EPS) -> Tensor:
    """Cosine similarity ``K(k, M(i)) = k . M(i) / (|k| |M(i)|)`` of each key with each row.

    Args:
        key: one key per head.
        memory: the memory matrix.
        eps: added to each squared norm, so a zero key or a zero row gives similarity 0 with
            finite gradients.

    Shape:
        - key: ``(B, H, C)``
        - memory: ``(B, R, C)``
        - output: ``(B, H, R)``

    Example:
        >>> cosine_similarity(torch.tensor([[[1.0, 0.0]]]), torch.tensor([[[2.0, 0.0], [0.0, 3.0]]]))
        tensor([[[1., 0.]]])
    """
    _check(key=(key, ("B", "H", "C")), memory=(memory, ("B", "R", "C")))
    check_number("eps", eps, bound=">= 0")
    dtype, work = _dtypes(key, memory)
    return _cosine(key.to(work), memory.to(work), eps).to(dtype)


def _check(sizes: dict[str, int] | None = None, **tensors: tuple[Tensor, tuple]) -> dict[str, int]:
    """Check each ``name=(tensor, expected shape)``: a tensor, of that shape, floating point, one dtype."""
    sizes = {} if sizes is None else sizes
    for name, (tensor, expected) in tensors.items():
        check_shape(name, check_tensor(name, tensor), expected, sizes)
    check_floating(**{name: tensor for name, (tensor, _) in tensors.items()})
    return sizes


def _dtypes(*tensors: Tensor) -> tuple[torch.dtype, torch.dtype]:
    """The dtype of the result (the inputs' together) and the one to compute in (float32 for 16-bit floats)."""
    dtype = tensors[0].dtype
    for tensor in tensors[1:]:
        dtype = torch.promote_types(dtype, tensor.dtype)
    return dtype, work_dtype(dtype)


def _cosine(key: Tensor, memory: Tensor, eps: float) -> Tensor:
    dot = key @ memory.transpose(1, 2)
    key_norm = torch.rsqrt((key * key).sum(-1, keepdim=True) + eps)  # (B, H, 1)
    row_norm = torch.rsqrt((memory * memory).sum(-1) + eps).unsqueeze(1)  # (B, 1, R)
    return dot * key_norm * row_norm


def content_weights(key: Tensor, memory: Tensor, beta: Tensor, eps: float = EPS) -> Tensor:
    """Content addressing: ``w_c(i) = softmax_i(beta K(k, M(i)))``.

    Args:
        key: the key vector ``k`` of each head.
        memory: the memory ``M``.
        beta: key strength ``beta >= 0``; 0 gives the uniform weighting.
        eps: see :func:`cosine_similarity`.

    Shape:
        - key: ``(B, H, C)``
        - memory: ``(B, R, C)``
        - beta: ``(B, H)``
        - output: ``(B, H, R)``, rows sum to 1

    Example:
        >>> w = content_weights(torch.ones(1, 1, 2), torch.eye(2)[None], torch.tensor([[0.0]]))
        >>> w
        tensor([[[0.5000, 0.5000]]])
    """
    _check(key=(key, ("B", "H", "C")), memory=(memory, ("B", "R", "C")), beta=(beta, ("B", "H")))
    check_number("eps", eps, bound=">= 0")
    dtype, work = _dtypes(key, memory, beta)
    return _content(key.to(work), memory.to(work), beta.to(work), eps).to(dtype)


def _content(key: Tensor, memory: Tensor, beta: Tensor, eps: float) -> Tensor:
    return (beta.unsqueeze(-1) * _cosine(key, memory, eps)).softmax(dim=-1)


def interpolate(w_content: Tensor, w_prev: Tensor, gate: Tensor) -> Tensor:
    """Interpolation gate: ``w_g = g w_c + (1 - g) w_prev``.

    Args:
        w_content: the content weighting of this step.
        w_prev: the head's weighting of the previous step.
        gate: ``g`` in ``[0, 1]``; 1 keeps only the content weighting, 0 only the previous one.

    Shape:
        - w_content: ``(B, H, R)``
        - w_prev: ``(B, H, R)``
        - gate: ``(B, H)``
        - output: ``(B, H, R)``

    Example:
        >>> interpolate(torch.tensor([[[1.0, 0.0]]]), torch.tensor([[[0.0, 1.0]]]), torch.tensor([[0.25]]))
        tensor([[[0.2500, 0.7500]]])
    """
    _check(w_content=(w_content, ("B", "H", "R")), w_prev=(w_prev, ("B", "H", "R")), gate=(gate, ("B", "H")))
    return _interpolate(w_content, w_prev, gate)


def _interpolate(w_content: Tensor, w_prev: Tensor, gate: Tensor) -> Tensor:
    g = gate.unsqueeze(-1)
    return g * w_content + (1 - g) * w_prev


def shift_offsets(n_shifts: int) -> list[int]:
    """The allowed shifts for a kernel of ``n_shifts`` entries: ``-k..k`` for ``n_shifts = 2k + 1``.

    Example:
        >>> shift_offsets(3)
        [-1, 0, 1]
    """
    if isinstance(n_shifts, bool) or not isinstance(n_shifts, numbers.Integral) or n_shifts < 1 or n_shifts % 2 == 0:
        raise FovealError(f"n_shifts: expected an odd integer >= 1 (shifts -k..k), got {n_shifts!r}")
    k = int(n_shifts) // 2
    return list(range(-k, k + 1))


@functools.lru_cache(maxsize=16)
def _shift_index(n_rows: int, n_shifts: int, device: torch.device) -> Tensor:
    """``index[n, i] = (i - d_n) mod R`` for the allowed shifts ``d_n``: ``w[..., index][..., n, i] = w(i - d_n)``."""
    offsets = torch.tensor(shift_offsets(n_shifts), device=device)
    return (torch.arange(n_rows, device=device).unsqueeze(0) - offsets.unsqueeze(1)) % n_rows


def circular_shift(w: Tensor, shift: Tensor) -> Tensor:
    """Circular convolution with the shift kernel: ``w~(i) = sum_j w(j) s(i - j)``, indices mod R.

    The kernel is given over the allowed shifts ``-k..k`` only (``s(d) = 0`` for other ``d``), so
    the sum runs over ``d = i - j`` in ``-k..k``: ``w~(i) = sum_d s(d) w(i - d)``. One gather
    builds all shifted copies of ``w`` for the whole batch at once.

    Args:
        w: the gated weighting ``w_g``.
        shift: the kernel ``s`` over shifts ``-k..k`` (entry ``k + d`` is ``s(d)``); rows sum to 1.

    Shape:
        - w: ``(B, H, R)``
        - shift: ``(B, H, S)`` with ``S = 2k + 1 <= R``
        - output: ``(B, H, R)``

    Example:
        >>> circular_shift(torch.tensor([[[1.0, 0.0, 0.0]]]), torch.tensor([[[0.0, 0.0, 1.0]]]))
        tensor([[[0., 1., 0.]]])
    """
    _check(w=(w, ("B", "H", "R")), shift=(shift, ("B", "H", "S")))
    return _circular_shift(w, shift)


def _check_shift(shift: Tensor, n_rows: int) -> None:
    n_shifts = shift.shape[-1]
    if n_shifts % 2 == 0:
        raise FovealError(f"shift: expected an odd number of shifts S = 2k + 1 (shifts -k..k), got S={n_shifts}")
    if n_shifts > n_rows:
        raise FovealError(f"shift: {n_shifts} shifts need at least as many memory rows, got R={n_rows}")


def _circular_shift(w: Tensor, shift: Tensor) -> Tensor:
    n_rows, n_shifts = w.shape[-1], shift.shape[-1]
    _check_shift(shift, n_rows)
    # A traced graph keeps the index it builds as a constant: the cache is for eager calls (dynamo would
    # trace through the cache anyway, with a warning).
    index = (_shift_index.__wrapped__ if tracing() else _shift_index)(n_rows, n_shifts, w.device)
    shifted = w[..., index]  # (B, H, S, R)
    return (shift.unsqueeze(-1) * shifted).sum(dim=-2)


def sharpen(w: Tensor, gamma: Tensor, eps: float = EPS) -> Tensor:
    """Sharpening: ``w(i) = w~(i)^gamma / sum_j w~(j)^gamma``, computed stably.

    Evaluated as ``softmax_i(gamma * log(w~(i) + eps))``: the same value for ``w~ > 0``, no
    underflow to ``0 / 0`` for large ``gamma`` and no ``log 0``. A zero weighting gives the uniform
    weighting.

    Args:
        w: the shifted weighting ``w~`` (>= 0: a convex combination of weightings is).
        gamma: the sharpening exponent, ``gamma >= 1``.
        eps: added to ``w~`` inside the log.

    Shape:
        - w: ``(B, H, R)``
        - gamma: ``(B, H)``
        - output: ``(B, H, R)``, rows sum to 1

    Example:
        >>> sharpen(torch.tensor([[[0.5, 0.25, 0.25]]]), torch.tensor([[2.0]]))
        tensor([[[0.6667, 0.1667, 0.1667]]])
    """
    _check(w=(w, ("B", "H", "R")), gamma=(gamma, ("B", "H")))
    check_number("eps", eps, bound=">= 0")
    dtype, work = _dtypes(w, gamma)
    return _sharpen(w.to(work), gamma.to(work), eps).to(dtype)


def _sharpen(w: Tensor, gamma: Tensor, eps: float) -> Tensor:
    return (gamma.unsqueeze(-1) * torch.log(w + eps)).softmax(dim=-1)


def address(
    key: Tensor,
    beta: Tensor,
    gate: Tensor,
    shift: Tensor,
    gamma: Tensor,
    memory: Tensor,
    w_prev: Tensor,
    eps: float = EPS,
    *,
    shift_function: Callable[[Tensor, Tensor], Tensor] | None = None,
) -> Tensor:
    """One full addressing step: content, interpolate, shift, sharpen (Graves et al. fig. 2).

    Args:
        key, beta: content addressing (:func:`content_weights`).
        gate: interpolation gate ``g`` (:func:`interpolate`).
        shift: shift kernel ``s`` (:func:`circular_shift`).
        gamma: sharpening exponent (:func:`sharpen`).
        memory: the memory the content is looked up in.
        w_prev: each head's weighting of the previous step.
        eps: the guard of the cosine and the sharpening.
        shift_function: another computation of :func:`circular_shift` (``(w, shift) -> shifted``, the same
            values), for a caller that has measured one faster where it runs; None: :func:`circular_shift`.

    Shape:
        - key: ``(B, H, C)``; beta, gate, gamma: ``(B, H)``; shift: ``(B, H, S)``
        - memory: ``(B, R, C)``; w_prev: ``(B, H, R)``
        - output: ``(B, H, R)``, rows sum to 1

    Example:
        >>> B, H, R, C = 2, 1, 4, 3
        >>> w = address(torch.ones(B, H, C), torch.ones(B, H), torch.zeros(B, H),
        ...             torch.tensor([0.0, 0.0, 1.0]).expand(B, H, 3), torch.ones(B, H),
        ...             torch.zeros(B, R, C), torch.eye(R)[:1].expand(B, H, R))
        >>> w[0].round(decimals=3)
        tensor([[0., 1., 0., 0.]])
    """
    sizes = _check(
        key=(key, ("B", "H", "C")),
        beta=(beta, ("B", "H")),
        gate=(gate, ("B", "H")),
        shift=(shift, ("B", "H", "S")),
        gamma=(gamma, ("B", "H")),
        memory=(memory, ("B", "R", "C")),
        w_prev=(w_prev, ("B", "H", "R")),
    )
    _check_shift(shift, sizes["R"])
    check_number("eps", eps, bound=">= 0")
    tensors = key, beta, gate, shift, gamma, memory, w_prev
    dtype, work = _dtypes(*tensors)
    key, beta, gate, shift, gamma, memory, w_prev = (t.to(work) for t in tensors)
    w_content = _content(key, memory, beta, eps)
    w_gated = _interpolate(w_content, w_prev, gate)
    shifted = (_circular_shift if shift_function is None else shift_function)(w_gated, shift)
    return _sharpen(shifted, gamma, eps).to(dtype)


def read(memory: Tensor, w: Tensor) -> Tensor:
    """Read heads: ``r = sum_i w(i) M(i)``, one read vector per head.

    Shape:
        - memory: ``(B, R, C)``
        - w: ``(B, H, R)``
        - output: ``(B, H, C)``

    Example:
        >>> read(torch.tensor([[[1.0, 2.0], [3.0, 4.0]]]), torch.tensor([[[0.5, 0.5]]]))
        tensor([[[2., 3.]]])
    """
    _check(memory=(memory, ("B", "R", "C")), w=(w, ("B", "H", "R")))
    return w @ memory


def write(memory: Tensor, w: Tensor, erase: Tensor, add: Tensor) -> Tensor:
    """Write heads: erase ``M'(i) = M(i) prod_h (1 - w_h(i) e_h)``, then add ``+ sum_h w_h(i) a_h``.

    With several write heads, all erases are applied before any add (Graves et al. sec. 3.2: "the
    multiplications are commutative"; so are the additions), so the order of the heads does not
    matter. With one head this is the seed's ``M'(i) = M(i)(1 - w(i) e)``, ``M(i) = M'(i) + w(i) a``.

    Args:
        memory: the memory before the write.
        w: each write head's weighting.
        erase: each head's erase vector ``e`` in ``[0, 1]^C``.
        add: each head's add vector ``a``.

    Shape:
        - memory: ``(B, R, C)``
        - w: ``(B, H, R)``
        - erase, add: ``(B, H, C)``
        - output: ``(B, R, C)``

    Example:
        >>> m = write(torch.ones(1, 2, 2), torch.tensor([[[1.0, 0.0]]]),
        ...           torch.tensor([[[1.0, 0.0]]]), torch.tensor([[[5.0, 5.0]]]))
        >>> m
        tensor([[[5., 6.],
                 [1., 1.]]])
    """
    _check(
        memory=(memory, ("B", "R", "C")),
        w=(w, ("B", "H", "R")),
        erase=(erase, ("B", "H", "C")),
        add=(add, ("B", "H", "C")),
    )
    # A product over the (few) heads; torch.prod's backward is several times slower than this.
    erased = memory
    for h in range(w.shape[1]):
        erased = erased * (1 - w[:, h].unsqueeze(-1) * erase[:, h].unsqueeze(1))  # (B, R, 1) * (B, 1, C)
    return erased + w.transpose(1, 2) @ add
