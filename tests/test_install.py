"""The core installs lean: the mechanisms and models import and run with torch and einops alone."""

import subprocess
import sys

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
