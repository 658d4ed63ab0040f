"""The order in which the loop sees the data: a function of (seed, epoch) alone.

Step ``s`` reads global batch ``s % per_epoch`` of epoch ``s // per_epoch``; epoch ``e``'s order
is ``randperm(n)`` from a generator seeded with ``(seed, e)``. Resuming at step ``s`` therefore
needs no state but ``s``, and under torch.distributed rank ``r`` of ``W`` takes the ``r``-th
``1/W`` slice of each global batch, so N ranks together see exactly what one process sees.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import Sampler

from foveal.errors import FovealError


class StepBatchSampler(Sampler[list[int]]):
    """An endless batch sampler, deterministic in ``(seed, epoch)``, starting at a given step.

    Args:
        n: the number of examples.
        batch_size: the GLOBAL batch size (all ranks together); incomplete batches are dropped.
        seed: the run's seed.
        start_step: the first step to yield (skip what a resumed run already consumed).
        rank: this process's rank.
        world_size: the number of processes; must divide ``batch_size``.

    Example:
        >>> s = StepBatchSampler(10, 4, seed=0)
        >>> it = iter(s); a, b, c = next(it), next(it), next(it)   # 2 batches per epoch
        >>> sorted(a + b) == sorted(set(a + b)), len(c)
        (True, 4)
        >>> next(iter(StepBatchSampler(10, 4, seed=0, start_step=2))) == c
        True
    """

    def __init__(
        self, n: int, batch_size: int, seed: int, start_step: int = 0, rank: int = 0, world_size: int = 1
    ) -> None:
        if batch_size % world_size:
            raise FovealError(f"loop.batch_size={batch_size} must be divisible by the number of processes {world_size}")
        if n < batch_size:
            raise FovealError(f"the training set has {n} examples, fewer than loop.batch_size={batch_size}")
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.start_step, self.rank, self.world_size = start_step, rank, world_size
        self.per_epoch = n // batch_size

    def epoch_order(self, epoch: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(self.n, generator=g)

    def __iter__(self) -> Iterator[list[int]]:
        local = self.batch_size // self.world_size
        step = self.start_step
        while True:
            epoch, index = divmod(step, self.per_epoch)
            order = self.epoch_order(epoch)
            for b in range(index, self.per_epoch):
                start = b * self.batch_size + self.rank * local
                yield order[start : start + local].tolist()
            step = (epoch + 1) * self.per_epoch
