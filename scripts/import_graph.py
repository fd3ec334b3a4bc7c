"""The import graph of the repository's Python, from the source (ast): its circles and its upward imports.

The packages, lowest first: the SDK (`vllm_devclient`, the wheel), the benchmarks, the repository's tooling
(`tools`), the GPU suite (`gpu_tests`) and the scripts; a package imports itself and those before it, never
one after (the wheel imports nothing of the repository). Inside `vllm_devclient` and `gpu_tests` the same
rule holds between their layers (`LAYERS`).

Edges: every import statement anywhere in a module (module level, `if TYPE_CHECKING:`, inside functions)
and every string constant that names a module (importlib look-ups). A circle is a strongly connected
component of more than one module.

    python scripts/import_graph.py           # the report
    python scripts/import_graph.py --check   # exit 1 on any circle or upward import
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = "vllm_devclient"
PACKAGES = (PKG, "benchmarks", "tools", "gpu_tests", "scripts")

# Each package's layers, lowest first: a module imports its own layer and those below, never one above.
LAYERS: dict[str, tuple[tuple[str, ...], ...]] = {
    PKG: (
        (
            "_version",
            "timeouts",
            "constants",
            "responses",
            "support",
            "errors",
            "redaction",
            "arguments",
            "models",
            "transports",
        ),
        ("answers", "metrics", "records", "endpoints", "routes"),
        (
            "operations",  # a package: its modules import one another lowest first (its docstring)
            "polling",
            "reset_check",
            "release_gate",
            "checkpoint_wait",
            "rank_plan",
            "watchdog",
            "body_limits",
        ),
        ("_base_client", "_derived"),
        ("_async", "_sync"),
        ("client", "kv_events"),
        ("fleet", "calls", "weight_sync", "gsm8k"),
        ("cli", "testing", ""),  # "": the package's __init__
    ),
    # The offload check (one case: measure, judge, report), the engine-side instruments, the graded bugs
    # (history: data), the device runner (plans, runs, collects, tables), the RL runner, then the suites.
    "gpu_tests": (
        ("offload_check", "upstream"),
        ("kv_proof",),
        ("history",),
        ("runner",),
        ("rl",),
        ("tests", "conftest", "test_offload_gsm8k", "test_nccl_fleet_gpu", ""),
    ),
}


def modules(root: Path) -> dict[str, Path]:
    out = {}
    paths = [p for package in PACKAGES for p in sorted((root / package).rglob("*.py"))]
    for path in paths:
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _known(mods: dict[str, Path], name: str) -> str:
    while name not in mods and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _ours(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def _targets(mods: dict[str, Path], package: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [_known(mods, a.name) for a in node.names if _ours(a.name)]
    if node.level:
        parts = package.split(".")
        target = ".".join(parts[: len(parts) - node.level + 1]) + ("." + node.module if node.module else "")
    elif _ours(node.module or ""):
        target = node.module or ""
    else:
        return []
    return [
        f"{target}.{a.name}" if f"{target}.{a.name}" in mods else _known(mods, target) for a in node.names
    ]


def _module_edges(mods: dict[str, Path], name: str, found: dict[tuple[str, str], set[str]]) -> None:
    path = mods[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    skip = (name, *PACKAGES)  # a bare package name in a string is rarely an import of it

    def walk(node: ast.AST, how: str) -> None:
        for child in ast.iter_child_nodes(node):
            kind = how
            if how == "top" and isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                kind = "lazy"
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                kind = "typing"
            if isinstance(child, ast.Import | ast.ImportFrom):
                for target in _targets(mods, package, child):
                    if target != name:
                        found.setdefault((name, target), set()).add(kind)
            elif isinstance(child, ast.Constant) and child.value in mods and child.value not in skip:
                found.setdefault((name, str(child.value)), set()).add("lazy")
            walk(child, kind)

    walk(ast.parse(path.read_text()), "top")


def edges(mods: dict[str, Path]) -> dict[tuple[str, str], set[str]]:
    """(importer, imported) -> how: "top", "lazy" (in a function, or by name), "typing" (TYPE_CHECKING)."""
    found: dict[tuple[str, str], set[str]] = {}
    for name in mods:
        _module_edges(mods, name, found)
    return found


def circles(
    mods: dict[str, Path], found: dict[tuple[str, str], set[str]], nodes: set[str]
) -> list[list[str]]:
    """Strongly connected components of more than one module among `nodes` (Tarjan)."""
    graph: dict[str, list[str]] = {m: [] for m in nodes}
    for a, b in sorted(found):
        if a in nodes and b in nodes:
            graph[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return out


def layer(module: str) -> tuple[int, int]:
    """(package, layer inside it): an import may not go to a higher pair."""
    package, _, rest = module.partition(".")
    if package not in LAYERS:
        return PACKAGES.index(package), 0
    head = rest.split(".")[0]
    for i, names in enumerate(LAYERS[package]):
        if head in names:
            return PACKAGES.index(package), i
    raise SystemExit(f"{module}: in no layer of scripts/import_graph.py's LAYERS")


def upward(a: str, b: str) -> bool:
    """An import from a lower package or layer to a higher one (across packages: only the package order)."""
    (pa, la), (pb, lb) = layer(a), layer(b)
    return pb > pa or (pb == pa and lb > la)


def main(argv: list[str]) -> int:
    root = Path(argv[argv.index("--root") + 1]) if "--root" in argv else ROOT
    mods = modules(root)
    found = edges(mods)
    whole = circles(mods, found, set(mods) - set(PACKAGES))
    up = sorted((a, b, "/".join(sorted(how))) for (a, b), how in found.items() if upward(a, b))
    counts = ", ".join(f"{sum(m.split('.')[0] == p for m in mods)} {p}" for p in PACKAGES)
    print(f"{len(mods)} modules ({counts}); circles: {len(whole)}")
    for component in whole:
        print(f"  circle of {len(component)}: {' '.join(component)}")
    print(f"upward imports: {len(up)}")
    for a, b, how in up:
        print(f"  {a} -> {b} ({how})")
    return 1 if "--check" in argv and (whole or up) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
