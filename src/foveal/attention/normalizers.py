"""The normalisers of :func:`~foveal.attention.attend`: the softmax under a mask, the sparsemax, the count.

Each turns a row of scores into weights; a masked key, and under the softmax and the sparsemax a score of
``-inf``, weighs exactly 0, and a row with nothing to attend gets zero weights with finite gradients.
"""

from __future__ import annotations

import torch
from torch import Tensor

from foveal._checks import check_floating
from foveal.attention._masks import check_mask

__all__ = ["masked_softmax", "sparsemax"]


def masked_softmax(logits: Tensor, mask: Tensor | None = None) -> Tensor:
    """Softmax over the last axis that gives exactly zero weight where ``mask`` is False.

    A logit of ``-inf`` is a key that cannot be attended, as a masked one (``exp(-inf) = 0``). A row
    with nothing left to attend (no True entry, or every logit ``-inf``) gets all-zero weights (not
    NaN, not uniform), with finite gradients. A NaN or Inf logit where the mask is False changes
    nothing, in value or gradient.

    Shape:
        - logits: ``(..., n, m)``
        - mask: bool, broadcastable to ``(..., n, m)``; True = may be attended
        - output: ``(..., n, m)``
    """
    check_floating(logits=logits)
    if mask is not None:
        check_mask(mask, logits.shape)
    return _masked_softmax(logits, mask)


def _masked_softmax(logits: Tensor, mask: Tensor | None) -> Tensor:
    if mask is not None:
        # A finite fill keeps every softmax input finite (no inf - inf = NaN in all-masked rows); the product
        # with the mask then zeroes masked entries, and with them whole all-masked rows. A row whose allowed
        # scores are all -inf puts its weight on the fill, which the product zeroes too.
        filled = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
        return filled.softmax(dim=-1) * mask
    # A row of -inf scores (a callable may rule every key out) has nothing to attend: shifted by 0 instead of
    # its maximum, its exponentials are all 0, and the clamped sum gives zeros, not 0 / 0, with finite
    # gradients. A NaN score makes the maximum NaN, and its row NaN. (Written out: the compiler's backward of
    # torch.where around a softmax miscomputes strides under dynamic shapes.)
    if logits.shape[-1] == 0:  # no key, and no maximum to take
        return logits.softmax(dim=-1)
    best = logits.detach().amax(dim=-1, keepdim=True)
    exp = (logits - torch.where(best == -torch.inf, 0, best)).exp()
    return exp / exp.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(logits.dtype).tiny)


def sparsemax(logits: Tensor, mask: Tensor | None = None) -> Tensor:
    """The Euclidean projection of each row of ``logits`` onto the simplex (Martins and Astudillo 2016).

    ``w = max(s - tau, 0)`` with ``tau`` chosen so that ``sum w = 1``: with the scores sorted
    descending, ``k`` is the largest count with ``1 + k s_(k) > sum_{i<=k} s_(i)``, and
    ``tau = (sum_{i<=k} s_(i) - 1) / k``. Unlike a softmax, weights are exactly zero off the support
    ``S = {w > 0}`` (a score equal to ``tau`` is off it). The Jacobian is ``diag(1_S) - 1_S 1_S^T / |S|``:
    zero in the rows and columns of keys off the support, ties included, and the weights' sum (always
    1) has no gradient. Where ``mask`` is False the weight is zero and the logit is never read; a
    score of ``-inf`` is a key that cannot be attended, as a masked one; a row with nothing left to
    attend gets all-zero weights. Only the scores' differences matter, so scores of any size work.

    Shape:
        - logits: ``(..., n, m)``
        - mask: bool, broadcastable to ``(..., n, m)``; True = may be attended
        - output: ``(..., n, m)``

    Example:
        >>> sparsemax(torch.tensor([[2.0, 1.5, 0.0]]))
        tensor([[0.7500, 0.2500, 0.0000]])
    """
    check_floating(logits=logits)
    if logits.shape[-1] == 0:
        return logits.clone()
    if mask is not None:
        check_mask(mask, logits.shape)
        # A masked key is a score of -inf, which is never in the support (where, not a product: a NaN
        # there must reach neither the weights nor the gradient).
        logits = torch.where(mask, logits, -torch.inf)
    # The projection is unchanged by a shift of the row, so the best score is moved to 0 (the shift
    # passes no gradient: it cancels). The support test then compares numbers of the size of the
    # scores' spread, not of the scores, and 1 + 1 * 0 > 0 keeps the best key in the support however
    # large the scores are. A row with nothing to attend (every score -inf) is left at -inf: its
    # threshold is -inf, its support empty and its weights zero.
    best = logits.detach().amax(dim=-1, keepdim=True)
    shifted = logits - torch.where(best == -torch.inf, 0, best)
    ordered = shifted.detach().sort(dim=-1, descending=True).values
    ranks = torch.arange(1, logits.shape[-1] + 1, device=logits.device, dtype=logits.dtype)
    cumulative = ordered.cumsum(dim=-1)
    # >= 1 where the best score is finite; the clamp keeps the index in bounds in the other rows.
    count = (1 + ranks * ordered > cumulative).sum(dim=-1, keepdim=True).clamp_min(1)
    threshold = (cumulative.gather(-1, count - 1) - 1) / count.to(logits.dtype)
    # s - tau > 0 exactly where s > tau, so the weights are positive on this support and zero off it.
    support = shifted.detach() > threshold
    # tau's value is the one read off the sorted scores; its gradient is that of (sum_S s - 1) / |S|, the
    # same formula over the support alone, which gives the Jacobian above at ties too (a key on the
    # threshold, of weight 0, is no part of the sum).
    on_support = torch.where(support, shifted, 0).sum(dim=-1, keepdim=True)
    tau = threshold + (on_support - on_support.detach()) / support.sum(dim=-1, keepdim=True).clamp_min(1)
    # A NaN score (or an inf one, whose shift is inf - inf) makes tau NaN: its row is NaN, not hidden as zeros.
    return torch.where(support | tau.isnan(), shifted - tau, 0)


def _count_normalized(f: Tensor, mask: Tensor | None) -> Tensor:
    """``f / C_j`` with ``C_j`` the number of keys row ``j`` may attend; zero where masked or nothing is left."""
    if mask is None:
        return f / max(f.shape[-1], 1)
    mask = mask.expand(f.shape)
    count = mask.sum(dim=-1, keepdim=True).clamp_min(1)
    # where, not a product: a masked score may be inf (an unbounded dot product), and 0 * inf = NaN.
    return torch.where(mask, f, 0) / count
