"""Where a model looked, by module name, whatever kernel runs; and attention rollout.

Every foveal attention module returns its maps when asked (``need_weights=True``) and otherwise runs
the fused kernel, which never builds them. :func:`record_maps` asks for all of them at once: while it
is on, every foveal attention module inside the model computes its maps (even where the fused kernel
would have run) and the recorder keeps them under the module's name in the model::

    with record_maps(vit) as maps:
        logits = vit(images)
    maps["blocks.0.attn"]             # (B, heads, N, N)
    attention_rollout([maps[f"blocks.{i}.attn"] for i in range(12)])

The glimpse and memory families are recorded the same way, by what says where they looked: a
spatial transformer's ``theta`` and sampling ``grid``, a Gaussian read or write head's ``window``,
a recurrent attention model's glimpse ``locations`` and ``extents``, a Neural Turing Machine's
``read_weights`` and ``write_weights``, DRAW's ``read_boxes`` and ``write_boxes``
(:data:`MAP_FIELDS`).

:func:`attention_rollout` is Abnar and Zuidema's (2020) estimate of how much each output token
draws on each input token through a stack of residual attention layers.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TypeVar

import torch
from torch import Tensor, nn

from foveal._checks import check_choice, check_number
from foveal.errors import FovealError

MAP_FIELDS = (
    # attention: (B, [heads,] queries, keys) weights and the co-attention family's maps
    "weights",
    "word_weights",
    "region_weights",
    "affinity",
    "image_to_words",
    "image_self",
    "question_self",
    # glimpses: a spatial transformer's (B, 2, 3) or (B, 3, 3) theta and (B, h, w, 2) sampling grid in
    # normalised (x, y) coordinates; a Gaussian head's window (g_X, g_Y, delta, sigma2, gamma), pixels
    "theta",
    "grid",
    "window",
    # a recurrent attention model's (B, T, 2) normalised (x, y) glimpse centres and (B, T) glimpse sides in pixels
    "locations",
    "extents",
    # a Neural Turing Machine's (B, T, heads, rows) read and write weightings
    "read_weights",
    "write_weights",
    # DRAW's (T, B, 4) read and write boxes, (x0, y0, x1, y1) in 0-based pixels
    "read_boxes",
    "write_boxes",
)
"""The fields of a recorded module's output that say where it looked; ``weights`` is recorded under
the module's own name, any other field under ``name.field`` (a named tuple's fields under
``name.field.part``)."""

HEAD_FUSIONS = ("mean", "max", "min")

_RECORDERS: list[RecordedMaps] = []  # the recordings now on, innermost last
_MAP_MODULES: list[type[nn.Module]] = []  # the types record_maps records (register_map_module)

M = TypeVar("M", bound=type[nn.Module])


def register_map_module(cls: M) -> M:
    """Make :func:`record_maps` record every module of type ``cls``, its subclasses included.

    The contract a registered module keeps: while :func:`wants_maps` says so it computes its maps
    whatever it was asked, and returns them in its output's :data:`MAP_FIELDS`; a module whose return
    value cannot hold them (a drop-in for another library's layer) hands them over with :func:`report`.
    Every foveal attention module is registered; a class decorator for a user's own.

    Example:
        >>> from foveal.attention import AttentionOutput
        >>> @register_map_module
        ... class Uniform(nn.Module):
        ...     def forward(self, x):
        ...         w = torch.full((x.shape[0], x.shape[1], x.shape[1]), 1 / x.shape[1])
        ...         return AttentionOutput(w @ x, w)
        >>> model = nn.Sequential(Uniform())
        >>> with record_maps(model) as maps:
        ...     _ = model(torch.ones(1, 2, 3))
        >>> maps["0"].shape
        torch.Size([1, 2, 2])
    """
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise FovealError(f"register_map_module: expected a torch.nn.Module class, got {cls!r}")
    if cls not in _MAP_MODULES:
        _MAP_MODULES.append(cls)
    return cls


def is_map_module(module: object) -> bool:
    """Whether :func:`record_maps` records ``module`` (an instance of a :func:`register_map_module` type)."""
    return isinstance(module, tuple(_MAP_MODULES))


def report(module: nn.Module, maps: object) -> None:
    """Hand ``module``'s maps to every :func:`record_maps` recording that holds it; outside one, do nothing.

    For a module whose return value cannot carry its maps (a tensor, another library's tuple), so that the
    recording cannot read them from it. ``maps`` is either an output whose :data:`MAP_FIELDS` hold them
    (a named tuple such as :class:`~foveal.attention.AttentionOutput`) or a ``{field: tensor}`` mapping of
    any names; either way ``"weights"`` is recorded under the module's name and any other field under
    ``name.field``. ``module``'s type must be registered (:func:`register_map_module`): a recording holds
    only those.

    Example:
        >>> @register_map_module
        ... class Saliency(nn.Module):
        ...     def forward(self, x):  # (B, N, C) -> (B, C): another library's contract, a tensor out
        ...         w = x.norm(dim=-1).softmax(-1)
        ...         report(self, {"weights": w})
        ...         return (w.unsqueeze(-1) * x).sum(1)
        >>> model = nn.Sequential(Saliency())
        >>> with record_maps(model) as recorded:
        ...     _ = model(torch.randn(2, 5, 3))
        >>> recorded["0"].shape
        torch.Size([2, 5])
    """
    if not _RECORDERS:
        return
    if isinstance(maps, Mapping):
        items = list(maps.items())
        if not all(isinstance(field, str) for field, _ in items):
            raise FovealError(f"report: expected maps by name, {{field: tensor}}, got keys {list(maps)!r}")
    else:
        items = _map_fields(maps)
    for recorder in _RECORDERS:
        if id(module) in recorder._names:
            recorder._record(recorder._names[id(module)], items)


def _map_fields(output: object) -> list[tuple[str, object]]:
    """The :data:`MAP_FIELDS` of a named-tuple output, as ``(field, value)``."""
    fields = getattr(output, "_fields", ())
    return [(field, getattr(output, field)) for field in MAP_FIELDS if field in fields]


class RecordedMaps(dict):
    """The maps of one recording: ``{module name: map}``, each module's last call.

    ``calls[name]`` holds every call's map in order, for a module called more than once per
    forward pass (a recurrent hop, a shared block). A map that a module passed up unchanged from a
    module inside it (a :class:`~foveal.attention.NonLocalBlock`'s from its inner attention) is
    kept once, under the outer module's name.
    """

    def __init__(self, names: dict[int, str], detach: bool) -> None:
        super().__init__()
        self.calls: dict[str, list[Tensor]] = {}
        self._names = names
        self._detach = detach
        self._owner: dict[int, tuple] = {}  # id of a module's map -> (its key, what was stored, the map)

    def _add(self, key: str, tensor: Tensor) -> None:
        stored = tensor.detach() if self._detach else tensor
        inner = self._owner.pop(id(tensor), None)
        if inner is not None and inner[2]() is tensor and inner[0] != key:
            # The same tensor, passed up by an enclosing module: keep the outer name only.
            name, kept, _ = inner
            self.calls[name] = [t for t in self.calls[name] if t is not kept]
            if self.calls[name]:
                self[name] = self.calls[name][-1]
            else:
                del self.calls[name], self[name]
        # A weak reference: an id alone could be a later tensor's, once the first is freed.
        self._owner[id(tensor)] = (key, stored, weakref.ref(tensor))
        self.calls.setdefault(key, []).append(stored)
        self[key] = stored

    def _hook(self, module: nn.Module, _inputs: object, output: object) -> None:
        self._record(self._names[id(module)], _map_fields(output))

    def _record(self, name: str, items: list[tuple[str, object]]) -> None:
        """Keep the maps ``(field, map)`` of the module called ``name``."""
        for field, value in items:
            key = name if field == "weights" else f"{name}.{field}" if name else field
            if isinstance(value, Tensor):
                self._add(key, value)
            elif isinstance(value, tuple) and all(isinstance(v, Tensor) for v in value):
                parts = getattr(value, "_fields", range(len(value)))  # a named tuple's parts by name
                for part, v in zip(parts, value, strict=True):
                    self._add(f"{key}.{part}", v)


def wants_maps(module: nn.Module) -> bool:
    """True while :func:`record_maps` records a model that holds ``module``: compute its maps."""
    return bool(_RECORDERS) and any(id(module) in recorder._names for recorder in _RECORDERS)


@contextmanager
def record_maps(model: nn.Module, *, detach: bool = True) -> Iterator[RecordedMaps]:
    """Record where every foveal attention, glimpse and memory module in ``model`` looked, by module name.

    The modules recorded are those of a type given to :func:`register_map_module`: every attention
    module foveal ships, its spatial transformer and Gaussian read and write heads, and its whole
    models that attend (RAM, the NTM, DRAW), their subclasses, and a user's own registered types.
    What each records is its output's :data:`MAP_FIELDS`.

    While the context is on, each of them computes its maps whatever was asked of it (so the fused
    kernel gives way to the path that builds them, and an NTM or DRAW keeps every step; outputs are
    unchanged) and returns them. Outside it, nothing is recorded and the modules run as before.

    Args:
        model: any module; the foveal attention modules in it (itself included) are recorded.
        detach: record the maps without their autograd history (False keeps it, e.g. to take
            gradients of a map).

    Returns:
        A :class:`RecordedMaps`, ``{name: map}``, filled as the model runs.

    Example:
        >>> from foveal.attention import Attention
        >>> model = nn.Sequential(Attention(8, heads=2))
        >>> with record_maps(model) as maps:
        ...     out, weights = model(torch.randn(1, 5, 8))
        >>> maps["0"].shape
        torch.Size([1, 2, 5, 5])
    """
    if not isinstance(model, nn.Module):
        raise FovealError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    names = {id(m): name for name, m in model.named_modules() if is_map_module(m)}
    recorder = RecordedMaps(names, detach)
    handles = [m.register_forward_hook(recorder._hook) for m in model.modules() if id(m) in names]
    _RECORDERS.append(recorder)
    try:
        yield recorder
    finally:
        _RECORDERS.remove(recorder)
        for handle in handles:
            handle.remove()


def attention_rollout(
    maps: Sequence[Tensor], *, head_fusion: str = "mean", discard_ratio: float = 0.0, residual: bool = True
) -> Tensor:
    """Attention rollout (Abnar and Zuidema 2020): how much each token draws on each input token.

    For each layer, in order from the input: the heads are fused (their mean, max or min), the
    lowest ``discard_ratio`` of each row's weights are set to zero, the identity is added for the
    residual connection around the attention, and each row is renormalised to sum to 1::

        A_l = normalise(fuse(W_l) + I),      rollout = A_L ... A_2 A_1

    Args:
        maps: one self-attention map per layer, first layer first: ``(B, heads, N, N)`` or ``(B, N, N)``.
        head_fusion: ``"mean"`` (the paper's), ``"max"`` or ``"min"``.
        discard_ratio: fraction in ``[0, 1)`` of each row's weights (the lowest) to drop.
        residual: add the identity (True, the paper's); False multiplies the raw maps.

    Returns:
        ``(B, N, N)``: row ``j`` is output token ``j``'s share of each input token.

    Example:
        >>> w = torch.tensor([[[0.5, 0.5], [0.0, 1.0]]])
        >>> attention_rollout([w])
        tensor([[[0.7500, 0.2500],
                 [0.0000, 1.0000]]])
    """
    check_choice("head_fusion", head_fusion, HEAD_FUSIONS)
    check_number("discard_ratio", discard_ratio, bound=">= 0")
    if discard_ratio >= 1:
        raise FovealError(f"discard_ratio: expected a fraction in [0, 1), got {discard_ratio!r}")
    if len(maps) == 0:
        raise FovealError("maps: expected at least one layer's map, got none")
    result = None
    for l, w in enumerate(maps):
        if not isinstance(w, Tensor) or w.dim() not in (3, 4) or w.shape[-1] != w.shape[-2]:
            shape = tuple(w.shape) if isinstance(w, Tensor) else type(w).__name__
            raise FovealError(f"maps[{l}]: expected a self-attention map (B, heads, N, N) or (B, N, N), got {shape}")
        if w.dim() == 4:
            w = {"mean": w.mean(dim=1), "max": w.amax(dim=1), "min": w.amin(dim=1)}[head_fusion]
        n = w.shape[-1]
        drop = int(n * discard_ratio)
        if drop:
            lowest = w.topk(drop, dim=-1, largest=False).indices
            w = w.scatter(-1, lowest, 0)
        if residual:
            w = w + torch.eye(n, dtype=w.dtype, device=w.device)
        w = w / w.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)
        if result is not None and result.shape != w.shape:
            raise FovealError(
                f"maps[{l}]: expected shape {tuple(result.shape)} after head fusion, got {tuple(w.shape)}"
            )
        result = w if result is None else w @ result
    assert result is not None  # at least one map, checked above
    return result
