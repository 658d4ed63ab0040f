"""The core installs lean: the mechanisms and models import and run with torch and einops alone, the
shipped models load with safetensors added, and with numpy the command line lists, configures and trains
(the wheel, installed without extras in a fresh environment)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXTRAS = ["numpy", "matplotlib", "PIL", "tqdm", "easy_vqa", "safetensors", "tensorboard", "mlxtend"]

SCRIPT = f"""
import sys
for name in {EXTRAS!r}:
    sys.modules[name] = None  # importing any of them now raises ImportError
import torch
import foveal
from foveal import attend, gaussian_glimpse, SpatialTransformer
from foveal.memory import address
from foveal.models.ntm import NTM
from foveal.models.vqa import VQA
from foveal.models.draw import DRAW
q = torch.randn(2, 3, 8)
out, weights = attend(q, q, q)
print(NTM(4, 3, controller_size=8, n_rows=6, n_cols=5)(torch.zeros(2, 7, 4)).logits.shape)
"""


def test_mechanisms_and_models_need_no_extras():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "torch.Size([2, 7, 3])" in result.stdout


# The recipes extra (numpy is a core dependency): blocked, the command line lists and configures, and a
# command that draws names the extra it needs.
RECIPES_EXTRA = ["matplotlib", "PIL", "tqdm", "easy_vqa"]

COMMANDS_WITHOUT_EXTRAS = f"""
import sys
for name in {RECIPES_EXTRA!r}:
    sys.modules[name] = None
from foveal.cli import main
for command in (["list"], ["config", "stn"], ["show", "stn", "--out", "figures"]):
    print("exit", main(command), file=sys.stderr)
"""


def test_the_command_line_lists_and_configures_without_extras_and_names_the_one_a_command_needs(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", COMMANDS_WITHOUT_EXTRAS], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    exits = [line for line in result.stderr.splitlines() if line.startswith("exit")]
    assert exits == ["exit 0", "exit 0", "exit 2"], result.stderr
    assert "shipped models" in result.stdout and "loop.lr" in result.stdout
    drawn = "the package 'matplotlib' is not installed; install foveal's extras: pip install 'foveal[recipes]'"
    assert f"foveal: error: {drawn}" in result.stderr.splitlines()


def test_a_missing_package_is_named_with_the_extra_that_brings_it():
    from foveal.cli import _one_line

    assert _one_line(ModuleNotFoundError("no PIL", name="PIL.Image")).startswith("the package 'pillow' is not")
    assert _one_line(ModuleNotFoundError("no mlxtend", name="mlxtend")).endswith("pip install 'foveal[mnist]'")
    assert (
        _one_line(ModuleNotFoundError("no timm", name="timm"))
        == "the package 'timm' is not installed: pip install timm"
    )


def test_the_submodules_the_docs_call_resolve_after_import_foveal_and_load_lazily():
    script = (
        "import sys, foveal\n"
        "lazy = [m for m in ('foveal.zoo', 'foveal.runs', 'foveal.recipes') if m in sys.modules]\n"
        "print(lazy, foveal.zoo.available()[0], foveal.runs.export_run.__name__)\n"
        "print(hasattr(foveal, 'no_such_module'))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[] draw export_run", "False"]


ROOT = Path(__file__).resolve().parents[1]


def readme_python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)


def test_the_readme_has_python_examples_to_install_against():
    blocks = readme_python_blocks()
    assert len(blocks) >= 3 and any("pretrained" in block for block in blocks)


@pytest.mark.slow
def test_the_wheel_without_extras_runs_the_readme_and_loads_every_shipped_model(tmp_path):
    import torch

    from foveal.zoo import available

    def run(*command: object, cwd: Path = tmp_path) -> str:
        result = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=cwd, timeout=900)
        assert result.returncode == 0, f"{command}: {result.stdout[-2000:]}{result.stderr[-4000:]}"
        return result.stdout

    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", tmp_path / "dist", ROOT)
    (wheel,) = (tmp_path / "dist").glob("foveal-*.whl")
    run(sys.executable, "-m", "venv", tmp_path / "venv")
    python = tmp_path / "venv" / "bin" / "python"
    # the torch this test runs under (pip finds it in its configured index or wheel directory), then the wheel
    # with the dependencies it declares: no extra
    run(python, "-m", "pip", "install", "--quiet", f"torch=={torch.__version__}")
    run(python, "-m", "pip", "install", "--quiet", wheel)
    installed = run(python, "-m", "pip", "list", "--format=freeze").lower()
    assert "foveal==" in installed and "numpy==" in installed
    assert not [extra for extra in ("matplotlib", "pillow", "tqdm", "easy-vqa") if f"{extra}==" in installed]
    foveal = tmp_path / "venv" / "bin" / "foveal"
    assert "shipped models" in run(foveal, "list") and "loop.lr" in run(foveal, "config", "stn")
    assert '"metrics"' in run(foveal, "train", "toy", "--preset", "quick", "--set", "loop.steps=2", "--out", "toy")
    drawing = subprocess.run([foveal, "show", "stn"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert drawing.returncode == 2 and drawing.stderr.strip().endswith("pip install 'foveal[recipes]'")
    # no warning (torch's about a missing numpy) and no error
    quiet = subprocess.run(
        [python, "-c", "import foveal; foveal.zoo.available(); foveal.pretrained('stn')"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    for block in readme_python_blocks():
        if re.search(r"^import timm$", block, re.M):
            continue  # it swaps into a timm model: the user's timm, not foveal's core (tests/attention/test_dropin.py)
        run(python, "-c", block)
    shipped = available()
    script = "import sys, foveal\nfor name in sys.argv[1:]:\n    print(name, type(foveal.pretrained(name)).__name__)"
    assert len(run(python, "-c", script, *shipped).splitlines()) == len(shipped)
