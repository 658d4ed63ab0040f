"""Attention over the image regions *and* the question words (seed 002, "Attending to the image and question").

Every module here takes the same inputs and returns the same :class:`CoAttentionOutput`, so a VQA
model can swap one for another:

- :class:`HopCoAttention`: independent attention, per hop the question attends to the regions and
  the image attends to the words; with ``joint=True`` both use one conditioning vector, the sum of
  the two modal ones.
- :class:`ParallelCoAttention`: seed 002's joint attention, affinity ``C = tanh(Q^T W V)`` turned
  into region and word weights by a max over the other modality or by Lu et al.'s small network.
- :class:`AlternatingCoAttention`: Lu et al. (2016): summarise the question, attend to the image
  given the summary, attend to the question given the attended image.

Seed 002 and Lu et al. store vectors as columns (``V`` is ``d x N``); we store them as rows
(``V`` is ``(N, d)``), so their ``Q^T W V`` (``T x N``) is our ``Q W V^T``.

Padded words (``mask`` False) enter every module as zero vectors: what they held, NaN or Inf
included, reaches no output and no gradient, and their weights are zero. An empty set (no regions,
or no words) is a set with nothing to attend: it adds zeros where it would add its attended vector.
"""

from __future__ import annotations

from typing import NamedTuple, cast

import torch
from torch import Tensor, nn

from foveal._checks import check_ints, check_module_dtype, check_shape
from foveal._torch_private import exportable_output
from foveal.attention._masks import check_flags, check_mask, drop_padding
from foveal.attention.core import Bilinear
from foveal.attention.maps import register_map_module
from foveal.attention.normalizers import masked_softmax
from foveal.attention.spatial import SpatialAttention
from foveal.errors import FovealError
from foveal.registry import ATTENTION


@exportable_output
class CoAttentionOutput(NamedTuple):
    """What every co-attention module returns. Maps always have a step axis (hops, or Lu's steps).

    Shape:
        - output: ``(B, d)``, ``image + question``, the fused vector for the answer classifier
        - weights: ``(B, S, N)``, the region weights of each step
        - word_weights: ``(B, S_w, T)``, the word weights of each step (zero on padded words)
        - image: ``(B, d)``, the image-side vector (attended regions, or the hop state)
        - question: ``(B, d)``, the question-side vector (attended words, or the hop state)
        - affinity: ``(B, T, N)`` for :class:`ParallelCoAttention`, else None
    """

    output: Tensor
    weights: Tensor
    word_weights: Tensor
    image: Tensor
    question: Tensor
    affinity: Tensor | None = None


def _check_inputs(module: nn.Module, V: Tensor, Q: Tensor, mask: Tensor | None, v_Q: Tensor | None) -> Tensor:
    """Check the inputs every co-attention module takes; return ``Q`` with its padded words zeroed."""
    check_module_dtype(module, V=V, Q=Q, v_Q=v_Q, optional=("v_Q",))
    dim = cast(int, module.dim)
    sizes = check_shape("V", V, ("B", "N", dim))
    check_shape("Q", Q, ("B", "T", dim), sizes)
    if v_Q is not None:
        check_shape("v_Q", v_Q, ("B", dim), sizes)
    if mask is None:
        return Q
    check_shape("mask", mask, ("B", "T"), sizes)
    check_mask(mask, mask.shape)
    return drop_padding(Q, mask)


def masked_mean(x: Tensor, mask: Tensor | None) -> Tensor:
    """Mean over the set axis of the rows where ``mask`` is True; zero for a row with none (or an empty set).

    A row where ``mask`` is False is never read: a NaN there changes neither the mean nor a gradient.

    Shape:
        - x: ``(B, T, d)``; mask: bool ``(B, T)``; output: ``(B, d)``
    """
    if mask is None:
        return x.mean(dim=1) if x.shape[1] else x.new_zeros(x.shape[0], x.shape[2])
    count = mask.sum(dim=1, keepdim=True).to(x.dtype)
    return drop_padding(x, mask).sum(dim=1) / count.clamp_min(1.0)


@register_map_module
class HopCoAttention(nn.Module):
    """Independent attention over regions and words, repeated for ``hops`` hops (seed 002).

    The question-side state ``u`` starts at ``v_Q`` and the image-side state ``m`` at the mean region;
    each hop has its own :class:`SpatialAttention` for each modality::

        independent:  v_t = Att_t(V; u_{t-1}),   q_t = Att'_t(Q; m_{t-1})
        joint:        c = u_{t-1} + m_{t-1},     v_t = Att_t(V; c),   q_t = Att'_t(Q; c)
        then          u_t = u_{t-1} + v_t,       m_t = m_{t-1} + q_t      (stacked attention's phi)

    and the output is ``u_K + m_K``.

    Args:
        dim: size ``d`` of the regions, the words and the question vector.
        hops: number of hops ``K``.
        k_dim: joint-embedding size of each attention.
        joint: condition both attentions on ``u + m`` (joint conditioning).

    Shape:
        - V: ``(B, N, d)``; Q: ``(B, T, d)``; mask: bool ``(B, T)``, True = real word
        - v_Q: ``(B, d)``; None uses the mean of the real words
        - output: :class:`CoAttentionOutput` with ``weights (B, K, N)``, ``word_weights (B, K, T)``

    Example:
        >>> co = HopCoAttention(16, hops=2, k_dim=8)
        >>> out = co(torch.randn(2, 49, 16), torch.randn(2, 7, 16), torch.ones(2, 7, dtype=torch.bool))
        >>> out.output.shape, out.weights.shape, out.word_weights.shape
        (torch.Size([2, 16]), torch.Size([2, 2, 49]), torch.Size([2, 2, 7]))
    """

    def __init__(self, dim: int, *, hops: int = 2, k_dim: int = 128, joint: bool = False) -> None:
        super().__init__()
        check_ints(dim=dim, hops=hops, k_dim=k_dim)
        check_flags(joint=joint)
        self.dim, self.joint = dim, joint
        self.image_hops = nn.ModuleList(SpatialAttention(dim, dim, k_dim) for _ in range(hops))
        self.word_hops = nn.ModuleList(SpatialAttention(dim, dim, k_dim) for _ in range(hops))

    def forward(self, V: Tensor, Q: Tensor, mask: Tensor | None = None, v_Q: Tensor | None = None) -> CoAttentionOutput:
        Q = _check_inputs(self, V, Q, mask, v_Q)
        u = masked_mean(Q, mask) if v_Q is None else v_Q
        m = masked_mean(V, None)
        region_maps, word_maps = [], []
        for image_attention, word_attention in zip(self.image_hops, self.word_hops, strict=True):
            image_condition, word_condition = (u + m, u + m) if self.joint else (u, m)
            v_t, alpha = image_attention(V, image_condition)
            q_t, beta = word_attention(Q, word_condition, mask)
            u, m = u + v_t, m + q_t
            region_maps.append(alpha)
            word_maps.append(beta)
        return CoAttentionOutput(u + m, torch.stack(region_maps, 1), torch.stack(word_maps, 1), m, u)

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        return _example_inputs(self.dim, batch, generator)


@ATTENTION.register("coattention-independent")
def independent_coattention(dim: int, **options) -> HopCoAttention:
    """:class:`HopCoAttention` with independent conditioning."""
    return HopCoAttention(dim, joint=False, **options)


@ATTENTION.register("coattention-joint")
def joint_coattention(dim: int, **options) -> HopCoAttention:
    """:class:`HopCoAttention` with joint conditioning (the sum of both modal vectors)."""
    return HopCoAttention(dim, joint=True, **options)


@ATTENTION.register("coattention-parallel")
@register_map_module
class ParallelCoAttention(nn.Module):
    """Parallel co-attention: one affinity matrix gives both the region and the word weights.

    Seed 002 / Lu et al. (2016) eq. (3), in our row layout (``Q (T, d)``, ``V (N, d)``)::

        C = tanh(Q W_b V^T)                                   (T, N), C[t, n]: word t vs region n
        pool="max":      e_v[n] = max_t C[t, n],     e_q[t] = max_n C[t, n]
        pool="learned":  H_v = tanh(V W_v^T + C^T (Q W_q^T)),   e_v = H_v w_hv      (Lu et al. eq. 4)
                         H_q = tanh(Q W_q^T + C (V W_v^T)),     e_q = H_q w_hq
        a_v = softmax(e_v),  a_q = softmax(e_q),  image = sum_n a_v[n] v_n,  question = sum_t a_q[t] q_t

    Padded words take no part: their rows of ``C`` are left out of the max and of the sums, and
    their weight is zero. With no real word at all, ``e_v`` is 0 (uniform region weights).

    Args:
        dim: size ``d`` of the regions and the words.
        pool: ``"max"`` (parameter-free) or ``"learned"``.
        k_dim: hidden size ``k`` of the learned pooling.

    Shape:
        - V: ``(B, N, d)``; Q: ``(B, T, d)``; mask: bool ``(B, T)``, True = real word; v_Q: unused
        - output: :class:`CoAttentionOutput` with ``weights (B, 1, N)``, ``word_weights (B, 1, T)``,
          ``affinity (B, T, N)``

    Example:
        >>> co = ParallelCoAttention(16, pool="learned", k_dim=8)
        >>> out = co(torch.randn(2, 49, 16), torch.randn(2, 7, 16))
        >>> out.affinity.shape, out.weights.shape
        (torch.Size([2, 7, 49]), torch.Size([2, 1, 49]))
    """

    def __init__(self, dim: int, *, pool: str = "max", k_dim: int = 128) -> None:
        super().__init__()
        check_ints(dim=dim, k_dim=k_dim)
        if pool not in ("max", "learned"):
            raise FovealError(f"unknown pool {pool!r}; choose from: max, learned")
        self.dim, self.pool = dim, pool
        self.W_b = Bilinear(dim, dim)
        if pool == "learned":
            self.W_v = nn.Linear(dim, k_dim, bias=False)
            self.W_q = nn.Linear(dim, k_dim, bias=False)
            self.w_hv = nn.Linear(k_dim, 1, bias=False)
            self.w_hq = nn.Linear(k_dim, 1, bias=False)

    def forward(self, V: Tensor, Q: Tensor, mask: Tensor | None = None, v_Q: Tensor | None = None) -> CoAttentionOutput:
        Q = _check_inputs(self, V, Q, mask, v_Q)
        C = torch.tanh(self.W_b(Q, V))  # (B, T, N)
        word_mask = torch.ones(Q.shape[:2], dtype=torch.bool, device=Q.device) if mask is None else mask
        if self.pool == "max":
            # tanh is in [-1, 1], so -2 is below every real entry and never wins the max.
            e_v = _amax(C.masked_fill(~word_mask.unsqueeze(-1), -2.0), dim=1)
            e_v = e_v * word_mask.any(dim=1, keepdim=True)  # no real word: 0, not -2
            e_q = _amax(C, dim=2)
        else:
            C_real = C * word_mask.unsqueeze(-1)  # padded words add nothing to H_v
            Q_k, V_k = self.W_q(Q), self.W_v(V)
            e_v = self.w_hv(torch.tanh(V_k + C_real.transpose(1, 2) @ Q_k)).squeeze(-1)
            e_q = self.w_hq(torch.tanh(Q_k + C @ V_k)).squeeze(-1)
        a_v = e_v.softmax(dim=-1)
        a_q = masked_softmax(e_q, word_mask)
        image = (a_v.unsqueeze(1) @ V).squeeze(1)
        question = (a_q.unsqueeze(1) @ Q).squeeze(1)
        return CoAttentionOutput(image + question, a_v.unsqueeze(1), a_q.unsqueeze(1), image, question, C)

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        return _example_inputs(self.dim, batch, generator)


@ATTENTION.register("coattention-alternating")
@register_map_module
class AlternatingCoAttention(nn.Module):
    """Alternating co-attention (Lu et al. 2016, eq. 6): question, then image, then question again.

    Each step is one attention ``x_hat = A(X; g)``: ``H = tanh(W_x X + (W_g g) 1^T)``,
    ``a = softmax(w_hx^T H)``, ``x_hat = sum_i a_i x_i`` (a :class:`SpatialAttention`, which adds
    the biases ``b_z`` and ``b_a``). Step 1 has ``g = 0``, so it has no ``W_g`` (it would get no
    gradient): its score is ``w^T tanh(W_x q_t + b) + b_a``::

        s     = A_1(Q; 0)        summarise the question
        image = A_2(V; s)        attend to the image given the summary
        question = A_3(Q; image) attend to the question given the attended image

    and the output is ``image + question``.

    Args:
        dim: size ``d`` of the regions and the words.
        k_dim: joint-embedding size of each step.

    Shape:
        - V: ``(B, N, d)``; Q: ``(B, T, d)``; mask: bool ``(B, T)``, True = real word; v_Q: unused
        - output: :class:`CoAttentionOutput` with ``weights (B, 1, N)`` and ``word_weights (B, 2, T)``
          (step 1's summary weights, then step 3's)

    Example:
        >>> co = AlternatingCoAttention(16, k_dim=8)
        >>> out = co(torch.randn(2, 49, 16), torch.randn(2, 7, 16))
        >>> out.weights.shape, out.word_weights.shape
        (torch.Size([2, 1, 49]), torch.Size([2, 2, 7]))
    """

    def __init__(self, dim: int, *, k_dim: int = 128) -> None:
        super().__init__()
        check_ints(dim=dim, k_dim=k_dim)
        self.dim = dim
        self.summary_score = nn.Sequential(nn.Linear(dim, k_dim), nn.Tanh(), nn.Linear(k_dim, 1))
        self.attend_image = SpatialAttention(dim, dim, k_dim)
        self.attend_question = SpatialAttention(dim, dim, k_dim)

    def forward(self, V: Tensor, Q: Tensor, mask: Tensor | None = None, v_Q: Tensor | None = None) -> CoAttentionOutput:
        Q = _check_inputs(self, V, Q, mask, v_Q)
        word_mask = torch.ones(Q.shape[:2], dtype=torch.bool, device=Q.device) if mask is None else mask
        summary_weights = masked_softmax(self.summary_score(Q).squeeze(-1), word_mask)
        summary = (summary_weights.unsqueeze(1) @ Q).squeeze(1)
        image, image_weights = self.attend_image(V, summary)
        question, word_weights = self.attend_question(Q, image, mask)
        return CoAttentionOutput(
            image + question,
            image_weights.unsqueeze(1),
            torch.stack([summary_weights, word_weights], 1),
            image,
            question,
        )

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        return _example_inputs(self.dim, batch, generator)


def _amax(x: Tensor, dim: int) -> Tensor:
    # The max over no entries is taken as 0, the score of a set with nothing in it.
    return x.amax(dim=dim) if x.shape[dim] else x.new_zeros(x.shape[:dim] + x.shape[dim + 1 :])


def _example_inputs(dim: int, batch: int, generator: torch.Generator | None) -> tuple[Tensor, ...]:
    V = torch.randn(batch, 9, dim, generator=generator)
    Q = torch.randn(batch, 5, dim, generator=generator)
    mask = torch.ones(batch, 5, dtype=torch.bool)
    mask[0, 3:] = False  # one padded question, so the sweep exercises the mask
    return V, Q, mask, torch.randn(batch, dim, generator=generator)
