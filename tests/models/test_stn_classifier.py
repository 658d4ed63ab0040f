import io

import pytest
import torch
import torch.nn.functional as F

from foveal.models.stn_classifier import (
    CNN,
    STCNN,
    CNNSpec,
    GlimpseCNN,
    STCNNSpec,
    STNSpec,
    localization_net,
    stn_classifier,
    transform_box,
)
from foveal.registry import MODELS

TRANSFORMS = ["affine", "no_shear", "attention", "projective"]


def test_registered_by_name():
    for name in ("cnn", "stcnn", "glimpse-cnn"):
        assert name in MODELS
    assert isinstance(MODELS.get("stcnn")(1, 28, 10), STCNN)


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_stcnn_shapes_and_identity_start(transform):
    model = STCNN(1, 42, 10, transform=transform)
    x = torch.rand(3, 1, 42, 42)
    logits, theta, seen = model(x)
    assert logits.shape == (3, 10) and torch.isfinite(logits).all()
    assert theta.shape == ((3, 3, 3) if transform == "projective" else (3, 2, 3))
    # The transformer starts at the identity: it passes the image through unchanged.
    torch.testing.assert_close(seen, x, atol=1e-5, rtol=0)
    eye = torch.eye(3)[None] if transform == "projective" else torch.eye(2, 3)[None]
    torch.testing.assert_close(theta, eye.expand_as(theta))


def test_stcnn_smaller_output_and_plain_models():
    logits, _, seen = STCNN(1, 60, 10, out_size=28)(torch.rand(2, 1, 60, 60))
    assert logits.shape == (2, 10) and seen.shape == (2, 1, 28, 28)
    out = CNN(3, 32, 5)(torch.rand(2, 3, 32, 32))
    assert out.logits.shape == (2, 5) and out.theta is None and out.transformed is None
    assert GlimpseCNN(1, 60, 10)(torch.rand(2, 1, 60, 60)).logits.shape == (2, 10)


@pytest.mark.parametrize("model", [CNN(1, 28, 10), STCNN(1, 28, 10), GlimpseCNN(1, 28, 10)])
def test_wrong_input_shape_is_named(model):
    with pytest.raises(ValueError, match="images: expected shape"):
        model(torch.rand(2, 1, 30, 30))


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_every_parameter_gets_a_gradient(transform):
    model = STCNN(1, 28, 10, transform=transform)
    # At the identity start the regressor's weight is zero, which blocks the gradient into the rest of
    # the localisation net; one optimiser step moves it, so test from a slightly moved regressor.
    regressor = model.transformer.localization[-1]
    with torch.no_grad():
        regressor.weight.normal_(0, 1e-2)
    x, y = torch.rand(4, 1, 28, 28), torch.tensor([0, 1, 2, 3])
    F.cross_entropy(model(x).logits, y).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, f"{name} gets a zero gradient"


def _share_above_zero(net: torch.nn.Sequential, images: torch.Tensor) -> list[float]:
    shares, h = [], images
    for layer in net:
        h = layer(h)
        if isinstance(layer, torch.nn.ReLU):
            shares.append(float((h > 0).float().mean()))
    return shares


@pytest.mark.parametrize("norm", [True, False])
def test_the_localisation_nets_norm_keeps_its_units_alive_on_an_empty_canvas(norm):
    # A 60 x 60 canvas, empty but for one 12 x 12 patch: the situation in which the net's units died
    # once Adam had pushed their biases below what the sparse inputs give them.
    torch.manual_seed(0)
    images = torch.zeros(16, 1, 60, 60)
    for i, (y, x) in enumerate(torch.randint(0, 48, (16, 2)).tolist()):
        images[i, :, y : y + 12, x : x + 12] = torch.rand(12, 12)
    net = localization_net(1, 6, norm=norm)
    assert sum(isinstance(m, torch.nn.BatchNorm1d | torch.nn.BatchNorm2d) for m in net) == (3 if norm else 0)
    with torch.no_grad():
        for layer in net[:-1]:
            if isinstance(layer, torch.nn.Conv2d | torch.nn.Linear):
                layer.bias.fill_(-1.0)
    shares = _share_above_zero(net.train(), images)
    if norm:
        # Normalised over the batch, each unit is above zero for part of it, whatever its bias.
        assert all(0.2 < share < 0.8 for share in shares), shares
    else:
        assert shares[-1] == 0.0, shares  # the hidden layer is dead: the transform no longer depends on the input


def test_the_localisation_nets_norm_is_an_option():
    assert STCNN(1, 28, 10).spec.loc_norm
    plain = STCNN(1, 28, 10, loc_norm=False).transformer.localization
    assert not any(isinstance(m, torch.nn.BatchNorm1d | torch.nn.BatchNorm2d) for m in plain)


@pytest.mark.parametrize("factory", [lambda: CNN(1, 28, 10), lambda: STCNN(1, 28, 10, transform="attention")])
def test_state_dict_round_trip(factory):
    torch.manual_seed(0)
    a = factory()
    torch.manual_seed(1)
    b = factory()
    with torch.no_grad():  # move the regressor off its (seed-independent) identity start
        for m in (a, b):
            if isinstance(m, STCNN):
                m.transformer.localization[-1].weight.normal_(0, 0.1)
    x = torch.rand(2, 1, 28, 28)
    assert not torch.allclose(a(x).logits, b(x).logits)
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    buffer.seek(0)
    b.load_state_dict(torch.load(buffer, weights_only=True))
    torch.testing.assert_close(a(x).logits, b(x).logits)


def test_transform_box_from_the_convention():
    # x in [0, 1], y in [-0.5, 0.5] (normalised) on a 28 x 28 input: pixels 13.5..27.5 and 6.5..20.5.
    theta = torch.tensor([[[0.5, 0.0, 0.5], [0.0, 0.5, 0.0]]])
    box = transform_box(theta, (28, 28))[0]
    expected = torch.tensor([[13.5, 6.5], [27.5, 6.5], [27.5, 20.5], [13.5, 20.5], [13.5, 6.5]])
    torch.testing.assert_close(box, expected)
    projective = torch.cat([theta, torch.tensor([[[0.0, 0.0, 1.0]]])], 1)
    torch.testing.assert_close(transform_box(projective, (28, 28))[0], expected)


def test_the_box_is_where_the_transformer_samples():
    # A bright pixel inside the box appears in the output; one outside does not.
    theta = torch.tensor([[[0.25, 0.0, -0.5], [0.0, 0.25, 0.5]]])
    box = transform_box(theta, (40, 40))[0]
    x0, y0 = box[0].tolist()
    x1, y1 = box[2].tolist()
    inside, outside = torch.zeros(1, 1, 40, 40), torch.zeros(1, 1, 40, 40)
    inside[0, 0, round((y0 + y1) / 2), round((x0 + x1) / 2)] = 1.0
    outside[0, 0, round(y1) + 3, round(x1) + 3] = 1.0
    grid = F.affine_grid(theta, [1, 1, 20, 20], align_corners=False)
    assert F.grid_sample(inside, grid, align_corners=False).sum() > 0.5
    assert F.grid_sample(outside, grid, align_corners=False).sum() == 0


def test_a_few_steps_of_training_reduce_the_loss():
    g = torch.Generator().manual_seed(0)
    x = torch.zeros(64, 1, 28, 28)
    y = torch.randint(0, 2, (64,), generator=g)
    x[y == 0, :, 4:12, 4:12] = 1.0  # class 0: a square top-left, class 1: bottom-right
    x[y == 1, :, 16:24, 16:24] = 1.0
    model = STCNN(1, 28, 2, width=4, hidden=16)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(15):
        loss = F.cross_entropy(model(x).logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(map(lambda v: v == v, losses)) and losses[-1] < 0.5 * losses[0]


def test_a_spec_and_single_options_build_the_same_model():
    spec = STCNNSpec(transform="attention", out_size=20, width=4, hidden=8)
    torch.manual_seed(0)
    a = STCNN(1, 28, 10, spec)
    torch.manual_seed(0)
    b = STCNN(1, 28, 10, transform="attention", out_size=20, width=4, hidden=8)
    torch.manual_seed(0)
    c = STCNN(1, 28, 10, STCNNSpec(transform="attention"), out_size=20, width=4, hidden=8)  # options replace fields
    assert a.spec == b.spec == c.spec
    for other in (b, c):
        for (name, p), q in zip(a.state_dict().items(), other.state_dict().values(), strict=True):
            assert torch.equal(p, q), name
    with pytest.raises(ValueError, match="did you mean 'hidden'"):
        CNN(1, 28, 10, hiden=8)


def test_stn_spec_names_the_classifier_and_carries_its_options():
    plain = stn_classifier(1, 28, 10, STNSpec(name="cnn", width=4, transform="projective"))
    assert type(plain) is CNN and plain.features[0].out_channels == 4  # the CNN reads only its own fields
    st = stn_classifier(1, 42, 10, STNSpec(transform="attention", out_size=28, width=4))
    assert type(st) is STCNN and st.transformer.out_size == (28, 28) and st.cnn.features[0].out_channels == 4
    assert isinstance(STNSpec(), STCNNSpec) and isinstance(STNSpec(), CNNSpec)
    with pytest.raises(ValueError, match="name"):
        stn_classifier(1, 28, 10, STNSpec(name="mlp"))  # type: ignore[arg-type]
