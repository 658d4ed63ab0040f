"""Every fenced ``python`` block of every page in docs/ and of README.md runs as written.

A page's blocks run in order in one namespace, so a later block may use what an earlier one made.
Each page runs in a fresh interpreter (matplotlib on Agg, a temporary working directory, seed 0,
one thread), so nothing a page does, such as registering a name or writing a file, reaches another
test. Tracebacks name the page and its line. A block that is not meant to run says so with
``<!-- no-test -->`` alone on the line before its fence.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
NO_TEST = "<!-- no-test -->"
FENCE = re.compile(r"^([ \t]*)```python[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)
RUNNER = (
    f"TESTS = {str(Path(__file__).resolve().parent)!r}\n"
    + """
import json, sys
import torch
torch.manual_seed(0)
torch.set_num_threads(1)
namespace = {"__name__": "__main__"}
blocks = json.load(sys.stdin)
if any("import timm" in source for _, _, source in blocks):
    sys.path.insert(0, TESTS)
    import _timm  # timm beside a torchvision that cannot import: see tests/_timm.py

    _timm.import_timm()
for path, line, source in blocks:
    exec(compile("\\n" * (line - 1) + source, path, "exec"), namespace)
"""
)


class Block(NamedTuple):
    line: int
    """The page's line number of the block's first line of code."""
    source: str
    runs: bool
    """False when ``<!-- no-test -->`` stands on the line before the fence."""


def python_blocks(text: str) -> list[Block]:
    """The fenced ``python`` blocks of a Markdown page, in order (indented fences, as in lists, too)."""
    blocks = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rpartition("\n")[2].strip()
        line = text.count("\n", 0, match.start(2)) + 1
        blocks.append(Block(line, textwrap.dedent(match.group(2)), before != NO_TEST))
    return blocks


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


RUNNABLE = [page for page in PAGES if any(block.runs for block in python_blocks(page.read_text()))]
# Pages whose examples train and evaluate for over a minute on a busy 2-core machine: `make test-slow` runs them.
LONG_PAGES = {"docs/ntm.md"}


@pytest.mark.parametrize(
    "page",
    [pytest.param(p, marks=pytest.mark.slow) if _page_id(p) in LONG_PAGES else p for p in RUNNABLE],
    ids=_page_id,
)
def test_page_examples_run(page: Path, tmp_path: Path) -> None:
    blocks = [(str(page), block.line, block.source) for block in python_blocks(page.read_text()) if block.runs]
    result = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(blocks),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "MPLBACKEND": "Agg"},
        timeout=600,
    )
    if result.returncode != 0:
        pytest.fail(f"{_page_id(page)}: an example failed\n{result.stderr}", pytrace=False)


def test_every_python_fence_is_found() -> None:
    for page in PAGES:
        text = page.read_text()
        fences = len(re.findall(r"^[ \t]*```python[ \t]*$", text, flags=re.MULTILINE))
        assert len(python_blocks(text)) == fences, f"{_page_id(page)}: a python fence the test would not run"


def test_blocks_keep_their_lines_and_the_marker_skips_one() -> None:
    page = (
        "text\n\n```python\nx = 1\n```\n\n"
        "<!-- no-test -->\n```python\nraise SystemExit\n```\n\n"
        "- item\n\n  ```python\n  y = x\n  ```\n"
    )
    blocks = python_blocks(page)
    assert [(b.line, b.source, b.runs) for b in blocks] == [
        (4, "x = 1\n", True),
        (9, "raise SystemExit\n", False),
        (15, "y = x\n", True),
    ]


def _api_reference_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("api_reference", ROOT / "scripts" / "api_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_api_reference_gives_a_docstring_s_whole_first_paragraph() -> None:
    script = _api_reference_script()

    def documented() -> None:
        """Draw the run's figures into ``RUN/figures/``,
        then write its page (:func:`foveal.runs.show_run`).

        Args:
            nothing: not part of the summary.
        """

    summary = "Draw the run's figures into ``RUN/figures/``, then write its page (`foveal.runs.show_run`)."
    assert script.summary(documented) == summary
    assert script.paragraph("One.\nTwo, :func:`f` and :class:`~a.B`.\n\nThree.") == "One. Two, `f` and `a.B`."


def test_the_api_reference_is_current(tmp_path, monkeypatch, capsys) -> None:
    import foveal

    monkeypatch.undo()  # the suite's one-thread patch would show in foveal.train.task
    script = _api_reference_script()
    text = script.reference()
    assert (ROOT / "docs" / "api.md").read_text() == text, "docs/api.md is stale: run python scripts/api_reference.py"
    for name in foveal.__all__:  # every public name, with its signature and its docstring's first paragraph
        obj = getattr(foveal, name)
        if callable(obj):
            line = next(line for line in text.splitlines() if line.startswith(f"- `{name}("))
            assert script.summary(obj) in line
    stale = tmp_path / "api.md"
    stale.write_text(text.replace("## foveal.attention\n", "## foveal.attention (old)\n"))
    monkeypatch.setattr(script, "API", stale)
    monkeypatch.setattr(script, "ROOT", tmp_path)
    assert script.main(["--check"]) == 1 and "api.md is stale" in capsys.readouterr().err


REPOSITORY = "https://github.com/foveal/foveal"


def test_readme_links_work_off_github() -> None:
    """A package index shows the README without the repository: every link is absolute, and every link
    into the repository names a file that is there."""
    links = re.findall(r"\]\(([^)\s]+)\)", (ROOT / "README.md").read_text())
    relative = [link for link in links if not link.startswith(("https://", "http://", "#"))]
    assert not relative, f"relative links in README.md: {relative}"
    ours = [link for link in links if link.startswith(REPOSITORY)]
    assert ours and all(link.startswith(f"{REPOSITORY}/blob/main/") for link in ours)
    files = [link.removeprefix(f"{REPOSITORY}/blob/main/").partition("#")[0] for link in ours]
    missing = [link for link, file in zip(ours, files, strict=True) if not (ROOT / file).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_project_metadata_names_its_licence_and_urls() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert all(url.startswith(REPOSITORY) for url in project["urls"].values())
    missing = [
        url
        for url in project["urls"].values()
        if "/blob/main/" in url and not (ROOT / url.split("/blob/main/")[1]).exists()
    ]
    assert not missing
    citation = (ROOT / "CITATION.cff").read_text()
    assert "cff-version: 1.2.0" in citation and f"version: {project['version']}" in citation
