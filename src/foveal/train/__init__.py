"""foveal.train: the one training loop, its contract, its checkpoints, and running it under torchrun.

This package is the bottom of the upper half: it imports no model, dataset or recipe.
"""

from foveal.train.callbacks import Anneal, Curriculum
from foveal.train.checkpoint import load, save_atomic
from foveal.train.loop import Interrupted, Trainer, evaluate, seed_everything, to_device, train
from foveal.train.metrics import read_metrics
from foveal.train.optim import build_optimizer, build_scheduler, clip_gradients, lr_factor, parameter_groups
from foveal.train.run_dir import RunDir
from foveal.train.sampler import StepBatchSampler
from foveal.train.task import Callback, LoopConfig, RunConfig, Task, cpu_threads, use_threads

__all__ = [
    "Anneal",
    "Callback",
    "Curriculum",
    "Interrupted",
    "LoopConfig",
    "RunConfig",
    "RunDir",
    "StepBatchSampler",
    "Task",
    "Trainer",
    "build_optimizer",
    "build_scheduler",
    "clip_gradients",
    "cpu_threads",
    "evaluate",
    "load",
    "lr_factor",
    "parameter_groups",
    "read_metrics",
    "save_atomic",
    "seed_everything",
    "to_device",
    "train",
    "use_threads",
]
