"""A saved model's input, made from what its card says: :func:`transform_for`.

A card's ``preprocessing`` (:mod:`foveal.artifact`) describes the tensor the network takes. For pictures:

- ``layout`` ``"NCHW"``, ``size`` ``[H, W]`` and ``channels``: the shape, ``(N, channels, H, W)``;
- ``dtype``: the tensor's dtype (``"float32"``);
- ``range`` ``[low, high]``: a picture's values as floats, before normalisation; a uint8 picture holds
  ``uint8_range`` (``[0, 255]``), mapped linearly onto it (``x.float() / 255`` for ``[0, 1]``);
- ``mean`` and ``std``, one per channel: the network takes ``(picture - mean) / std``;
- ``binarize`` ``"threshold"`` and ``threshold`` (DRAW's): the network takes 1 where the picture is above
  the threshold and 0 elsewhere (``"sample"``: a Bernoulli draw of each pixel). Bits that are already bits
  go in as a bool or float tensor: a uint8 picture is 0-255 for every model.

For bit sequences (the NTM's): ``layout`` ``"NTC"``, vectors of ``input_size`` values (``width`` data bits
and the task's marker channels), ``dtype``, and ``binary``: every value 0 or 1.

:func:`transform_for` turns that into a function from what a user has (a PIL image, a uint8 or float
tensor, one picture or a batch) to the network's input, as timm's ``create_transform`` does from its data
config. Pillow is not needed: a PIL image is recognised only where ``PIL.Image`` has been imported.

Example:
    >>> import torch
    >>> prepare = transform_for({"size": [4, 4], "channels": 1, "mean": [0.5], "std": [0.5]})
    >>> prepare(torch.full((4, 4), 255, dtype=torch.uint8))[0, 0, 0]  # one (H, W) picture in 0-255
    tensor([1., 1., 1., 1.])
    >>> prepare(torch.zeros(2, 8, 8, 3)).shape  # two RGB pictures, channels last: grey, 4 x 4
    torch.Size([2, 1, 4, 4])
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

import torch
import torch.nn.functional as F
from torch import Tensor

from foveal.errors import FovealError

__all__ = ["Preprocessing", "Transform", "picture_input", "sequence_input", "transform_for"]


class Preprocessing(TypedDict, total=False):
    """A card's ``preprocessing``: the input a saved model takes (the module's doc says what each key means).

    Pictures have ``layout`` ``"NCHW"``, ``size``, ``channels``, ``dtype``, ``range`` and ``uint8_range``, then
    ``mean`` and ``std`` or ``binarize`` and ``threshold``; bit sequences ``layout`` ``"NTC"``, ``width``,
    ``input_size``, ``dtype`` and ``binary``. It is a dict, so a card's JSON reads into it as it is.
    """

    layout: Literal["NCHW", "NTC"]
    dtype: str
    size: list[int]
    channels: int
    range: list[float]
    uint8_range: list[int]
    mean: list[float]
    std: list[float]
    binarize: Literal["threshold", "sample"]
    threshold: float
    width: int
    input_size: int
    binary: bool


LUMA = (0.299, 0.587, 0.114)
"""The weights of R, G and B in a grey picture (ITU-R 601-2, as PIL's ``convert("L")``)."""
CHANNEL_COUNTS = (1, 3, 4)  # grey, RGB, RGBA: how an axis is recognised as the channels


def picture_input(size: Sequence[int], channels: int, **options: Any) -> dict[str, Any]:
    """A card's ``preprocessing`` for a network that takes pictures: float32 ``(N, channels, H, W)`` in [0, 1]
    (a uint8 picture's 0-255 divided by 255), then ``options``: ``mean`` and ``std``, or ``binarize`` and
    ``threshold``.

    Example:
        >>> picture_input([28, 28], 1, binarize="threshold", threshold=0.5)["range"]
        [0.0, 1.0]
    """
    shape = {"layout": "NCHW", "size": [int(s) for s in size], "channels": int(channels)}
    return {**shape, "dtype": "float32", "range": [0.0, 1.0], "uint8_range": [0, 255], **options}


def sequence_input(width: int, input_size: int, *, binary: bool = True) -> dict[str, Any]:
    """A card's ``preprocessing`` for a network that takes sequences: float32 ``(N, T, input_size)``, ``width``
    data bits and the task's marker channels in each vector; ``binary``: every value 0 or 1.

    Example:
        >>> sequence_input(8, 9)["input_size"]
        9
    """
    return {"layout": "NTC", "width": width, "input_size": input_size, "dtype": "float32", "binary": binary}


def transform_for(model: Any) -> Transform:
    """The function that makes ``model``'s input from a picture (or a bit sequence), as its card says.

    ``model`` is a model loaded by :func:`foveal.pretrained` or :func:`foveal.from_pretrained` (it carries
    its card's ``preprocessing``), or such a ``preprocessing`` dict itself. See :class:`Transform` for what
    the function takes and returns.

    Example:
        >>> import foveal, torch
        >>> stn = foveal.pretrained("stn")
        >>> pictures = torch.randint(0, 256, (2, 1, 42, 42), dtype=torch.uint8)  # as the data set stores them
        >>> torch.equal(transform_for(stn)(pictures), pictures.float() / 255)
        True
    """
    preprocessing = model if isinstance(model, Mapping) else getattr(model, "preprocessing", None)
    if not isinstance(preprocessing, Mapping) or not preprocessing:
        raise FovealError(
            "transform_for: expected a model loaded by foveal.pretrained or foveal.from_pretrained (it carries "
            f"its card's preprocessing) or a preprocessing dict, got a {type(model).__name__} without one"
        )
    return Transform(preprocessing)


class Transform:
    """A card's ``preprocessing`` as a function: what the user has in, the network's input out.

    Pictures: a PIL image, a tensor or a list of either. A tensor is one picture ``(H, W)`` or ``(C, H, W)``
    or a batch ``(N, C, H, W)``; channels last (``(H, W, C)``, ``(N, H, W, C)``) where the channels-first
    axis cannot be channels (1, 3 or 4 of them). uint8 is 0-255, bool is 0 and 1, and a float picture must
    already be in the card's ``range``; other integer dtypes are refused, as is a uint8 picture of only 0s
    and 1s (bits given as 0-255 would all be dark). Grey becomes RGB and RGB grey (RGBA loses its alpha),
    the picture is resized (bilinear, antialiased) to the card's size, then binarised or normalised.

    Bit sequences: a bool, integer or float tensor of 0s and 1s, ``(T, input_size)`` or ``(N, T, input_size)``.

    Shape:
        - output: always a batch, ``(N, channels, H, W)`` (``(N, T, input_size)`` for sequences), on the
          input's device, in the card's dtype
    """

    def __init__(self, preprocessing: Mapping[str, Any]) -> None:
        self.preprocessing = dict(preprocessing)
        p = self.preprocessing
        self.pictures = "size" in p
        if not self.pictures and "input_size" not in p:
            raise FovealError(
                "transform_for: expected preprocessing with 'size' and 'channels' (pictures) or 'input_size' "
                f"(sequences), got keys {sorted(p)}"
            )
        self.dtype = getattr(torch, str(p.get("dtype", "float32")))
        low, high = (float(v) for v in p.get("range", (0.0, 1.0)))
        self.range = low, high

    def __repr__(self) -> str:
        return f"Transform({self.preprocessing})"

    def __call__(self, x: Any) -> Tensor:
        return self._pictures(x) if self.pictures else self._sequences(x)

    # -- pictures -----------------------------------------------------------------------------------------

    def _pictures(self, x: Any) -> Tensor:
        if _is_pil(x):
            x = _pil_tensor(x)
        if isinstance(x, Sequence) and not isinstance(x, str) and x and all(_is_pil(i) or _tensor(i) for i in x):
            return torch.cat([self._pictures(item) for item in x])
        if not isinstance(x, Tensor):
            raise FovealError(
                f"pictures: expected a PIL image, a tensor or a list of them, got {_kind(x)}"
                + ("" if "PIL.Image" in sys.modules else " (a PIL image needs pillow: pip install pillow)")
            )
        p = self.preprocessing
        pixels = self._scaled(_channels_first(x))
        pixels = _convert_channels(pixels, int(p["channels"]))
        size = tuple(int(s) for s in p["size"])
        if tuple(pixels.shape[-2:]) != size:
            pixels = F.interpolate(pixels, size=size, mode="bilinear", align_corners=False, antialias=True)
        if "binarize" in p:
            pixels = self._binarized(pixels)
        elif "mean" in p or "std" in p:
            channels = pixels.shape[1]
            mean = torch.tensor(p.get("mean", [0.0] * channels), dtype=pixels.dtype, device=pixels.device)
            std = torch.tensor(p.get("std", [1.0] * channels), dtype=pixels.dtype, device=pixels.device)
            pixels = (pixels - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1)
        return pixels.to(self.dtype)

    def _scaled(self, x: Tensor) -> Tensor:
        """A float tensor of the picture's values in the card's range."""
        low, high = self.range
        if x.dtype == torch.uint8:
            if bool((x <= 1).all()) and bool(x.any()):
                raise FovealError(
                    "pictures: expected a uint8 picture in 0-255, got one of only 0s and 1s; "
                    "pass bits as a bool or float tensor (x.bool())"
                )
            u_low, u_high = (float(v) for v in self.preprocessing.get("uint8_range", (0, 255)))
            return (x.float() - u_low) / (u_high - u_low) * (high - low) + low
        if x.dtype == torch.bool:
            return x.float() * (high - low) + low
        if not x.is_floating_point():
            raise FovealError(
                f"pictures: expected uint8 (0-255), bool or floating point, got {x.dtype}; "
                "convert 0-255 values with .to(torch.uint8)"
            )
        x = x.float() if x.dtype != torch.float64 else x
        margin = (high - low) / 2  # resampling may overshoot a little; 0-255 or a normalised picture far more
        seen_low, seen_high = (float(x.min()), float(x.max())) if x.numel() else (low, high)
        if seen_low < low - margin or seen_high > high + margin:
            raise FovealError(
                f"pictures: expected float values in [{low:g}, {high:g}], got values in [{seen_low:g}, {seen_high:g}]; "
                "divide 0-255 values by 255 (or pass the uint8 tensor)"
            )
        return x

    def _binarized(self, pixels: Tensor) -> Tensor:
        p = self.preprocessing
        mode = p["binarize"]
        low, high = self.range
        if mode == "threshold":
            return (pixels > float(p.get("threshold", (low + high) / 2))).to(pixels.dtype)
        if mode == "sample":
            return torch.bernoulli(((pixels - low) / (high - low)).clamp(0, 1))
        raise FovealError(f"preprocessing: expected binarize 'threshold' or 'sample', got {mode!r}")

    # -- bit sequences ------------------------------------------------------------------------------------

    def _sequences(self, x: Any) -> Tensor:
        p = self.preprocessing
        size = int(p["input_size"])
        if not isinstance(x, Tensor) or x.dim() not in (2, 3):
            shape = f"a {x.dim()}-D tensor" if isinstance(x, Tensor) else _kind(x)
            raise FovealError(f"sequence: expected a (T, {size}) or (N, T, {size}) tensor, got {shape}")
        if x.shape[-1] != size:
            width = p.get("width")
            markers = f"{size - width} marker channel" + ("s" if size - width != 1 else "") if width else ""
            parts = f" ({width} data bits and {markers})" if width else ""
            raise FovealError(f"sequence: expected vectors of {size} values{parts}, got {x.shape[-1]}")
        if p.get("binary") and bool(((x != 0) & (x != 1)).any()):
            raise FovealError("sequence: expected bits (0 or 1), got other values")
        return (x if x.dim() == 3 else x[None]).to(self.dtype)


def _tensor(x: Any) -> bool:
    return isinstance(x, Tensor)


def _is_pil(x: Any) -> bool:
    """Whether ``x`` is a PIL image; pillow is not imported for the question (whoever made one has)."""
    module = sys.modules.get("PIL.Image")
    return module is not None and isinstance(x, module.Image)


def _kind(x: Any) -> str:
    return f"a {x.dtype} tensor" if isinstance(x, Tensor) else type(x).__name__


def _pil_tensor(image: Any) -> Tensor:
    """A PIL image as uint8 ``(1, C, H, W)``: grey stays grey (one channel), anything else becomes RGB."""
    grey = image.mode.startswith(("1", "L", "I", "F"))  # bilevel, grey (with alpha), 16- and 32-bit grey
    converted = image if image.mode in ("L", "RGB") else image.convert("L" if grey else "RGB")
    width, height = converted.size
    channels = 1 if converted.mode == "L" else 3
    pixels = torch.frombuffer(bytearray(converted.tobytes()), dtype=torch.uint8)
    return pixels.view(height, width, channels).permute(2, 0, 1)[None]


def _channels_first(x: Tensor) -> Tensor:
    """A picture or a batch as ``(N, C, H, W)``."""
    shape = tuple(x.shape)
    if x.dim() == 2:
        return x[None, None]
    if x.dim() == 3:
        if shape[0] in CHANNEL_COUNTS:
            return x[None]
        if shape[-1] in CHANNEL_COUNTS:
            return x.permute(2, 0, 1)[None]
    if x.dim() == 4:
        if shape[1] in CHANNEL_COUNTS:
            return x
        if shape[-1] in CHANNEL_COUNTS:
            return x.permute(0, 3, 1, 2)
    raise FovealError(
        "pictures: expected (H, W), (C, H, W) or (N, C, H, W) with 1, 3 or 4 channels (or channels last), "
        f"got shape {shape}"
    )


def _convert_channels(pixels: Tensor, channels: int) -> Tensor:
    """``(N, C, H, W)`` with the model's number of channels: RGBA loses alpha, RGB becomes grey or grey RGB."""
    if pixels.shape[1] == 4:
        pixels = pixels[:, :3]
    have = pixels.shape[1]
    if have == channels:
        return pixels
    if have == 3 and channels == 1:
        weights = torch.tensor(LUMA, dtype=pixels.dtype, device=pixels.device).view(1, 3, 1, 1)
        return (pixels * weights).sum(1, keepdim=True)
    if have == 1:
        return pixels.expand(-1, channels, -1, -1)
    raise FovealError(f"pictures: expected {channels} channels (or 1, 3 or 4 to convert), got {have}")
