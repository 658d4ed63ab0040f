"""The one training loop: every recipe trains through :func:`train`."""

from __future__ import annotations

import random
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from foveal.recipes.base import RunConfig, Task
from foveal.train import checkpoint as ckpt
from foveal.train import distributed as D
from foveal.train.metrics import MetricsLog
from foveal.train.optim import build_optimizer, build_scheduler, clip_gradients
from foveal.train.sampler import StepBatchSampler


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) stopped training; a checkpoint at ``step`` was written first."""

    def __init__(self, step: int, path: Path) -> None:
        super().__init__(f"interrupted at step {step}; checkpoint saved to {path}")
        self.step, self.path = step, path


def seed_everything(seed: int) -> None:
    """Seed torch, numpy and python ``random`` (call it before building a recipe's task)."""
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def to_device(batch: Any, device: torch.device) -> Any:
    """Move every tensor in a (nested) batch to ``device``; other values pass through."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # NamedTuple
        return type(batch)(*(to_device(x, device) for x in batch))
    if isinstance(batch, list | tuple):
        return type(batch)(to_device(x, device) for x in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch


def evaluate(task: Task, model: nn.Module) -> dict[str, float]:
    """``task.evaluate`` in eval mode under ``no_grad``, leaving every RNG state as it found it."""
    if task.evaluate is None or task.eval_set is None:
        return {}
    state = ckpt.rng_state()
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            metrics = task.evaluate(model, task.eval_set)
    finally:
        model.train(was_training)
        ckpt.set_rng_state(state)
    return {k: float(v) for k, v in metrics.items()}


@contextmanager
def _graceful_stop() -> Iterator[dict[str, bool]]:
    """The first Ctrl-C (or SIGTERM) asks the loop to stop at the end of the step; a second one stops now."""
    flag = {"stop": False}
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum: int, frame: Any) -> None:
        if flag["stop"]:
            raise KeyboardInterrupt
        flag["stop"] = True

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def train(task: Task, config: RunConfig, run_dir: str | Path, resume: bool = False) -> dict[str, float]:
    """Train ``task.model`` for ``config.loop.steps`` optimiser steps and return the final metrics.

    Writes ``RUN/metrics.jsonl``, ``RUN/checkpoint.pt`` (every ``loop.ckpt_every`` steps, at the
    end, and on Ctrl-C) and TensorBoard events when tensorboard is installed. With
    ``resume=True`` it continues from ``RUN/checkpoint.pt`` and ends exactly where an
    uninterrupted run with the same config ends. Under ``torchrun`` it runs data-parallel
    (``loop.batch_size`` is the global batch) and only rank 0 writes.

    Args:
        task: what the recipe built (model, data, loss, evaluation).
        config: the resolved config (``seed``, ``threads``, ``loop``).
        run_dir: the run directory.
        resume: continue from the run directory's checkpoint.

    Returns:
        The final evaluation metrics (the last training metrics if the task has no evaluation).
    """
    torch.set_num_threads(config.threads)
    device = D.pick_device(config.loop.device)
    created = D.setup(device)
    try:
        return _train(task, config, Path(run_dir), resume, device)
    finally:
        if created:
            dist.destroy_process_group()


def _train(task: Task, config: RunConfig, run_dir: Path, resume: bool, device: torch.device) -> dict[str, float]:
    loop = config.loop
    rank, world_size = D.world()
    main = rank == 0
    path = run_dir / ckpt.CHECKPOINT
    model = task.model.to(device)
    optimizer = build_optimizer(model.parameters(), loop)
    scheduler = build_scheduler(optimizer, loop, task.lr_scale)
    step = 0
    window: dict[str, Any] = {"count": 0, "sums": {}}
    rng: dict[str, Any] | None = None
    if resume:
        if not path.is_file():
            raise ValueError(f"nothing to resume: {path} does not exist")
        state = ckpt.load(path, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        step, window = state["step"], state["window"]
        if len(state["rng"]) == world_size:
            rng = state["rng"][rank]

    net: nn.Module = model
    if world_size > 1:
        ids = [device.index] if device.type == "cuda" else None
        net = DistributedDataParallel(model, device_ids=ids, find_unused_parameters=loop.ddp_find_unused)
    sampler = StepBatchSampler(len(task.train_set), loop.batch_size, config.seed, step, rank, world_size)
    # The loader's own generator keeps it from drawing on the global RNG when its iterator starts.
    loader = DataLoader(
        task.train_set,
        batch_sampler=sampler,
        collate_fn=task.collate,
        generator=torch.Generator().manual_seed(config.seed),
    )
    batches = iter(loader)
    log = MetricsLog(run_dir, loop.steps, step, enabled=main)

    def save(at: int) -> None:
        rngs = D.gather(ckpt.rng_state())
        if main:
            state = {
                "step": at,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "rng": rngs,
                "window": window,
                "world_size": world_size,
            }
            ckpt.save_atomic(state, path)
        D.barrier()

    def run_eval(at: int) -> dict[str, float]:
        metrics = evaluate(task, model) if main else {}
        metrics = D.broadcast(metrics)
        if metrics:
            log.event(at, "eval", metrics)
        return metrics

    def flush_window(at: int) -> dict[str, float]:
        if not window["count"]:
            return {}
        means = {k: v / window["count"] for k, v in window["sums"].items()}
        means = D.all_mean(means)
        means["lr"] = scheduler.get_last_lr()[0]
        log.event(at, "train", means)
        window["count"], window["sums"] = 0, {}
        return means

    # The training random stream starts here, identically whether or not the run was resumed.
    seed_everything(config.seed + rank)
    if rng is not None:
        ckpt.set_rng_state(rng)
    model.train()
    last_train: dict[str, float] = {}
    try:
        with _graceful_stop() as stop:
            while step < loop.steps:
                batch = to_device(next(batches), device)
                loss, metrics = task.loss(net, batch)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                clip_gradients(model.parameters(), loop)
                optimizer.step()
                scheduler.step()
                step += 1
                window["count"] += 1
                for k, v in {"loss": loss.item(), **metrics}.items():
                    window["sums"][k] = window["sums"].get(k, 0.0) + float(v)
                log.advance()
                if loop.log_every and step % loop.log_every == 0:
                    last_train = flush_window(step)
                if loop.eval_every and step % loop.eval_every == 0 and step < loop.steps:
                    run_eval(step)
                if loop.ckpt_every and step % loop.ckpt_every == 0 and step < loop.steps:
                    save(step)
                if D.any_rank(stop["stop"]) if world_size > 1 else stop["stop"]:
                    save(step)
                    raise Interrupted(step, path)
        last_train = flush_window(step) or last_train
        final = run_eval(step)
        save(step)
    finally:
        log.close()
    return final or last_train
