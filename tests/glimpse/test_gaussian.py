"""Gaussian glimpses (seed 003) and DRAW's filterbank read/write (seed 004) against their equations."""

import math

import pytest
import torch

from foveal.glimpse import (
    GaussianRead,
    GaussianWrite,
    crop,
    draw_window,
    filterbank,
    gaussian_glimpse,
    gaussian_mask,
    gaussian_read,
    gaussian_write,
)

# --- references, written from the equations with plain loops ------------------------------------


def ref_mask(u: float, s: float, d: float, R: int, C: int, eps: float = 1e-8) -> torch.Tensor:
    """Seed 003: A[r, c] = exp(-.5 ((c - (u + r d)) / s)^2), each row divided by its sum + eps."""
    A = torch.zeros(R, C, dtype=torch.float64)
    for r in range(R):
        for c in range(C):
            A[r, c] = math.exp(-0.5 * ((c - (u + r * d)) / s) ** 2)
        A[r] /= A[r].sum() + eps
    return A


def ref_separable(Ay: torch.Tensor, image: torch.Tensor, Ax: torch.Tensor) -> torch.Tensor:
    """g[i, j] = sum_y sum_x Ay[i, y] I[y, x] Ax[j, x] for one channel."""
    g = torch.zeros(Ay.shape[0], Ax.shape[0], dtype=torch.float64)
    for i in range(Ay.shape[0]):
        for j in range(Ax.shape[0]):
            g[i, j] = sum(
                Ay[i, y] * image[y, x] * Ax[j, x] for y in range(image.shape[0]) for x in range(image.shape[1])
            )
    return g


def ref_filterbank(params: list[float], H: int, W: int, N: int, eps: float = 1e-8):
    """Seed 004 (DRAW), 1-based i and a; A = W, B = H; sigma^2 a variance, used once."""
    gx_t, gy_t, log_sigma2, log_delta_t, log_gamma = params
    A, B = W, H
    g_X, g_Y = (A + 1) / 2 * (gx_t + 1), (B + 1) / 2 * (gy_t + 1)
    delta = (max(A, B) - 1) / (N - 1) * math.exp(log_delta_t)
    sigma2 = math.exp(log_sigma2)
    F_X, F_Y = torch.zeros(N, A, dtype=torch.float64), torch.zeros(N, B, dtype=torch.float64)
    for i in range(1, N + 1):
        mu_X = g_X + (i - N / 2 - 0.5) * delta
        mu_Y = g_Y + (i - N / 2 - 0.5) * delta
        for a in range(1, A + 1):
            F_X[i - 1, a - 1] = math.exp(-((a - mu_X) ** 2) / (2 * sigma2))
        for b in range(1, B + 1):
            F_Y[i - 1, b - 1] = math.exp(-((b - mu_Y) ** 2) / (2 * sigma2))
        F_X[i - 1] /= F_X[i - 1].sum() + eps
        F_Y[i - 1] /= F_Y[i - 1].sum() + eps
    return F_X, F_Y, math.exp(log_gamma)


# --- seed 003 ------------------------------------------------------------------------------------


def test_gaussian_mask_matches_seed_003_formula():
    u, s, d = torch.tensor([1.5, -2.0]), torch.tensor([0.7, 3.0]), torch.tensor([1.2, 0.5])
    A = gaussian_mask(u.double(), s.double(), d.double(), 6, 13)
    for b in range(2):
        torch.testing.assert_close(A[b], ref_mask(u[b].item(), s[b].item(), d[b].item(), 6, 13))


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("truncate", [False, True])
def test_gaussian_glimpse_matches_A_y_I_A_x_transpose(channels, truncate):
    images = torch.rand(2, channels, 9, 11, dtype=torch.float64)
    params = torch.tensor([[1.0, 0.8, 1.5, 2.0, 0.6, 1.2], [-1.0, 1.5, 2.0, 4.0, 0.4, 0.7]], dtype=torch.float64)
    out = gaussian_glimpse(images, params, (4, 5), truncate=truncate)
    for b in range(2):
        uy, sy, dy, ux, sx, dx = params[b].tolist()
        Ay, Ax = ref_mask(uy, sy, dy, 4, 9), ref_mask(ux, sx, dx, 5, 11)
        for c in range(channels):
            torch.testing.assert_close(out[b, c], ref_separable(Ay, images[b, c], Ax), atol=1e-7, rtol=1e-6)


def test_full_size_centred_gaussian_returns_the_input():
    images = torch.rand(2, 3, 8, 10)
    # std 0.25 px: a neighbour weighs exp(-8) = 3.4e-4 of the centre, so |g - I| <= 2 * 3.4e-4 * max|I| per axis.
    params = torch.tensor([[0.0, 0.25, 1.0, 0.0, 0.25, 1.0]]).expand(2, 6)
    torch.testing.assert_close(gaussian_glimpse(images, params, (8, 10), truncate=False), images, atol=1.5e-3, rtol=0)
    # std -> 0 (clamped to SIGMA_MIN): one-hot filters, the input exactly.
    sharp = torch.tensor([[0.0, 0.0, 1.0, 0.0, 0.0, 1.0]]).expand(2, 6)
    torch.testing.assert_close(gaussian_glimpse(images, sharp, (8, 10)), images, atol=1e-6, rtol=0)


def test_sharp_gaussian_glimpse_equals_the_crop():
    images = torch.rand(3, 2, 12, 12)
    params = torch.tensor([[2.0, 1e-4, 1.0, 5.0, 1e-4, 1.0]]).expand(3, 6)  # rows 2..6, cols 5..9
    torch.testing.assert_close(
        gaussian_glimpse(images, params, (5, 5)), crop(images, torch.tensor([[5, 2]] * 3), (5, 5))
    )


def test_truncated_path_within_1e_4_of_dense_and_auto_takes_it():
    g = torch.Generator().manual_seed(1)
    images = torch.rand(4, 3, 96, 96, generator=g) * 2 - 1
    # Zoomed in: 12 filters, 1 px apart, std 0.5-1.5 px, some near or over the edge.
    centres = torch.tensor([[10.0, 40.0], [80.0, 2.0], [-5.0, 60.0], [50.0, 90.0]])
    stds = torch.tensor([0.5, 1.0, 1.5, 0.8])
    params = torch.stack([centres[:, 0], stds, torch.ones(4), centres[:, 1], stds, torch.ones(4)], dim=-1)
    dense = gaussian_glimpse(images, params, (12, 12), truncate=False)
    truncated = gaussian_glimpse(images, params, (12, 12), truncate=True)
    assert (truncated - dense).abs().max() <= 1e-4
    assert torch.equal(gaussian_glimpse(images, params, (12, 12)), truncated)  # "auto" chose the window
    zoomed_out = torch.tensor([[0.0, 4.0, 8.0, 0.0, 4.0, 8.0]]).expand(4, 6)
    assert torch.equal(
        gaussian_glimpse(images, zoomed_out, (12, 12)), gaussian_glimpse(images, zoomed_out, (12, 12), truncate=False)
    )


@pytest.mark.parametrize("read", ["seed 003", "draw"])
def test_truncated_window_wider_than_the_image_is_cut_to_it(monkeypatch, read):
    # std 3e3 px keeps 5 std = 15,000 px either side of a 12 x 10 image: the window holds the whole
    # image, which is all it can read, so the glimpse is the dense one. Its size is the image's (and a
    # pixel of padding at each edge at most), not the Gaussians' reach: 30,000^2 pixels would be gigabytes.
    images = torch.rand(2, 3, 12, 10, generator=torch.Generator().manual_seed(0))
    windows = []

    def bounded_crop(images, boxes, size, **kwargs):
        windows.append(size)
        assert size[0] <= 12 + 2 and size[1] <= 10 + 2, f"a window of {size} for a 12 x 10 image"
        return crop(images, boxes, size, **kwargs)

    def glimpse(truncate: bool) -> torch.Tensor:
        if read == "seed 003":
            params = torch.tensor([[4.0, 3e3, 1.0, 3.0, 3e3, 1.0], [-50.0, 3e3, 2.0, 60.0, 2e3, -1.0]])
            return gaussian_glimpse(images, params, (4, 5), truncate=truncate)
        params = torch.tensor([[0.0, 0.0, math.log(9e6), 0.0, 0.0], [0.5, -2.0, math.log(4e6), 1.0, 0.0]])
        return gaussian_read(images, params, 4, truncate=truncate).output

    monkeypatch.setattr("foveal.glimpse.separable.crop", bounded_crop)
    truncated = glimpse(True)
    assert windows, "the windowed path ran"
    torch.testing.assert_close(truncated, glimpse(False))


@pytest.mark.parametrize("truncate", [False, True])
def test_gradients_reach_every_glimpse_parameter_and_the_image(truncate):
    images = torch.rand(2, 2, 16, 16, requires_grad=True)
    params = torch.tensor([[3.0, 1.0, 1.5, 4.0, 0.8, 1.2], [2.0, 1.2, 0.9, 1.0, 1.5, 1.1]], requires_grad=True)
    target = torch.rand(2, 2, 5, 5)
    (gaussian_glimpse(images, params, (5, 5), truncate=truncate) * target).sum().backward()
    assert (params.grad.abs() > 1e-6).all()
    assert images.grad.abs().sum() > 0


def test_gaussian_glimpse_gradcheck_float64():
    images = torch.rand(1, 2, 7, 8, dtype=torch.float64, requires_grad=True)
    params = torch.tensor([[1.0, 0.9, 1.3, 2.0, 1.1, 0.8]], dtype=torch.float64, requires_grad=True)
    for truncate in (False, True):
        assert torch.autograd.gradcheck(
            lambda i, p, t=truncate: gaussian_glimpse(i, p, (3, 4), truncate=t), (images, params)
        )


def test_degenerate_gaussians_give_finite_outputs_and_gradients():
    images = torch.rand(3, 1, 10, 10, requires_grad=True)
    params = torch.tensor(
        [
            [2.0, 0.0, 1.0, 2.0, 0.0, 1.0],  # zero std
            [-1e4, 1.0, 1.0, 1e4, 1.0, 1.0],  # every Gaussian far off the image: the row sums underflow to 0
            [2.0, 1e-30, 0.0, 2.0, -1.0, 0.0],  # tiny and negative std, zero stride
        ],
        requires_grad=True,
    )
    for truncate in (False, True):
        out = gaussian_glimpse(images, params, (4, 4), truncate=truncate)
        assert torch.isfinite(out).all()
        assert (out[1] == 0).all()  # eps guard: zero, not NaN
        images.grad = params.grad = None
        out.sum().backward()
        assert torch.isfinite(images.grad).all() and torch.isfinite(params.grad).all()


def test_gaussian_shape_errors():
    with pytest.raises(ValueError):
        gaussian_glimpse(torch.zeros(2, 1, 8, 8), torch.zeros(2, 5), (3, 3))  # six parameters
    with pytest.raises(ValueError):
        gaussian_glimpse(torch.zeros(2, 8, 8), torch.zeros(2, 6), (3, 3))  # no channel dim
    with pytest.raises(ValueError):
        gaussian_glimpse(torch.zeros(2, 1, 8, 8), torch.zeros(2, 6), (3, 3), truncate="yes")
    with pytest.raises(ValueError):
        gaussian_mask(torch.zeros(2), torch.ones(3), torch.ones(2), 3, 8)


# --- DRAW (seed 004) -----------------------------------------------------------------------------

DRAW_PARAMS = torch.tensor(
    [[0.1, -0.3, math.log(2.0), math.log(0.6), math.log(1.7)], [-0.5, 0.4, math.log(0.5), 0.2, -0.4]]
)


def test_filterbank_matches_draw_equations():
    fb = filterbank(DRAW_PARAMS.double(), (9, 13), 4)
    for b in range(2):
        F_X, F_Y, gamma = ref_filterbank(DRAW_PARAMS[b].tolist(), 9, 13, 4)
        torch.testing.assert_close(fb.F_X[b], F_X)
        torch.testing.assert_close(fb.F_Y[b], F_Y)
        torch.testing.assert_close(fb.window.gamma[b].item(), gamma)


def test_draw_grid_is_centred():
    window = draw_window(torch.zeros(1, 5), (20, 30), 6)
    assert window.g_X.item() == 15.5 and window.g_Y.item() == 10.5  # the middles of pixels 1..30 and 1..20
    F_X = filterbank(torch.tensor([[0.0, 0.0, -4.0, 0.0, 0.0]]), (30, 30), 6).F_X[0]
    torch.testing.assert_close(F_X, F_X.flip(0).flip(1))  # mirror-symmetric about the image's middle


@pytest.mark.parametrize("truncate", [False, True])
def test_read_matches_gamma_F_Y_x_F_X_transpose(truncate):
    x = torch.rand(2, 2, 9, 13, dtype=torch.float64)
    x_hat = torch.rand(2, 2, 9, 13, dtype=torch.float64) - 0.5
    out, _ = gaussian_read(x, DRAW_PARAMS.double(), 4, x_hat, truncate=truncate)
    assert out.shape == (2, 4, 4, 4)
    for b in range(2):
        F_X, F_Y, gamma = ref_filterbank(DRAW_PARAMS[b].tolist(), 9, 13, 4)
        for c in range(2):
            torch.testing.assert_close(out[b, c], gamma * ref_separable(F_Y, x[b, c], F_X), atol=1e-7, rtol=1e-6)
            torch.testing.assert_close(
                out[b, 2 + c], gamma * ref_separable(F_Y, x_hat[b, c], F_X), atol=1e-7, rtol=1e-6
            )


def test_write_matches_inverse_gamma_F_Y_transpose_w_F_X():
    w = torch.rand(2, 3, 4, 4, dtype=torch.float64)
    out, _ = gaussian_write(w, DRAW_PARAMS.double(), (9, 13))
    assert out.shape == (2, 3, 9, 13)
    for b in range(2):
        F_X, F_Y, gamma = ref_filterbank(DRAW_PARAMS[b].tolist(), 9, 13, 4)
        for c in range(3):
            torch.testing.assert_close(out[b, c], ref_separable(F_Y.T, w[b, c], F_X.T) / gamma)


def test_centred_full_size_read_returns_the_input():
    x = torch.rand(2, 1, 12, 12)
    # g~ = 0, delta~ = 1 -> delta = 1 px with N = 12; sigma^2 = e^-3 -> a neighbour weighs exp(-1/(2 e^-3)) = 4.5e-5.
    params = torch.tensor([[0.0, 0.0, -3.0, 0.0, 0.0]]).expand(2, 5)
    out, _ = gaussian_read(x, params, 12)
    torch.testing.assert_close(out, x, atol=2e-4, rtol=0)


@pytest.mark.parametrize("truncate", [False, True])
def test_gradients_reach_every_draw_parameter(truncate):
    x = torch.rand(2, 1, 16, 16)
    params = DRAW_PARAMS.clone().requires_grad_()
    target = torch.rand(2, 1, 5, 5)
    (gaussian_read(x, params, 5, truncate=truncate).output * target).sum().backward()
    assert (params.grad.abs() > 1e-6).all(), params.grad  # public ports detach these with .item()
    params.grad = None
    (gaussian_write(torch.rand(2, 1, 5, 5), params, (16, 16)).output * torch.rand(2, 1, 16, 16)).sum().backward()
    assert (params.grad.abs() > 1e-6).all(), params.grad


def test_read_write_gradcheck_float64():
    x = torch.rand(1, 1, 6, 7, dtype=torch.float64, requires_grad=True)
    params = DRAW_PARAMS[:1].double().requires_grad_()
    assert torch.autograd.gradcheck(lambda i, p: gaussian_read(i, p, 3, truncate=False).output, (x, params))
    w = torch.rand(1, 1, 3, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda w_, p: gaussian_write(w_, p, (6, 7)).output, (w, params))


def test_draw_extremes_give_finite_outputs_and_gradients():
    x = torch.rand(4, 1, 10, 10)
    params = torch.tensor(
        [
            [0.0, 0.0, -200.0, 0.0, 0.0],  # sigma^2 underflows to 0
            [50.0, -50.0, 0.0, 0.0, 0.0],  # grid far off the image
            [0.0, 0.0, 0.0, -200.0, 30.0],  # delta -> 0, gamma huge
            [0.0, 0.0, 80.0, 60.0, -80.0],  # sigma^2 and delta huge, gamma tiny
        ],
        requires_grad=True,
    )
    for out in (gaussian_read(x, params, 4).output, gaussian_write(torch.rand(4, 1, 4, 4), params, (10, 10)).output):
        assert torch.isfinite(out).all()
        params.grad = None
        out.sum().backward()
        assert torch.isfinite(params.grad).all()
    out, _ = gaussian_read(x, torch.zeros(4, 5), 1)  # N = 1: no stride, no division by N - 1 = 0
    assert out.shape == (4, 1, 1, 1) and torch.isfinite(out).all()


def test_read_write_modules_and_shape_errors():
    read, write = GaussianRead(8, N=4), GaussianWrite(8, N=4, channels=2)
    h = torch.randn(3, 8)
    glimpse, _ = read(torch.rand(3, 2, 12, 12), h, torch.rand(3, 2, 12, 12))
    canvas, _ = write(h, (12, 12))
    (glimpse.sum() + canvas.sum()).backward()
    assert glimpse.shape == (3, 4, 4, 4) and canvas.shape == (3, 2, 12, 12)
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in [*read.parameters(), *write.parameters()])
    with pytest.raises(ValueError):
        gaussian_read(torch.rand(3, 1, 12, 12), torch.zeros(3, 6), 4)
    with pytest.raises(ValueError):
        gaussian_read(torch.rand(3, 1, 12, 12), torch.zeros(3, 5), 4, torch.rand(3, 2, 12, 12))
    with pytest.raises(ValueError):
        gaussian_write(torch.rand(3, 1, 4, 5), torch.zeros(3, 5), (12, 12))
