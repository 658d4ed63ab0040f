"""Which glimpse trains more easily? The capture range of STN and Gaussian glimpses (seed 003's question).

    python studies/glimpse-trainability/glimpse_trainability.py [--threads 1] [--quick]

An object sits in the middle of a 96 x 96 image: seed 003's uniform square of ones, or a square of
random texture (uniform in [0.4, 1] per pixel), on a clean black background or on seed 003's
``|N(0, 1)| * 0.3`` clutter. The template is the glimpse taken exactly on the object. Each glimpse
starts ``offset`` pixels away from it (8 directions) and gradient descent moves only its centre
``(x, y)``, in pixels, to minimise the mean squared difference to the template (Adam, lr 0.5 px
with cosine decay, 300 steps; the same for every method). A start *converges* when it ends
within half a stride of the target. The capture range is the largest offset from which all 8
directions converge (and every smaller offset too).

Two scenarios: a zoomed-in glimpse (12 x 12 samples, stride 1 px, an 8 px object) and a zoomed-out
one (12 x 12 samples, stride 3 px, a 24 px object). Methods: ``stn`` (bilinear sampling, seed
003's no-shear transform) and ``gauss`` at std = 0.25, 0.5, 1, 2 and 4 strides. The last table
sums up the capture ranges in glimpse widths.
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from foveal.glimpse import gaussian_glimpse, stn_glimpse

SIZE = 96
SAMPLES = 12
DIRECTIONS = 8
STEPS = 300
LR = 0.5


def scene(object_px: int, texture: bool, clutter: bool, generator: torch.Generator):
    """The image ``(1, 1, SIZE, SIZE)`` and the object's centre ``(x, y)`` in pixels."""
    image = torch.zeros(1, 1, SIZE, SIZE)
    if clutter:
        image = torch.randn(1, 1, SIZE, SIZE, generator=generator).abs() * 0.3
    lo = SIZE // 2 - object_px // 2
    pattern = 0.4 + 0.6 * torch.rand(object_px, object_px, generator=generator) if texture else 1.0
    image[0, 0, lo : lo + object_px, lo : lo + object_px] = pattern
    centre = lo + (object_px - 1) / 2
    return image, torch.tensor([centre, centre])


def glimpse(method: str, images: torch.Tensor, centre: torch.Tensor, stride: float) -> torch.Tensor:
    """A ``SAMPLES x SAMPLES`` glimpse centred at ``centre`` (B, 2) = (x, y) px, samples ``stride`` px apart."""
    B = centre.shape[0]
    if method == "stn":
        # align_corners=False: sample j sits at ((s u_j + t + 1) SIZE - 1) / 2 with u_j = (2j + 1) / n - 1,
        # so the spacing is s SIZE / n = stride and the middle (u = 0) is at centre: t = (2 centre + 1) / SIZE - 1.
        scale = torch.full((B,), stride * SAMPLES / SIZE)
        shift = (2 * centre + 1) / SIZE - 1
        params = torch.stack([scale, shift[:, 1], scale, shift[:, 0]], dim=-1)
        return stn_glimpse(images, params, (SAMPLES, SAMPLES))
    std = float(method.split("=")[1]) * stride
    first = centre - (SAMPLES - 1) / 2 * stride
    s, d = torch.full((B,), std), torch.full((B,), stride)
    return gaussian_glimpse(images, torch.stack([first[:, 1], s, d, first[:, 0], s, d], dim=-1), (SAMPLES, SAMPLES))


def descend(
    method: str, image: torch.Tensor, target: torch.Tensor, starts: torch.Tensor, stride: float
) -> torch.Tensor:
    """Optimise each start's centre independently; return the final centres (B, 2)."""
    B = starts.shape[0]
    images = image.expand(B, -1, -1, -1)
    template = glimpse(method, image, target[None], stride).expand(B, -1, -1, -1)
    centre = starts.clone().requires_grad_()
    optimiser = torch.optim.Adam([centre], lr=LR)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, STEPS)
    for _ in range(STEPS):
        optimiser.zero_grad()
        # Summed over the batch: each start's gradient is its own (Adam is elementwise).
        loss = (glimpse(method, images, centre, stride) - template).square().mean((1, 2, 3)).sum()
        loss.backward()
        optimiser.step()
        schedule.step()
    return centre.detach()


def run(scenario, stride, object_px, offsets, texture: bool, clutter: bool, methods: list[str]) -> dict[str, float]:
    """One table; returns each method's capture range in glimpse widths."""
    generator = torch.Generator().manual_seed(0)
    image, target = scene(object_px, texture, clutter, generator)
    angles = torch.arange(DIRECTIONS) * (2 * math.pi / DIRECTIONS) + 0.3  # off the axes
    unit = torch.stack([angles.cos(), angles.sin()], dim=-1)
    starts = torch.cat([target + r * unit for r in offsets])  # (len(offsets) * DIRECTIONS, 2)
    extent = stride * SAMPLES
    kind, background = ("textured" if texture else "uniform"), ("cluttered" if clutter else "clean")
    what = f"{kind} {object_px} px square on a {background} background"
    print(f"\n### {scenario} (stride {stride:g} px, glimpse {extent:g} px wide): {what}\n")
    print("Converged starts out of 8 (median final error in px) per start offset (px):\n")
    print("| method | " + " | ".join(f"{r:g}" for r in offsets) + " | capture range px | in glimpse widths | wall s |")
    print("|---|" + "---|" * (len(offsets) + 3))
    captures = {}
    for method in methods:
        t0 = time.perf_counter()
        final = descend(method, image, target, starts, stride)
        error = (final - target).norm(dim=-1).view(len(offsets), DIRECTIONS)
        ok = error < stride / 2
        cells = [f"{int(k.sum())} ({e.median():.1f})" for k, e in zip(ok, error, strict=True)]
        capture = 0.0
        for r, k in zip(offsets, ok, strict=True):
            if not k.all():
                break
            capture = r
        captures[method] = capture / extent
        print(f"| {method} | " + " | ".join(cells) + f" | {capture:g} | {capture / extent:.2f} | "
              f"{time.perf_counter() - t0:.1f} |")  # fmt: skip
    return captures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="zoomed-in scenario, clean background, fewer methods")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"# glimpse capture range: torch {torch.__version__}, {args.threads} thread(s), Adam lr {LR} px, {STEPS} steps"
    )
    methods = ["stn"] + [f"gauss std={k:g}" for k in (0.25, 0.5, 1, 2, 4)]
    zoomed_in = ("zoomed in", 1.0, 8, [1, 2, 4, 6, 8, 10, 12, 16, 20, 28, 36])
    zoomed_out = ("zoomed out", 3.0, 24, [2, 4, 8, 12, 16, 20, 24, 30, 36, 42])
    if args.quick:
        run(*zoomed_in, texture=False, clutter=False, methods=["stn", "gauss std=0.5", "gauss std=2"])
        return
    summary = {}
    for scenario in (zoomed_in, zoomed_out):
        for texture, clutter in ((False, False), (False, True), (True, False)):
            column = f"{scenario[0]}, {'texture' if texture else 'square'}, {'clutter' if clutter else 'clean'}"
            summary[column] = run(*scenario, texture=texture, clutter=clutter, methods=methods)
    print("\n### Capture range in glimpse widths (offset from which all 8 directions converge)\n")
    print("| method | " + " | ".join(summary) + " |")
    print("|---|" + "---|" * len(summary))
    for method in methods:
        print(f"| {method} | " + " | ".join(f"{captures[method]:.2f}" for captures in summary.values()) + " |")


if __name__ == "__main__":
    main()
