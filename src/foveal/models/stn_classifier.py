"""Image classifiers with and without a spatial transformer (Jaderberg et al. 2015, seed 004).

- :class:`CNN`: two 5 x 5 conv + max-pool stages and a fully connected head. Its head sees
  *where* things are (no global pooling), which is why a transformer in front of it can help.
- :class:`STCNN`: the same CNN preceded by a :class:`~foveal.glimpse.SpatialTransformer` whose
  small localisation net regresses the transform from the input (``affine``, ``no_shear``,
  ``attention`` or ``projective``) and starts at the identity.
- :class:`GlimpseCNN`: the RAM paper's convolutional baseline (one layer of 8 10 x 10 filters
  with stride 5, 256 rectified units, softmax).

Each takes its options as a spec (:class:`CNNSpec`, :class:`STCNNSpec`, :class:`GlimpseCNNSpec`) or
by name. The ``stn`` recipe's :class:`STNSpec` is :class:`STCNNSpec` with the choice of model
(``name``), and :func:`stn_classifier` builds what it names.

Every classifier returns a :class:`ClassifierOutput` ``(logits, theta, transformed)``; the plain
CNNs give ``None`` for the last two.

Convention:
    Images are ``(B, C, H, W)`` with a zero background (Fashion-MNIST's and MNIST's raw [0, 1]
    scale), so the transformer's zero padding reads background. ``theta`` maps the transformer's
    output grid to the input in normalised ``[-1, 1]`` coordinates, ``x`` first,
    ``align_corners=False`` (see :mod:`foveal.glimpse.transformer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import torch
from torch import Tensor, nn

from foveal._checks import check_choice, check_int, check_ints, check_number, check_shape
from foveal._torch_private import exportable_output
from foveal.errors import FovealError
from foveal.glimpse.transformer import IDENTITY, Read, SpatialTransformer, Transform
from foveal.registry import MODELS
from foveal.specs import resolve_spec

__all__ = [
    "CNN",
    "STCNN",
    "CNNSpec",
    "ClassifierOutput",
    "GlimpseCNN",
    "GlimpseCNNSpec",
    "STCNNSpec",
    "STNSpec",
    "localization_net",
    "stn_classifier",
    "transform_box",
]


@exportable_output
class ClassifierOutput(NamedTuple):
    """What every classifier here returns.

    ``logits`` ``(B, K)``; ``theta`` ``(B, 2, 3)`` (``(B, 3, 3)`` projective) or None;
    ``transformed``: the transformer's output ``(B, C, h, w)`` or None.
    """

    logits: Tensor
    theta: Tensor | None = None
    transformed: Tensor | None = None


@dataclass
class CNNSpec:
    """The options of :class:`CNN`, each with its default."""

    width: int = 16  # channels of the first conv layer (the second has twice as many)
    hidden: int = 128  # units of the hidden fully connected layer
    dropout: float = 0.0  # dropout before the last layer


@dataclass
class STCNNSpec(CNNSpec):
    """The options of :class:`STCNN`: its CNN's (:class:`CNNSpec`) and its transformer's."""

    transform: Transform = "affine"  # what the localisation net regresses (foveal.glimpse.transformer)
    out_size: int | None = None  # side of the transformer's output, which the CNN reads (None: the input's)
    # "bilinear" (the STN's sampler) or "gaussian" (one Gaussian on each sampling point; attention, no_shear)
    read: Read = "bilinear"
    gaussian_std: float = 0.5  # read="gaussian": the Gaussians' std in strides
    loc_width: int = 8  # channels of the localisation net's first conv layer
    loc_hidden: int = 32  # units of the localisation net's hidden layer
    loc_norm: bool = True  # batch-normalise the localisation net's layers (without it, it dies on clutter)


@dataclass
class STNSpec(STCNNSpec):
    """The ``stn`` recipe's classifier: which one (``name``) and the options of both.

    :func:`stn_classifier` builds it; :class:`CNN` reads only the :class:`CNNSpec` fields.
    """

    name: Literal["cnn", "stcnn"] = "stcnn"  # "cnn": the CNN alone; "stcnn": a spatial transformer, then the CNN


@dataclass
class GlimpseCNNSpec:
    """The options of :class:`GlimpseCNN`, each with its default (the RAM paper's)."""

    filters: int = 8  # 10 x 10 filters of the one conv layer (stride 5)
    hidden: int = 256  # rectified units of the hidden layer


def _check_dropout(p: float) -> None:
    if check_number("dropout", p, bound=">= 0") >= 1:
        raise FovealError(f"dropout: expected a probability in [0, 1), got {p!r}")


def _pooled(size: int, stages: int) -> int:
    for _ in range(stages):
        size //= 2
    return size


@MODELS.register("cnn")
class CNN(nn.Module):
    """conv(5x5, w) - ReLU - maxpool 2 - conv(5x5, 2w) - ReLU - maxpool 2 - FC(hidden) - ReLU - FC(classes).

    Args:
        in_channels: channels of the input images.
        in_size: side of the (square) input; fixes the first fully connected layer's width.
        classes: number of classes.
        spec: the options (:class:`CNNSpec`: ``width``, ``hidden``, ``dropout``); single options may
            also be given by name.

    Shape:
        - images: ``(B, in_channels, in_size, in_size)``
        - logits: ``(B, classes)``

    Example:
        >>> CNN(1, 28, 10)(torch.rand(2, 1, 28, 28)).logits.shape
        torch.Size([2, 10])
    """

    def __init__(
        self, in_channels: int, in_size: int, classes: int, spec: CNNSpec | None = None, **options: Any
    ) -> None:
        super().__init__()
        self.spec = spec = resolve_spec(CNNSpec, spec, options)
        width = spec.width
        check_ints(in_channels=in_channels, classes=classes, width=width, hidden=spec.hidden)
        _check_dropout(spec.dropout)
        self.in_channels, self.in_size, self.classes = in_channels, in_size, classes
        side = _pooled(check_int("in_size", in_size), 2)
        if side < 1:
            raise FovealError(f"in_size: expected at least 4 pixels, got {in_size}")
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(2 * width * side * side, spec.hidden),
            nn.ReLU(),
            nn.Dropout(spec.dropout),
            nn.Linear(spec.hidden, classes),
        )

    def forward(self, images: Tensor) -> ClassifierOutput:
        check_shape("images", images, (None, self.in_channels, self.in_size, self.in_size))
        return ClassifierOutput(self.head(self.features(images)))

    def example_inputs(self, batch: int, generator: torch.Generator) -> tuple[Tensor]:
        return (torch.rand(batch, self.in_channels, self.in_size, self.in_size, generator=generator),)


def localization_net(
    in_channels: int, n_params: int, *, width: int = 8, hidden: int = 32, norm: bool = True
) -> nn.Sequential:
    """A small localisation net: pool, two conv stages, a 4 x 4 max pool, two linear layers.

    The pool to 4 x 4 makes it work for any input size (28, 42, 60, ...). It takes the maximum: on a
    60 x 60 canvas an average over its 15 x 15 cells dilutes a garment's features among the empty
    background until the hidden layer sees only its own biases and dies, and the transform stays a
    constant (docs/studies/stn-localisation.md). ``norm`` puts a batch normalisation before each ReLU,
    which keeps every layer's units on both sides of zero so none of them dies. Its last ``nn.Linear``
    outputs the transform's ``n_params`` and is set to the identity by
    :class:`~foveal.glimpse.SpatialTransformer`.

    Shape:
        - input: ``(B, in_channels, H, W)`` with ``H, W >= 8``
        - output: ``(B, n_params)``
    """

    def normalised(layer: nn.Module, features: int, kind: type[nn.Module]) -> list[nn.Module]:
        return [layer, kind(features), nn.ReLU()] if norm else [layer, nn.ReLU()]

    return nn.Sequential(
        nn.MaxPool2d(2),
        *normalised(nn.Conv2d(in_channels, width, 5, padding=2), width, nn.BatchNorm2d),
        nn.MaxPool2d(2),
        *normalised(nn.Conv2d(width, 2 * width, 5, padding=2), 2 * width, nn.BatchNorm2d),
        nn.AdaptiveMaxPool2d(4),
        nn.Flatten(),
        *normalised(nn.Linear(2 * width * 16, hidden), hidden, nn.BatchNorm1d),
        nn.Linear(hidden, n_params),
    )


@MODELS.register("stcnn")
class STCNN(nn.Module):
    """A spatial transformer, then :class:`CNN` on its output (the STN paper's ST-CNN).

    Args:
        in_channels: channels of the input images.
        in_size: side of the input.
        classes: number of classes.
        spec: the options (:class:`STCNNSpec`: the CNN's, ``transform``, ``out_size``, ``read``,
            ``gaussian_std``, ``loc_width``, ``loc_hidden``, ``loc_norm``); single options may also be given by name.

    Shape:
        - images: ``(B, in_channels, in_size, in_size)``
        - logits: ``(B, classes)``; theta: ``(B, 2, 3)`` (``(B, 3, 3)`` projective)
        - transformed: ``(B, in_channels, out_size, out_size)``

    Convention:
        See the module docstring: ``theta`` maps output to input, normalised, ``x`` first. At
        initialisation ``theta`` is the identity (the transformer passes the image through).

    Example:
        >>> model = STCNN(1, 42, 10, STCNNSpec(transform="attention"), out_size=28)
        >>> logits, theta, seen = model(torch.rand(2, 1, 42, 42))
        >>> logits.shape, theta.shape, seen.shape
        (torch.Size([2, 10]), torch.Size([2, 2, 3]), torch.Size([2, 1, 28, 28]))
    """

    def __init__(
        self, in_channels: int, in_size: int, classes: int, spec: STCNNSpec | None = None, **options: Any
    ) -> None:
        super().__init__()
        self.spec = spec = resolve_spec(STCNNSpec, spec, options)
        check_ints(in_channels=in_channels, in_size=in_size, classes=classes)
        check_choice("transform", spec.transform, tuple(IDENTITY))
        check_ints(loc_width=spec.loc_width, loc_hidden=spec.loc_hidden)
        if spec.out_size is not None:
            check_int("out_size", spec.out_size)
        self.in_channels, self.in_size, self.classes = in_channels, in_size, classes
        out_size = spec.out_size or in_size
        n_params = len(IDENTITY[spec.transform])
        localization = localization_net(
            in_channels, n_params, width=spec.loc_width, hidden=spec.loc_hidden, norm=spec.loc_norm
        )
        self.transformer = SpatialTransformer(
            localization, (out_size, out_size), transform=spec.transform, read=spec.read, gaussian_std=spec.gaussian_std
        )
        self.cnn = CNN(in_channels, out_size, classes, spec)  # it reads the CNNSpec fields

    def forward(self, images: Tensor) -> ClassifierOutput:
        check_shape("images", images, (None, self.in_channels, self.in_size, self.in_size))
        transformed, theta, _ = self.transformer(images)
        return ClassifierOutput(self.cnn(transformed).logits, theta, transformed)

    def example_inputs(self, batch: int, generator: torch.Generator) -> tuple[Tensor]:
        return (torch.rand(batch, self.in_channels, self.in_size, self.in_size, generator=generator),)


def stn_classifier(in_channels: int, in_size: int, classes: int, spec: STNSpec | None = None) -> CNN | STCNN:
    """The classifier ``spec.name`` names, with its options from ``spec``.

    Example:
        >>> type(stn_classifier(1, 28, 10, STNSpec(name="cnn", width=4))).__name__
        'CNN'
    """
    spec = spec or STNSpec()
    if spec.name == "cnn":
        return CNN(in_channels, in_size, classes, spec)
    if spec.name == "stcnn":
        return STCNN(in_channels, in_size, classes, spec)
    raise FovealError(f"name: expected 'cnn' or 'stcnn', got {spec.name!r}")


@MODELS.register("glimpse-cnn")
class GlimpseCNN(nn.Module):
    """The RAM paper's convolutional baseline: conv(10x10, 8 filters, stride 5) - ReLU - FC(256) - ReLU - FC.

    Args:
        in_channels: channels of the input images.
        in_size: side of the (square) input, at least 10.
        classes: number of classes.
        spec: the options (:class:`GlimpseCNNSpec`); single options may also be given by name.

    Shape:
        - images: ``(B, in_channels, in_size, in_size)``
        - logits: ``(B, classes)``

    Example:
        >>> GlimpseCNN(1, 60, 10)(torch.rand(2, 1, 60, 60)).logits.shape
        torch.Size([2, 10])
    """

    def __init__(
        self, in_channels: int, in_size: int, classes: int, spec: GlimpseCNNSpec | None = None, **options: Any
    ) -> None:
        super().__init__()
        self.spec = spec = resolve_spec(GlimpseCNNSpec, spec, options)
        check_ints(in_channels=in_channels, classes=classes, filters=spec.filters, hidden=spec.hidden)
        if check_int("in_size", in_size) < 10:
            raise FovealError(f"in_size: expected at least 10 pixels (the one 10 x 10 filter), got {in_size}")
        self.in_channels, self.in_size, self.classes = in_channels, in_size, classes
        side = (in_size - 10) // 5 + 1
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, spec.filters, 10, stride=5),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(spec.filters * side * side, spec.hidden),
            nn.ReLU(),
            nn.Linear(spec.hidden, classes),
        )

    def forward(self, images: Tensor) -> ClassifierOutput:
        check_shape("images", images, (None, self.in_channels, self.in_size, self.in_size))
        return ClassifierOutput(self.net(images))

    def example_inputs(self, batch: int, generator: torch.Generator) -> tuple[Tensor]:
        return (torch.rand(batch, self.in_channels, self.in_size, self.in_size, generator=generator),)


def transform_box(theta: Tensor, in_size: tuple[int, int]) -> Tensor:
    """Where the transformer's output square lands in the input: its four corners, in input pixels.

    Args:
        theta: ``(B, 2, 3)`` affine or ``(B, 3, 3)`` projective, output -> input, normalised.
        in_size: ``(H, W)`` of the input.

    Shape:
        - output: ``(B, 5, 2)``, the corners as ``(x, y)`` pixel coordinates (0-based, continuous:
          pixel ``j`` spans ``[j - 0.5, j + 0.5]``), closed (the first corner repeated last) so a
          plot draws the outline in one call.

    Convention:
        ``align_corners=False``: normalised -1 and +1 are the outer edges of the border pixels,
        i.e. pixel coordinates -0.5 and ``W - 0.5``.

    Example:
        >>> transform_box(torch.eye(2, 3)[None], (28, 28))[0, :4].tolist()
        [[-0.5, -0.5], [27.5, -0.5], [27.5, 27.5], [-0.5, 27.5]]
    """
    corners = torch.tensor([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0]], dtype=theta.dtype)
    points = torch.cat([corners, torch.ones(5, 1, dtype=theta.dtype)], -1) @ theta.transpose(1, 2)  # (B, 5, 2|3)
    if theta.shape[1] == 3:
        points = points[..., :2] / points[..., 2:].clamp(min=1e-6)
    H, W = in_size
    scale = torch.tensor([W / 2, H / 2], dtype=theta.dtype)
    return (points + 1) * scale - 0.5
