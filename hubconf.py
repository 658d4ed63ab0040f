"""``torch.hub`` entry points: ``torch.hub.load(CHECKOUT, "easy-vqa", source="local")`` loads a shipped model.

Each model foveal ships (``foveal.zoo.available()``) is an entry, under its name and, for
a Python name, with ``_`` for ``-`` (``easy_vqa``). It returns ``foveal.pretrained(NAME)``.
"""

import sys
from pathlib import Path

dependencies = ["torch", "einops", "safetensors"]

# A checkout's own sources come first, whatever foveal is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

from foveal import pretrained  # noqa: E402
from foveal.zoo import available  # noqa: E402


def _entry(name: str):
    def load(**kwargs):
        if kwargs:
            raise TypeError(f"{name} takes no options, got {', '.join(kwargs)}")
        return pretrained(name)

    load.__name__ = name.replace("-", "_")
    load.__doc__ = f"foveal's shipped model {name!r} (foveal.pretrained), in eval mode, with its labels."
    return load


for _name in available():
    globals()[_name] = globals()[_name.replace("-", "_")] = _entry(_name)
