"""Rewrite every results table in the docs from its results file.

    python scripts/refresh_docs_tables.py

A table sits under a ``<!-- results: NAME metric=M -->`` marker (``M`` one metric or several,
comma-separated); this replaces the ``|`` lines under each marker, or inserts them if there are
none, with :func:`foveal.sweep.markdown_table` of ``results/NAME.jsonl``. ``tests/test_results.py``
checks that every table matches its file.
"""

from __future__ import annotations

from pathlib import Path

from foveal.sweep import parse_marker, read_results, results_table

ROOT = Path(__file__).resolve().parents[1]


def refresh(text: str) -> str:
    """``text`` with the table under each marker made again from its results file."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if (marker := parse_marker(line)) is None:
            continue
        name, metric = marker
        while i < len(lines) and lines[i].startswith("|"):  # the old table, if any
            i += 1
        out.extend(results_table(read_results(ROOT / "results" / f"{name}.jsonl"), metric).splitlines())
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def main() -> None:
    for page in [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]:
        text = page.read_text()
        new = refresh(text)
        if new != text:
            page.write_text(new)
            print(f"{page.relative_to(ROOT)}: tables rewritten")


if __name__ == "__main__":
    main()
