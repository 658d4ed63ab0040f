"""The pictures of :mod:`foveal.data.shapes`: six objects, their colours, shapes, pixels and boxes.

See the package's docstring for the pixel convention.
"""

from __future__ import annotations

import numpy as np

IMAGE_SIZE = 75
N_OBJECTS = 6
HALF = 5
"""Half the size of an object: it covers ``2 * HALF + 1`` pixels across."""
MIN_SEPARATION = 2 * HALF + 2
"""Two centres differ by at least this in x or y, so objects never touch (1 px of white between)."""
TIE_MARGIN = 2.0
"""Pixels by which each object's closest (and furthest) other object must beat the runner-up."""
COLOURS = ("red", "green", "blue", "orange", "gray", "yellow")
RGB = np.array([(255, 0, 0), (0, 200, 0), (0, 0, 255), (255, 150, 0), (128, 128, 128), (235, 235, 0)], np.uint8)
SHAPES = ("square", "circle")


def valid_scenes(centres: np.ndarray) -> np.ndarray:
    """Which scenes obey the rules of the module docstring (no touching, no ties, off the middle).

    Shape:
        - centres: int ``(n, 6, 2)``, pixel ``(x, y)`` per object
        - output: bool ``(n,)``
    """
    first, second = np.triu_indices(N_OBJECTS, 1)  # the 15 pairs
    gap = np.abs(centres[:, first] - centres[:, second]).max(-1)  # (n, 15)
    ok = (gap >= MIN_SEPARATION).all(axis=1) & ~(2 * centres + 1 == IMAGE_SIZE).any(axis=(1, 2))
    candidates = np.flatnonzero(ok)  # the distance test on the survivors only: most scenes fail above
    kept = centres[candidates].astype(np.float64)
    dist = np.sqrt(((kept[:, :, None] - kept[:, None]) ** 2).sum(-1))
    np.einsum("nii->ni", dist)[:] = np.inf
    ranked = np.sort(dist, axis=-1)[..., : N_OBJECTS - 1]  # (n, 6, 5): nearest first, self dropped
    unique = (ranked[..., 1] - ranked[..., 0] >= TIE_MARGIN) & (ranked[..., -1] - ranked[..., -2] >= TIE_MARGIN)
    ok[candidates] = unique.all(axis=-1)
    return ok


def make_scenes(rng: np.random.Generator, n: int, *, progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random scenes: object ``k`` has colour ``k``, a centre and a shape (0 square, 1 circle).

    Candidate layouts are drawn in chunks and the first ``n`` valid ones kept (about 2% are).

    Shape:
        - centres: int64 ``(n, 6, 2)``, pixel ``(x, y)``; shapes: int64 ``(n, 6)``
    """
    from tqdm.auto import tqdm  # a recipes extra, which drawing scenes needs and importing this does not

    kept, have, chunk = [], 0, 20_000
    with tqdm(total=n, desc="shapes: scenes", unit="scene", disable=not progress) as bar:
        while have < n:
            centres = rng.integers(HALF, IMAGE_SIZE - HALF, size=(chunk, N_OBJECTS, 2))
            good = centres[valid_scenes(centres)][: n - have]
            kept.append(good)
            have += len(good)
            bar.update(len(good))
    shapes = rng.integers(0, len(SHAPES), size=(n, N_OBJECTS))
    return np.concatenate(kept).astype(np.int64), shapes.astype(np.int64)


def _masks() -> np.ndarray:
    dy, dx = np.mgrid[-HALF : HALF + 1, -HALF : HALF + 1]
    square = np.ones_like(dx, dtype=bool)
    circle = dx**2 + dy**2 <= HALF * (HALF + 1)  # a little past the radius, for a round 11 px disc
    return np.stack([square, circle])


OBJECT_MASKS = _masks()
"""bool ``(2, 11, 11)``: the pixels of a square and of a circle around their centre."""


def render(centres: np.ndarray, shapes: np.ndarray, *, progress: bool = False) -> np.ndarray:
    """Draw the scenes: one fancy-indexed write per chunk of pictures.

    Shape:
        - centres: ``(n, 6, 2)``; shapes: ``(n, 6)``
        - output: uint8 ``(n, 75, 75, 3)``, white background
    """
    n = len(centres)
    images = np.full((n, IMAGE_SIZE, IMAGE_SIZE, 3), 255, np.uint8)
    offsets = np.arange(-HALF, HALF + 1)
    pixels = images.reshape(-1, 3)  # one row per pixel, so one flat index per write
    from tqdm.auto import tqdm

    chunk = 2_000
    for start in tqdm(range(0, n, chunk), desc="shapes: drawing", disable=not progress):
        c, s = centres[start : start + chunk], shapes[start : start + chunk]
        m = len(c)
        ys = c[:, :, 1, None, None] + offsets[:, None]  # (m, 6, 11, 1)
        xs = c[:, :, 0, None, None] + offsets  # (m, 6, 1, 11)
        flat = (np.arange(start, start + m)[:, None, None, None] * IMAGE_SIZE + ys) * IMAGE_SIZE + xs
        on = OBJECT_MASKS[s]  # (m, 6, 11, 11)
        colour = np.broadcast_to(np.arange(N_OBJECTS)[:, None, None], on.shape)
        pixels[flat[on]] = RGB[colour[on]]
    return images


def object_boxes(centres: np.ndarray) -> np.ndarray:
    """The box ``(x0, y0, x1, y1)`` of each object, half-open, in pixels (see the module's Convention).

    Shape:
        - centres: ``(..., 2)``; output: float32 ``(..., 4)``
    """
    return np.concatenate([centres - HALF, centres + HALF + 1], axis=-1).astype(np.float32)
