"""Binarised image sets for Bernoulli likelihoods (DRAW): MNIST 5k and Fashion-MNIST.

A Bernoulli log-likelihood is only a likelihood for 0/1 pixels; scoring grey values with it gives
numbers that are not comparable with the literature (and not bounded below by zero). Two ways to
binarise, both fixed once the set is built (the same seed gives the same bits):

- ``"threshold"``: pixel = 1 where intensity / 255 > ``threshold`` (default 0.5);
- ``"sample"``: pixel ~ Bernoulli(intensity / 255), drawn once from a seeded generator (the
  "stochastically binarised" sets of the VAE literature). Train and test use different streams.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor
from torch.utils.data import Dataset

from foveal.data.images import load_base
from foveal.errors import FovealError

BINARIZE_MODES = ("threshold", "sample")


def binarize(
    images: Tensor, mode: str = "threshold", *, threshold: float = 0.5, generator: torch.Generator | None = None
) -> Tensor:
    """Turn intensities in [0, 1] into 0/1 floats.

    Args:
        images: intensities in [0, 1].
        mode: ``"threshold"`` (``images > threshold``) or ``"sample"`` (Bernoulli(images)).
        threshold: the cut for ``"threshold"``.
        generator: the random source for ``"sample"``.

    Shape:
        - images: any; output: the same

    Example:
        >>> binarize(torch.tensor([0.2, 0.5, 0.9]))
        tensor([0., 0., 1.])
        >>> g = torch.Generator().manual_seed(0)
        >>> binarize(torch.tensor([0.0, 1.0]), "sample", generator=g)
        tensor([0., 1.])
    """
    if mode == "threshold":
        return (images > threshold).to(images.dtype)
    if mode == "sample":
        return torch.bernoulli(images.clamp(0, 1), generator=generator)
    raise FovealError(f"unknown binarisation {mode!r}; choose from: {', '.join(BINARIZE_MODES)}")


class BinarizedImages(Dataset):
    """A base image set (``"mnist"``: the 5k subset, or ``"fashion-mnist"``) with 0/1 pixels.

    Args:
        base: ``"mnist"`` or ``"fashion-mnist"`` (see :func:`foveal.data.images.load_base`).
        split: ``"train"`` or ``"test"``.
        mode: see :func:`binarize`.
        seed: the seed of ``"sample"`` binarisation (the test split uses a different stream).
        threshold: the cut of ``"threshold"`` binarisation.
        limit: keep only the first ``limit`` images.
        root: a directory with the Fashion-MNIST IDX files.

    Items are images ``(1, 28, 28)`` float with values 0 or 1 (no labels: DRAW is unsupervised).

    Attributes:
        images: ``(N, 1, 28, 28)`` float 0/1.
    """

    def __init__(
        self,
        base: str = "mnist",
        split: str = "train",
        mode: str = "threshold",
        *,
        seed: int = 0,
        threshold: float = 0.5,
        limit: int | None = None,
        root: str | Path | None = None,
    ) -> None:
        raw, _ = load_base(base, split, root)
        if limit is not None:
            raw = raw[:limit]
        generator = torch.Generator().manual_seed(2 * seed + (split == "test"))
        self.images = binarize(raw.unsqueeze(1).float() / 255.0, mode, threshold=threshold, generator=generator)
        self.base, self.split, self.mode = base, split, mode

    def __len__(self) -> int:
        return self.images.shape[0]

    def __getitem__(self, index: int) -> Tensor:
        return self.images[index]
