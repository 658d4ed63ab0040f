"""DRAW training speed (images/s) at the paper's MNIST config, against straightforward steps.

    python benchmarks/draw.py [--threads 1] [--quick] [--batch 64]

One training step = the loop's step (:meth:`foveal.train.Trainer.step`: forward over T steps, loss,
backward, the ``draw`` recipe's clipping and Adam update) on a batch of binary 28 x 28 images. Three
implementations of the same model with the same weights and the same noise
(their losses agree to float32 round-off, checked before timing):

``per-sample``  the DRAW step as public ports write it: the encoder and decoder ``nn.LSTMCell``
                called on ``[r_t, h_dec_{t-1}]`` and ``z_t``, each head its own ``nn.Linear``,
                and the filterbanks built and applied one image at a time (a Python loop over
                the batch).
``batched``     the same modules, with the filterbanks of the whole batch built and applied at
                once (``foveal.glimpse.gaussian.gaussian_read`` / ``gaussian_write``).
``foveal``      ``foveal.models.DRAW.forward``: batched filterbanks, ``x`` and ``x_hat`` in one
                product pair, each LSTM's gates in one product of its inputs and last state, and
                the outputs of ``h_enc_t`` (or ``h_dec_t``) in one, so each step makes four dense
                products.
``compiled``    with ``--compiled``: ``foveal`` as ``loop.compile=true`` runs it
                (:func:`foveal.compiling.compile_model`: runs of drawing steps compiled by inductor).

Without attention only ``batched`` (modules) and ``foveal`` are timed; ``foveal`` also computes
the ``W x`` half of the encoder's input product once instead of ``T`` times.

Timing: the candidates are timed in interleaved rounds (a burst of load from other processes hits
all alike) and each reports its fastest step, in CPU seconds of this process (``time.process_time``)
and in wall seconds. On a shared machine the CPU time is the steadier of the two (waiting for a
core is not counted); with one thread and an idle machine they agree. images/s are from CPU time.
Ratios, not absolute times, are the result.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import platform
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from _roofline import count_flops, gemm_call, gemm_gflops, roofline
from foveal.compiling import compile_model
from foveal.glimpse.gaussian import gaussian_read, gaussian_write
from foveal.models.draw import DRAW, guard
from foveal.runs import get_recipe
from foveal.train import RunConfig, Task, Trainer

PAPER = dict(steps=64, enc_size=256, dec_size=256, z_size=100, read_size=2, write_size=5)
QUICK = dict(steps=16, enc_size=256, dec_size=256, z_size=100, read_size=2, write_size=5)


def _filterbank_one(params: Tensor, N: int, H: int, W: int) -> tuple[Tensor, Tensor, Tensor]:
    """One image's F_X (N x W), F_Y (N x H) and gamma, as a port writes it."""
    gx_t, gy_t, log_s2, log_d, log_g = params.clamp(-50, 50)
    g_x = (W + 1) / 2 * (gx_t + 1)
    g_y = (H + 1) / 2 * (gy_t + 1)
    delta = (max(H, W) - 1) / (N - 1) * log_d.exp()
    sigma2 = log_s2.exp()
    grid = torch.arange(1, N + 1, dtype=params.dtype) - N / 2 - 0.5
    mu_x, mu_y = g_x + grid * delta, g_y + grid * delta
    a = torch.arange(1, W + 1, dtype=params.dtype)
    b = torch.arange(1, H + 1, dtype=params.dtype)
    F_X = torch.exp(-((a - mu_x[:, None]) ** 2) / (2 * sigma2))
    F_Y = torch.exp(-((b - mu_y[:, None]) ** 2) / (2 * sigma2))
    F_X = F_X / (F_X.sum(1, keepdim=True) + 1e-8)
    F_Y = F_Y / (F_Y.sum(1, keepdim=True) + 1e-8)
    return F_X, F_Y, log_g.exp()


def _read_per_sample(model: DRAW, x: Tensor, x_hat: Tensor, params: Tensor) -> Tensor:
    H, W = model.image_size
    out = []
    for b in range(x.shape[0]):
        F_X, F_Y, gamma = _filterbank_one(params[b], model.read_size, H, W)
        out.append(gamma * torch.cat([(F_Y @ x[b, 0] @ F_X.T).flatten(), (F_Y @ x_hat[b, 0] @ F_X.T).flatten()]))
    return torch.stack(out)


def _write_per_sample(model: DRAW, patch: Tensor, params: Tensor) -> Tensor:
    H, W = model.image_size
    N = model.write_size
    out = []
    for b in range(patch.shape[0]):
        F_X, F_Y, gamma = _filterbank_one(params[b], N, H, W)
        out.append((F_Y.T @ patch[b].view(N, N) @ F_X / gamma)[None])
    return torch.stack(out)


def module_forward(model: DRAW, x: Tensor, noise: Tensor, per_sample: bool) -> Tensor:
    """The straightforward DRAW step with the model's own modules; returns the mean negative ELBO."""
    B = x.shape[0]
    C, (H, W) = model.channels, model.image_size
    h_enc = c_enc = x.new_zeros(B, model.encoder.hidden_size)
    h_dec = c_dec = x.new_zeros(B, model.decoder.hidden_size)
    canvas = x.new_zeros(B, C, H, W)
    kl = x.new_zeros(B)
    for t in range(model.steps):
        x_hat = x - torch.sigmoid(canvas)
        if not model.attention:
            r = torch.cat([x.flatten(1), x_hat.flatten(1)], 1)
        elif per_sample:
            r = _read_per_sample(model, x, x_hat, model.read_head(h_dec))
        else:
            r = gaussian_read(x, model.read_head(h_dec), model.read_size, x_hat, truncate=False).output.flatten(1)
        h_enc, c_enc = model.encoder(torch.cat([r, h_dec], 1), (h_enc, c_enc))
        mu, log_sigma = model.latent(h_enc).chunk(2, 1)
        log_sigma = guard(log_sigma)
        z = mu + log_sigma.exp() * noise[t]
        kl = kl + 0.5 * (mu.square() + (2 * log_sigma).exp() - 2 * log_sigma - 1).sum(1)
        h_dec, c_dec = model.decoder(z, (h_dec, c_dec))
        patch = model.write_patch(h_dec)
        if not model.attention:
            canvas = canvas + patch.view(B, C, H, W)
        elif per_sample:
            canvas = canvas + _write_per_sample(model, patch, model.write_head(h_dec))
        else:
            N = model.write_size
            canvas = canvas + gaussian_write(patch.view(B, C, N, N), model.write_head(h_dec), (H, W)).output
    nll = F.binary_cross_entropy_with_logits(canvas, x, reduction="none").flatten(1).sum(1)
    return (nll + kl).mean()


def foveal_forward(model: DRAW, x: Tensor, noise: Tensor) -> Tensor:
    out = model(x, noise=noise)
    return (out.nll + out.kl).mean()


Forward = Callable[[nn.Module, Tensor], Tensor]  # (model, images) -> the mean negative ELBO


def make_step(model: DRAW, forward: Forward, images: Tensor) -> Callable[[], float]:
    """The loop's training step on ``images``, ``forward`` as the loss, under the ``draw`` recipe's loop settings."""
    loop = dataclasses.replace(get_recipe("draw").config().loop, lr=0.0)  # lr 0: every round times the same weights

    def loss(model: nn.Module, batch: Tensor) -> tuple[Tensor, dict[str, float]]:
        return forward(model, batch), {}

    trainer = Trainer(Task(model, images, loss), RunConfig(loop=loop))
    return lambda: trainer.step(images)["loss"]


def time_rounds(steps: dict[str, Callable[[], float]], rounds: int) -> dict[str, tuple[float, float]]:
    """Fastest ``(CPU seconds, wall seconds)`` of each step over interleaved rounds, after a warm-up."""
    cpu = dict.fromkeys(steps, float("inf"))
    wall = dict.fromkeys(steps, float("inf"))
    for step in steps.values():
        step()
    for _ in range(rounds):
        for name, step in steps.items():
            c0, w0 = time.process_time(), time.perf_counter()
            step()
            cpu[name] = min(cpu[name], time.process_time() - c0)
            wall[name] = min(wall[name], time.perf_counter() - w0)
    return {name: (cpu[name], wall[name]) for name in steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="T = 16 instead of 64 (same widths)")
    parser.add_argument("--compiled", action="store_true", help="also time foveal's step compiled (loop.compile)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sizes = QUICK if args.quick else PAPER
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(args.batch, 1, 28, 28, generator=g) > 0.5).float()
    noise = torch.randn(sizes["steps"], args.batch, sizes["z_size"], generator=g)
    print(f"DRAW training step, batch {args.batch}, 28x28, {sizes}, threads {args.threads}, torch {torch.__version__}")
    print(f"machine: {platform.processor() or platform.machine()}, best of {args.rounds} interleaved rounds\n")
    print(f"{'attention':>9} {'implementation':>14} {'CPU ms':>9} {'wall ms':>9} {'images/s':>9} {'vs foveal':>10}")
    matmul = gemm_call(torch.Generator().manual_seed(1))

    def gemm() -> float:
        matmul()
        return 0.0

    for attention in (True, False):
        torch.manual_seed(0)
        model = DRAW((28, 28), 1, **sizes, attention=attention)
        if attention:  # spread the heads off the centre so the filterbanks differ per image
            with torch.no_grad():
                for head in (model.read_head, model.write_head):
                    head.weight.normal_(0, 0.05)
        forwards: dict[str, Forward] = {"foveal": lambda m, x: foveal_forward(m, x, noise)}
        forwards["batched"] = lambda m, x: module_forward(m, x, noise, per_sample=False)
        if attention:
            forwards["per-sample"] = lambda m, x: module_forward(m, x, noise, per_sample=True)
        with torch.no_grad():
            losses = {name: f(model, x).item() for name, f in forwards.items()}
        ref = losses["foveal"]
        for name, value in losses.items():  # same model, same noise: the same loss
            assert abs(value - ref) <= 1e-4 * abs(ref), (name, value, ref)
        steps = {name: make_step(model, f, x) for name, f in forwards.items()}
        if args.compiled:  # a copy: compiling binds the compiled step to the model it is given
            forwards["compiled"] = forwards["foveal"]
            steps["compiled"] = make_step(compile_model(copy.deepcopy(model)), forwards["foveal"], x)
        best = time_rounds({**steps, "gemm": gemm}, args.rounds)
        for name in reversed(list(forwards)):
            cpu, wall = best[name]
            ratio, rate = cpu / best["foveal"][0], args.batch / cpu
            print(f"{attention!s:>9} {name:>14} {cpu * 1e3:9.1f} {wall * 1e3:9.1f} {rate:9.1f} {ratio:9.2f}x")
        if args.compiled:
            public = min(best[name][0] for name in ("batched", "per-sample") if name in best)
            print(f"{'':>9} {'compiled':>14} {public / best['compiled'][0]:.2f}x the fastest public-style step")
        flops = count_flops(steps["foveal"])
        peak = gemm_gflops(best["gemm"][0])
        print(
            f"{'':>9} {'roofline':>14} foveal: {flops / 1e9:.2f} GFLOP/step, {roofline(flops, best['foveal'][0], peak)}"
        )
    print("\n'vs foveal' = that implementation's CPU time per step / foveal's (> 1: foveal is faster).")
    print("roofline: matmul and convolution FLOPs of foveal's step by torch's counter, against a float32 512^3 GEMM")
    print("timed in the same rounds (its CPU time); element-wise work is not counted.")


if __name__ == "__main__":
    main()
