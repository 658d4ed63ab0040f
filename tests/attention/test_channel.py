"""Channel-wise and cross-layer attention (seed 002, SCA-CNN), each against a loop written from its equation."""

from __future__ import annotations

import pytest
import torch

from foveal.attention.channel import ChannelAttention, CrossLayerAttention
from foveal.registry import ATTENTION


def _randomised(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    generator = torch.Generator().manual_seed(seed)
    module = module.double()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.5)
    return module


def channel_reference(attn: ChannelAttention, V: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Seed 002's order: the affinity of channel c at region i, pooled across space, then SCA-CNN eq. 7-8."""
    B, N, C = V.shape
    W_c, b_c, W_hc = attn.W_c, attn.b_c, attn.W_hc.weight
    w_i, b_i = attn.W_i.weight[0], attn.W_i.bias[0]
    beta = torch.zeros(B, C, dtype=V.dtype)
    for b in range(B):
        logits = []
        for c in range(C):
            pooled = sum(W_c * V[b, i, c] + b_c[c] + W_hc @ h[b] for i in range(N)) / N  # mean over space
            logits.append(w_i @ torch.tanh(pooled) + b_i)
        beta[b] = torch.softmax(torch.stack(logits), dim=0)
    out = torch.zeros_like(V)
    for b in range(B):
        for i in range(N):
            for c in range(C):
                out[b, i, c] = C * beta[b, c] * V[b, i, c]
    return out, beta


def test_channel_attention_matches_the_equation() -> None:
    attn = _randomised(ChannelAttention(5, q_dim=3, k_dim=4))
    V, h = torch.randn(2, 6, 5, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)
    out, beta = attn(V, h)
    ref_out, ref_beta = channel_reference(attn, V, h)
    torch.testing.assert_close(beta, ref_beta)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(beta.sum(-1), torch.ones(2, dtype=torch.float64))


def test_channel_weights_depend_on_the_question_and_uniform_weights_are_identity() -> None:
    attn = _randomised(ChannelAttention(4, q_dim=3, k_dim=4))
    V = torch.randn(1, 6, 4, dtype=torch.float64)
    _, beta_1 = attn(V, torch.randn(1, 3, dtype=torch.float64))
    _, beta_2 = attn(V, torch.randn(1, 3, dtype=torch.float64))
    assert not torch.allclose(beta_1, beta_2)
    with torch.no_grad():
        attn.W_i.weight.zero_()  # every channel scores the same: beta = 1/C
    out, beta = attn(V, torch.randn(1, 3, dtype=torch.float64))
    torch.testing.assert_close(beta, torch.full((1, 4), 0.25, dtype=torch.float64))
    torch.testing.assert_close(out, V)


def cross_layer_reference(attn: CrossLayerAttention, layers, h):
    """Seed 002: weights across all tensors (one softmax over every region of every layer), summed per tensor."""
    score = attn.score
    B = h.shape[0]
    outputs, gammas, alphas = [], [], []
    for b in range(B):
        logits, projected, owner = [], [], []
        for l, (V, project) in enumerate(zip(layers, attn.project, strict=True)):
            for i in range(V.shape[1]):
                u = project.weight @ V[b, i] + project.bias
                z = torch.tanh(score.W_k.weight @ u + score.W_q.weight @ h[b] + score.W_q.bias)
                logits.append(score.w_a.weight[0] @ z + score.w_a.bias[0])
                projected.append(u)
                owner.append(l)
        w = torch.softmax(torch.stack(logits), dim=0)
        gamma = torch.stack([sum(w[j] for j in range(len(w)) if owner[j] == l) for l in range(len(layers))])
        outputs.append(sum(w[j] * projected[j] for j in range(len(w))))
        gammas.append(gamma)
        alphas.append(
            [torch.stack([w[j] for j in range(len(w)) if owner[j] == l]) / gamma[l] for l in range(len(layers))]
        )
    per_layer = tuple(torch.stack([alphas[b][l] for b in range(B)]) for l in range(len(layers)))
    return torch.stack(outputs), torch.stack(gammas), per_layer


def test_cross_layer_attention_matches_the_equation() -> None:
    attn = _randomised(CrossLayerAttention(4, layer_dims=(3, 5, 2), q_dim=6, k_dim=3))
    layers = [torch.randn(2, n, c, dtype=torch.float64) for n, c in ((9, 3), (4, 5), (1, 2))]
    h = torch.randn(2, 6, dtype=torch.float64)
    out, gamma, alphas = attn(layers, h)
    ref_out, ref_gamma, ref_alphas = cross_layer_reference(attn, layers, h)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(gamma, ref_gamma)
    for alpha, ref_alpha in zip(alphas, ref_alphas, strict=True):
        torch.testing.assert_close(alpha, ref_alpha)


@pytest.mark.parametrize("name", ["channel", "cross-layer"])
def test_every_parameter_gets_a_gradient(name: str) -> None:
    attn = ATTENTION.get(name)(8)
    out = attn(*attn.example_inputs(generator=torch.Generator().manual_seed(1)))
    out.output.square().sum().backward()
    for pname, p in attn.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, pname


def test_shape_errors_name_the_shapes() -> None:
    attn = ChannelAttention(8, q_dim=4)
    with pytest.raises(ValueError, match="V: expected shape"):
        attn(torch.randn(2, 5, 7), torch.randn(2, 4))
    with pytest.raises(ValueError, match="h_Q: expected shape"):
        attn(torch.randn(2, 5, 8), torch.randn(3, 4))
    cross = CrossLayerAttention(8, layer_dims=(4, 6))
    with pytest.raises(ValueError, match="expected 2 tensors"):
        cross([torch.randn(2, 5, 4)], torch.randn(2, 8))
    with pytest.raises(ValueError, match=r"layers\[1\]: expected shape"):
        cross([torch.randn(2, 5, 4), torch.randn(2, 5, 4)], torch.randn(2, 8))
