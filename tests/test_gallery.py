"""The gallery needs no data set: every shipped model draws from the test examples shipped with it."""

import pytest

from foveal.cli import main
from foveal.zoo import available, card


@pytest.fixture
def no_data_sets(monkeypatch, tmp_path):
    """Every data set foveal reads or generates raises if it is asked for; the cache starts empty."""
    import foveal.data.easy_vqa
    import foveal.data.images.sources
    import foveal.data.shapes

    def hidden(*args, **kwargs):
        raise AssertionError("a data set was read")

    monkeypatch.setattr(foveal.data.images.sources, "_find_fashion_files", hidden)
    monkeypatch.setattr(foveal.data.images.sources, "load_mnist5k", hidden)
    monkeypatch.setattr(foveal.data.easy_vqa, "_build_arrays", hidden)
    monkeypatch.setattr(foveal.data.shapes, "load_shapes", hidden)
    monkeypatch.setenv("FOVEAL_CACHE", str(tmp_path / "cache"))


def test_samples_are_small_and_held_out():
    sizes = {name: (card(name).directory / "sample.safetensors") for name in available()}
    total = sum(path.stat().st_size for path in sizes.values() if path.is_file())
    assert total < 300_000
    assert all(path.is_file() for path in sizes.values())


def test_show_draws_a_model_of_a_data_set_without_it(no_data_sets, tmp_path, capsys):
    assert main(["show", "stn", "--out", str(tmp_path / "figures")]) == 0
    printed = capsys.readouterr().out.split()
    assert [p.split("/")[-2:] for p in printed] == [["stn", "transformer.png"]]


@pytest.mark.slow
def test_demo_draws_every_shipped_model_without_a_data_set(no_data_sets, tmp_path):
    from foveal.demo import run_demo

    result = run_demo(tmp_path / "demo")
    assert not result["skipped"] and set(result["figures"]) == set(available())
    assert all(path.stat().st_size > 5_000 for paths in result["figures"].values() for path in paths)
    assert not (tmp_path / "cache").exists()  # nothing was built or cached
