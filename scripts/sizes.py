"""The repository's size limits, read from the source (ast): no function over 60 lines, no class over 300.

A function counts from its `def` line to its last line (decorators left out, docstring in); a class from its
`class` line to its last line. Every `.py` of the repository counts except the tests (`tests/` and
`contract_tests/` directories, wherever they are, files named `test_*.py` and `conftest.py`), generated code
(text that starts with `# Generated from `: its source is what counts) and what is not the repository's own
(hidden directories such as `.venv*` and `.git`, `__pycache__`, `build`, `dist`). There is no allow-list:
a long function is split by meaning, a long class by concept.

    python scripts/sizes.py           # every offender, longest first
    python scripts/sizes.py --check   # the same, exit 1 on any (run by `make lint`)
    python scripts/sizes.py --root DIR
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION = 60
MAX_CLASS = 300
TEST_DIRS = frozenset({"tests", "contract_tests"})
NOT_OURS = frozenset({"__pycache__", "build", "dist"})
GENERATED = "# Generated from "


@dataclass(frozen=True)
class Offender:
    path: Path
    line: int
    kind: str  # "def" or "class"
    name: str
    lines: int

    def __str__(self) -> str:
        limit = MAX_CLASS if self.kind == "class" else MAX_FUNCTION
        return f"{self.path}:{self.line}: {self.kind} {self.name} is {self.lines} lines (over {limit})"


def counted(root: Path, path: Path) -> bool:
    """Whether the limits apply to this file (see the module docstring)."""
    dirs = path.relative_to(root).parts[:-1]
    if any(d.startswith(".") or d in NOT_OURS or d in TEST_DIRS for d in dirs):
        return False
    return not (path.name.startswith("test_") or path.name == "conftest.py")


def offenders_in(path: Path, text: str) -> list[Offender]:
    out = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            kind, limit = "def", MAX_FUNCTION
        elif isinstance(node, ast.ClassDef):
            kind, limit = "class", MAX_CLASS
        else:
            continue
        lines = (node.end_lineno or node.lineno) - node.lineno + 1
        if lines > limit:
            out.append(Offender(path, node.lineno, kind, node.name, lines))
    return out


def offenders(root: Path) -> list[Offender]:
    """Every function and class over its limit under `root`, longest first."""
    out = []
    for path in sorted(root.rglob("*.py")):
        if not counted(root, path):
            continue
        text = path.read_text()
        if not text.startswith(GENERATED):
            out += offenders_in(path.relative_to(root), text)
    return sorted(out, key=lambda o: (-o.lines, str(o.path), o.line))


def main(argv: list[str]) -> int:
    root = Path(argv[argv.index("--root") + 1]) if "--root" in argv else ROOT
    found = offenders(root)
    for offender in found:
        print(offender)
    print(f"{len(found)} over the limits (functions {MAX_FUNCTION} lines, classes {MAX_CLASS})")
    return 1 if "--check" in argv and found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
