"""Training speed of foveal's NTM against a straightforward reference step, measured in the same run.

    python benchmarks/ntm.py [--threads 1] [--quick]

Both arms run one training step of the ``ntm-copy`` recipe (the loop's step,
:meth:`foveal.train.Trainer.step`: the recipe's loss and curriculum, Adam, clipping) on the same
weights (the paper's copy-task sizes: LSTM controller 100, memory 128 x 20, one read and one write
head), on copy sequences of length 10 (21 time steps); the benchmark checks that they compute the
same outputs. Only the forward pass differs. The reference is written the way public NTM ports
usually are: the heads in a Python loop, each head's circular shift as a loop over the batch (one
``conv1d`` per sequence on a wrapped-around copy of the weighting), and sharpening as
``w ** gamma / (sum + 1e-16)``. foveal's :class:`~foveal.models.ntm.NTM` batches all of it (the
shift is a single gather).

Timing: the two are timed in interleaved rounds (a burst of load from other processes hits both
alike) and each reports its fastest round: on a shared machine the minimum is the least disturbed
estimate. The ratio is the result.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import time

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from _roofline import count_flops, gemm_call, gemm_gflops, roofline
from foveal.data.ntm_tasks import Copy
from foveal.memory import split_head_params
from foveal.models.ntm import NTM, NTMOutput
from foveal.recipes.config import resolve_config
from foveal.runs import get_recipe
from foveal.train import Trainer, seed_everything


def _reference_address(p, memory: Tensor, w_prev: Tensor) -> Tensor:
    """One head's addressing, per the paper, with the shift looped over the batch."""
    # p: key (B, C), beta, gate, gamma (B,), shift (B, S); memory (B, R, C); w_prev (B, R)
    cos = F.cosine_similarity(memory + 1e-16, p.key.unsqueeze(1) + 1e-16, dim=-1)
    w = torch.softmax(p.beta.unsqueeze(1) * cos, dim=1)
    w = p.gate.unsqueeze(1) * w + (1 - p.gate.unsqueeze(1)) * w_prev
    k = p.shift.shape[-1] // 2
    shifted = []
    for b in range(w.shape[0]):  # the per-sample loop of the usual ports
        wrapped = torch.cat([w[b, -k:], w[b], w[b, :k]])
        # conv1d correlates; flipping the kernel makes it the convolution sum_j w(j) s(i - j)
        shifted.append(F.conv1d(wrapped.view(1, 1, -1), p.shift[b].flip(0).view(1, 1, -1)).view(-1))
    w = torch.stack(shifted)
    w = w ** p.gamma.unsqueeze(1)
    return w / (w.sum(dim=1, keepdim=True) + 1e-16)


def reference_forward(model: NTM, x: Tensor) -> Tensor:
    """The NTM's forward pass, written straightforwardly (heads and shift in Python loops)."""
    B, T, _ = x.shape
    h, c = model.h0.expand(B, -1), model.c0.expand(B, -1)
    reads = list(model.r0.expand(B, -1, -1).unbind(1))
    w0 = model.w0_logits.softmax(-1).expand(B, -1, -1)
    w_read = list(w0[:, : model.n_read_heads].unbind(1))
    w_write = list(w0[:, model.n_read_heads :].unbind(1))
    memory = model.memory_init(B)
    outputs = []
    n_read_params = model.n_read_heads * model.read_param_size
    for t in range(T):
        h, c = model.controller(torch.cat([x[:, t], *reads], dim=-1), (h, c))
        raw = model.heads(h)
        for i in range(model.n_write_heads):
            start = n_read_params + i * model.write_param_size
            p = split_head_params(raw[:, None, start : start + model.write_param_size], model.n_cols, 3, write=True)
            p = type(p)(*(q[:, 0] for q in p))
            w_write[i] = _reference_address(p, memory, w_write[i])
            memory = memory * (1 - w_write[i].unsqueeze(-1) * p.erase.unsqueeze(1))
            memory = memory + w_write[i].unsqueeze(-1) * p.add.unsqueeze(1)
        for i in range(model.n_read_heads):
            start = i * model.read_param_size
            p = split_head_params(raw[:, None, start : start + model.read_param_size], model.n_cols, 3, write=False)
            p = type(p)(*(q[:, 0] if q is not None else None for q in p))
            w_read[i] = _reference_address(p, memory, w_read[i])
            reads[i] = (w_read[i].unsqueeze(-1) * memory).sum(1)
        out_in = torch.cat([h, *reads], dim=-1) if model.output_from == "both" else torch.cat(reads, dim=-1)
        outputs.append(model.out(out_in))
    return torch.stack(outputs, dim=1)


class Reference(nn.Module):
    """The NTM's parameters, run by :func:`reference_forward`: the recipe's loss takes it as it takes the NTM."""

    def __init__(self, ntm: NTM) -> None:
        super().__init__()
        self.ntm = ntm

    def forward(self, x: Tensor) -> NTMOutput:
        return NTMOutput(reference_forward(self.ntm, x))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="fewer rounds")
    p.add_argument("--length", type=int, default=10, help="copy length (time steps: 2 L + 1)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    recipe = get_recipe("ntm-copy")
    # lr 0: both arms step the same weights, so every round times the same model.
    config = resolve_config(recipe, sets={"loop.lr": "0"}, seed=0, threads=args.threads)
    seed_everything(config.seed)
    task = recipe.build(config)
    model = task.model
    reference = dataclasses.replace(task, model=Reference(model), callbacks=copy.deepcopy(task.callbacks))
    trainers = {"reference": Trainer(reference, config), "foveal": Trainer(task, config)}
    rounds = 3 if args.quick else 7
    print(
        f"NTM training step (ntm-copy: forward, loss, backward, clip, Adam), copy length {args.length}, "
        f"paper sizes, {args.threads} thread(s)"
    )
    print(f"{'batch':>5}  {'reference seq/s':>15}  {'foveal seq/s':>12}  {'ratio':>6}  foveal's roofline")
    gemm = gemm_call(torch.Generator().manual_seed(0))
    peaks = []
    for batch_size in (1, 32):
        batch = Copy(config.width).sample(batch_size, torch.Generator().manual_seed(batch_size), length=args.length)
        with torch.no_grad():
            torch.testing.assert_close(
                model(batch.inputs).logits, reference_forward(model, batch.inputs), atol=1e-4, rtol=1e-4
            )
        best = dict.fromkeys(trainers, float("inf"))
        best_gemm = float("inf")
        repeats = max(1, 32 // batch_size)  # about 32 sequences per timed round
        for _ in range(rounds):
            for name, trainer in trainers.items():
                start = time.perf_counter()
                for _ in range(repeats):
                    trainer.step(batch)
                best[name] = min(best[name], (time.perf_counter() - start) / (repeats * batch_size))
            start = time.perf_counter()
            gemm()
            best_gemm = min(best_gemm, time.perf_counter() - start)
        ref, fov = 1 / best["reference"], 1 / best["foveal"]
        flops = count_flops(functools.partial(trainers["foveal"].step, batch))
        peaks.append(gemm_gflops(best_gemm))
        line = roofline(flops, best["foveal"] * batch_size, peaks[-1])
        print(f"{batch_size:>5}  {ref:>15.1f}  {fov:>12.1f}  {fov / ref:>5.2f}x  {flops / 1e6:.1f} MFLOP/step, {line}")
    print(
        "roofline: matmul FLOPs of one step by torch's counter, against a float32 512^3 GEMM timed in the same "
        f"rounds ({', '.join(f'{p:.1f}' for p in peaks)} GFLOP/s)"
    )


if __name__ == "__main__":
    main()
