"""Seed 003's gate: attention as a multiplicative mask on a feature vector, soft or hard.

Soft (seed 003 eq. 1): ``a = sigmoid(logits)``, ``g = a * z``. Each feature has its own
independent gate in ``[0, 1]``; nothing makes the gates sum to one (unlike a softmax).

Hard: ``a in {0, 1}`` (``a = logits > 0``, i.e. ``sigmoid(logits) > 1/2``) and the mask indexes the
feature vector, ``g~ = z[a]``, which keeps ``m <= k`` features. In a batch every row may keep a
different number, so the kept features are returned left-aligned in a zero-padded tensor of width
``max m`` with a bool mask saying which entries are real (the same True = "is there" rule as the
attention masks). Indexing has no gradient with respect to ``a``: train the logits of a hard gate
with a score-function estimator (REINFORCE), as seed 003 says.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from foveal._checks import check_floating, check_shape, check_tensor
from foveal._torch_private import exportable_output
from foveal.errors import FovealError


@exportable_output
class GateOutput(NamedTuple):
    """``(output, weights, kept)``; unpacks like ``(g, a, kept)``.

    - soft: ``output = a * z`` with the shape of ``z``; ``weights = a``; ``kept = None``.
    - hard: ``output`` = the kept features, left-aligned and zero-padded to the largest count in
      the batch; ``weights = a`` as 0./1.; ``kept`` = bool, True where ``output`` holds a kept feature.
    """

    output: Tensor
    weights: Tensor
    kept: Tensor | None


def gate(features: Tensor, logits: Tensor, hard: bool = False) -> GateOutput:
    """Gate a feature vector ``z`` with ``a = sigmoid(logits)`` (soft) or ``a = logits > 0`` (hard).

    Args:
        features: ``z``, the features to gate.
        logits: the attention network's output ``f(x)`` before the sigmoid, one per feature.
        hard: keep the features whose ``a`` is 1 (by indexing) instead of scaling them.

    Shape:
        - features: ``(..., k)``
        - logits: ``(..., k)``, floating point, leading dims broadcast with ``features`` (a
          ``features`` of another dtype is promoted as ``torch.mul`` does)
        - soft output: ``(..., k)``; hard output and kept: ``(..., max m)``, ``max m <= k``
        - weights: ``(..., k)``

    Example:
        >>> z = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        >>> logits = torch.tensor([[9.0, -9.0, 9.0], [-9.0, -9.0, 9.0]])
        >>> gate(z, logits).output.round()
        tensor([[1., 0., 3.],
                [0., 0., 6.]])
        >>> g, a, kept = gate(z, logits, hard=True)
        >>> g, kept
        (tensor([[1., 3.],
                [6., 0.]]), tensor([[ True,  True],
                [ True, False]]))
    """
    check_tensor("features", features)
    check_floating(logits=logits)
    sizes = check_shape("features", features, ("k",), leading=True)
    check_shape("logits", logits, ("k",), sizes, leading=True)
    try:
        shape = torch.broadcast_shapes(features.shape, logits.shape)
    except RuntimeError:
        raise FovealError(
            f"logits: expected a shape broadcastable to {tuple(features.shape)}, got {tuple(logits.shape)}"
        ) from None
    if not hard:
        a = torch.sigmoid(logits)
        return GateOutput(a * features, a, None)
    z, on = features.expand(shape), (logits > 0).expand(shape)
    counts = on.sum(-1, keepdim=True)
    width = int(counts.max()) if counts.numel() else 0
    # A stable sort of "is off" brings the kept features to the front in their original order.
    order = torch.argsort((~on).to(torch.uint8), dim=-1, stable=True)[..., :width]
    kept = torch.arange(width, device=z.device) < counts
    # where, not a product: a padded slot must be 0 even if the feature it points at is inf or NaN.
    return GateOutput(torch.where(kept, z.gather(-1, order), 0.0), on.to(features.dtype), kept)
