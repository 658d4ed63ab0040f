"""Where data sets are cached, and that a cached file is written whole or not at all."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from foveal.data.cache import cache_root, save_npz, save_tensors


def test_cache_root_follows_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FOVEAL_CACHE", str(tmp_path / "here"))
    assert cache_root() == tmp_path / "here"
    monkeypatch.delenv("FOVEAL_CACHE")
    assert cache_root() == Path.home() / ".cache" / "foveal"


def test_saves_leave_one_whole_file_and_no_temporaries(tmp_path) -> None:
    arrays = {"a": np.arange(6).reshape(2, 3), "b": np.array(["x", "y"])}
    save_npz(tmp_path / "deep" / "set.npz", arrays)
    save_npz(tmp_path / "deep" / "set.npz", arrays)  # a second writer replaces the first whole
    with np.load(tmp_path / "deep" / "set.npz", allow_pickle=False) as f:
        assert all(np.array_equal(f[k], v) for k, v in arrays.items())
    save_tensors(tmp_path / "t" / "split.pt", {"images": torch.ones(2, 3), "boxes": None})
    saved = torch.load(tmp_path / "t" / "split.pt", weights_only=True)
    assert torch.equal(saved["images"], torch.ones(2, 3)) and saved["boxes"] is None
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["set.npz", "split.pt"]
