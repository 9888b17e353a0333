"""No function of the product is longer than a screen: a long one becomes named phases.

Counted from the source (``def`` line to last line, docstring and comments included) in
the product's packages; scripts and tests are not held to it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bench", "reports", "workloads")
MAX_LINES = 80


def long_functions(root: Path, packages: tuple[str, ...] = PACKAGES,
                   limit: int = MAX_LINES) -> list[str]:
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > limit:
                        found.append(f"{path.relative_to(root)}:{node.lineno} "
                                     f"{node.name}: {lines} lines")
    return found


def test_no_function_over_the_limit() -> None:
    assert long_functions(ROOT) == []


def test_the_count_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n")
    assert long_functions(tmp_path, ("pkg",)) == [f"pkg/m.py:5 long: {MAX_LINES + 1} lines"]
