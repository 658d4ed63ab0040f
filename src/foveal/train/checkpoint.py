"""Checkpoints: written atomically, read with ``torch.load(weights_only=True)``.

Everything stored is a tensor or a plain Python value (RNG states included), so loading never
unpickles arbitrary objects.
"""

from __future__ import annotations

import os
import pickle
import random
import tempfile
import zipfile
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from foveal.errors import CheckpointError

FORMAT = 1
"""The checkpoint layout's version: a checkpoint of another version is refused with a message."""

TRAINING_KEYS = ("format", "step", "model", "optimizer", "scheduler", "callbacks")


def _replace_atomically(path: Path, write: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only; a run's files are ordinary files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def save_atomic(obj: Any, path: str | Path) -> Path:
    """``torch.save`` to a temp file in the same directory, fsync, then ``os.replace``.

    A reader (or a crash) sees the old file or the new one, never half of one.
    """
    return _replace_atomically(Path(path), lambda f: torch.save(obj, f))


def write_text_atomic(text: str, path: str | Path) -> Path:
    """Write a text file the way :func:`save_atomic` writes a checkpoint: whole or not at all."""
    return _replace_atomically(Path(path), lambda f: f.write(text.encode()))


def load(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint safely (``weights_only=True``: nothing in the file is executed).

    Raises:
        CheckpointError: the file is missing, truncated, not a torch file, holds objects other
            than tensors and plain values, or is not a dict.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist")
    unreadable = (
        f"cannot read checkpoint {str(path)!r}: it is truncated, empty or not a torch file; "
        "delete it or train again with --overwrite"
    )
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; anything else is not ours
        raise CheckpointError(unreadable)
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:
        raise CheckpointError(
            f"refused to load {str(path)!r}: it holds objects other than tensors and plain values, so it is not "
            "a foveal checkpoint; delete it or train again with --overwrite"
        ) from None
    except (EOFError, RuntimeError, OSError, ValueError, KeyError, AttributeError, TypeError):
        raise CheckpointError(unreadable) from None
    if not isinstance(state, dict):
        kind = type(state).__name__
        raise CheckpointError(f"{str(path)!r} is a torch file but not a foveal checkpoint (it holds a {kind})")
    return state


def check_training_state(state: dict[str, Any], path: str | Path) -> None:
    """Refuse a checkpoint that cannot resume training: another format version or missing parts."""
    version = state.get("format")
    if version != FORMAT:
        raise CheckpointError(
            f"{str(path)!r} has checkpoint format {version!r}, this foveal reads format {FORMAT}; "
            "train again with --overwrite"
        )
    missing = [key for key in TRAINING_KEYS if key not in state]
    if missing:
        raise CheckpointError(f"{str(path)!r} cannot resume training: it lacks {', '.join(missing)}")


def load_model_state(model: torch.nn.Module, state: Any, path: str | Path) -> None:
    """``model.load_state_dict(state)`` after checking that every key and shape matches.

    Raises:
        CheckpointError: naming the missing and unexpected keys and the first shape mismatches
            (a checkpoint of another recipe or another model size).
    """
    if not isinstance(state, dict):
        raise CheckpointError(f"{str(path)!r} is a torch file but not a foveal checkpoint (no model state in it)")
    own = model.state_dict()
    missing = sorted(own.keys() - state.keys())
    unexpected = sorted(state.keys() - own.keys())
    shapes = [
        f"{key} {tuple(state[key].shape)} vs {tuple(own[key].shape)}"
        for key in own.keys() & state.keys()
        if isinstance(state[key], torch.Tensor) and state[key].shape != own[key].shape
    ]
    problems = []
    if missing:
        problems.append(f"missing {_some(missing)}")
    if unexpected:
        problems.append(f"unexpected {_some(unexpected)}")
    if shapes:
        problems.append(f"shapes differ (checkpoint vs model): {_some(sorted(shapes))}")
    if problems:
        raise CheckpointError(
            f"{str(path)!r} does not fit this model ({'; '.join(problems)}): "
            "is it another recipe's or another size's checkpoint?"
        )
    model.load_state_dict(state)


def _some(items: list[str], shown: int = 3) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def rng_state() -> dict[str, Any]:
    """The torch, CUDA, numpy and python ``random`` states as tensors and plain values."""
    kind, keys, pos, has_gauss, cached = cast(tuple[str, np.ndarray, int, int, float], np.random.get_state())
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
