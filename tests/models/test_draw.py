"""DRAW against seed 004's equations, and one test for each error known in public ports.

The reference below is written literally from the seed: per-entry filterbanks (1-based pixel and
grid indices), the read and write sums written out, ``nn.LSTMCell`` called on ``[r_t, h_dec_{t-1}]``,
``x_hat = x - sigmoid(c_{t-1})``, ``c_t = c_{t-1} + write(h_dec_t)``. The model's fast step
(stacked weights, batched filterbanks) is held to it in float64.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor
from torch.distributions import Bernoulli, Normal, kl_divergence

from foveal.models.draw import DRAW, DRAWSpec
from foveal.registry import MODELS

# -- a literal reference ------------------------------------------------------------------------


def ref_filterbank(params: Tensor, N: int, H: int, W: int) -> tuple[Tensor, Tensor, Tensor]:
    """Seed 004's F_X (N x A), F_Y (N x B) and gamma for one image, entry by entry (A = W, B = H)."""
    gx_t, gy_t, log_s2, log_d, log_g = params.tolist()
    A, B_ = W, H
    g_X = (A + 1) / 2 * (gx_t + 1)
    g_Y = (B_ + 1) / 2 * (gy_t + 1)
    delta = (max(A, B_) - 1) / (N - 1) * math.exp(log_d) if N > 1 else 0.0
    sigma2 = math.exp(log_s2)
    F_X = torch.zeros(N, A, dtype=torch.float64)
    F_Y = torch.zeros(N, B_, dtype=torch.float64)
    for i in range(1, N + 1):
        mu_X = g_X + (i - N / 2 - 0.5) * delta
        mu_Y = g_Y + (i - N / 2 - 0.5) * delta
        for a in range(1, A + 1):
            F_X[i - 1, a - 1] = math.exp(-((a - mu_X) ** 2) / (2 * sigma2))
        for b in range(1, B_ + 1):
            F_Y[i - 1, b - 1] = math.exp(-((b - mu_Y) ** 2) / (2 * sigma2))
    F_X = F_X / (F_X.sum(1, keepdim=True) + 1e-8)
    F_Y = F_Y / (F_Y.sum(1, keepdim=True) + 1e-8)
    return F_X, F_Y, torch.tensor(math.exp(log_g), dtype=torch.float64)


def ref_read(x: Tensor, x_hat: Tensor, params: Tensor, N: int) -> Tensor:
    """``gamma [F_Y x F_X^T, F_Y x_hat F_X^T]`` as explicit sums, per image and channel."""
    B, C, H, W = x.shape
    out = []
    for n in range(B):
        F_X, F_Y, gamma = ref_filterbank(params[n], N, H, W)
        parts = []
        for img in (x[n], x_hat[n]):
            for c in range(C):
                g = torch.zeros(N, N, dtype=torch.float64)
                for j in range(N):
                    for i in range(N):
                        g[j, i] = sum(F_Y[j, b] * img[c, b, a] * F_X[i, a] for b in range(H) for a in range(W))
                parts.append(gamma * g.flatten())
        out.append(torch.cat(parts))
    return torch.stack(out)


def ref_write(patch: Tensor, params: Tensor, N: int, C: int, H: int, W: int) -> Tensor:
    """``(1 / gamma) F_Y^T w F_X`` as explicit sums, per image and channel."""
    out = torch.zeros(patch.shape[0], C, H, W, dtype=torch.float64)
    for n in range(patch.shape[0]):
        F_X, F_Y, gamma = ref_filterbank(params[n], N, H, W)
        w = patch[n].view(C, N, N)
        for c in range(C):
            for b in range(H):
                for a in range(W):
                    out[n, c, b, a] = sum(F_Y[j, b] * w[c, j, i] * F_X[i, a] for j in range(N) for i in range(N))
        out[n] /= gamma
    return out


def ref_forward(model: DRAW, x: Tensor, noise: Tensor) -> dict[str, Tensor]:
    """Seed 004's DRAW step by step, with the model's own modules."""
    B = x.shape[0]
    C, (H, W) = model.channels, model.image_size
    h_enc = c_enc = x.new_zeros(B, model.encoder.hidden_size)
    h_dec = c_dec = x.new_zeros(B, model.decoder.hidden_size)
    canvas = model.canvas0.expand(B, C, H, W)  # c_0
    kl = x.new_zeros(B)
    log_q_minus_log_p = x.new_zeros(B)
    canvases, zs = [], []
    for t in range(model.steps):
        x_hat = x - torch.sigmoid(canvas)  # x_hat_t = x - sigma(c_{t-1})
        if model.attention:  # r_t = read(x, x_hat_t, h_dec_{t-1})
            r = ref_read(x, x_hat, model.read_head(h_dec), model.read_size)
        else:
            r = torch.cat([x.flatten(1), x_hat.flatten(1)], 1)
        h_enc, c_enc = model.encoder(torch.cat([r, h_dec], 1), (h_enc, c_enc))  # RNN_enc(h, [r_t, h_dec_{t-1}])
        mu, log_sigma = model.latent(h_enc).chunk(2, 1)
        sigma = log_sigma.exp()
        z = mu + sigma * noise[t]  # z_t ~ Q(Z_t | h_enc_t)
        q, p = Normal(mu, sigma), Normal(torch.zeros_like(mu), torch.ones_like(sigma))
        kl = kl + kl_divergence(q, p).sum(1)
        log_q_minus_log_p = log_q_minus_log_p + (q.log_prob(z) - p.log_prob(z)).sum(1)
        h_dec, c_dec = model.decoder(z, (h_dec, c_dec))  # h_dec_t = RNN_dec(h_dec_{t-1}, z_t)
        if model.attention:  # c_t = c_{t-1} + write(h_dec_t)
            patch = model.write_patch(h_dec)
            canvas = canvas + ref_write(patch, model.write_head(h_dec), model.write_size, C, H, W)
        else:
            canvas = canvas + model.write_patch(h_dec).view(B, C, H, W)
        canvases.append(canvas)
        zs.append(z)
    nll = -Bernoulli(logits=canvas).log_prob(x).flatten(1).sum(1)
    return {
        "logits": canvas,
        "nll": nll,
        "kl": kl,
        "log_weight": -nll - log_q_minus_log_p,
        "canvases": torch.stack(canvases),
        "z": torch.stack(zs),
    }


# -- helpers ------------------------------------------------------------------------------------


def tiny(attention: bool = True, **kw) -> DRAW:
    args = dict(steps=3, enc_size=8, dec_size=7, z_size=3, attention=attention, read_size=2, write_size=3)
    args.update(kw)
    size = args.pop("image_size", (6, 5))
    channels = args.pop("channels", 1)
    return DRAW(size, channels, **args)


def binary(*shape: int, seed: int = 0) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(*shape, generator=g) > 0.5).double()


def randomise_heads(model: DRAW, scale: float = 0.5) -> None:
    # The init puts both heads at the centre with tiny weights; spread them so the tests see
    # off-centre, zoomed grids whose parameters depend on h_dec.
    with torch.no_grad():
        for head in (model.read_head, model.write_head):
            head.weight.normal_(0, scale)
            head.bias.normal_(0, scale)


def head(gx: float = 0.0, gy: float = 0.0, log_s2: float = 0.0, log_d: float = 0.0, log_g: float = 0.0) -> Tensor:
    return torch.tensor([[gx, gy, log_s2, log_d, log_g]], dtype=torch.float64)


# -- every equation of seed 004's DRAW against the reference ------------------------------------


@pytest.mark.parametrize("channels", [1, 2])
def test_read_equation(channels):
    model = tiny(channels=channels).double()
    x, x_hat = binary(2, channels, 6, 5), torch.randn(2, channels, 6, 5, dtype=torch.float64)
    params = torch.tensor([[0.3, -0.2, 0.4, -0.3, 0.2], [-0.6, 0.5, -0.8, 0.1, -0.4]], dtype=torch.float64)
    torch.testing.assert_close(model.read(x, x_hat, params), ref_read(x, x_hat, params, model.read_size))


@pytest.mark.parametrize("channels", [1, 2])
def test_write_equation_transposed_and_inverse_gamma(channels):
    model = tiny(channels=channels).double()
    N = model.write_size
    patch = torch.randn(2, channels * N * N, dtype=torch.float64)
    params = torch.tensor([[0.2, 0.1, -0.5, 0.2, 0.7], [-0.4, 0.3, 0.3, -0.2, -0.5]], dtype=torch.float64)
    torch.testing.assert_close(model.write(patch, params), ref_write(patch, params, N, channels, 6, 5))


def test_attention_parameters_decode_to_seed_grid():
    # Read a ramp image (pixel value = its 1-based column a) with unit-variance filters well inside
    # the image (a sampled Gaussian of sigma >= 1 has its mean at mu to ~1e-9): each glimpse
    # entry is then mu_X^i = g_X + (i - N/2 - 0.5) delta, with g_X = (A+1)/2 (g~_X + 1) and
    # delta = (max(A, B) - 1)/(N - 1) delta~. The image is not square, so A, B and max(A, B) differ.
    H, W, N = 9, 23, 4
    model = tiny(image_size=(H, W), read_size=N).double()
    gx_t, log_d = 0.1, math.log(0.4)
    params = head(gx=gx_t, gy=0.05, log_s2=0.0, log_d=log_d)
    ramp = torch.arange(1, W + 1, dtype=torch.float64).expand(1, 1, H, W)
    glimpse = model.read(ramp, ramp, params)[0, : N * N].view(N, N)  # rows j (y), columns i (x)
    g_X = (W + 1) / 2 * (gx_t + 1)
    delta = (max(H, W) - 1) / (N - 1) * math.exp(log_d)
    mu_X = torch.tensor([g_X + (i - N / 2 - 0.5) * delta for i in range(1, N + 1)], dtype=torch.float64)
    torch.testing.assert_close(glimpse, mu_X.expand(N, N), atol=1e-4, rtol=0)


@pytest.mark.parametrize("attention", [True, False])
def test_forward_matches_reference_every_step(attention):
    # Covers x_hat = x - sigmoid(c_{t-1}), the encoder input [r_t, h_dec_{t-1}], z_t = mu + sigma eps,
    # the decoder, the canvas update c_t = c_{t-1} + write(h_dec_t), the Bernoulli NLL and the KL.
    model = tiny(attention).double()
    if attention:
        randomise_heads(model)
    with torch.no_grad():
        model.canvas0.normal_()
    x = binary(2, 1, 6, 5)
    noise = torch.randn(model.steps, 2, model.z_size, dtype=torch.float64)
    out = model(x, noise=noise, return_steps=True)
    ref = ref_forward(model, x, noise)
    for name, value in ref.items():
        torch.testing.assert_close(getattr(out, name), value, msg=lambda m, name=name: f"{name}: {m}")


def test_encoder_sees_read_then_previous_decoder_state():
    # Zero the encoder's weights on h_dec_{t-1} (the columns after the read): then the decoder's
    # state cannot reach h_enc, and changing the decoder's recurrent weights leaves step 2's z
    # untouched only if those really are the h_dec columns. The read is without attention, so
    # the decoder cannot reach the encoder through the read head either.
    model = tiny(False, steps=2).double()
    x = binary(1, 1, 6, 5)
    noise = torch.randn(2, 1, model.z_size, dtype=torch.float64)
    with torch.no_grad():
        model.encoder.weight_ih[:, model.read_dim :] = 0
        model.write_patch.weight.zero_()  # the canvas stays constant: x_hat carries no decoder info
    z_before = model(x, noise=noise, return_steps=True).z
    with torch.no_grad():
        model.decoder.weight_hh.normal_()
        model.decoder.weight_ih.normal_()
    z_after = model(x, noise=noise, return_steps=True).z
    torch.testing.assert_close(z_before, z_after)
    # ...and with the h_dec columns live, the decoder does reach step 2's z.
    with torch.no_grad():
        model.encoder.weight_ih[:, model.read_dim :].normal_()
    assert not torch.allclose(model(x, noise=noise, return_steps=True).z[1], z_after[1])


# -- the known errors of public ports, one test each --------------------------------------------


@pytest.mark.parametrize(("N", "H", "W"), [(2, 8, 8), (3, 7, 10), (5, 28, 28)])
def test_grid_is_centred_with_one_based_indices(N, H, W):
    # With g~ = 0 the grid's centre is the image's centre, so reading a mirrored image gives the
    # mirrored glimpse. A 0-based grid index (i - N/2 - 0.5 with i from 0) shifts the grid by one
    # stride and breaks this; so do 0-based pixel coordinates with g_X = (A+1)/2 (g~ + 1).
    model = tiny(image_size=(H, W), read_size=N).double()
    x = torch.randn(1, 1, H, W, dtype=torch.float64)
    params = head(log_s2=math.log(0.7), log_d=math.log(0.6))
    glimpse = model.read(x, x, params)[:, : N * N].view(N, N)
    mirrored = model.read(x.flip(-1, -2), x.flip(-1, -2), params)[:, : N * N].view(N, N)
    torch.testing.assert_close(mirrored, glimpse.flip(-1, -2))
    # and the mean filter centre is exactly (A + 1) / 2 in 1-based pixel units
    ramp = torch.arange(1, W + 1, dtype=torch.float64).expand(1, 1, H, W)
    centres = model.read(ramp, ramp, head(log_d=math.log(0.6)))[0, : N * N]
    torch.testing.assert_close(centres.mean(), torch.tensor((W + 1) / 2, dtype=torch.float64), atol=1e-6, rtol=0)


def test_sigma_squared_is_the_variance_once():
    # The emitted value is log sigma^2: a filter row, as a distribution over pixels, has variance
    # sigma^2 (not sigma^4, the "squared twice" error). Read ramps a and a^2 on a wide image.
    H, W, N, sigma2 = 3, 81, 1, 4.0
    model = tiny(image_size=(H, W), read_size=N).double()
    a = torch.arange(1, W + 1, dtype=torch.float64).expand(1, 1, H, W) - (W + 1) / 2  # centred: no cancellation
    params = head(log_s2=math.log(sigma2))
    mean = model.read(a, a, params)[0, 0]
    second = model.read(a.square(), a.square(), params)[0, 0]
    torch.testing.assert_close(second - mean.square(), torch.tensor(sigma2, dtype=torch.float64))


def _constant_latent(model: DRAW, mu: Tensor, log_sigma: Tensor) -> None:
    with torch.no_grad():
        model.latent.weight.zero_()
        model.latent.bias.copy_(torch.cat([mu, log_sigma]))


def test_kl_constant_is_minus_half_per_dimension_per_step():
    model = tiny(steps=4, z_size=5).double()
    x = binary(2, 1, 6, 5)
    # Q = N(0, I) exactly: KL is 0 (the "-T/2 once" error gives T (Z - 1) / 2 here).
    _constant_latent(model, torch.zeros(5), torch.zeros(5))
    assert torch.equal(model(x).kl, torch.zeros(2, dtype=torch.float64))
    # A hand case: mu = 1, sigma = 1 in one dimension gives KL = 1/2 per step.
    _constant_latent(model, torch.tensor([1.0, 0, 0, 0, 0]), torch.zeros(5))
    torch.testing.assert_close(model(x).kl, torch.full((2,), 0.5 * 4, dtype=torch.float64))
    # General mu, sigma: T times the closed form, and torch.distributions agrees.
    mu, log_sigma = torch.tensor([0.3, -1.2, 0.0, 2.0, 0.5]), torch.tensor([-0.5, 0.2, 1.0, 0.0, -2.0])
    _constant_latent(model, mu, log_sigma)
    s2 = (2 * log_sigma).exp()
    closed = 4 * 0.5 * (mu.square() + s2 - s2.log() - 1).sum()
    by_torch = 4 * kl_divergence(Normal(mu, log_sigma.exp()), Normal(0.0, 1.0)).sum()
    torch.testing.assert_close(model(x).kl, closed.double().expand(2))
    torch.testing.assert_close(model(x).kl, by_torch.double().expand(2))


def test_fresh_noise_every_step():
    # Same mu and sigma at every step (constant latent layer): z must still differ across steps.
    model = tiny(steps=4).double()
    _constant_latent(model, torch.full((3,), 0.5), torch.zeros(3))
    z = model(binary(2, 1, 6, 5), generator=torch.Generator().manual_seed(1), return_steps=True).z
    for t in range(1, 4):
        assert not torch.allclose(z[t], z[0])
    # and z_t = mu + sigma eps_t with eps_t the step's own noise
    noise = torch.randn(4, 2, 3, dtype=torch.float64)
    z = model(binary(2, 1, 6, 5), noise=noise, return_steps=True).z
    torch.testing.assert_close(z, 0.5 + noise)


def test_bernoulli_likelihood_on_binary_data_only():
    model = tiny().double()
    x = binary(3, 1, 6, 5)
    out = model(x)
    torch.testing.assert_close(out.nll, -Bernoulli(logits=out.logits).log_prob(x).flatten(1).sum(1))
    assert (out.nll > 0).all()
    with pytest.raises(ValueError, match="binary"):
        model(x * 0.7)


@pytest.mark.parametrize("which", ["read_head", "write_head"])
def test_gradients_reach_every_attention_parameter(which):
    model = tiny(steps=3)
    randomise_heads(model, 0.3)
    (out := model(binary(4, 1, 6, 5).float())).nll.add(out.kl).mean().backward()
    grad = getattr(model, which).weight.grad
    assert grad is not None
    # each of (g~_X, g~_Y, log sigma^2, log delta~, log gamma) gets a gradient
    assert (grad.abs().sum(1) > 0).all(), grad
    assert (getattr(model, which).bias.grad.abs() > 0).all()


@pytest.mark.parametrize("attention", [True, False])
def test_every_parameter_gets_a_gradient(attention):
    model = tiny(attention)
    out = model(binary(4, 1, 6, 5).float())
    (out.nll + out.kl).mean().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


# -- stability ----------------------------------------------------------------------------------


def test_extreme_head_parameters_stay_finite():
    # Guards: huge/tiny sigma^2, delta and gamma, and a grid far off the image (every filter row
    # sums to ~0 before the normaliser's epsilon). Outputs and gradients must be finite.
    model = tiny(steps=2)
    x = binary(2, 1, 6, 5).float()
    for bias in ([1e3, -1e3, -1e3, -1e3, 1e3], [-1e3, 1e3, 1e3, 1e3, -1e3], [50.0, 50.0, -50.0, 0.0, 0.0]):
        model.zero_grad()
        with torch.no_grad():
            model.read_head.bias.copy_(torch.tensor(bias))
            model.write_head.bias.copy_(torch.tensor(bias))
            model.latent.bias.fill_(bias[2])
        out = model(x)
        loss = (out.nll + out.kl).mean()
        loss.backward()
        assert torch.isfinite(loss), bias
        for name, p in model.named_parameters():
            assert torch.isfinite(p.grad).all(), (bias, name)


def test_short_training_run_has_no_nan():
    torch.manual_seed(0)
    model = tiny(steps=4)
    optim = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = binary(16, 1, 6, 5).float()
    first = None
    for _ in range(30):
        out = model(x)
        loss = (out.nll + out.kl).mean()
        optim.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optim.step()
        assert torch.isfinite(loss)
        first = loss.item() if first is None else first
    assert loss.item() < first


# -- IWAE, generation, shapes, state ------------------------------------------------------------


def test_iwae_is_below_the_average_of_its_own_samples():
    model = tiny().double()
    x = binary(3, 1, 6, 5)
    k = 16
    iwae = model.iwae_nll(x, k, generator=torch.Generator().manual_seed(5))
    log_w = model(x.repeat(k, 1, 1, 1), generator=torch.Generator().manual_seed(5)).log_weight.view(k, 3)
    assert (iwae <= -log_w.mean(0)).all()
    torch.testing.assert_close(iwae, -(log_w.logsumexp(0) - math.log(k)))


def test_sampled_elbo_agrees_with_the_closed_form_kl():
    # -log_weight and nll + kl are two unbiased estimates of the same negative ELBO.
    model = tiny().double()
    x = binary(1, 1, 6, 5)
    out = model(x.repeat(4000, 1, 1, 1), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close((-out.log_weight).mean(), (out.nll + out.kl).mean(), rtol=0.01, atol=0)


@pytest.mark.parametrize("attention", [True, False])
def test_generate_from_the_prior(attention):
    model = tiny(attention)
    gen = model.generate(4, generator=torch.Generator().manual_seed(0))
    assert gen.canvases.shape == (3, 4, 1, 6, 5)
    assert torch.isfinite(gen.canvases).all()
    assert (gen.write_params is not None) == attention
    if attention:
        assert gen.write_params.shape == (3, 4, 5)
        assert model.box(gen.write_params, model.write_size).shape == (3, 4, 4)
    a = model.generate(2, generator=torch.Generator().manual_seed(3)).canvases
    b = model.generate(2, generator=torch.Generator().manual_seed(3)).canvases
    assert torch.equal(a, b)


def test_generation_uses_the_same_decoder_and_writer_as_training():
    # With mu = 0 and noise 0, training's decoder sees z_t = 0 at every step; generation fed
    # z_t = 0 must draw the same canvases, whatever x was.
    model = tiny().double()
    randomise_heads(model)
    _constant_latent(model, torch.zeros(3), torch.zeros(3))
    out = model(binary(2, 1, 6, 5), noise=torch.zeros(3, 2, 3, dtype=torch.float64), return_steps=True)
    gen = model.generate(2, z=torch.zeros(3, 2, 3, dtype=torch.float64))
    torch.testing.assert_close(gen.canvases, out.canvases)
    torch.testing.assert_close(gen.write_params, out.write_params)


def test_box_is_centred_for_a_centred_head():
    model = tiny(image_size=(28, 28), write_size=5)
    box = model.box(torch.zeros(1, 5), 5)[0]
    # delta = 27/4, N delta = 33.75, centre (14.5 - 1) = 13.5 in 0-based pixel units
    torch.testing.assert_close(box, torch.tensor([13.5 - 16.875, 13.5 - 16.875, 13.5 + 16.875, 13.5 + 16.875]))


def test_shapes_are_checked():
    model = tiny()
    with pytest.raises(ValueError, match="x: expected shape"):
        model(torch.zeros(2, 1, 5, 6))
    with pytest.raises(ValueError, match="noise: expected shape"):
        model(torch.zeros(2, 1, 6, 5), noise=torch.zeros(3, 2, 4))


@pytest.mark.parametrize("attention", [True, False])
def test_state_dict_round_trip(attention):
    model = tiny(attention)
    randomise_heads(model) if attention else None
    copy = tiny(attention)
    copy.load_state_dict(model.state_dict())
    x, noise = binary(2, 1, 6, 5).float(), torch.randn(3, 2, 3)
    torch.testing.assert_close(copy(x, noise=noise).logits, model(x, noise=noise).logits)


def test_registered():
    model = MODELS.get("draw")((6, 5), 1, steps=2, enc_size=4, dec_size=4, z_size=2)
    assert isinstance(model, DRAW)


def test_a_spec_and_single_options_build_the_same_model():
    spec = DRAWSpec(steps=2, enc_size=4, dec_size=5, z_size=2, read_size=3, write_size=2, learn_canvas=False)
    torch.manual_seed(0)
    a = DRAW((6, 5), 1, spec)
    torch.manual_seed(0)
    b = DRAW((6, 5), 1, DRAWSpec(steps=2, enc_size=4, z_size=2), dec_size=5, read_size=3, write_size=2,
             learn_canvas=False)  # fmt: skip
    assert a.spec == b.spec and "canvas0" not in dict(a.named_parameters())
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    with pytest.raises(ValueError, match="did you mean 'z_size'"):
        DRAW((6, 5), 1, z_siz=3)


@pytest.mark.parametrize("steps_per_call", [2, 3, 5])
def test_runs_of_steps_change_no_output(steps_per_call):
    torch.manual_seed(0)
    model = DRAW((8, 7), 1, steps=6, enc_size=10, dec_size=9, z_size=3, read_size=2, write_size=3).double()
    x = (torch.rand(4, 1, 8, 7, generator=torch.Generator().manual_seed(1)) > 0.5).double()
    noise = torch.randn(6, 4, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    one_at_a_time = model(x, noise=noise)
    model.steps_per_call = steps_per_call
    in_runs = model(x, noise=noise)
    recorded = model(x, noise=noise, return_steps=True)  # recorded steps run one per call
    for name in ("logits", "nll", "kl", "log_weight"):
        torch.testing.assert_close(getattr(in_runs, name), getattr(one_at_a_time, name), rtol=0, atol=0, msg=name)
        torch.testing.assert_close(getattr(recorded, name), getattr(one_at_a_time, name), rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("attention", [True, False])
def test_an_empty_batch_gives_empty_outputs(attention):
    model = DRAW((8, 8), 1, steps=2, enc_size=8, dec_size=8, z_size=3, attention=attention)
    out = model(torch.zeros(0, 1, 8, 8))
    assert out.logits.shape == (0, 1, 8, 8) and out.nll.shape == out.kl.shape == (0,)
