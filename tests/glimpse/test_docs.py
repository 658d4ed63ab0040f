"""Every python block in docs/glimpses.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "glimpses.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL) if DOC.exists() else []


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_doc_example_runs(index):
    exec(compile(BLOCKS[index], f"{DOC.name}[block {index}]", "exec"), {})


def test_the_page_has_examples():
    assert len(BLOCKS) >= 3
