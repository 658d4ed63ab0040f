"""The one training loop: every recipe trains through :func:`train`."""

from __future__ import annotations

import dataclasses
import math
import random
import signal
import threading
import time
from collections.abc import Iterator, Sized
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from foveal.compiling import CUDA_GRAPH_MODES, compile_count, compile_model
from foveal.errors import CheckpointError, FovealError, NonFiniteError
from foveal.specs import flatten
from foveal.train import checkpoint as ckpt
from foveal.train import distributed
from foveal.train.metrics import MetricsLog
from foveal.train.optim import build_optimizer, build_scheduler, clip_gradients, gradient_norm, parameter_groups
from foveal.train.run_dir import RunDir
from foveal.train.sampler import StepBatchSampler
from foveal.train.task import RunConfig, Task, use_threads


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


def evaluate(task: Task, model: nn.Module, interim: bool = False) -> dict[str, float]:
    """``task.evaluate`` in eval mode under ``no_grad``, plus the callbacks' values; RNG states are left as found.

    ``interim``: an evaluation during training, which reads ``task.interim_eval_set`` where the task has one.
    """
    dataset = task.interim_eval_set if interim and task.interim_eval_set is not None else task.eval_set
    if task.evaluate is None or dataset is None:
        return {}
    state = ckpt.rng_state()
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            metrics = task.evaluate(model, dataset)
    finally:
        model.train(was_training)
        ckpt.set_rng_state(state)
    for callback in task.callbacks:
        metrics.update(callback.eval_metrics())
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


class Trainer:
    """The training step of the loop, on its own: model on the device, optimiser, schedule, callbacks.

    :func:`train` drives one; a benchmark that times a training step calls :meth:`step` so that it
    measures exactly what the loop runs.

    Example:
        >>> from torch.utils.data import TensorDataset
        >>> import torch.nn.functional as F
        >>> data = TensorDataset(torch.randn(8, 2), torch.randn(8, 1))
        >>> def loss(model, batch):
        ...     return F.mse_loss(model(batch[0]), batch[1]), {}
        >>> trainer = Trainer(Task(nn.Linear(2, 1), data, loss), RunConfig())
        >>> sorted(trainer.step(data[:4]))
        ['loss']
    """

    def __init__(self, task: Task, config: RunConfig, device: torch.device | None = None) -> None:
        self.task, self.config = task, config
        self.device = device or torch.device("cpu")
        self.model = task.model.to(self.device)
        if config.loop.compile:
            compile_model(self.model, config.loop.compile_mode)
        self.compile_seconds = 0.0  # wall time of the steps that compiled a graph (loop.compile)
        self.net: nn.Module = self.model  # the DDP wrapper under torchrun (see :meth:`distribute`)
        self.optimizer = build_optimizer(parameter_groups(self.model, task.lr_scales, config.loop.lr), config.loop)
        self.scheduler = build_scheduler(self.optimizer, config.loop, self._lr_scale)
        self.step_count = 0
        self.skipped = 0  # steps skipped for a non-finite loss or gradient (loop.nonfinite="skip")

    def _lr_scale(self) -> float:
        scale = 1.0
        for callback in self.task.callbacks:
            scale *= callback.lr_scale()
        return scale

    def distribute(self) -> None:
        """Wrap the model in ``DistributedDataParallel`` (under torchrun, world size > 1)."""
        ids = [self.device.index] if self.device.type == "cuda" else None
        self.net = DistributedDataParallel(
            self.model, device_ids=ids, find_unused_parameters=self.config.loop.ddp_find_unused
        )

    def step(self, batch: Any) -> dict[str, float]:
        """One optimiser step on ``batch``: callbacks, loss, backward, clip, step, callbacks, schedule.

        A non-finite loss or gradient never reaches the weights: with ``loop.nonfinite="stop"`` it
        raises :class:`NonFiniteError` naming the step; with ``"skip"`` the step is skipped and
        counted (``skipped`` in the metrics).

        Returns the step's metrics (``loss`` and what the task's loss and callbacks report).
        """
        batch = to_device(batch, self.device)
        for callback in self.task.callbacks:
            callback.on_step_begin(self.step_count + 1)
        compiled = compile_count() if self.config.loop.compile else 0
        if self.config.loop.compile and self.config.loop.compile_mode in CUDA_GRAPH_MODES:
            # A new step: the CUDA graphs may reuse the memory of the last step's outputs, which no one holds now
            torch.compiler.cudagraph_mark_step_begin()
        start = time.perf_counter()
        loss, metrics = self.task.loss(self.net, batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss_value = loss.item()
        finite = math.isfinite(loss_value)
        if finite:
            loss.backward()
            norm = clip_gradients(self.model.parameters(), self.config.loop)
            finite = math.isfinite(gradient_norm(self.model.parameters()) if norm is None else norm)
        self.step_count += 1
        if not finite:
            self.optimizer.zero_grad(set_to_none=True)
            what = "loss" if not math.isfinite(loss_value) else "gradient"
            if self.config.loop.nonfinite == "stop":
                raise NonFiniteError(
                    f"step {self.step_count}: the {what} is not finite (loss {loss_value}); the run stopped "
                    "and its last checkpoint is kept. Lower loop.lr, set loop.clip_norm, or set "
                    "loop.nonfinite=skip to skip such steps",
                    self.step_count,
                )
            self.skipped += 1
        else:
            self.optimizer.step()
        if self.config.loop.compile and compile_count() != compiled:
            self.compile_seconds += time.perf_counter() - start
        metrics = {"loss": loss_value, **metrics}
        if self.config.loop.nonfinite == "skip":
            metrics["skipped"] = float(self.skipped)
        for callback in self.task.callbacks:
            callback.on_step_end(self.step_count, metrics)
        self.scheduler.step()  # after the callbacks: the next rate sees their new lr_scale
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {
            "format": ckpt.FORMAT,
            "step": self.step_count,
            "skipped": self.skipped,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "callbacks": [callback.state_dict() for callback in self.task.callbacks],
        }

    def load_state_dict(self, state: dict[str, Any], path: str | Path = "checkpoint") -> None:
        """Restore what :meth:`state_dict` returned; raises :class:`CheckpointError` if it does not fit."""
        ckpt.check_training_state(state, path)
        ckpt.load_model_state(self.model, state["model"], path)
        try:
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
        except (ValueError, KeyError) as e:
            raise CheckpointError(f"{str(path)!r}: the optimiser state does not fit this model ({e})") from None
        if len(state["callbacks"]) != len(self.task.callbacks):
            raise CheckpointError(
                f"{str(path)!r} holds {len(state['callbacks'])} callback states, the task has "
                f"{len(self.task.callbacks)}: was it trained with other settings?"
            )
        for callback, saved in zip(self.task.callbacks, state["callbacks"], strict=True):
            callback.load_state_dict(saved)
        self.step_count, self.skipped = state["step"], state.get("skipped", 0)


def train(task: Task, config: RunConfig, run_dir: str | Path | RunDir, resume: bool = False) -> dict[str, float]:
    """Train ``task.model`` for ``config.loop.steps`` optimiser steps and return the final metrics.

    Writes the run directory's metrics, checkpoint (every ``loop.ckpt_every`` steps, at the end,
    and on Ctrl-C) and TensorBoard events when tensorboard is installed (see :class:`RunDir`).
    With ``resume=True`` it continues from the checkpoint and ends exactly where an uninterrupted
    run with the same config ends. Under ``torchrun`` it runs data-parallel (``loop.batch_size`` is
    the global batch) and only rank 0 writes.

    Args:
        task: what the recipe built (model, data, loss, evaluation, callbacks).
        config: the resolved config (``seed``, ``threads``, ``loop``).
        run_dir: the run directory.
        resume: continue from the run directory's checkpoint.

    Returns:
        The final evaluation metrics (the last training metrics if the task has no evaluation).
    """
    use_threads(config.threads)
    device = distributed.pick_device(config.loop.device)
    created = distributed.setup(device)
    try:
        metrics = _train(task, config, RunDir(run_dir), resume, device)
        if created:  # leave together: a rank that tears the group down while a peer still talks to it can abort
            distributed.barrier()
        return metrics
    finally:
        if created:
            dist.destroy_process_group()


def _train(task: Task, config: RunConfig, run: RunDir, resume: bool, device: torch.device) -> dict[str, float]:
    loop = config.loop
    rank, world_size = distributed.world()
    main = rank == 0
    trainer = Trainer(task, config, device)
    model = trainer.model
    window: dict[str, Any] = {"count": 0, "sums": {}}
    rng: dict[str, Any] | None = None
    if resume:
        if not run.checkpoint.is_file():
            raise FovealError(f"nothing to resume: {run.checkpoint} does not exist")
        state = ckpt.load(run.checkpoint, map_location=device)
        trainer.load_state_dict(state, run.checkpoint)
        window = state["window"]
        if len(state["rng"]) == world_size:
            rng = state["rng"][rank]
    step = trainer.step_count

    if world_size > 1:
        trainer.distribute()
    sampler = StepBatchSampler(len(cast(Sized, task.train_set)), loop.batch_size, config.seed, step, rank, world_size)
    # The loader's own generator keeps it from drawing on the global RNG when its iterator starts.
    loader = DataLoader(
        task.train_set,
        batch_sampler=sampler,
        collate_fn=task.collate,
        generator=torch.Generator().manual_seed(config.seed),
    )
    batches = iter(loader)
    log = MetricsLog(run, loop.steps, step, enabled=main)

    def save() -> None:
        rngs = distributed.gather(ckpt.rng_state())
        if main:
            state = {**trainer.state_dict(), "rng": rngs, "window": window, "world_size": world_size}
            ckpt.save_atomic(state, run.checkpoint)
        distributed.barrier()

    def run_eval(at: int, interim: bool = False) -> dict[str, float]:
        metrics = evaluate(task, model, interim) if main else {}
        metrics = distributed.broadcast(metrics)
        if metrics:
            log.event(at, "eval", metrics)
        return metrics

    def flush_window(at: int) -> dict[str, float]:
        if not window["count"]:
            return {}
        means = {k: v / window["count"] for k, v in window["sums"].items()}
        means = distributed.all_mean(means)
        means["lr"] = float(trainer.scheduler.get_last_lr()[0])
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
                metrics = trainer.step(next(batches))
                step = trainer.step_count
                window["count"] += 1
                for k, v in metrics.items():
                    window["sums"][k] = window["sums"].get(k, 0.0) + float(v)
                log.advance()
                if loop.log_every and step % loop.log_every == 0:
                    last_train = flush_window(step)
                if loop.eval_every and step % loop.eval_every == 0 and step < loop.steps:
                    run_eval(step, interim=True)
                if loop.ckpt_every and step % loop.ckpt_every == 0 and step < loop.steps:
                    save()
                if distributed.any_rank(stop["stop"]) if world_size > 1 else stop["stop"]:
                    save()
                    raise Interrupted(step, run.checkpoint)
        last_train = flush_window(step) or last_train
        if loop.compile:
            log.event(step, "compile", {"compile_s": trainer.compile_seconds})
        final = run_eval(step)
        save()
        log.hparams(flatten(dataclasses.asdict(config)), final or last_train)
    finally:
        log.close()
    return final or last_train
