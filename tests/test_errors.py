"""One error family: every error a user can cause is a :class:`foveal.errors.FovealError` kind, in every layer."""

import ast
import builtins
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "foveal"
# Raised for Python's own protocols, not for a user's mistake: iteration's end, an abstract method, a module's
# __getattr__ for a name it has not.
PROTOCOL = {"AttributeError", "IndexError", "StopIteration", "NotImplementedError"}
BUILTIN = {name for name in dir(builtins) if name.endswith("Error")}


def builtin_raises(path: Path, root: Path = SRC.parent) -> list[str]:
    """Every ``raise`` of a builtin error class in ``path``, as ``file:line: raise Name``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Raise) and node.exc is not None:
            call = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(call, ast.Name) and call.id in BUILTIN - PROTOCOL:
                found.append(f"{path.relative_to(root)}:{node.lineno}: raise {call.id}")
    return found


def test_no_layer_raises_a_bare_builtin_error():
    found = [line for path in sorted(SRC.rglob("*.py")) for line in builtin_raises(path)]
    assert not found, "raise a FovealError kind instead:\n" + "\n".join(found)


def test_the_check_finds_a_bare_error(tmp_path):
    path = tmp_path / "foveal" / "bad.py"
    path.parent.mkdir()
    path.write_text("def f(x):\n    if x < 0:\n        raise ValueError('negative')\n    raise StopIteration\n")
    assert builtin_raises(path, tmp_path) == ["foveal/bad.py:3: raise ValueError"]
