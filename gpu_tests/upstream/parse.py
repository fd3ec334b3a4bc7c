"""Read upstream's ``tests/evals/gsm8k/test_gsm8k_offloading.py`` with ``ast`` (never importing it) into a
JSON record of its matrix: the module constants, the config class's defaults, each ``MODELS`` entry as
written, and the test's ``server_args`` list.

    python -m gpu_tests.upstream.parse PATH --repo OWNER/NAME --commit SHA \
        > gpu_tests/upstream/test_gsm8k_offloading.json
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

PATH = "tests/evals/gsm8k/test_gsm8k_offloading.py"
RECORD = Path(__file__).with_name("test_gsm8k_offloading.json")
CONSTANTS = ("NUM_QUESTIONS", "NUM_FEWSHOT", "_OFFLOAD_SYNC_TIMEOUT")
FACTORIES = {"list": [], "dict": {}}


def _default(value: ast.expr) -> Any:
    if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "field":
        (factory,) = [k.value for k in value.keywords if k.arg == "default_factory"]
        return FACTORIES[getattr(factory, "id", "")]
    return ast.literal_eval(value)


def _argument(node: ast.expr) -> Any:
    """An element of ``server_args``: a literal, or what stands in its place (a call, a starred name)."""
    if isinstance(node, ast.Starred):
        return f"*{ast.unparse(node.value)}"
    if isinstance(node, ast.Call):
        return f"<{ast.unparse(node.func)}(...)>"
    return ast.literal_eval(node)


def parse(text: str) -> dict[str, Any]:
    tree = ast.parse(text)
    out: dict[str, Any] = {"constants": {}, "defaults": {}, "models": [], "server_args": []}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in CONSTANTS:
                out["constants"][name] = ast.literal_eval(node.value)
            elif name == "MODELS" and isinstance(node.value, ast.List):
                for call in node.value.elts:
                    assert isinstance(call, ast.Call) and not call.args, ast.unparse(call)
                    out["models"].append({k.arg: ast.literal_eval(k.value) for k in call.keywords})
        elif isinstance(node, ast.ClassDef) and node.name == "OffloadingModelConfig":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and item.value is not None:
                    out["defaults"][ast.unparse(item.target)] = _default(item.value)
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.Assign)
                    and ast.unparse(inner.targets[0]) == "server_args"
                    and isinstance(inner.value, ast.List)
                ):
                    out["server_args"] = [_argument(e) for e in inner.value.elts]
    missing = [k for k in ("models", "server_args", "defaults") if not out[k]]
    missing += [c for c in CONSTANTS if c not in out["constants"]]
    if missing:
        raise ValueError(f"not found in the file: {missing}")
    return out


def record(text: str, repo: str, commit: str) -> dict[str, Any]:
    return {
        "source": {
            "url": f"https://github.com/{repo}/blob/{commit}/{PATH}",
            "repo": repo,
            "commit": commit,
            "path": PATH,
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
        },
        **parse(text),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpu_tests.upstream.parse", description=__doc__.split("\n")[0])
    p.add_argument("path", type=Path)
    p.add_argument("--repo", required=True)
    p.add_argument("--commit", required=True)
    args = p.parse_args(argv)
    data = record(args.path.read_text(), args.repo, args.commit)
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
