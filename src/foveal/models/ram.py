"""The Recurrent Attention Model (Mnih, Heess, Graves and Kavukcuoglu 2014), hard and Gaussian.

At each of ``T`` steps the model looks at the image through a glimpse at location ``l_t``, folds
what it saw into a recurrent state, and decides where to look next; after the last step it
classifies. The parts, in the paper's names:

- glimpse sensor ``rho(x, l)``: ``k`` square patches centred at ``l``, of sides ``g, 2g, 4g, ...``,
  each reduced to ``g x g`` (hard crops with :func:`~foveal.glimpse.crop` and average pooling;
  or, in the differentiable variant, Gaussian filterbank reads with
  :func:`~foveal.glimpse.gaussian_read` whose stride and width double from scale to scale);
- glimpse network: ``g_t = ReLU(Linear(h_g) + Linear(h_l))`` with ``h_g = ReLU(Linear(rho))`` and
  ``h_l = ReLU(Linear(l))``;
- core network: ``h_t = ReLU(Linear(h_{t-1}) + Linear(g_t))`` (or an LSTM);
- location network: a Gaussian policy ``l_{t+1} ~ N(tanh(Linear(h_t)), std^2)`` with a fixed
  ``std``, on a detached ``h_t`` (REINFORCE trains it alone; letting its gradient into the core
  made the policy saturate at the image corners within a few hundred steps); in eval mode the
  mean is taken;
- baseline network ``b_t = Linear(h_t)`` (on a detached state), trained by mean squared error to
  predict the reward;
- the classifier ``softmax(Linear(h_T))``.

:func:`ram_loss` is the paper's hybrid loss: cross-entropy for the classifier, core and glimpse
network, plus REINFORCE for the location network with reward ``R = 1`` if the class is right,
advantage ``R - b_t``, and the baseline's squared error. With ``read="gaussian"`` every step is
differentiable and the loss is the cross-entropy alone (no sampling, no REINFORCE).

Convention:
    Locations are normalised ``(x, y)`` in ``[-1, 1]``: ``(-1, -1)`` is the top-left corner of the
    image, ``(1, 1)`` the bottom-right, ``(0, 0)`` its centre; in pixels the centre is at
    ``((x + 1) W / 2, (y + 1) H / 2)`` with pixel ``j`` spanning ``[j, j + 1)``. Glimpse sides are
    in input pixels. Images have a zero background, which the glimpses read outside the image.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from foveal._checks import check_choice, check_floating, check_ints, check_number, check_shape, work_dtype
from foveal._torch_private import exportable_output
from foveal.attention.maps import register_map_module
from foveal.errors import FovealError
from foveal.glimpse import crop, gaussian_read
from foveal.models.stn_classifier import CNN, GlimpseCNN
from foveal.registry import MODELS
from foveal.specs import resolve_spec

__all__ = [
    "RAM",
    "RAMClassifierSpec",
    "RAMOutput",
    "RAMSpec",
    "glimpse_sensor",
    "glimpses_on_object",
    "ram_classifier",
    "ram_loss",
]

Read = Literal["hard", "gaussian"]
Reward = Literal["correct", "probability", "log-probability"]  # ram_loss's R (see there)


@dataclass
class RAMSpec:
    """The options of :class:`RAM`, each with its default (the RAM paper's)."""

    read: Read = "hard"  # "hard" crops trained by REINFORCE, or "gaussian" filterbank reads trained by backprop
    glimpses: int = 6  # T, the number of glimpses
    glimpse_size: int = 12  # g, side of each glimpse patch in pixels (and of the Gaussian read's N x N)
    scales: int = 3  # k, patches per glimpse, each twice the side of the previous
    glimpse_hidden: int = 128  # width of h_g, the glimpse network's "what"
    location_hidden: int = 128  # width of h_l, the glimpse network's "where"
    hidden: int = 256  # width of g_t and of the core state h_t
    core: Literal["rnn", "lstm"] = "rnn"  # "rnn" (the paper's rectifier core) or "lstm"
    std: float = 0.15  # the location policy's fixed standard deviation (normalised units)


@dataclass
class RAMClassifierSpec(RAMSpec):
    """The ``ram`` recipe's classifier: RAM with these options, or a conv baseline (``name``).

    :func:`ram_classifier` builds it; the baselines take their default options.
    """

    # "ram"; or, on the whole canvas, "glimpse-cnn" (the RAM paper's conv net) or "cnn" (the stn recipe's)
    name: Literal["ram", "glimpse-cnn", "cnn"] = "ram"


@exportable_output
class RAMOutput(NamedTuple):
    """What :class:`RAM` returns.

    - ``logits``: ``(B, K)``, from the last state.
    - ``locations``: ``(B, T, 2)``, the normalised ``(x, y)`` centre of each glimpse.
    - ``extents``: ``(B, T)``, the side of each step's finest glimpse in input pixels.
    - ``log_probs``: ``(B, T)``, ``log pi(l_t | h_{t-1})`` of the sampled locations (hard read in
      training mode); None otherwise.
    - ``baselines``: ``(B, T)``, ``b_t`` predicted from ``h_{t-1}``; None for the Gaussian read.
    """

    logits: Tensor
    locations: Tensor
    extents: Tensor
    log_probs: Tensor | None = None
    baselines: Tensor | None = None


def glimpse_sensor(images: Tensor, locations: Tensor, size: int, scales: int) -> Tensor:
    """The RAM glimpse sensor ``rho(x, l)``: ``scales`` hard crops of sides ``size * 2^i``, each pooled to ``size``.

    Args:
        images: the images.
        locations: normalised ``(x, y)`` centres (see the module's ``Convention``).
        size: ``g``, the side of the finest patch and of every returned patch.
        scales: ``k``, the number of patches.

    Shape:
        - images: ``(B, C, H, W)``
        - locations: ``(B, 2)``
        - output: ``(B, scales * C, size, size)``, finest scale first

    Example:
        >>> img = torch.arange(64.0).view(1, 1, 8, 8)
        >>> out = glimpse_sensor(img, torch.zeros(1, 2), 2, 2)
        >>> out[0, 0].tolist(), out[0, 1].tolist()  # 2x2 at the centre, then 4x4 pooled to 2x2
        ([[27.0, 28.0], [35.0, 36.0]], [[22.5, 24.5], [38.5, 40.5]])
    """
    sizes = check_shape("images", images, ("B", "C", "H", "W"))
    check_shape("locations", locations, ("B", 2), sizes)
    H, W = images.shape[-2:]
    # Pixel positions in float32 for 16-bit locations: bfloat16 rounds them to even pixels beyond 256.
    work = work_dtype(locations.dtype)
    centre = (locations.detach().to(work) + 1) / 2 * torch.tensor([W, H], dtype=work, device=locations.device)
    patches = []
    for i in range(scales):
        side = size * 2**i
        corner = torch.round(centre - side / 2)
        patch = crop(images, corner, (side, side))
        patches.append(F.avg_pool2d(patch, 2**i) if i else patch)
    return torch.cat(patches, dim=1)


def glimpses_on_object(locations: Tensor, boxes: Tensor, size: tuple[int, ...] | torch.Size) -> Tensor:
    """The fraction of each image's glimpses whose centre lies inside its object's box.

    Args:
        locations: normalised ``(x, y)`` glimpse centres (the module's ``Convention``).
        boxes: the objects' boxes ``(x_min, y_min, x_max, y_max)`` in continuous pixel coordinates
            (pixel ``j`` spans ``[j - 0.5, j + 0.5]``, as :func:`~foveal.data.images.object_boxes`).
        size: the images' ``(H, W)``.

    Shape:
        - locations: ``(B, T, 2)``; boxes: ``(B, 4)``
        - output: ``(B,)``

    Example:
        >>> at = torch.tensor([[[0.0, 0.0], [-0.9, -0.9]]])  # the centre, then near the top-left corner
        >>> glimpses_on_object(at, torch.tensor([[20.0, 20.0, 40.0, 40.0]]), (60, 60)).tolist()
        [0.5]
    """
    H, W = size[-2], size[-1]
    size_xy = torch.tensor([W, H], dtype=locations.dtype, device=locations.device)
    centres = (locations + 1) / 2 * size_xy - 0.5  # pixel-centre coordinates
    x, y = centres.unbind(-1)
    b = boxes[:, None, :].to(locations)
    inside = (x >= b[..., 0]) & (x < b[..., 2]) & (y >= b[..., 1]) & (y < b[..., 3])
    return inside.float().mean(1)


@MODELS.register("ram")
@register_map_module
class RAM(nn.Module):
    """The Recurrent Attention Model; ``read="hard"`` (REINFORCE) or ``"gaussian"`` (backprop only).

    Args:
        in_channels: channels of the images.
        in_size: side of the (square) input; sets the Gaussian read's initial zoom.
        classes: number of classes.
        spec: the options (:class:`RAMSpec`); single options may also be given by name.

    Shape:
        - images: ``(B, in_channels, in_size, in_size)``
        - output: :class:`RAMOutput` (``T = spec.glimpses``)

    Convention:
        See the module docstring. The first location is drawn from the policy at the zero state,
        so it is learned like the others.

    Example:
        >>> model = RAM(1, 60, 10, glimpses=4)
        >>> out = model(torch.rand(2, 1, 60, 60))
        >>> out.logits.shape, out.locations.shape, out.log_probs.shape
        (torch.Size([2, 10]), torch.Size([2, 4, 2]), torch.Size([2, 4]))
    """

    window_start: Tensor  # read="gaussian": a buffer, the window's starting log parameters (see __init__)

    def __init__(
        self, in_channels: int, in_size: int, classes: int, spec: RAMSpec | None = None, **options: Any
    ) -> None:
        super().__init__()
        self.spec = spec = resolve_spec(RAMSpec, spec, options)
        read, core, hidden, scales = spec.read, spec.core, spec.hidden, spec.scales
        steps, glimpse = spec.glimpses, spec.glimpse_size
        check_choice("read", read, ("hard", "gaussian"))
        check_choice("core", core, ("rnn", "lstm"))
        check_ints(in_channels=in_channels, in_size=in_size, classes=classes, glimpses=steps, glimpse_size=glimpse)
        check_ints(scales=scales, glimpse_hidden=spec.glimpse_hidden, location_hidden=spec.location_hidden)
        check_ints(hidden=hidden)
        check_number("std", spec.std, why="the location policy's standard deviation")
        self.in_channels, self.in_size, self.classes = in_channels, in_size, classes
        self.steps, self.glimpse, self.scales = steps, glimpse, scales
        self.hidden, self.std, self.read, self.core_kind = hidden, spec.std, read, core
        # Where: the hard read's (x, y); the Gaussian read's (g~_X, g~_Y, log sigma^2, log delta~).
        where = 2 if read == "hard" else 4
        self.glimpse_what = nn.Linear(scales * in_channels * glimpse * glimpse, spec.glimpse_hidden)
        self.glimpse_where = nn.Linear(where, spec.location_hidden)
        self.glimpse_out_what = nn.Linear(spec.glimpse_hidden, hidden)
        self.glimpse_out_where = nn.Linear(spec.location_hidden, hidden)
        self.core = nn.RNNCell(hidden, hidden, nonlinearity="relu") if core == "rnn" else nn.LSTMCell(hidden, hidden)
        self.locator = nn.Linear(hidden, where)
        self.classifier = nn.Linear(hidden, classes)
        if read == "hard":
            self.baseline = nn.Linear(hidden, 1)
        else:
            # Start where the hard read starts: centred, finest scale g pixels wide with a stride of one
            # pixel (DRAW: delta = (A - 1) / (N - 1) delta~) and sigma of half a stride. The window is
            # bounded around that start (see forward): with unbounded DRAW parameters, training on cluttered
            # canvases swung between 55% and 25% train accuracy within a few thousand steps.
            delta_tilde = (glimpse - 1) / max(in_size - 1, 1)
            self.register_buffer(
                "window_start", torch.tensor([math.log(0.25), math.log(delta_tilde)]), persistent=False
            )
            with torch.no_grad():
                self.locator.weight.mul_(0.1)
                self.locator.bias.zero_()

    def _state(self, batch: int, images: Tensor) -> tuple[Tensor, ...]:
        zeros = images.new_zeros(batch, self.hidden)
        return (zeros,) if self.core_kind == "rnn" else (zeros, zeros.clone())

    def _look(self, images: Tensor, where: Tensor) -> tuple[Tensor, Tensor]:
        """The glimpse ``rho`` at ``where`` and the side of its finest patch in pixels, ``(B,)``."""
        if self.read == "hard":
            extent = torch.full_like(where[:, 0], float(self.glimpse))
            return glimpse_sensor(images, where, self.glimpse, self.scales), extent
        ln2 = math.log(2.0)
        reads = []
        for i in range(self.scales):
            # Scale i: stride and sigma 2^i times the finest's, the same centre; gamma = 1.
            step = torch.tensor([0.0, 0.0, 2 * i * ln2, i * ln2], dtype=where.dtype, device=where.device)
            params = torch.cat([where + step, torch.zeros_like(where[:, :1])], dim=-1)
            reads.append(gaussian_read(images, params, self.glimpse).output)
        _, _, _, log_delta_t = where.unbind(-1)
        delta = (self.in_size - 1) / max(self.glimpse - 1, 1) * log_delta_t.clamp(max=20.0).exp()
        return torch.cat(reads, dim=1), self.glimpse * delta

    def forward(self, images: Tensor, *, generator: torch.Generator | None = None) -> RAMOutput:
        check_shape("images", images, (None, self.in_channels, self.in_size, self.in_size))
        check_floating(images=images)
        B = images.shape[0]
        state = self._state(B, images)
        sample = self.read == "hard" and self.training
        locations, extents, log_probs, baselines = [], [], [], []
        for _ in range(self.steps):
            h = state[0]
            if self.read == "hard":
                # The policy reads a detached state: REINFORCE's noisy gradient trains the location network
                # alone, and the core learns from the classification loss only.
                mean = torch.tanh(self.locator(h.detach()))
                baselines.append(self.baseline(h.detach()).squeeze(-1))
                if sample:
                    noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
                    drawn = (mean + self.std * noise).detach()
                    log_probs.append(torch.distributions.Normal(mean, self.std).log_prob(drawn).sum(-1))
                    where = drawn.clamp(-1.0, 1.0)
                else:
                    where = mean
                centre = where
            else:
                # Centre inside the canvas; stride and sigma within a factor e^1.5 ~ 4.5 of the start.
                raw = self.locator(h)
                where = torch.cat([torch.tanh(raw[:, :2]), self.window_start + 1.5 * torch.tanh(raw[:, 2:])], -1)
                # DRAW's g~ = -1..1 spans pixels 0..A+1 (1-based): the normalised centre to within half a pixel.
                centre = where[:, :2]
            rho, extent = self._look(images, where)
            g = F.relu(
                self.glimpse_out_what(F.relu(self.glimpse_what(rho.flatten(1))))
                + self.glimpse_out_where(F.relu(self.glimpse_where(where)))
            )
            state = (self.core(g, state[0]),) if self.core_kind == "rnn" else self.core(g, state)
            locations.append(centre)
            extents.append(extent)
        return RAMOutput(
            logits=self.classifier(state[0]),
            locations=torch.stack(locations, dim=1),
            extents=torch.stack(extents, dim=1),
            log_probs=torch.stack(log_probs, dim=1) if log_probs else None,
            baselines=torch.stack(baselines, dim=1) if baselines else None,
        )

    def example_inputs(self, batch: int, generator: torch.Generator) -> tuple[Tensor]:
        return (torch.rand(batch, self.in_channels, self.in_size, self.in_size, generator=generator),)


def ram_loss(
    output: RAMOutput, labels: Tensor, *, reinforce_weight: float = 1.0, reward: Reward = "correct"
) -> tuple[Tensor, dict[str, float]]:
    """The RAM paper's hybrid loss: ``CE + w * REINFORCE + MSE(baseline, reward)``.

    ``REINFORCE = -mean_b sum_t log pi(l_t) (R - b_t)`` with the advantage held constant (no gradient
    through the baseline into the policy). The reward ``R`` is the paper's ``1[argmax logits = label]``
    (``reward="correct"``), the probability the classifier gives the label (``"probability"``), or its
    logarithm (``"log-probability"``, minus the cross-entropy). The last two count near misses too, and
    vary with where the glimpses went far more than a right-or-wrong outcome does. Without sampled
    locations (the Gaussian read, or eval mode) the loss is the cross-entropy alone.

    Args:
        output: what :class:`RAM` returned.
        labels: the true classes.
        reinforce_weight: ``w``.
        reward: ``"correct"``, ``"probability"`` or ``"log-probability"``.

    Shape:
        - labels: ``(B,)`` int64

    Returns:
        ``(loss, metrics)`` with metrics ``ce``, ``acc`` and, with sampling, ``reward``,
        ``reinforce`` and ``baseline_mse``.

    Example:
        >>> model = RAM(1, 28, 10, RAMSpec(glimpses=2, glimpse_size=8, scales=2))
        >>> loss, metrics = ram_loss(model(torch.rand(3, 1, 28, 28)), torch.tensor([0, 1, 2]))
        >>> sorted(metrics)
        ['acc', 'baseline_mse', 'ce', 'reinforce', 'reward']
    """
    check_shape("labels", labels, (output.logits.shape[0],))
    check_choice("reward", reward, ("correct", "probability", "log-probability"))
    ce = F.cross_entropy(output.logits, labels)
    correct = (output.logits.argmax(-1) == labels).float()
    metrics = {"ce": ce.item(), "acc": correct.mean().item()}
    if output.log_probs is None or output.baselines is None:
        return ce, metrics
    if reward == "correct":
        earned = correct
    else:
        earned = output.logits.detach().log_softmax(-1).gather(1, labels[:, None]).squeeze(1)
        earned = earned.exp() if reward == "probability" else earned
    returns = earned[:, None].expand_as(output.baselines)
    advantage = (returns - output.baselines).detach()
    reinforce = -(output.log_probs * advantage).sum(1).mean()
    baseline_mse = F.mse_loss(output.baselines, returns)
    metrics.update(reward=earned.mean().item(), reinforce=reinforce.item(), baseline_mse=baseline_mse.item())
    return ce + reinforce_weight * reinforce + baseline_mse, metrics


def ram_classifier(
    in_channels: int, in_size: int, classes: int, spec: RAMClassifierSpec | None = None
) -> RAM | GlimpseCNN | CNN:
    """The classifier ``spec.name`` names: :class:`RAM` with ``spec``'s options, or a baseline with its defaults.

    Example:
        >>> type(ram_classifier(1, 60, 10, RAMClassifierSpec(name="glimpse-cnn"))).__name__
        'GlimpseCNN'
    """
    spec = spec or RAMClassifierSpec()
    if spec.name == "ram":
        return RAM(in_channels, in_size, classes, spec)
    if spec.name == "glimpse-cnn":
        return GlimpseCNN(in_channels, in_size, classes)
    if spec.name == "cnn":
        return CNN(in_channels, in_size, classes)
    raise FovealError(f"name: expected 'ram', 'glimpse-cnn' or 'cnn', got {spec.name!r}")
