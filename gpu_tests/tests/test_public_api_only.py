"""The GPU suite uses the client as a user does: only its public modules, only the names they export."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parents[1]
# The package and the parts README.md documents by name (the test kit is public for test code).
PUBLIC = frozenset(
    {
        "vllm_devclient",
        "vllm_devclient.fleet",
        "vllm_devclient.gsm8k",
        "vllm_devclient.kv_events",
        "vllm_devclient.metrics",
        "vllm_devclient.testing",
        "vllm_devclient.testing.misbehaving",
        "vllm_devclient.testing.pytest_plugin",
    }
)


def client_imports(tree: ast.AST) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import of the client anywhere in a module (``import M``: no names)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] == "vllm_devclient"
            ]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] == "vllm_devclient":
                found.append((node.lineno, node.module, [a.name for a in node.names]))
    return found


def private_uses(source: str) -> list[str]:
    """What a module's source imports of the client outside its public surface, one line each."""
    bad = []
    for line, module, names in client_imports(ast.parse(source)):
        if module not in PUBLIC:
            bad.append(f"line {line}: {module} is not public")
            continue
        exported = set(importlib.import_module(module).__all__)
        hidden = [n for n in names if n not in exported and f"{module}.{n}" not in PUBLIC]
        if hidden:
            bad.append(f"line {line}: {module} does not export {hidden}")
    return bad


def test_no_gpu_tests_module_imports_a_private_part_of_the_client() -> None:
    bad = {
        str(path.relative_to(SUITE)): found
        for path in sorted(SUITE.rglob("*.py"))
        if (found := private_uses(path.read_text()))
    }
    assert bad == {}


@pytest.mark.parametrize(
    ("source", "private"),
    [
        ("from vllm_devclient.operations import RetryPolicy", True),
        ("def f():\n    from vllm_devclient.testing.processes import spawn", True),
        ("import vllm_devclient.records", True),
        ("from vllm_devclient.metrics import SNAPSHOT_FAMILIES", True),
        ("from vllm_devclient import _base_client", True),
        ("from vllm_devclient import DevClient, PauseMode", False),
        ("from vllm_devclient.testing import ScriptedEngine, spawn", False),
        ("from vllm_devclient import testing", False),
        ("from .events import EventWatcher", False),
    ],
)
def test_the_guard_tells_a_private_import_from_a_public_one(source: str, private: bool) -> None:
    assert bool(private_uses(source)) is private
