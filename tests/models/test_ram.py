import io
import math

import pytest
import torch
import torch.nn.functional as F

from foveal.models.ram import (
    RAM,
    RAMClassifierSpec,
    RAMOutput,
    RAMSpec,
    glimpse_sensor,
    glimpses_on_object,
    ram_classifier,
    ram_loss,
)
from foveal.models.stn_classifier import CNN, GlimpseCNN
from foveal.registry import MODELS


def reference_sensor(images, locations, size, scales):
    """rho(x, l) literally: per image and scale, slice the zero-padded image around the centre, then average."""
    B, C, H, W = images.shape
    pad = size * 2 ** (scales - 1)
    padded = F.pad(images, (pad, pad, pad, pad))
    out = torch.zeros(B, scales * C, size, size)
    for b in range(B):
        cx = (locations[b, 0].item() + 1) / 2 * W
        cy = (locations[b, 1].item() + 1) / 2 * H
        for i in range(scales):
            side = size * 2**i
            x0, y0 = round(cx - side / 2), round(cy - side / 2)
            patch = padded[b, :, y0 + pad : y0 + pad + side, x0 + pad : x0 + pad + side]
            k = 2**i
            for r in range(size):
                for c in range(size):
                    out[b, i * C : (i + 1) * C, r, c] = patch[:, r * k : (r + 1) * k, c * k : (c + 1) * k].mean((1, 2))
    return out


def test_glimpse_sensor_matches_the_literal_definition():
    g = torch.Generator().manual_seed(0)
    images = torch.rand(5, 2, 20, 24, generator=g)
    locations = torch.rand(5, 2, generator=g) * 2.4 - 1.2  # some glimpses stick out of the image
    out = glimpse_sensor(images, locations, 4, 3)
    assert out.shape == (5, 6, 4, 4)
    torch.testing.assert_close(out, reference_sensor(images, locations, 4, 3))


def test_registered_and_shapes_in_train_and_eval_mode():
    assert "ram" in MODELS
    model = MODELS.get("ram")(1, 40, 10, glimpses=3, glimpse_size=8, scales=2, hidden=32)
    x = torch.rand(4, 1, 40, 40)
    out = model(x)
    assert isinstance(out, RAMOutput)
    assert out.logits.shape == (4, 10) and out.locations.shape == (4, 3, 2) and out.extents.shape == (4, 3)
    assert out.log_probs.shape == (4, 3) and out.baselines.shape == (4, 3)
    assert (out.locations.abs() <= 1).all() and torch.isfinite(out.logits).all()
    model.eval()
    first, second = model(x), model(x)
    assert first.log_probs is None
    torch.testing.assert_close(first.locations, second.locations)  # eval mode takes the mean: no sampling


def test_sampling_follows_the_generator():
    model = RAM(1, 28, 10, glimpses=3, glimpse_size=6, scales=2, hidden=16, std=0.3)
    x = torch.rand(2, 1, 28, 28)
    a = model(x, generator=torch.Generator().manual_seed(1)).locations
    b = model(x, generator=torch.Generator().manual_seed(1)).locations
    c = model(x, generator=torch.Generator().manual_seed(2)).locations
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a, c)


def test_wrong_input_shape_is_named():
    with pytest.raises(ValueError, match="images: expected shape"):
        RAM(1, 28, 10)(torch.rand(2, 1, 30, 30))
    with pytest.raises(ValueError, match="read"):
        RAM(1, 28, 10, read="soft")  # type: ignore[arg-type]


def _grads(model, loss):
    model.zero_grad()
    loss.backward()
    return {name: p.grad for name, p in model.named_parameters()}


def test_hard_ram_every_parameter_gets_a_gradient_and_the_locator_only_through_reinforce():
    torch.manual_seed(0)
    model = RAM(1, 28, 10, glimpses=3, glimpse_size=6, scales=2, hidden=16)
    x, y = torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))
    grads = _grads(model, ram_loss(model(x, generator=torch.Generator().manual_seed(0)), y)[0])
    for name, grad in grads.items():
        assert grad is not None and torch.isfinite(grad).all(), name
        assert grad.abs().sum() > 0, f"{name} gets a zero gradient"
    # Without the REINFORCE term nothing reaches the location network: the path above is REINFORCE's.
    grads = _grads(model, ram_loss(model(x, generator=torch.Generator().manual_seed(0)), y, reinforce_weight=0.0)[0])
    assert grads["locator.weight"] is None or grads["locator.weight"].abs().sum() == 0


def test_gaussian_ram_trains_every_parameter_by_backprop_alone():
    torch.manual_seed(0)
    model = RAM(1, 28, 10, glimpses=3, glimpse_size=6, scales=2, hidden=16, read="gaussian")
    x, y = torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))
    out = model(x)
    assert out.log_probs is None and out.baselines is None and not hasattr(model, "baseline")
    loss, metrics = ram_loss(out, y)
    assert set(metrics) == {"ce", "acc"}
    for name, grad in _grads(model, loss).items():
        assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0, name


def test_gaussian_ram_starts_like_the_hard_one():
    model = RAM(1, 60, 10, glimpse_size=12, read="gaussian")
    out = model(torch.rand(2, 1, 60, 60))
    torch.testing.assert_close(out.extents[:, 0], torch.full((2,), 12.0))  # finest glimpse: 12 pixels
    assert out.locations[:, 0].abs().max() < 0.05  # near the centre


@pytest.mark.parametrize("reward", ["correct", "probability", "log-probability"])
def test_reinforce_gradient_is_the_score_function_times_the_advantage(reward):
    """d/dmu of ram_loss = -(1/B) (R - b) (l - mu) / std^2 per step; d/db = 2 (b - R) / (B T).

    R is 1[right], the softmax probability of the label (p(y) = e^5 / (e^5 + 1) for the right rows), or its log.
    """
    B, T, std = 4, 2, 0.2
    g = torch.Generator().manual_seed(3)
    mu = (torch.rand(B, T, 2, generator=g) - 0.5).requires_grad_()
    drawn = mu.detach() + std * torch.randn(B, T, 2, generator=g)
    log_probs = torch.distributions.Normal(mu, std).log_prob(drawn).sum(-1)
    baselines = torch.rand(B, T, generator=g).requires_grad_()
    logits = torch.tensor([[5.0, 0.0], [0.0, 5.0], [5.0, 0.0], [0.0, 5.0]])
    labels = torch.tensor([0, 0, 0, 1])  # rewards 1, 0, 1, 1
    out = RAMOutput(logits, torch.zeros(B, T, 2), torch.ones(B, T), log_probs, baselines)
    loss, metrics = ram_loss(out, labels, reward=reward)
    loss.backward()
    p_right, p_wrong = math.exp(5) / (math.exp(5) + 1), 1 / (math.exp(5) + 1)  # softmax of (5, 0)
    right, wrong = {
        "correct": (1.0, 0.0),
        "probability": (p_right, p_wrong),
        "log-probability": (math.log(p_right), math.log(p_wrong)),
    }[reward]
    reward = torch.tensor([right, wrong, right, right])[:, None]
    advantage = reward - baselines.detach()
    expected_mu = -(advantage[..., None] * (drawn - mu.detach()) / std**2) / B
    torch.testing.assert_close(mu.grad, expected_mu)
    torch.testing.assert_close(baselines.grad, 2 * (baselines.detach() - reward) / (B * T))
    assert metrics["reward"] == pytest.approx(reward.mean().item())


def test_an_unknown_reward_is_named():
    out = RAMOutput(torch.zeros(2, 3), torch.zeros(2, 1, 2), torch.ones(2, 1), torch.zeros(2, 1), torch.zeros(2, 1))
    with pytest.raises(ValueError, match="reward"):
        ram_loss(out, torch.tensor([0, 1]), reward="accuracy")


def test_glimpses_on_object_counts_centres_inside_the_box():
    """A centre at normalised (x, y) is pixel-centre coordinate (x + 1) W / 2 - 0.5; inside is [x0, x1) x [y0, y1)."""
    box = torch.tensor([[10.0, 20.0, 30.0, 40.0]])  # on a 60 x 60 canvas

    def at(px, py):  # the normalised location of pixel-centre coordinates (px, py)
        return [(px + 0.5) / 30 - 1, (py + 0.5) / 30 - 1]

    points = [at(10, 20), at(29.9, 39.9), at(30, 30), at(20, 19.9), at(20, 30), at(0, 0)]  # in, in, out, out, in, out
    locations = torch.tensor([points])
    assert glimpses_on_object(locations, box, (60, 60)).item() == pytest.approx(3 / 6)
    # x and y are not swapped: a tall box holds points below each other, not beside
    tall = torch.tensor([[10.0, 0.0, 12.0, 60.0]])
    assert glimpses_on_object(
        torch.tensor([[at(11, 5), at(11, 50), at(50, 11)]]), tall, (60, 60)
    ).item() == pytest.approx(2 / 3)


def test_state_dict_round_trip():
    torch.manual_seed(0)
    a = RAM(1, 28, 10, glimpses=2, glimpse_size=6, scales=2, hidden=16).eval()
    torch.manual_seed(1)
    b = RAM(1, 28, 10, glimpses=2, glimpse_size=6, scales=2, hidden=16).eval()
    x = torch.rand(2, 1, 28, 28)
    assert not torch.allclose(a(x).logits, b(x).logits)
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    buffer.seek(0)
    b.load_state_dict(torch.load(buffer, weights_only=True))
    torch.testing.assert_close(a(x).logits, b(x).logits)
    torch.testing.assert_close(a(x).locations, b(x).locations)


@pytest.mark.parametrize("read", ["hard", "gaussian"])
def test_a_few_steps_of_training_stay_finite_and_fit(read):
    g = torch.Generator().manual_seed(0)
    x = torch.zeros(32, 1, 28, 28)
    y = torch.randint(0, 2, (32,), generator=g)
    x[y == 0, :, 10:18, 10:18] = 1.0  # class 0: a bright square in the middle; class 1: nothing
    model = RAM(1, 28, classes=2, glimpses=2, glimpse_size=6, scales=2, hidden=16, read=read, core="lstm")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    ces = []
    for _ in range(20):
        loss, metrics = ram_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        assert torch.isfinite(loss)
        ces.append(metrics["ce"])
    assert ces[-1] < 0.5 * ces[0]


def test_a_spec_and_single_options_build_the_same_model():
    torch.manual_seed(0)
    a = RAM(1, 28, 10, RAMSpec(glimpses=2, glimpse_size=6, scales=2, hidden=16, read="gaussian"))
    torch.manual_seed(0)
    b = RAM(1, 28, 10, RAMSpec(read="gaussian"), glimpses=2, glimpse_size=6, scales=2, hidden=16)
    assert a.spec == b.spec
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    with pytest.raises(ValueError, match="did you mean 'glimpses'"):
        RAM(1, 28, 10, glimpse=3)


def test_the_recipe_spec_names_ram_or_a_baseline():
    model = ram_classifier(1, 28, 10, RAMClassifierSpec(glimpses=2, glimpse_size=6, scales=2, hidden=16))
    assert type(model) is RAM and model.spec.glimpses == 2
    assert type(ram_classifier(1, 28, 10, RAMClassifierSpec(name="glimpse-cnn"))) is GlimpseCNN
    assert type(ram_classifier(1, 28, 10, RAMClassifierSpec(name="cnn"))) is CNN


def test_glimpse_sensor_reads_the_same_pixels_for_16_bit_locations():
    # bfloat16 holds pixel positions beyond 256 only to the even pixel: the corner is computed in float32.
    images = torch.arange(600.0).expand(1, 1, 4, 600).contiguous()
    locations = torch.tensor([[0.77, 0.0]]).to(torch.bfloat16)
    expected = glimpse_sensor(images, locations.float(), 2, 2)
    torch.testing.assert_close(glimpse_sensor(images, locations, 2, 2), expected, rtol=0, atol=0)
