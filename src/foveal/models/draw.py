"""DRAW: the deep recurrent attentive writer (seed 004, Gregor et al. 2015).

A variational auto-encoder whose encoder and decoder are LSTMs that build the image on a canvas
in ``T`` steps. Step ``t`` (seed 004's equations)::

    x_hat_t   = x - sigmoid(c_{t-1})
    r_t       = read(x, x_hat_t, h_dec_{t-1})
    h_enc_t   = LSTM_enc(h_enc_{t-1}, [r_t, h_dec_{t-1}])
    z_t       ~ Q(Z_t | h_enc_t) = N(mu_t, sigma_t),   mu_t, log sigma_t = W(h_enc_t)
    h_dec_t   = LSTM_dec(h_dec_{t-1}, z_t)
    c_t       = c_{t-1} + write(h_dec_t)

With attention, ``read = gamma [F_Y x F_X^T, F_Y x_hat F_X^T]`` on an ``N x N`` Gaussian grid and
``write = (1 / gamma~) F~_Y^T w_t F~_X`` with ``w_t = W(h_dec_t)``; each head's five parameters
``(g~_X, g~_Y, log sigma^2, log delta~, log gamma)`` come from one linear layer on ``h_dec``.
Without attention, ``read = [x, x_hat]`` and ``write = W(h_dec_t)``, a whole image.

The loss is the negative evidence lower bound in nats, per image::

    L = -log Bernoulli(x | sigmoid(c_T)) + sum_t KL(N(mu_t, sigma_t) || N(0, I))
    KL_t = 1/2 sum_d (mu_td^2 + sigma_td^2 - log sigma_td^2 - 1)

(the ``- 1`` is per latent dimension and per step, not ``-T/2`` once).

Speed: each LSTM's gates are one product of its inputs and last state side by side, its weights
stacked once per forward; the filterbanks are built for the whole batch, ``x`` and ``x_hat`` share
one pair of batched products, and all noise is drawn before the loop (docs/draw.md, "The step is fused";
docs/studies/draw-compile-speed.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from foveal._checks import check_floating, check_hw, check_ints, check_shape, tracing
from foveal._torch_private import exportable_output
from foveal.attention.maps import register_map_module, report, wants_maps
from foveal.compiling import CompilePlan
from foveal.errors import FovealError
from foveal.glimpse.gaussian import draw_window, gaussian_read, gaussian_write
from foveal.registry import MODELS
from foveal.specs import resolve_spec

LOG_LIMIT = 10.0
"""Guard: the encoder's ``log sigma`` is clamped to ``[-LOG_LIMIT, LOG_LIMIT]`` so ``sigma^2`` can
neither overflow nor reach zero; inside the range the equations hold exactly. The heads are guarded
in :mod:`foveal.glimpse.gaussian` (clamped logs, a variance floor, ``eps`` in the row sums)."""


def guard(value: Tensor, limit: float = LOG_LIMIT) -> Tensor:
    """``value`` clamped to ``[-limit, limit]`` (see :data:`LOG_LIMIT`)."""
    return value.clamp(-limit, limit)


@dataclass
class DRAWSpec:
    """The options of :class:`DRAW`, each with its default (the paper's MNIST model)."""

    steps: int = 64  # T, the number of drawing steps
    enc_size: int = 256  # hidden size of the encoder LSTM
    dec_size: int = 256  # hidden size of the decoder LSTM
    z_size: int = 100  # Z, latent dimensions per step
    attention: bool = True  # Gaussian read and write heads; False: whole-image ones
    read_size: int = 2  # N of the read grid (an N x N glimpse per channel and image)
    write_size: int = 5  # N of the write grid
    learn_canvas: bool = True  # learn the start canvas c_0 (zero at the start); False keeps c_0 = 0


class DRAWState(NamedTuple):
    """What one drawing step hands the next."""

    canvas: Tensor  # (B, C, H, W): c_t, logits
    h_enc: Tensor  # (B, E): the encoder LSTM's state
    c_enc: Tensor  # (B, E): and its cell
    h_dec: Tensor  # (B, D): the decoder LSTM's state
    c_dec: Tensor  # (B, D): and its cell
    read_p: Tensor | None  # (B, 5): the next read's raw head parameters (None without attention)


class DRAWWeights(NamedTuple):
    """The weights one forward pass multiplies with, stacked once for every step."""

    enc_gates: Tensor  # (4E, read + D + E): the encoder's gates from [r_t, h_dec_{t-1}, h_enc_{t-1}]
    enc_bias: Tensor  # (4E,), or (B, 4E) without attention: it holds the constant x half of the input product
    dec_gates: Tensor  # (4D, Z + D): the decoder's gates from [z_t, h_dec_{t-1}]
    dec_bias: Tensor  # (4D,)
    out_weight: Tensor  # the write patch's rows, then (attention) the write and the read head's five each
    out_bias: Tensor


@exportable_output
class DRAWOutput(NamedTuple):
    """What :meth:`DRAW.forward` returns; the per-step fields are None unless ``return_steps``.

    Shape:
        - logits: ``(B, C, H, W)``, the final canvas ``c_T`` (Bernoulli logits)
        - nll: ``(B,)``, ``-log p(x | z_{1:T})`` in nats
        - kl: ``(B,)``, ``sum_t KL(Q(z_t) || N(0, I))`` in nats (closed form)
        - log_weight: ``(B,)``, ``log p(x, z) - log q(z | x)`` at the sampled ``z`` (for IWAE)
        - canvases: ``(T, B, C, H, W)``, ``c_1 .. c_T`` (logits)
        - read_params, write_params: ``(T, B, 5)``, the raw head parameters
          ``(g~_X, g~_Y, log sigma^2, log delta~, log gamma)`` (attention only)
        - z: ``(T, B, Z)``, the sampled latents
    """

    logits: Tensor
    nll: Tensor
    kl: Tensor
    log_weight: Tensor
    canvases: Tensor | None = None
    read_params: Tensor | None = None
    write_params: Tensor | None = None
    z: Tensor | None = None


class DRAWBoxes(NamedTuple):
    """Where DRAW read and wrote at each step (:func:`~foveal.attention.record_maps` records them):
    ``(T, B, 4)`` boxes ``(x0, y0, x1, y1)`` in 0-based pixels (:meth:`DRAW.box`); a generation reads none."""

    read_boxes: Tensor | None
    write_boxes: Tensor


@exportable_output
class Generation(NamedTuple):
    """What :meth:`DRAW.generate` returns.

    Shape:
        - canvases: ``(T, n, C, H, W)``, ``c_1 .. c_T`` (logits; ``sigmoid`` gives the picture)
        - write_params: ``(T, n, 5)`` raw write-head parameters, or None without attention
    """

    canvases: Tensor
    write_params: Tensor | None


@MODELS.register("draw")
@register_map_module
class DRAW(nn.Module):
    """DRAW with or without attention (see the module docstring for the equations).

    Args:
        image_size: ``(H, W)`` of the images.
        channels: image channels ``C`` (the filterbanks are shared by the channels).
        spec: the options (:class:`DRAWSpec`); single options may also be given by name.

    Shape:
        - x: ``(B, C, H, W)``, binary (0 or 1) values
        - output: :class:`DRAWOutput`

    Convention:
        ``x`` is ``(rows, columns) = (y, x)``: seed 004's ``A x B`` image is ``W = A`` columns by
        ``H = B`` rows, ``F_X`` is ``N x W`` and ``F_Y`` is ``N x H``. Filter centres are in
        1-based pixel units (pixel ``a`` of a row has centre ``a`` for ``a = 1 .. W``), so
        ``g~ = 0`` puts the grid's centre at ``((W + 1) / 2, (H + 1) / 2)``, the image centre.

    Example:
        >>> spec = DRAWSpec(steps=3, enc_size=16, dec_size=16, z_size=4, read_size=2, write_size=3)
        >>> model = DRAW((8, 8), 1, spec)
        >>> x = (torch.rand(5, 1, 8, 8) > 0.5).float()
        >>> out = model(x)
        >>> out.logits.shape, out.nll.shape, out.kl.shape
        (torch.Size([5, 1, 8, 8]), torch.Size([5]), torch.Size([5]))
        >>> model.generate(2).canvases.shape
        torch.Size([3, 2, 1, 8, 8])
    """

    compile_plan: ClassVar[CompilePlan] = CompilePlan(
        "each call of a graph has a fixed cost that a run of steps pays once, and the C++ wrapper calls a "
        "run's many kernels from C++ rather than Python (docs/studies/draw-compile-speed.md)",
        methods=("step", "run_steps"),
        steps_per_call=9,
        cpu_options=MappingProxyType({"cpp_wrapper": True}),
    )
    steps_per_call = 1  # drawing steps per call of ``run_steps`` (the plan's once compiled)

    def __init__(
        self, image_size: tuple[int, int], channels: int, spec: DRAWSpec | None = None, **options: Any
    ) -> None:
        super().__init__()
        self.spec = spec = resolve_spec(DRAWSpec, spec, options)
        steps, enc_size, dec_size, z_size = spec.steps, spec.enc_size, spec.dec_size, spec.z_size
        attention, read_size, write_size = spec.attention, spec.read_size, spec.write_size
        H, W = check_hw("image_size", image_size)
        check_ints(channels=channels, steps=steps, enc_size=enc_size, dec_size=dec_size, z_size=z_size)
        check_ints(read_size=read_size, write_size=write_size)
        self.image_size = (H, W)
        self.channels = channels
        self.steps = steps
        self.z_size = z_size
        self.attention = attention
        self.read_size = read_size
        self.write_size = write_size
        # c_0: a learned image (zero at the start) or the constant 0. The whole-image writer has a
        # per-pixel bias and learns the mean image at once; the 5 x 5 attentive writer has none.
        # A learned c_0 gives both the same start.
        canvas0 = torch.zeros(channels, H, W)
        if spec.learn_canvas:
            self.canvas0 = nn.Parameter(canvas0)
        else:
            self.register_buffer("canvas0", canvas0)
        pixels = channels * H * W
        read_dim = 2 * channels * read_size**2 if attention else 2 * pixels
        write_dim = channels * write_size**2 if attention else pixels
        self.read_dim = read_dim
        self.encoder = nn.LSTMCell(read_dim + dec_size, enc_size)
        self.decoder = nn.LSTMCell(z_size, dec_size)
        self.latent = nn.Linear(enc_size, 2 * z_size)  # -> (mu, log sigma)
        self.write_patch = nn.Linear(dec_size, write_dim)  # w_t (attention) or the whole write
        if attention:
            self.read_head = nn.Linear(dec_size, 5)
            self.write_head = nn.Linear(dec_size, 5)
            self._init_heads()

    def _init_heads(self) -> None:
        # Both heads start centred with delta~ = 1 and sigma = stride / 2, so the filters tile the image
        # and early steps see all of it; the read at unit gain, the write at 1 / gamma = stride^2 so a unit
        # patch value adds about one logit where it lands (Adam would take thousands of steps to get
        # there from log gamma = 0). Why: docs/studies/draw-initialisation.md.
        H, W = self.image_size
        for head, N in ((self.read_head, self.read_size), (self.write_head, self.write_size)):
            stride = (max(H, W) - 1) / max(N - 1, 1)
            nn.init.normal_(head.weight, std=1e-3)
            nn.init.zeros_(head.bias)
            with torch.no_grad():
                head.bias[2] = 2 * math.log(stride / 2)  # log sigma^2
                if head is self.write_head:
                    head.bias[4] = -2 * math.log(stride)  # log gamma

    # -- the two heads --------------------------------------------------------------------------

    def read(self, x: Tensor, x_hat: Tensor, params: Tensor | None) -> Tensor:
        """``gamma [F_Y x F_X^T, F_Y x_hat F_X^T]`` flattened, or ``[x, x_hat]`` without attention.

        Shape:
            - x, x_hat: ``(B, C, H, W)``
            - params: ``(B, 5)`` raw read-head parameters (None without attention)
            - output: ``(B, 2 C N^2)`` or ``(B, 2 C H W)``
        """
        if params is None:
            return torch.cat([x.flatten(1), x_hat.flatten(1)], dim=1)
        # x and x_hat ride in one pair of batched products; dense (no window cut, no .item()): at
        # DRAW's sizes the whole image is small, and the dense product is exact.
        return gaussian_read(x, params, self.read_size, x_hat, truncate=False).output.flatten(1)

    def write(self, patch: Tensor, params: Tensor | None) -> Tensor:
        """``(1 / gamma) F_Y^T w F_X`` with ``w`` the patch, or the patch itself without attention.

        Shape:
            - patch: ``(B, C N^2)`` or ``(B, C H W)``
            - params: ``(B, 5)`` raw write-head parameters (None without attention)
            - output: ``(B, C, H, W)``
        """
        B = patch.shape[0]
        H, W = self.image_size
        if params is None:
            return patch.view(B, self.channels, H, W)
        N = self.write_size
        return gaussian_write(patch.view(B, self.channels, N, N), params, (H, W)).output

    # -- the step, with the stacked weights -----------------------------------------------------

    def _stacked(self, x: Tensor) -> DRAWWeights:
        """Each LSTM's input and recurrent weights side by side (see the module docstring)."""
        enc, dec = self.encoder, self.decoder
        enc_gates = torch.cat([enc.weight_ih, enc.weight_hh], dim=1)  # columns: [read | h_dec | h_enc]
        enc_bias = enc.bias_ih + enc.bias_hh
        if not self.attention:  # read = [x, x_hat]: the x half of the encoder's input product is constant
            pixels = math.prod(x.shape[1:])
            enc_bias = F.linear(x.flatten(1), enc.weight_ih[:, :pixels], enc_bias)
            enc_gates = enc_gates[:, pixels:]
        dec_gates = torch.cat([dec.weight_ih, dec.weight_hh], dim=1)  # columns: [z | h_dec]
        heads = (self.write_patch, self.write_head, self.read_head) if self.attention else (self.write_patch,)
        out_weight = torch.cat([head.weight for head in heads])
        out_bias = torch.cat([head.bias for head in heads])
        return DRAWWeights(enc_gates, enc_bias, dec_gates, dec.bias_ih + dec.bias_hh, out_weight, out_bias)

    @staticmethod
    def _lstm(gates: Tensor, cell: Tensor) -> tuple[Tensor, Tensor]:
        i, f, g, o = gates.chunk(4, dim=1)  # nn.LSTMCell's gate order
        cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(cell), cell

    def _outputs(self, h_dec: Tensor, weights: DRAWWeights) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """The write patch and both heads' raw parameters from ``h_dec`` (None without attention)."""
        out = F.linear(h_dec, weights.out_weight, weights.out_bias)
        if not self.attention:
            return out, None, None
        patch, write_p, read_p = out.split([self.write_patch.out_features, 5, 5], dim=1)
        return patch, write_p, read_p

    def step(
        self, x: Tensor, noise_t: Tensor, state: DRAWState, weights: DRAWWeights
    ) -> tuple[DRAWState, Tensor, Tensor, Tensor | None]:
        """One drawing step: read, encode, sample ``z_t``, decode, write.

        Returns the next state, ``(mu_t, log sigma_t)`` stacked ``(2, B, Z)``, ``z_t`` and the write
        head's parameters (None without attention).
        """
        return self._step(x, noise_t, state, weights)

    def _step(
        self, x: Tensor, noise_t: Tensor, state: DRAWState, weights: DRAWWeights
    ) -> tuple[DRAWState, Tensor, Tensor, Tensor | None]:
        """:meth:`step`, never compiled on its own: the runs of steps and the first step call it."""
        Z = self.z_size
        x_hat = x - torch.sigmoid(state.canvas)
        read = self.read(x, x_hat, state.read_p) if self.attention else x_hat.flatten(1)
        enc_in = torch.cat([read, state.h_dec, state.h_enc], dim=1)
        h_enc, c_enc = self._lstm(torch.addmm(weights.enc_bias, enc_in, weights.enc_gates.t()), state.c_enc)
        stats = self.latent(h_enc)
        mu, log_sigma = stats[:, :Z], guard(stats[:, Z:])
        z = torch.addcmul(mu, torch.exp(log_sigma), noise_t)  # z_t = mu + sigma eps_t, fresh eps_t
        dec_in = torch.cat([z, state.h_dec], dim=1)
        h_dec, c_dec = self._lstm(torch.addmm(weights.dec_bias, dec_in, weights.dec_gates.t()), state.c_dec)
        patch, write_p, read_p = self._outputs(h_dec, weights)
        canvas = state.canvas + self.write(patch, write_p)
        return DRAWState(canvas, h_enc, c_enc, h_dec, c_dec, read_p), torch.stack([mu, log_sigma]), z, write_p

    def run_steps(
        self, x: Tensor, noise: Tensor, state: DRAWState, weights: DRAWWeights
    ) -> tuple[DRAWState, Tensor, Tensor]:
        """``noise.shape[0]`` drawing steps from ``state``; returns the state after the last, the steps'
        ``(mu_t, log sigma_t)`` ``(k, 2, B, Z)`` and their ``z_t`` ``(k, B, Z)``.

        Shape:
            - noise: ``(k, B, Z)``, the ``eps_t`` of the ``k`` steps
        """
        stats, zs = [], []
        for noise_t in noise:
            state, stat, z, _ = self._step(x, noise_t, state, weights)
            stats.append(stat)
            zs.append(z)
        return state, torch.stack(stats), torch.stack(zs)

    def example_inputs(self, batch: int, generator: torch.Generator) -> tuple[Tensor]:
        """Random binary images, for tests and examples."""
        return ((torch.rand(batch, self.channels, *self.image_size, generator=generator) > 0.5).float(),)

    def forward(
        self,
        x: Tensor,
        *,
        noise: Tensor | None = None,
        generator: torch.Generator | None = None,
        return_steps: bool = False,
        check_binary: bool = True,
    ) -> DRAWOutput:
        """Encode and redraw ``x``; returns the loss terms (and the steps if asked).

        Args:
            x: binary images. Bernoulli likelihood is only a likelihood for 0/1 data: grey values
                raise ``ValueError`` unless ``check_binary=False``.
            noise: the standard-normal ``eps`` of every step (drawn if None), ``z_t = mu + sigma eps_t``.
            generator: the random source for ``noise`` when it is drawn.
            return_steps: also return every canvas, head parameters and latent.
            check_binary: verify that ``x`` is 0/1 (skipped while ``torch.compile`` or ``torch.export`` traces).

        Shape:
            - x: ``(B, C, H, W)``
            - noise: ``(T, B, Z)``
        """
        H, W = self.image_size
        sizes = check_shape("x", x, ("B", self.channels, H, W))
        check_floating(x=x)
        B = sizes["B"]
        # A traced graph has no pixel values to branch on: the check would break it.
        if check_binary and not tracing() and ((x != 0) & (x != 1)).any():
            raise FovealError(
                "DRAW scores x with a Bernoulli likelihood, which needs binary (0/1) pixels: binarise the "
                "data (foveal.data.binarize) or pass check_binary=False knowingly"
            )
        if noise is None:
            noise = torch.randn(self.steps, B, self.z_size, generator=generator, device=x.device, dtype=x.dtype)
        check_shape("noise", noise, (self.steps, B, self.z_size))

        weights = self._stacked(x)
        zeros_enc = x.new_zeros(B, self.encoder.hidden_size)
        zeros_dec = x.new_zeros(B, self.decoder.hidden_size)
        # The first read's parameters come from h_dec_0 = 0: the read head's bias
        read_p = self.read_head.bias.expand(B, -1) if self.attention else None
        state = DRAWState(self.canvas0.expand(B, -1, -1, -1), zeros_enc, zeros_enc, zeros_dec, zeros_dec, read_p)
        # Per-step Q statistics and z are kept and the KL terms computed once after the loop:
        # the same numbers in a handful of vectorised ops instead of a dozen per step.
        stats, zs = [], []
        steps: dict[str, list[Tensor]] = {"canvases": [], "read": [], "write": []}
        # Runs of steps_per_call steps per call; the steps left over, and every step when kept, one by one.
        recording = self.attention and wants_maps(self)  # a recording reads the boxes of every step
        keep_steps = return_steps or recording
        per_call = 1 if keep_steps else self.steps_per_call
        runs = (self.steps - 1) // per_call if per_call > 1 else 0
        for t in range(self.steps - runs * per_call):
            read_p = state.read_p
            # The first step runs eagerly: compiled, its broadcast start state would need a graph of its own.
            step = self._step if t == 0 else self.step
            state, stat, z, write_p = step(x, noise[t], state, weights)
            stats.append(stat[None])
            zs.append(z[None])
            if keep_steps:
                steps["canvases"].append(state.canvas)
                if read_p is not None and write_p is not None:  # with attention
                    steps["read"].append(read_p)
                    steps["write"].append(write_p)
        for start in range(self.steps - runs * per_call, self.steps, per_call):
            state, stat, z = self.run_steps(x, noise[start : start + per_call], state, weights)
            stats.append(stat)
            zs.append(z)
        canvas = state.canvas

        mu, log_sigma = torch.cat(stats).unbind(1)  # (T, B, Z) each
        z = torch.cat(zs)
        # KL(N(mu, sigma) || N(0, 1)) = (mu^2 + sigma^2 - log sigma^2 - 1) / 2 per dimension and step
        kl = 0.5 * (mu.square() + torch.exp(2 * log_sigma) - 2 * log_sigma - 1).sum((0, 2))
        # log q(z | x) - log p(z) at the sampled z: the log(2 pi) terms cancel, (z - mu) / sigma = eps
        log_q_over_p = (0.5 * (z.square() - noise.square()) - log_sigma).sum((0, 2))
        nll = F.binary_cross_entropy_with_logits(canvas, x, reduction="none").flatten(1).sum(1)
        log_weight = -nll - log_q_over_p
        stack = lambda key: torch.stack(steps[key]) if steps[key] else None  # noqa: E731
        if recording:
            read_p, write_p = torch.stack(steps["read"]), torch.stack(steps["write"])
            report(self, DRAWBoxes(self.box(read_p, self.read_size), self.box(write_p, self.write_size)))
        if not return_steps:
            return DRAWOutput(canvas, nll, kl, log_weight)
        return DRAWOutput(canvas, nll, kl, log_weight, stack("canvases"), stack("read"), stack("write"), z)

    @torch.no_grad()
    def generate(self, n: int, *, z: Tensor | None = None, generator: torch.Generator | None = None) -> Generation:
        """Draw ``n`` images from the prior: ``z_t ~ N(0, I)``, ``h_dec_t = LSTM_dec(h_dec_{t-1}, z_t)``.

        Args:
            n: how many images.
            z: the latents of every step (drawn from ``N(0, I)`` if None).
            generator: the random source for ``z``.

        Shape:
            - z: ``(T, n, Z)``
            - output: :class:`Generation`, canvases ``(T, n, C, H, W)``
        """
        p = next(self.parameters())
        if z is None:
            z = torch.randn(self.steps, n, self.z_size, generator=generator, device=p.device, dtype=p.dtype)
        check_shape("z", z, (self.steps, n, self.z_size))
        h = p.new_zeros(n, self.decoder.hidden_size)
        c = p.new_zeros(n, self.decoder.hidden_size)
        canvas = self.canvas0.expand(n, -1, -1, -1)
        canvases, write_params = [], []  # write_params: none without attention
        for t in range(self.steps):
            h, c = self.decoder(z[t], (h, c))
            write_p = self.write_head(h) if self.attention else None
            canvas = canvas + self.write(self.write_patch(h), write_p)
            canvases.append(canvas)
            if write_p is not None:
                write_params.append(write_p)
        written = torch.stack(write_params) if write_params else None
        if written is not None:
            report(self, DRAWBoxes(None, self.box(written, self.write_size)))
        return Generation(torch.stack(canvases), written)

    def box(self, params: Tensor, N: int) -> Tensor:
        """The image region a head covers: ``(x0, y0, x1, y1)`` in 0-based pixel coordinates.

        The box spans the grid's outer filter centres plus half a stride on each side,
        ``g +- N delta / 2``, shifted by -1 from the 1-based filter coordinates.

        Shape:
            - params: ``(..., 5)`` raw head parameters
            - output: ``(..., 4)``
        """
        lead = params.shape[:-1]
        window = draw_window(params.reshape(-1, 5), self.image_size, N)
        g_x, g_y = window.g_X - 1, window.g_Y - 1
        half = N * window.delta / 2
        return torch.stack([g_x - half, g_y - half, g_x + half, g_y + half], dim=-1).view(*lead, 4)

    def negative_elbo(self, x: Tensor, **kwargs: object) -> Tensor:
        """Mean over the batch of ``nll + kl``, in nats per image."""
        out = self(x, **kwargs)
        return (out.nll + out.kl).mean()

    @torch.no_grad()
    def iwae_nll(self, x: Tensor, k: int, *, generator: torch.Generator | None = None) -> Tensor:
        """Importance-weighted NLL estimate per image: ``-log (1/k) sum_k exp(log p(x, z_k) - log q(z_k | x))``.

        Its expectation is an upper bound on ``-log p(x)`` that tightens as ``k`` grows; with the
        same samples it is never above their average ``-(log p(x, z) - log q(z | x))`` (Jensen).

        Shape:
            - x: ``(B, C, H, W)``
            - output: ``(B,)``
        """
        B = x.shape[0]
        log_w = self(x.repeat(k, 1, 1, 1), generator=generator).log_weight.view(k, B)
        return -(torch.logsumexp(log_w, dim=0) - math.log(k))
