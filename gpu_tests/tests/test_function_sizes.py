"""The GPU suite's code (its tests aside) keeps functions short and classes small: a long one is split by
meaning (stages, named helpers, tables), so that each reads as one step."""

from __future__ import annotations

import ast
from pathlib import Path

SUITE = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 60  # def to end, docstring included, decorators not
MAX_CLASS_LINES = 300


def too_long(source: str) -> list[str]:
    """Every function over MAX_FUNCTION_LINES and class over MAX_CLASS_LINES in ``source``, with its size."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            limit = MAX_CLASS_LINES if isinstance(node, ast.ClassDef) else MAX_FUNCTION_LINES
            if lines > limit:
                found.append(f"{node.name} ({lines} lines)")
    return found


def test_no_function_or_class_of_the_suite_is_too_long() -> None:
    found = {
        str(path.relative_to(SUITE)): long
        for path in sorted(SUITE.rglob("*.py"))
        if "tests" not in path.relative_to(SUITE).parts
        and not path.name.startswith("test_")
        and path.name != "conftest.py"
        and (long := too_long(path.read_text()))
    }
    assert found == {}


def test_the_size_guard_counts_from_def_to_end_without_decorators() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    assert too_long(f"@decorated\ndef f():\n{body}") == []
    assert too_long(f"def f():\n{body}    x = 0\n") == [f"f ({MAX_FUNCTION_LINES + 1} lines)"]
