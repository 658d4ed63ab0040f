"""Every python block in docs/vqa-family.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "vqa-family.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL) if DOC.exists() else []


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_doc_example_runs(index: int) -> None:
    exec(compile(BLOCKS[index], f"{DOC.name}[block {index}]", "exec"), {})


def test_the_page_has_an_example_per_mechanism() -> None:
    assert len(BLOCKS) >= 10
