"""Generate what must never be written twice by hand (run by `make generate`; `--check` in `make lint`).

1. The method tables: `AsyncRawResponses` (in `_async/client.py`) lists every route method of the client,
   the fleets (`fleet.py`) list every public client method. Each table sits between the markers
   `# -- generated: <name> --` and `# -- end generated --`.
2. The sync surfaces: every module of `vllm_devclient/_async/` (but `_support.py`) is rewritten into
   `vllm_devclient/_sync/` by token substitution (`async def` -> `def`, `AsyncDevClient` -> `DevClient`,
   ...), the way httpcore generates its sync code, then sorted and formatted by ruff.

`--check` changes nothing and exits 1 naming every file that is not what the generator would write.
"""

from __future__ import annotations

import ast
import difflib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "vllm_devclient"
ASYNC_DIR, SYNC_DIR = PKG / "_async", PKG / "_sync"
HEADER = (
    "# Generated from vllm_devclient/_async/{name} by scripts/unasync.py: do not edit, run `make generate`.\n"
)

# Order matters: longer names first.
SUBS = [
    ("Asynchronous client for", "Synchronous client for"),
    (
        "Use one AsyncDevClient from one event loop at a time; from another loop it opens new connections.",
        "One DevClient may be shared by many threads: its connection pool is locked.",
    ),
    ("The source of `_sync/client.py`", "Generated from `_async/client.py`"),
    ("AsyncDevClient", "DevClient"),
    ("AsyncRawResponses", "RawResponses"),
    ("AsyncWeightUpdate", "WeightUpdate"),
    ("_AsyncRaw", "_SyncRaw"),
    ("AsyncTransport", "SyncTransport"),
    ("make_async_transport", "make_sync_transport"),
    ("httpx.AsyncClient", "httpx.Client"),
    ("AsyncIterator", "Iterator"),
    ("asynccontextmanager", "contextmanager"),
    ("__aenter__", "__enter__"),
    ("__aexit__", "__exit__"),
    ("aclose", "close"),
    ("Awaitable[RawResponse[T]]", "RawResponse[T]"),
    ("Awaitable[T]", "T"),
    ("async with ", "with "),
    ("async def ", "def "),
    ("async for ", "for "),
    ("await ", ""),
    ("the async face of", "the sync face of"),
]

MARK = re.compile(
    r"(?P<indent>[ \t]*)# -- generated: (?P<name>[^\n]+?) --\n.*?(?P=indent)# -- end generated --\n", re.S
)


def _methods(tree: ast.Module, cls: str) -> list[ast.AsyncFunctionDef]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            # Decorated ones are the flows (context managers), not calls.
            return [
                n for n in node.body
                if isinstance(n, ast.AsyncFunctionDef) and not n.name.startswith("_") and not n.decorator_list
            ]  # fmt: skip
    raise SystemExit(f"class {cls} not found")


def _sends_one_request(fn: ast.AsyncFunctionDef) -> bool:
    """A route method: its body ends in `self._send(...)` (one exchange, so one raw response)."""
    calls = [
        n for n in ast.walk(fn)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "_send"
    ]  # fmt: skip
    return bool(calls) and fn.name != "request"


def client_methods() -> tuple[list[str], list[str]]:
    """(every public client method that is a call, the route methods among them)."""
    tree = ast.parse((ASYNC_DIR / "client.py").read_text())
    methods = [fn for fn in _methods(tree, "AsyncDevClient") if fn.name not in ("close",)]
    every = [fn.name for fn in methods]
    routes = [fn.name for fn in methods if _sends_one_request(fn)]
    return every, routes


def fill(text: str, tables: dict[str, str]) -> str:
    def replace(m: re.Match[str]) -> str:
        name, indent = m.group("name"), m.group("indent")
        if name not in tables:
            raise SystemExit(f"no table named {name!r}")
        body = "".join(f"{indent}{line}\n" for line in tables[name].splitlines())
        return f"{indent}# -- generated: {name} --\n{body}{indent}# -- end generated --\n"

    return MARK.sub(replace, text)


def _defined(cls: str) -> set[str]:
    """What a fleet class writes itself (pause with rollback, the flows): left out of its table."""
    tree = ast.parse((PKG / "fleet.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    raise SystemExit(f"class {cls} not found in fleet.py")


def tables() -> dict[str, str]:
    every, routes = client_methods()
    fleet, sync_fleet = _defined("AsyncFleet"), _defined("Fleet")
    return {
        "raw-response methods (make generate)": "\n".join(
            f"{n} = _AsyncRaw(AsyncDevClient.{n})" for n in routes
        ),
        "async fleet methods (make generate)": "\n".join(
            f"{n} = _FanOut(AsyncDevClient.{n})" for n in every if n not in fleet
        ),
        "sync fleet methods (make generate)": "\n".join(
            f"{n} = _SyncFanOut(AsyncDevClient.{n})" for n in every if n not in sync_fleet
        ),
    }


def unasync(text: str) -> str:
    for old, new in SUBS:
        text = text.replace(old, new)
    return text


def ruff(text: str, path: Path) -> str:
    ruff_bin = Path(sys.executable).parent / "ruff"
    cmd = str(ruff_bin) if ruff_bin.exists() else "ruff"
    fixed = subprocess.run(
        [cmd, "check", "--quiet", "--fix", "--select", "I,F401", "--stdin-filename", str(path), "-"],
        input=text, capture_output=True, text=True, cwd=ROOT,
    ).stdout  # fmt: skip
    return subprocess.run(
        [cmd, "format", "--quiet", "--stdin-filename", str(path), "-"],
        input=fixed or text, capture_output=True, text=True, check=True, cwd=ROOT,
    ).stdout  # fmt: skip


def wanted() -> dict[Path, str]:
    filled = tables()
    out: dict[Path, str] = {}
    for path in (ASYNC_DIR / "client.py", PKG / "fleet.py"):
        out[path] = fill(path.read_text(), filled)
    for src in sorted(ASYNC_DIR.glob("*.py")):
        if src.name in ("_support.py", "__init__.py"):
            continue
        text = out.get(src, src.read_text())
        dest = SYNC_DIR / src.name
        out[dest] = ruff(HEADER.format(name=src.name) + unasync(text), dest)
    return out


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, text in wanted().items():
        current = path.read_text() if path.exists() else ""
        if current == text:
            continue
        stale.append(path)
        if check:
            diff = difflib.unified_diff(
                current.splitlines(), text.splitlines(), str(path), "generated", lineterm=""
            )
            print("\n".join(list(diff)[:40]))
        else:
            path.write_text(text)
    if check and stale:
        print(f"out of date: {', '.join(str(p.relative_to(ROOT)) for p in stale)}; run `make generate`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
