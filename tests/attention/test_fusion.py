"""Transformer fusion block against einsum written from Vaswani et al.'s equations, with the real words only."""

from __future__ import annotations

import math

import pytest
import torch

from foveal.attention.fusion import TransformerFusion
from foveal.registry import ATTENTION


def layer_norm(x: torch.Tensor, norm: torch.nn.LayerNorm) -> torch.Tensor:
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def multi_head(query: torch.Tensor, key: torch.Tensor, module, heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q_h K_h^T / sqrt(d_h)) V_h per head, concatenated, then W_o (Vaswani et al. eq. 1, sec. 3.2.2)."""
    attention = module.attention
    d_h = query.shape[-1] // heads
    q = torch.einsum("nd,ed->ne", query, attention.W_q.weight).reshape(-1, heads, d_h)
    k = torch.einsum("md,ed->me", key, attention.W_k.weight).reshape(-1, heads, d_h)
    v = torch.einsum("md,ed->me", key, attention.W_v.weight).reshape(-1, heads, d_h)
    weights = torch.softmax(torch.einsum("nhe,mhe->hnm", q, k) / math.sqrt(d_h), dim=-1)
    out = torch.einsum("hnm,mhe->nhe", weights, v).reshape(query.shape[0], -1)
    return out @ module.W_o.weight.T + module.W_o.bias, weights


def mlp(x: torch.Tensor, net: torch.nn.Sequential) -> torch.Tensor:
    hidden = x @ net[0].weight.T + net[0].bias
    hidden = 0.5 * hidden * (1 + torch.erf(hidden / math.sqrt(2)))  # GELU
    return hidden @ net[2].weight.T + net[2].bias


def block_reference(block: TransformerFusion, x: torch.Tensor, y: torch.Tensor, heads: int):
    """One sample; ``y`` holds the real words only (padding removed, so it cannot matter)."""
    n = block.norms
    h, image_self = multi_head(layer_norm(x, n["v1"]), layer_norm(x, n["v1"]), block.self_image, heads)
    g, question_self = multi_head(layer_norm(y, n["q1"]), layer_norm(y, n["q1"]), block.self_question, heads)
    x1, y1 = x + h, y + g
    nx, ny = layer_norm(x1, n["v2"]), layer_norm(y1, n["q2"])
    h, image_to_words = multi_head(nx, ny, block.image_to_words, heads)
    g, words_to_image = multi_head(ny, nx, block.words_to_image, heads)
    x2, y2 = x1 + h, y1 + g
    x3 = x2 + mlp(layer_norm(x2, n["v3"]), block.mlp_image)
    y3 = y2 + mlp(layer_norm(y2, n["q3"]), block.mlp_question)
    return x3, y3, image_self, question_self, image_to_words, words_to_image


def _randomised(block: TransformerFusion) -> TransformerFusion:
    generator = torch.Generator().manual_seed(0)
    block = block.double()
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.4)
    return block


def test_fusion_block_matches_the_equations_on_the_real_words() -> None:
    heads = 2
    block = _randomised(TransformerFusion(4, heads=heads, mlp_ratio=1.5))
    V, Q = torch.randn(2, 5, 4, dtype=torch.float64), torch.randn(2, 6, 4, dtype=torch.float64)
    lengths = (6, 3)
    mask = torch.arange(6) < torch.tensor(lengths).unsqueeze(1)
    out = block(V, Q, mask)
    for b, length in enumerate(lengths):
        x3, y3, image_self, question_self, image_to_words, words_to_image = block_reference(
            block, V[b], Q[b, :length], heads
        )
        torch.testing.assert_close(out.output[b], x3)
        torch.testing.assert_close(out.question[b, :length], y3)
        torch.testing.assert_close(out.image_self[b], image_self)
        torch.testing.assert_close(out.question_self[b, :, :length, :length], question_self)
        torch.testing.assert_close(out.image_to_words[b, :, :, :length], image_to_words)
        torch.testing.assert_close(out.weights[b, :, :length], words_to_image)
        assert (out.image_to_words[b, :, :, length:] == 0).all()
        assert (out.question_self[b, :, :, length:] == 0).all()


def test_padded_words_change_nothing_real() -> None:
    block = _randomised(TransformerFusion(4, heads=2))
    V, Q = torch.randn(2, 5, 4, dtype=torch.float64), torch.randn(2, 6, 4, dtype=torch.float64)
    mask = torch.tensor([[True] * 6, [True, True, True, False, False, False]])
    changed = torch.where(mask.unsqueeze(-1), Q, 100 * torch.randn_like(Q))
    out, again = block(V, Q, mask), block(V, changed, mask)
    torch.testing.assert_close(again.output, out.output)
    torch.testing.assert_close(again.question[mask], out.question[mask])
    assert not torch.allclose(block(V, changed).output, block(V, Q).output)  # the mask does mask


def test_all_padding_question_is_finite() -> None:
    block = TransformerFusion(8, heads=2)
    V, Q = torch.randn(2, 5, 8, requires_grad=True), torch.randn(2, 4, 8, requires_grad=True)
    out = block(V, Q, torch.zeros(2, 4, dtype=torch.bool))
    assert all(torch.isfinite(t).all() for t in out)
    assert (out.image_to_words == 0).all()
    (out.output.sum() + out.question.sum()).backward()
    assert torch.isfinite(V.grad).all() and torch.isfinite(Q.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in block.parameters())


def test_every_parameter_gets_a_gradient() -> None:
    block = ATTENTION.get("transformer-fusion")(8)
    out = block(*block.example_inputs(generator=torch.Generator().manual_seed(4)))
    (out.output.square().sum() + out.question.square().sum()).backward()
    for name, p in block.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_shape_errors() -> None:
    block = TransformerFusion(8, heads=2)
    V, Q, mask = torch.randn(2, 5, 8), torch.randn(2, 4, 8), torch.ones(2, 4, dtype=torch.bool)
    with pytest.raises(ValueError, match="V: expected shape"):
        block(torch.randn(2, 5, 6), Q, mask)
    with pytest.raises(ValueError, match="Q: expected shape"):
        block(V, torch.randn(3, 4, 8), mask)
    with pytest.raises(ValueError, match="mask: expected shape"):
        block(V, Q, mask[:, :3])
    with pytest.raises(ValueError, match="mask must be bool"):
        block(V, Q, mask.long())
    with pytest.raises(ValueError, match="not divisible by heads"):
        TransformerFusion(6, heads=4)
