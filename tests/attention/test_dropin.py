"""foveal's attention swapped into timm's ViTs and torch's transformer layers: same outputs, same gradients,
maps recorded; what cannot be taken is refused with its reason.

timm is imported through tests/_timm.py, which stands in for torchvision where the real one does not import.
"""

from __future__ import annotations

import copy
import io

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import _timm
from foveal import Attention, MultiheadAttention, TimmAttention, attention_rollout, record_maps, swap_attention
from foveal.attention import register_map_module
from foveal.attention.core import AttentionOutput
from foveal.errors import FovealError

# Small versions of the timm ViTs a user swaps first: plain (vit_tiny's layout), no qkv bias with
# LayerScale, register tokens, and DeiT's distillation token.
VITS = {
    "vit": {"model_name": "vit_tiny_patch16_224"},
    "no-qkv-bias-layerscale": {"model_name": "vit_tiny_patch16_224", "qkv_bias": False, "init_values": 1e-2},
    "registers": {"model_name": "vit_tiny_patch16_224", "reg_tokens": 2, "no_embed_class": True},
    "deit-distilled": {"model_name": "deit_tiny_distilled_patch16_224"},
}


def import_timm():
    try:
        return _timm.import_timm()
    except ModuleNotFoundError as error:
        pytest.skip(str(error))


def small_vit(kind: str) -> nn.Module:
    timm = import_timm()
    options = dict(VITS[kind])
    torch.manual_seed(0)
    return timm.create_model(
        options.pop("model_name"), pretrained=False, img_size=32, patch_size=8, depth=3, num_classes=5, **options
    )


def grads(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("kind", list(VITS))
def test_swapped_timm_vit_gives_timms_outputs_and_gradients(kind):
    theirs = small_vit(kind).train()
    ours = copy.deepcopy(theirs)
    assert swap_attention(ours) == [f"blocks.{i}.attn" for i in range(3)]
    assert all(isinstance(block.attn, TimmAttention) for block in ours.blocks)
    assert set(ours.state_dict()) == set(theirs.state_dict())  # a timm checkpoint still loads
    x = torch.randn(2, 3, 32, 32)
    torch.manual_seed(1)
    expected = theirs(x)
    torch.manual_seed(1)
    out = ours(x)
    assert_close(out, expected)
    expected.square().sum().backward()
    out.square().sum().backward()
    assert_close(grads(ours), grads(theirs))


def test_one_assignment_swaps_a_timm_block_and_maps_equal_a_softmax_of_timms_weights():
    vit = small_vit("vit").eval()
    x = torch.randn(2, 3, 32, 32)
    expected = vit(x)
    block = vit.blocks[1]
    timm_layer = block.attn
    block.attn = Attention.from_timm(timm_layer)
    with record_maps(vit) as maps:
        assert_close(vit(x), expected)
    # the map by hand, from timm's own weights and the block's input
    tokens = vit.blocks[0](vit._pos_embed(vit.patch_embed(x)))
    y = block.norm1(tokens)
    B, N, _ = y.shape
    q, k, _ = timm_layer.qkv(y).reshape(B, N, 3, timm_layer.num_heads, -1).permute(2, 0, 3, 1, 4)
    assert_close(maps["blocks.1.attn"], (q * timm_layer.scale @ k.transpose(-2, -1)).softmax(-1))


def test_swapped_vit_records_every_blocks_map_for_the_rollout_and_exports():
    vit = small_vit("registers").eval()
    swap_attention(vit)
    x = torch.randn(2, 3, 32, 32)
    expected = vit(x)
    with record_maps(vit) as maps:
        assert_close(vit(x), expected)
    assert sorted(maps) == [f"blocks.{i}.attn" for i in range(3)]
    rollout = attention_rollout([maps[f"blocks.{i}.attn"] for i in range(3)])
    tokens = 1 + 2 + 16  # class, registers, 4 x 4 patches
    assert rollout.shape == (2, tokens, tokens)
    assert_close(rollout.sum(-1), torch.ones(2, tokens))
    program = torch.export.export(vit, (x,))
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    assert_close(torch.export.load(buffer).module()(x), expected)


def test_timm_masks_follow_timms_convention():
    torch.manual_seed(0)
    layer = TimmAttention(16, heads=4, qkv_bias=True)
    x = torch.randn(2, 5, 16)
    allowed = torch.rand(2, 4, 5, 5) > 0.3
    allowed[..., 0] = True  # every query keeps a key: torch's kernels give NaN otherwise
    q, k, v = layer.qkv(x).reshape(2, 5, 3, 4, 4).permute(2, 0, 3, 1, 4)

    def reference(mask: torch.Tensor | None = None, is_causal: bool = False) -> torch.Tensor:
        out = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
        return layer.proj(out.transpose(1, 2).reshape(2, 5, 16))

    bias = torch.randn(2, 4, 5, 5)
    assert_close(layer(x, attn_mask=allowed), reference(allowed))
    assert_close(layer(x, attn_mask=bias), reference(bias))
    assert_close(layer(x, is_causal=True), reference(is_causal=True))


def _encoder(batch_first: bool) -> nn.Module:
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=batch_first)


def _decoder(batch_first: bool) -> nn.Module:
    torch.manual_seed(0)
    return nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=batch_first)


PADDING = torch.tensor([[False] * 6, [False] * 4 + [True] * 2, [False] * 5 + [True]])
CAUSAL = nn.Transformer.generate_square_subsequent_mask(6)
ENCODER_MASKS = {
    "none": {},
    "padding": {"src_key_padding_mask": PADDING},
    "causal": {"src_mask": CAUSAL, "is_causal": True},
    "bool mask and padding": {"src_mask": CAUSAL.isinf(), "src_key_padding_mask": PADDING},
}


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("masks", list(ENCODER_MASKS))
def test_torch_encoder_layer_takes_the_swap_with_the_same_outputs_and_gradients(batch_first, train, masks):
    theirs = _encoder(batch_first).train(train)
    ours = copy.deepcopy(theirs)
    ours.self_attn = Attention.from_multihead(ours.self_attn)
    x = torch.randn(3, 6, 16) if batch_first else torch.randn(6, 3, 16)
    expected, out = theirs(x, **ENCODER_MASKS[masks]), ours(x, **ENCODER_MASKS[masks])
    assert_close(out, expected)
    expected.square().sum().backward()
    out.square().sum().backward()
    ours_grads = grads(ours)
    renamed = {"self_attn.in_proj_weight": "self_attn.qkv.weight", "self_attn.in_proj_bias": "self_attn.qkv.bias"}
    renamed |= {"self_attn.out_proj.weight": "self_attn.proj.weight", "self_attn.out_proj.bias": "self_attn.proj.bias"}
    for name, grad in grads(theirs).items():
        assert_close(ours_grads[renamed.get(name, name)], grad, msg=name)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("train", [True, False])
def test_torch_decoder_layer_takes_the_swap_in_self_and_cross_attention(batch_first, train):
    theirs = _decoder(batch_first).train(train)
    ours = copy.deepcopy(theirs)
    assert swap_attention(ours) == ["self_attn", "multihead_attn"]
    tgt, memory = torch.randn(3, 6, 16), torch.randn(3, 4, 16)
    if not batch_first:
        tgt, memory = tgt.transpose(0, 1), memory.transpose(0, 1)
    masks = {"tgt_mask": CAUSAL, "tgt_key_padding_mask": PADDING, "memory_key_padding_mask": PADDING[:, :4]}
    expected, out = theirs(tgt, memory, **masks), ours(tgt, memory, **masks)
    assert_close(out, expected)
    expected.sum().backward()
    out.sum().backward()
    assert_close(ours.linear1.weight.grad, theirs.linear1.weight.grad)
    assert_close(ours.multihead_attn.qkv.weight.grad, theirs.multihead_attn.in_proj_weight.grad)


def test_torch_encoder_in_evaluation_records_maps_through_its_nested_padding():
    torch.manual_seed(0)
    encoder = nn.TransformerEncoder(_encoder(True), 2).eval()
    x = torch.randn(3, 6, 16)
    with torch.no_grad():
        expected = encoder(x, src_key_padding_mask=PADDING)
        swap_attention(encoder)
        with record_maps(encoder) as maps:
            out = encoder(x, src_key_padding_mask=PADDING)
    assert_close(out, expected)
    assert sorted(maps) == ["layers.0.self_attn", "layers.1.self_attn"]
    weights = maps["layers.0.self_attn"]
    assert weights.shape == (3, 4, 6, 6)
    assert (weights[1, ..., 4:] == 0).all()  # padding is never attended


def test_multihead_form_returns_torchs_weights_and_unbatched_inputs():
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(16, 4, kdim=8, vdim=12)
    ours = Attention.from_multihead(theirs)
    q, k, v = torch.randn(5, 2, 16), torch.randn(7, 2, 8), torch.randn(7, 2, 12)
    for average in (True, False):
        assert_close(ours(q, k, v, average_attn_weights=average), theirs(q, k, v, average_attn_weights=average))
    assert_close(ours(q[:, 0], k[:, 0], v[:, 0]), theirs(q[:, 0], k[:, 0], v[:, 0]))
    assert ours(q, k, v, need_weights=False)[1] is None
    assert (ours.embed_dim, ours.num_heads, ours.kdim, ours.vdim, ours.batch_first) == (16, 4, 8, 12, False)


def test_a_fresh_multihead_form_starts_as_torchs():
    layer = MultiheadAttention(32, 4, bias=True)
    assert (layer.in_proj_bias == 0).all() and (layer.out_proj.bias == 0).all()
    bound = (6 / (32 + 3 * 32)) ** 0.5  # Xavier-uniform over the (3E, E) in-projection, as torch's
    assert layer.in_proj_weight.abs().max() <= bound


def test_swap_refuses_what_it_cannot_take_and_changes_nothing():
    timm = import_timm()
    torch.manual_seed(0)
    vit = timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, depth=2, qk_norm=True, num_classes=5
    )
    model = nn.Sequential(vit, nn.TransformerEncoderLayer(5, 1, 8, batch_first=True))
    with pytest.raises(FovealError, match=r"(?s)0\.blocks\.0\.attn: .*qk_norm.*0\.blocks\.1\.attn"):
        swap_attention(model)
    assert not any(isinstance(m, Attention) for m in model.modules())
    assert swap_attention(model, strict=False) == ["1.self_attn"]
    with pytest.raises(FovealError, match="qk_norm"):
        Attention.from_timm(vit.blocks[0].attn)
    with pytest.raises(FovealError, match="add_bias_kv"):
        swap_attention(nn.Sequential(nn.MultiheadAttention(8, 2, add_bias_kv=True)))
    with pytest.raises(FovealError, match="a layer on its own"):
        swap_attention(nn.MultiheadAttention(8, 2))
    with pytest.raises(FovealError, match="heads"):
        Attention.from_timm(TimmAttention(8, 2).state_dict())


def test_record_maps_records_subclasses_and_registered_modules_by_type():
    class Mine(Attention):
        pass

    @register_map_module
    class Uniform(nn.Module):
        def forward(self, x: torch.Tensor) -> AttentionOutput:
            weights = torch.full((x.shape[0], x.shape[1], x.shape[1]), 1 / x.shape[1])
            return AttentionOutput(weights @ x, weights)

    model = nn.Sequential(Mine(8, heads=2), nn.Identity())
    x = torch.randn(1, 4, 8)
    with record_maps(model) as maps:
        out, _ = model[0](x)
    assert maps["0"].shape == (1, 2, 4, 4)  # the subclass was asked for its maps
    assert_close(out, model[0](x).output)
    other = nn.Sequential(Uniform())
    with record_maps(other) as maps:
        other(x)
    assert_close(maps["0"], torch.full((1, 4, 4), 0.25))
    with pytest.raises(FovealError, match=r"nn\.Module class"):
        register_map_module(len)  # type: ignore[arg-type]


@pytest.mark.slow
def test_swapped_timm_vit_compiles_to_timms_outputs_and_gradients():
    theirs = small_vit("no-qkv-bias-layerscale").train()
    ours = copy.deepcopy(theirs)
    swap_attention(ours)
    compiled = torch.compile(ours)
    x = torch.randn(2, 3, 32, 32)
    expected, out = theirs(x), compiled(x)
    assert_close(out, expected, rtol=1e-4, atol=1e-5)
    expected.sum().backward()
    out.sum().backward()
    assert_close(grads(ours), grads(theirs), rtol=1e-4, atol=1e-5)
