"""Training speed of foveal's NTM against a straightforward reference step, measured in the same run.

    python benchmarks/ntm.py [--threads 1] [--quick]

Both run the same weights (the paper's copy-task sizes: LSTM controller 100, memory 128 x 20, one
read and one write head) on copy sequences of length 10 (21 time steps), forward and backward,
and the benchmark checks that they compute the same outputs. The reference is written the way
public NTM ports usually are: the heads in a Python loop, each head's circular shift as a loop
over the batch (one ``conv1d`` per sequence on a wrapped-around copy of the weighting), and
sharpening as ``w ** gamma / (sum + 1e-16)``. foveal's :class:`~foveal.models.ntm.NTM` batches
all of it (the shift is a single gather).

Timing: the two are timed in interleaved rounds (a burst of load from other processes hits both
alike) and each reports its fastest round: on a shared machine the minimum is the least disturbed
estimate. The ratio is the result.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import Tensor

from foveal.data.ntm_tasks import Copy
from foveal.memory import split_head_params
from foveal.models.ntm import NTM


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
        outputs.append(model.out(torch.cat([h, *reads], dim=-1)))
    return torch.stack(outputs, dim=1)


def train_step(forward, model: NTM, x: Tensor) -> None:
    model.zero_grad(set_to_none=True)
    forward(model, x).sum().backward()


def ours(model: NTM, x: Tensor) -> Tensor:
    return model(x).logits


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="fewer rounds")
    p.add_argument("--length", type=int, default=10, help="copy length (time steps: 2 L + 1)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = NTM(9, 8)
    rounds = 3 if args.quick else 7
    print(f"NTM training step (forward + backward), copy length {args.length}, paper sizes, {args.threads} thread(s)")
    print(f"{'batch':>5}  {'reference seq/s':>15}  {'foveal seq/s':>12}  {'ratio':>6}")
    for batch in (1, 32):
        x = Copy().sample(batch, torch.Generator().manual_seed(batch), length=args.length).inputs
        torch.testing.assert_close(ours(model, x), reference_forward(model, x), atol=1e-4, rtol=1e-4)
        best = {"reference": float("inf"), "foveal": float("inf")}
        repeats = max(1, 32 // batch)  # about 32 sequences per timed round
        for _ in range(rounds):
            for name, fn in (("reference", reference_forward), ("foveal", ours)):
                start = time.perf_counter()
                for _ in range(repeats):
                    train_step(fn, model, x)
                best[name] = min(best[name], (time.perf_counter() - start) / (repeats * batch))
        ref, fov = 1 / best["reference"], 1 / best["foveal"]
        print(f"{batch:>5}  {ref:>15.1f}  {fov:>12.1f}  {fov / ref:>5.2f}x")


if __name__ == "__main__":
    main()
