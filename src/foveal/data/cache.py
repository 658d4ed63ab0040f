"""Where built data sets are kept, and how a file gets there without a reader ever seeing half of it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

__all__ = ["cache_root", "save_npz", "save_tensors"]


def cache_root() -> Path:
    """``$FOVEAL_CACHE`` if set, else ``~/.cache/foveal``: where downloads and built sets are kept."""
    return Path(os.environ.get("FOVEAL_CACHE", Path.home() / ".cache" / "foveal"))


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` as a compressed ``.npz`` at ``path``, atomically (temp file, then rename).

    Processes building the same set at once each write their own temp file, so the one that renames
    last wins with a whole file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp.npz")
    np.savez_compressed(tmp, **cast(dict[str, Any], arrays))  # names, not numpy's own keyword arguments
    os.replace(tmp, path)


def save_tensors(path: Path, tensors: dict[str, torch.Tensor | None]) -> None:
    """``torch.save`` a dict of tensors at ``path``, atomically (temp file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save(tensors, tmp)
    tmp.replace(path)
