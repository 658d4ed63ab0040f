"""The core installs lean: the mechanisms and models import and run with torch and einops alone, and the
shipped models load with safetensors added (the wheel, installed without extras in a fresh environment)."""

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


def test_the_command_line_names_a_missing_extra(tmp_path):
    script = "import sys; sys.modules['numpy'] = None; from foveal.cli import main; sys.exit(main(['list']))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "foveal[recipes]" in result.stderr


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
    # the torch this test runs under (pip finds it in its configured index or wheel directory), then foveal's core
    run(python, "-m", "pip", "install", "--quiet", f"torch=={torch.__version__}", "einops", "safetensors")
    run(python, "-m", "pip", "install", "--quiet", "--no-deps", wheel)
    installed = run(python, "-m", "pip", "list", "--format=freeze").lower()
    assert "numpy" not in installed and "matplotlib" not in installed and "foveal==" in installed
    for block in readme_python_blocks():
        if re.search(r"^import timm$", block, re.M):
            continue  # it swaps into a timm model: the user's timm, not foveal's core (tests/attention/test_dropin.py)
        run(python, "-c", block)
    shipped = available()
    script = "import sys, foveal\nfor name in sys.argv[1:]:\n    print(name, type(foveal.pretrained(name)).__name__)"
    assert len(run(python, "-c", script, *shipped).splitlines()) == len(shipped)
