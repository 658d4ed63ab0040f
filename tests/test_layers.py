"""The layers point down only: a module may import foveal packages at or below its own layer.

The table is docs/architecture.md's picture in code; a new top-level module or package must be
placed in it, or this test fails.
"""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "foveal"

FLOOR = {"_checks", "_torch_private", "compiling", "errors", "preprocess", "registry", "specs"}
MECHANISMS = {"attention", "glimpse", "memory"}
# What each top-level part of foveal may import (besides itself).
ALLOWED = {
    **{name: FLOOR for name in FLOOR},
    **{name: FLOOR | MECHANISMS for name in MECHANISMS},
    "train": FLOOR,
    "data": FLOOR,
    "models": FLOOR | MECHANISMS,
    "viz": FLOOR | MECHANISMS | {"train", "data", "models"},
    # A saved model (foveal.pretrained's format): builds a registered model; no recipe, data or loop.
    "artifact": FLOOR | MECHANISMS | {"models"},
    # The shipped models' cards and loading them: saved models, so no recipe, data or loop either.
    "shipped": FLOOR | MECHANISMS | {"models", "artifact"},
    "recipes": FLOOR | MECHANISMS | {"train", "data", "models", "viz", "artifact", "shipped"},
    "runs": FLOOR | MECHANISMS | {"train", "data", "models", "viz", "artifact", "shipped", "recipes", "__init__"},
    "zoo": FLOOR | MECHANISMS | {"train", "data", "models", "viz", "artifact", "shipped", "recipes", "runs"},
    "demo": FLOOR | MECHANISMS | {"train", "data", "models", "viz", "artifact", "shipped", "recipes", "runs", "zoo"},
    "sweep": FLOOR | MECHANISMS | {"train", "data", "models", "viz", "artifact", "shipped", "recipes", "runs"},
    "cli": FLOOR
    | MECHANISMS
    | {"train", "data", "models", "viz", "artifact", "shipped", "recipes", "runs", "zoo", "demo", "sweep", "__init__"},
    # The package's face: the mechanisms, the saved-model format and the shipped models, each below it.
    "__init__": FLOOR | MECHANISMS | {"artifact", "shipped"},
    "__main__": {"cli"},
}


FILES = sorted(SRC.rglob("*.py"))
PARTS = {p.relative_to(SRC).parts[0].removesuffix(".py") for p in FILES}


def part_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def module_named(node: ast.AST) -> str:
    """The module an ``import_module("NAME")`` call imports, when its name is written out ("" for any other node)."""
    if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
        return ""
    function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    name = node.args[0].value
    return name if function == "import_module" and isinstance(name, str) else ""


def foveal_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, top-level part)`` of every ``foveal`` import in a file, docstrings excluded; an
    ``importlib.import_module("foveal.PART...")`` of a written-out name counts as an import."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        named = module_named(node).split(".")
        if named[0] == "foveal":
            found.append((node.lineno, named[1] if len(named) > 1 else "__init__"))
        elif isinstance(node, ast.ImportFrom):
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
        'importlib.import_module("foveal.zoo")\nimport_module(f"foveal.{name}")\n'
    )
    assert sorted(foveal_imports(bad)) == [(2, "recipes"), (3, "zoo")]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_is_over_500_lines(path):
    # A module past this has become several: split it by what its parts do.
    assert len(path.read_text().splitlines()) <= 500, f"{path.relative_to(SRC)} is over 500 lines"


RECIPE_DIR = SRC / "recipes"


def registers_a_recipe(path: Path) -> bool:
    """Whether a module registers a recipe (calls ``RECIPES.add``): what makes it a recipe module."""
    return any(
        isinstance(node, ast.Attribute)
        and node.attr in ("add", "register")
        and isinstance(node.value, ast.Name)
        and node.value.id == "RECIPES"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
    )


RECIPE_FILES = [p for p in sorted(RECIPE_DIR.glob("*.py")) if registers_a_recipe(p)]
RECIPE_NAMES = {p.stem for p in RECIPE_FILES}


def recipes_imported(path: Path) -> set[str]:
    """The recipe modules (of :data:`RECIPE_NAMES`) that a file imports, docstrings excluded."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[:2] == ["foveal", "recipes"]:
                found |= {parts[2]} if len(parts) > 2 else {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[2] for alias in node.names if alias.name.startswith("foveal.recipes.")}
    return found & RECIPE_NAMES


def test_the_recipes_are_found():
    assert {"toy", "stn", "ram", "draw", "ntm", "easy_vqa", "shapes_vqa"} <= RECIPE_NAMES
    assert not {"base", "config", "__init__"} & RECIPE_NAMES


@pytest.mark.parametrize("path", sorted(RECIPE_DIR.glob("*.py")), ids=lambda p: p.name)
def test_no_recipe_imports_another(path):
    # What two recipes share lives in one module below them (recipes/_NAME.py, data/, models/, viz/),
    # so that a recipe reads as its config, presets, build, loss and evaluation alone.
    imported = recipes_imported(path) - {path.stem}
    assert not imported, f"recipes/{path.name} imports the recipe modules {sorted(imported)}"


@pytest.mark.parametrize("path", RECIPE_FILES, ids=lambda p: p.name)
def test_a_recipe_is_at_most_250_lines(path):
    # A recipe wires a config, presets, a build, a loss and an evaluation; data sets go to data/ and figures to viz/.
    assert len(path.read_text().splitlines()) <= 250, f"recipes/{path.name} is over 250 lines"


def test_the_recipe_checks_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""from foveal.recipes.stn import x (a docstring)."""\n'
        "from foveal.recipes.stn import ImageData\nfrom foveal.recipes import ram, base\nimport foveal.recipes.ntm\n"
        "from foveal.recipes._classify import error_rate\n"
        "RECIPES.add(None)\n"
    )
    assert recipes_imported(bad) == {"stn", "ram", "ntm"} and registers_a_recipe(bad)
    assert not registers_a_recipe(RECIPE_DIR / "_classify.py")
