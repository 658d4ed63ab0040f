"""Question-guided spatial attention over image regions: seed 000's MLP attention and seed 002's variants.

Seed 000 (additive)::

    z_i = tanh(W_v v_i + W_q h_Q + b_z),   e_i = w_a^T z_i + b_a,   alpha = softmax(e),   v_hat = sum_i alpha_i v_i

Seed 002 adds the parameter-free ``p = softmax(1^T (v_I * v_Q))``, i.e. ``e_i = v_i . v_Q``
(``"dot"``), and its cosine (``"cosine"``). Its parametric form without the tanh,
``e_i = w_a^T (W_v v_i + W_q h_Q + b_z) + b_a``, is refused: the question's term
``w_a^T (W_q h_Q + b_z)`` is the same for every region, so the softmax cancels it and the map cannot
depend on the question. ``"multiplicative"`` is the parametric form in which it can: the product
instead of the sum, the projected ``1^T (v_I * v_Q)``::

    e_i = w_a^T ((W_v v_i) * (W_q h_Q + b_z)) + b_a       (a low-rank bilinear form in v_i and h_Q)

All four are one module: the regions are the keys and the values, the question is the one query.
Its ``temperature`` ``T`` divides whichever score before it is normalised, ``alpha = softmax(e / T)``.
Seed 001's general operator lets the keys differ from the values (``f(q, k_i) g(v_i)``): pass
``keys`` to score other vectors of the same regions (e.g. an earlier, more local CNN layer's) than
the ones averaged.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from foveal._checks import check_ints, check_module_dtype, check_number, check_shape
from foveal.attention._masks import check_mask
from foveal.attention.core import AttentionOutput, _logits, additive_logits, attend
from foveal.attention.maps import register_map_module
from foveal.errors import FovealError
from foveal.registry import ATTENTION

SPATIAL_SCORES = ("additive", "multiplicative", "dot", "cosine")
SPATIAL_NORMALIZERS = ("softmax", "sparsemax")


@ATTENTION.register("spatial")
@register_map_module
class SpatialAttention(nn.Module):
    """Seed 000's ``SpatialAttention``: a question vector picks a weighted mean of the region vectors.

    The parameters are named as in seed 000 (``W_v``, ``W_q``, ``w_a``), so a ``state_dict`` of the
    seed's class loads into ``score="additive"`` (the default) with ``strict=True``.

    Args:
        c_dim: size ``C`` of each region vector ``v_i``.
        q_dim: size ``d_q`` of the question vector (default ``c_dim``).
        k_dim: size ``k`` of the joint embedding (parametric scores only).
        score: ``"additive"`` (seed 000, tanh), ``"multiplicative"`` (``w_a^T (W_v v_i * (W_q h_Q +
            b_z)) + b_a``), ``"dot"`` (seed 002's parameter-free ``1^T (v_I * v_Q)``; needs
            ``q_dim == c_dim``), or ``"cosine"`` (parameter-free; needs ``q_dim == c_dim``).
            ``"linear"`` (the additive form without its tanh) is refused: its map cannot depend on
            the question.
        temperature: divides the score before it is normalised, ``alpha = softmax(e / T)`` (> 0),
            whichever the score (for ``"cosine"`` as in :func:`foveal.attention.attend`); below 1 the map
            is sharper for the same parameters. Settable after construction (a schedule in training):
            it is a buffer's value, so a compiled model does not recompile when it changes.
        normalize: how the scores become ``alpha``: ``"softmax"`` (the seeds') or ``"sparsemax"``
            (their projection onto the simplex, :func:`foveal.attention.sparsemax`: cells scoring more
            than 1 below the best get exactly 0, where a softmax spreads a haze over the rest).

    Shape:
        - V: ``(B, N, C)``, the regions (a flattened map, see :func:`foveal.flatten_grid`); ``N = 0``
          gives a zero ``v_hat`` (nothing to attend)
        - h_Q: ``(B, d_q)``, or ``(B, n, d_q)``: ``n`` questions about the same regions, answered in
          one pass (the regions are projected once, not once per question)
        - mask: bool ``(B, N)``, True = region may be attended; a row with no True gives zeros. A
          masked region's ``V`` and ``keys`` are never read, so a NaN or Inf there changes nothing
        - keys: ``(B, N, C)``, what the score reads for each region (default: ``V``)
        - bias: ``(B, N)`` (``(B, n, N)``), added to the scores before they are normalised (e.g.
          :class:`foveal.attention.StackedAttention`'s ``relate`` term)
        - output: ``(B, C)``, ``v_hat`` (``(B, n, C)`` for ``n`` questions)
        - weights: ``(B, N)``, ``alpha`` (``(B, n, N)``)

    Example:
        >>> attn = SpatialAttention(512, 256, 128)
        >>> v_hat, alpha = attn(torch.randn(2, 49, 512), torch.randn(2, 256))
        >>> v_hat.shape, alpha.shape
        (torch.Size([2, 512]), torch.Size([2, 49]))
    """

    def __init__(
        self,
        c_dim: int,
        q_dim: int | None = None,
        k_dim: int = 128,
        *,
        score: str = "additive",
        temperature: float = 1.0,
        normalize: str = "softmax",
    ) -> None:
        super().__init__()
        q_dim = c_dim if q_dim is None else q_dim
        check_ints(c_dim=c_dim, q_dim=q_dim, k_dim=k_dim)
        if score == "linear":
            raise FovealError(
                "score='linear' cannot depend on the question: without the tanh, "
                "e_i = w_a^T (W_v v_i + W_q h_Q + b_z) + b_a adds the same question term to every region "
                "and the softmax cancels it; use 'multiplicative' (w_a^T (W_v v_i * (W_q h_Q + b_z)) + b_a) "
                "or 'additive'"
            )
        if score not in SPATIAL_SCORES:
            raise FovealError(f"unknown score {score!r}; choose from: {', '.join(SPATIAL_SCORES)}")
        if score in ("dot", "cosine") and q_dim != c_dim:
            raise FovealError(
                f"score={score!r} compares v_i with h_Q directly: needs q_dim == c_dim, got {q_dim} != {c_dim}"
            )
        self.c_dim, self.q_dim, self.score, self.normalize = c_dim, q_dim, score, normalize
        # A buffer, not a float: a schedule changing it during training does not recompile a compiled model;
        # not persistent, so a state_dict holds the seed's parameters only.
        self.register_buffer("divisor", torch.ones(()), persistent=False)
        self.temperature = temperature
        if score in ("additive", "multiplicative"):
            self.W_v = nn.Linear(c_dim, k_dim, bias=False)
            self.W_q = nn.Linear(q_dim, k_dim, bias=True)  # holds b_z
            self.w_a = nn.Linear(k_dim, 1, bias=True)  # holds b_a
        if score == "additive":
            self.activation = nn.Tanh()

    divisor: Tensor
    _normalize: str

    @property
    def temperature(self) -> float:
        """What the score is divided by before it is normalised (> 0)."""
        return float(self.divisor)

    @temperature.setter
    def temperature(self, value: float) -> None:
        check_number("temperature", value, why="it divides the score")
        with torch.no_grad():
            self.divisor.fill_(value)

    @property
    def normalize(self) -> str:
        """How the scores become ``alpha``: ``"softmax"`` or ``"sparsemax"`` (settable: a schedule may switch it)."""
        return self._normalize

    @normalize.setter
    def normalize(self, value: str) -> None:
        if value not in SPATIAL_NORMALIZERS:
            raise FovealError(f"unknown normalize {value!r}; choose from: {', '.join(SPATIAL_NORMALIZERS)}")
        self._normalize = value

    def forward(
        self,
        V: Tensor,
        h_Q: Tensor,
        mask: Tensor | None = None,
        keys: Tensor | None = None,
        bias: Tensor | None = None,
    ) -> AttentionOutput:
        tensors = {"V": V, "h_Q": h_Q, **({} if keys is None else {"keys": keys})}
        check_module_dtype(self, **tensors)
        sizes = check_shape("V", V, ("B", "N", self.c_dim))
        single = h_Q.dim() == 2
        if h_Q.dim() not in (2, 3):
            raise FovealError(
                f"h_Q: expected shape (B={sizes['B']}, {self.q_dim}) or (B={sizes['B']}, n, {self.q_dim}), "
                f"got {tuple(h_Q.shape)}"
            )
        check_shape("h_Q", h_Q, ("B", self.q_dim) if single else ("B", None, self.q_dim), sizes)
        if keys is not None:
            check_shape("keys", keys, ("B", "N", self.c_dim), sizes)
        if mask is not None:
            check_shape("mask", mask, ("B", "N"), sizes)
            check_mask(mask, mask.shape)
            mask = mask.unsqueeze(1)
        scored = {"additive": self._additive_score, "multiplicative": self._multiplicative_score}.get(
            self.score, self.score
        )
        query = h_Q.unsqueeze(1) if single else h_Q  # (B, n, d_q)
        offset = None
        if bias is not None:
            check_shape("bias", bias, ("B", "N") if single else ("B", query.shape[1], "N"), sizes)
            offset = bias.unsqueeze(1) if single else bias

        def score(q: Tensor, k: Tensor) -> Tensor:
            # e / T for every score (x / 1 is x exactly, so the default changes no bit); the bias is added after
            logits = _logits(q, k, scored, 1.0) / self.divisor
            return logits if offset is None else logits + offset

        v_hat, alpha = attend(
            query,
            V if keys is None else keys,
            V,
            score=score,
            mask=mask,
            normalize=self.normalize,
            need_weights=True,  # seed 000 returns (v_hat, alpha); alpha is (B, N), no bigger than V's sum
        )
        assert alpha is not None  # asked for
        return AttentionOutput(v_hat.squeeze(1), alpha.squeeze(1)) if single else AttentionOutput(v_hat, alpha)

    def _additive_score(self, query: Tensor, key: Tensor) -> Tensor:
        return additive_logits(self.W_q(query), self.W_v(key), self.w_a, self.activation)

    def _multiplicative_score(self, query: Tensor, key: Tensor) -> Tensor:
        # w_a^T (a * b) = (a * w_a) . b: one matmul, never the (n, N, k) products.
        steered = self.W_q(query) * self.w_a.weight[0]  # (..., n, k)
        return steered @ self.W_v(key).transpose(-2, -1) + self.w_a.bias  # (..., n, N)

    def example_inputs(self, batch: int = 2, generator: torch.Generator | None = None) -> tuple[Tensor, ...]:
        """Small random inputs for :meth:`forward` (used by the conformance tests)."""
        return torch.randn(batch, 6, self.c_dim, generator=generator), torch.randn(
            batch, self.q_dim, generator=generator
        )
