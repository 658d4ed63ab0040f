"""foveal.train: the one training loop, its checkpoints, and running it under torchrun."""

from foveal.train.checkpoint import CHECKPOINT, load, save_atomic
from foveal.train.loop import Interrupted, evaluate, seed_everything, to_device, train
from foveal.train.metrics import METRICS, read_metrics
from foveal.train.optim import build_optimizer, build_scheduler, clip_gradients, lr_factor
from foveal.train.sampler import StepBatchSampler

__all__ = [
    "CHECKPOINT",
    "METRICS",
    "Interrupted",
    "StepBatchSampler",
    "build_optimizer",
    "build_scheduler",
    "clip_gradients",
    "evaluate",
    "load",
    "lr_factor",
    "read_metrics",
    "save_atomic",
    "seed_everything",
    "to_device",
    "train",
]
