"""Contextualised image embeddings and coordinate features, each against a loop written from its definition."""

from __future__ import annotations

import math

import pytest
import torch

from foveal.attention.context import GridBiLSTM, ResidualSelfAttention
from foveal.attention.coords import AddCoords, add_coords, box_weights, grid_coords
from foveal.attention.grid import flatten_grid
from foveal.registry import ATTENTION


def lstm_direction(x_seq: list[torch.Tensor], lstm: torch.nn.LSTM, suffix: str) -> list[torch.Tensor]:
    """The LSTM equations (Hochreiter & Schmidhuber; torch's gate order i, f, g, o), one step at a time."""
    W_i, W_h = getattr(lstm, f"weight_ih_l0{suffix}"), getattr(lstm, f"weight_hh_l0{suffix}")
    b = getattr(lstm, f"bias_ih_l0{suffix}") + getattr(lstm, f"bias_hh_l0{suffix}")
    H = lstm.hidden_size
    h, c, out = torch.zeros(H, dtype=W_i.dtype), torch.zeros(H, dtype=W_i.dtype), []
    for x in x_seq:
        z = W_i @ x + W_h @ h + b
        i, f, g, o = (
            torch.sigmoid(z[:H]),
            torch.sigmoid(z[H : 2 * H]),
            torch.tanh(z[2 * H : 3 * H]),
            torch.sigmoid(z[3 * H :]),
        )
        c = f * c + i * g
        h = o * torch.tanh(c)
        out.append(h)
    return out


def test_grid_bilstm_reads_the_grid_row_major_in_both_directions() -> None:
    lstm = GridBiLSTM(6).double()
    grid = torch.randn(2, 6, 3, 4, dtype=torch.float64)  # (B, C, H, W)
    out, weights = lstm(flatten_grid(grid))
    assert weights is None
    for b in range(2):
        sequence = [grid[b, :, row, col] for row in range(3) for col in range(4)]  # row by row
        forward = lstm_direction(sequence, lstm.lstm, "")
        backward = lstm_direction(sequence[::-1], lstm.lstm, "_reverse")[::-1]
        expected = torch.stack([torch.cat([f, r]) for f, r in zip(forward, backward, strict=True)])
        torch.testing.assert_close(out[b], expected)


def test_residual_self_attention_matches_the_equation() -> None:
    attn = ResidualSelfAttention(4, k_dim=3).double()
    V = torch.randn(2, 5, 4, dtype=torch.float64)
    mask = torch.tensor([[True] * 5, [True, True, False, True, False]])
    out, weights = attn(V, mask, need_weights=True)
    for b in range(2):
        for i in range(5):
            real = [j for j in range(5) if mask[b, j]]
            query = V[b, i] if mask[b, i] else torch.zeros(4, dtype=torch.float64)  # padding asks nothing
            e = [attn.W_q.weight @ query @ (attn.W_k.weight @ V[b, j]) / math.sqrt(3) for j in real]
            alpha = torch.softmax(torch.stack(e), dim=0)
            expected = V[b, i] + sum(a * V[b, j] for a, j in zip(alpha, real, strict=True))  # v_i + filtered
            torch.testing.assert_close(out[b, i], expected)
            torch.testing.assert_close(weights[b, i, real], alpha)
    assert (weights[1][:, ~mask[1]] == 0).all()


def test_masked_regions_change_nothing_and_all_masked_is_finite() -> None:
    attn = ResidualSelfAttention(4)
    V = torch.randn(2, 5, 4)
    mask = torch.tensor([[True] * 5, [True, True, False, True, False]])
    changed = torch.where(mask.unsqueeze(-1), V, 50 * torch.randn_like(V))
    torch.testing.assert_close(attn(V, mask).output[mask], attn(changed, mask).output[mask])
    assert not torch.allclose(attn(V).output[mask], attn(changed).output[mask])  # the mask does mask
    V.requires_grad_(True)
    out, weights = attn(V, torch.zeros(2, 5, dtype=torch.bool), need_weights=True)
    torch.testing.assert_close(out, V)  # nothing to attend: the residual alone
    out.sum().backward()
    assert torch.isfinite(V.grad).all() and (weights == 0).all()


@pytest.mark.parametrize("name", ["context-bilstm", "context-self"])
def test_every_parameter_gets_a_gradient(name: str) -> None:
    module = ATTENTION.get(name)(8)
    module(*module.example_inputs(generator=torch.Generator().manual_seed(3))).output.square().sum().backward()
    for pname, p in module.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, pname


def test_shape_errors() -> None:
    with pytest.raises(ValueError, match="V: expected shape"):
        GridBiLSTM(8)(torch.randn(2, 5, 6))
    with pytest.raises(ValueError, match="dim must be even"):
        GridBiLSTM(7)
    with pytest.raises(ValueError, match="mask: expected shape"):
        ResidualSelfAttention(8)(torch.randn(2, 5, 8), torch.ones(2, 4, dtype=torch.bool))


def test_coordinates_are_cell_centres_in_x_then_y() -> None:
    coords = grid_coords(3, 4)
    for row in range(3):
        for col in range(4):
            # align_corners=False: cell j of n spans [2j/n - 1, 2(j+1)/n - 1], its centre is the mean
            assert coords[0, row, col].item() == pytest.approx((2 * col + 1) / 4 - 1)
            assert coords[1, row, col].item() == pytest.approx((2 * row + 1) / 3 - 1)
    x = torch.randn(2, 5, 3, 4)
    out = add_coords(x)
    assert out.shape == (2, 7, 3, 4)
    torch.testing.assert_close(out[:, :5], x)
    torch.testing.assert_close(out[:, 5:], coords.expand(2, 2, 3, 4))
    torch.testing.assert_close(AddCoords()(x), out)
    assert grid_coords(1, 1).abs().max() == 0  # a single cell sits at the middle
    with pytest.raises(ValueError, match="x: expected shape"):
        add_coords(torch.randn(2, 5, 3))


def test_box_weights_are_overlap_areas_normalised() -> None:
    boxes = torch.tensor(
        [[[5.0, 20.0, 16.0, 31.0], [0.0, 0.0, 75.0, 75.0]], [[60.0, 3.5, 75.0, 9.0], [7.0, 7.0, 7.0, 9.0]]]
    )
    weights = box_weights(boxes, (75, 75), (5, 3))  # cells 25 px wide, 15 px tall
    assert weights.shape == (2, 2, 15)
    for b in range(2):
        for k in range(2):
            x0, y0, x1, y1 = boxes[b, k].tolist()
            area = torch.zeros(15)
            for row in range(5):
                for col in range(3):
                    dx = min(x1, (col + 1) * 25) - max(x0, col * 25)
                    dy = min(y1, (row + 1) * 15) - max(y0, row * 15)
                    area[row * 3 + col] = max(dx, 0) * max(dy, 0)
            expected = area / area.sum() if area.sum() > 0 else area
            torch.testing.assert_close(weights[b, k], expected)
    assert (weights[1, 1] == 0).all()  # no area: zero weights, not NaN
    V = torch.randn(2, 15, 4)
    pooled = box_weights(boxes, (75, 75), (5, 3)) @ V  # the feature of each box
    torch.testing.assert_close(pooled[0, 1], V[0].mean(0))
