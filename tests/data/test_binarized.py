"""Binarised image sets: 0/1 pixels, the threshold and sampled modes, seeded and split-aware."""

from __future__ import annotations

import pytest
import torch

from foveal.data.binarized import BinarizedImages, binarize


def test_threshold_cuts_strictly_above():
    x = torch.tensor([0.0, 0.49, 0.5, 0.51, 1.0])
    assert binarize(x).tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert binarize(x, threshold=0.2).tolist() == [0.0, 1.0, 1.0, 1.0, 1.0]


def test_sample_is_bernoulli_of_the_intensity_and_seeded():
    x = torch.full((20000,), 0.3)
    a = binarize(x, "sample", generator=torch.Generator().manual_seed(0))
    b = binarize(x, "sample", generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b)
    assert set(a.unique().tolist()) <= {0.0, 1.0}
    assert abs(a.mean().item() - 0.3) < 0.02  # ~5 standard errors
    with pytest.raises(ValueError, match="unknown binarisation"):
        binarize(x, "round")


@pytest.mark.parametrize("mode", ["threshold", "sample"])
def test_mnist5k_binarised(mode):
    train = BinarizedImages("mnist", "train", mode, limit=64)
    test = BinarizedImages("mnist", "test", mode, limit=64)
    assert len(train) == 64 and train[0].shape == (1, 28, 28)
    for ds in (train, test):
        assert set(ds.images.unique().tolist()) == {0.0, 1.0}
    again = BinarizedImages("mnist", "train", mode, limit=64)
    assert torch.equal(train.images, again.images)
    if mode == "sample":  # a different seed gives different bits
        other = BinarizedImages("mnist", "train", mode, seed=1, limit=64)
        assert not torch.equal(train.images, other.images)
