"""The layers point down only: a module may import foveal packages at or below its own layer.

The table is docs/architecture.md's picture in code; a new top-level module or package must be
placed in it, or this test fails.
"""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "foveal"

FLOOR = {"_checks", "_torch_private", "compiling", "errors", "registry", "specs"}
MECHANISMS = {"attention", "glimpse", "memory"}
# What each top-level part of foveal may import (besides itself).
ALLOWED = {
    **{name: FLOOR for name in FLOOR},
    **{name: FLOOR | MECHANISMS for name in MECHANISMS},
    "train": FLOOR,
    "data": FLOOR,
    "models": FLOOR | MECHANISMS,
    "viz": FLOOR | MECHANISMS | {"train", "data", "models"},
    "recipes": FLOOR | MECHANISMS | {"train", "data", "models", "viz"},
    "runs": FLOOR | MECHANISMS | {"train", "data", "models", "viz", "recipes", "__init__"},
    "zoo": FLOOR | MECHANISMS | {"train", "data", "models", "viz", "recipes", "runs"},
    "demo": FLOOR | MECHANISMS | {"train", "data", "models", "viz", "recipes", "runs", "zoo"},
    "sweep": FLOOR | MECHANISMS | {"train", "data", "models", "viz", "recipes", "runs"},
    "cli": FLOOR
    | MECHANISMS
    | {"train", "data", "models", "viz", "recipes", "runs", "zoo", "demo", "sweep", "__init__"},
    # The package's face: re-exports the mechanisms; foveal.pretrained reaches the zoo lazily.
    "__init__": FLOOR | MECHANISMS | {"zoo"},
    "__main__": {"cli"},
}


FILES = sorted(SRC.rglob("*.py"))
PARTS = {p.relative_to(SRC).parts[0].removesuffix(".py") for p in FILES}


def part_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def foveal_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, top-level part)`` of every ``foveal`` import in a file, docstrings excluded."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                found.append((node.lineno, "<relative>"))
            elif node.module and node.module.split(".")[0] == "foveal":
                parts = node.module.split(".")
                if len(parts) > 1:
                    found.append((node.lineno, parts[1]))
                else:  # from foveal import x: x is a part, or a name of the package's face
                    found += [(node.lineno, alias.name if alias.name in PARTS else "__init__") for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "foveal":
                    found.append((node.lineno, parts[1] if len(parts) > 1 else "__init__"))
    return found


def test_every_part_has_a_layer():
    parts = {part_of(p) for p in FILES}
    assert parts <= ALLOWED.keys(), f"place these in ALLOWED and docs/architecture.md: {parts - ALLOWED.keys()}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down(path):
    part = part_of(path)
    allowed = ALLOWED.get(part, set()) | {part}
    upward = [f"line {line}: foveal.{target}" for line, target in foveal_imports(path) if target not in allowed]
    assert not upward, f"{path.relative_to(SRC)} ({part}) imports up a layer: {', '.join(upward)}"


def test_the_check_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""from foveal.recipes import x (a docstring, not an import)."""\nfrom foveal.recipes import base\n'
    )
    assert foveal_imports(bad) == [(2, "recipes")]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_is_over_500_lines(path):
    # A module past this has become several: split it by what its parts do.
    assert len(path.read_text().splitlines()) <= 500, f"{path.relative_to(SRC)} is over 500 lines"
