"""torch.distributed set-up for ``torchrun``: gloo on CPU, nccl on CUDA; rank 0 writes."""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist

from foveal.errors import FovealError


def world() -> tuple[int, int]:
    """``(rank, world_size)``: from the process group if there is one, else from torchrun's env."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def is_main() -> bool:
    """True on rank 0 (and in a single process): the one process that writes files and logs."""
    return world()[0] == 0


def setup(device: torch.device) -> bool:
    """Join the process group torchrun describes (``WORLD_SIZE > 1``); True if this call created it."""
    if int(os.environ.get("WORLD_SIZE", 1)) <= 1 or dist.is_initialized():
        return False
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend=backend)
    return True


def pick_device(name: str) -> torch.device:
    """``cpu`` | ``cuda`` | ``auto``; under torchrun on CUDA, each rank takes ``cuda:LOCAL_RANK``."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise FovealError("loop.device=cuda but no CUDA device is available; use loop.device=cpu or auto")
        index = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device(name)


def all_mean(values: dict[str, float]) -> dict[str, float]:
    """Average a dict of floats over ranks (identity in one process)."""
    if not (dist.is_available() and dist.is_initialized()) or not values:
        return values
    keys = list(values)  # every rank logs the same names in the same order
    t = torch.tensor([values[k] for k in keys], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t)
    t = t.cpu() / dist.get_world_size()
    return dict(zip(keys, t.tolist(), strict=True))


def any_rank(flag: bool) -> bool:
    """True if ``flag`` is True on any rank (identity in one process)."""
    if not (dist.is_available() and dist.is_initialized()):
        return flag
    t = torch.tensor([int(flag)])
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def gather(obj: Any) -> list[Any]:
    """Every rank's ``obj`` as a list (``[obj]`` in one process)."""
    if not (dist.is_available() and dist.is_initialized()):
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank."""
    if not (dist.is_available() and dist.is_initialized()):
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
