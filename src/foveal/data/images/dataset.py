"""A distorted split as a data set: built once from (base set, distortion, seed), cached as uint8."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import Dataset

from foveal.data.cache import cache_root, save_tensors
from foveal.data.images.distortions import CHUNK, DISTORTIONS, PLACED, distort, to_float
from foveal.data.images.sources import load_base
from foveal.errors import FovealError

__all__ = ["DistortedImages"]


class DistortedImages(Dataset):
    """A distorted split, built once from (base set, distortion, seed) and cached as uint8.

    Args:
        base: ``"fashion-mnist"`` or ``"mnist"`` (the 5k subset).
        split: ``"train"`` or ``"test"``.
        distortion: a key of :data:`DISTORTIONS`.
        seed: seeds the distortion's ``torch.Generator``; the same seed gives the same images.
        limit: keep only the first ``limit`` base images (``None``: all).
        cache_dir: where to keep built splits (default ``~/.cache/foveal/images``); ``False``: none.
        root: a directory with the Fashion-MNIST IDX files.
        options: passed to the distortion.

    Items are ``(image, label)`` with image float ``(1, H, W)`` in [0, 1] and label an int.

    Attributes:
        images: uint8 ``(N, 1, H, W)``; labels: int64 ``(N,)``.
        boxes: for :data:`PLACED` distortions, where each object is, float ``(N, 4)``
            ``(x_min, y_min, x_max, y_max)`` in pixels (:func:`object_boxes`); otherwise None.
    """

    def __init__(
        self,
        base: str = "fashion-mnist",
        split: str = "train",
        distortion: str = "none",
        seed: int = 0,
        *,
        limit: int | None = None,
        cache_dir: str | Path | bool | None = None,
        root: str | Path | None = None,
        **options: Any,
    ) -> None:
        if distortion not in DISTORTIONS:
            raise FovealError(f"unknown distortion {distortion!r}; choose from: {', '.join(DISTORTIONS)}")
        self.base, self.split, self.distortion, self.seed = base, split, distortion, seed
        placed = distortion in PLACED
        # v2: placed splits also keep their boxes (a v1 file has none, so it must not be found).
        key = f"{base}|{split}|{distortion}|{seed}|{limit}|{sorted(options.items())}|{CHUNK}|{'v2' if placed else 'v1'}"
        name = f"{base}-{split}-{distortion}-seed{seed}-{hashlib.sha1(key.encode()).hexdigest()[:10]}.pt"
        path = None
        if cache_dir is not False:
            folder = cache_root() / "images" if cache_dir in (None, True) else Path(cache_dir)  # type: ignore[arg-type]
            path = folder / name
        self.boxes: Tensor | None = None
        if path is not None and path.is_file():
            saved = torch.load(path, weights_only=True)
            self.images, self.labels, self.boxes = saved["images"], saved["labels"], saved.get("boxes")
            return
        images, labels = load_base(base, split, root)
        if limit is not None:
            images, labels = images[:limit], labels[:limit]
        # A different stream per split, so train and test never share a distortion.
        generator = torch.Generator().manual_seed(seed * 2 + (split == "test"))
        if placed:
            out, self.boxes = distort(to_float(images), distortion, generator, return_boxes=True, **options)
        else:
            out = distort(to_float(images), distortion, generator, **options)
        self.images = (out * 255).round().clamp(0, 255).to(torch.uint8)
        self.labels = labels
        if path is not None:
            save_tensors(path, {"images": self.images, "labels": self.labels, "boxes": self.boxes})

    def __len__(self) -> int:
        return self.labels.shape[0]

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        return self.images[index].float() / 255.0, int(self.labels[index])

    @property
    def image_size(self) -> int:
        return self.images.shape[-1]
