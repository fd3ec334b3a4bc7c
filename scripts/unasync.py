"""Write the sync code from the async code, the way httpcore does (its `scripts/unasync.py`): whole-word
rules on identifiers and keywords, applied line by line, and a rule that matches nothing is an error.

Every module of `vllm_devclient/_async/` becomes the one of the same name in `_sync/` (but `_support.py`,
written by hand on both sides, and `routes.py`: the blocking client's route methods are derived from the
async ones at run time, `_sync/routes.py`), and the KV-event subscriber's asyncio driver becomes its
blocking one. No
rule rewrites prose: the async sources say what is true of both. Each written file names its source in
its first line.

    python scripts/unasync.py            # write the sync files (ruff formats them)
    python scripts/unasync.py --check    # exit 1 naming each sync file that is out of date
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "vllm_devclient"
ASYNC_DIR, SYNC_DIR = PKG / "_async", PKG / "_sync"
HAND_WRITTEN = ("__init__.py", "_support.py", "routes.py")
MORE_PAIRS = ((PKG / "kv_events" / "_async_driver.py", PKG / "kv_events" / "_sync_driver.py"),)
HEADER = "# Generated from vllm_devclient/{source} by scripts/unasync.py; do not edit.\n"

# (pattern, replacement), each matched as whole words. The specific ones come before `Async(...)`.
SUBS = [
    ("AsyncTransport", "SyncTransport"),
    ("make_async_transport", "make_sync_transport"),
    ("SupportsAsyncKVEventSources", "SupportsKVEventSources"),
    ("_Async([A-Z][A-Za-z0-9_]*)", r"_Sync\1"),
    ("Async([A-Z][A-Za-z0-9_]*)", r"\1"),
    ("StopAsyncIteration", "StopIteration"),
    ("asynccontextmanager", "contextmanager"),
    ("new_async_poller", "new_poller"),
    ("async_wait_for", "wait_for"),
    ("async def", "def"),
    ("async with", "with"),
    ("await ", ""),
    ("Awaitable\\[(RawResponse\\[T\\]|T)\\]", r"\1"),
    ("aclose", "close"),
    ("__aenter__", "__enter__"),
    ("__aexit__", "__exit__"),
    ("__aiter__", "__iter__"),
    ("__anext__", "__next__"),
]


def _whole_word(regex: str) -> re.Pattern[str]:
    """The rule, not matching inside a longer word: no word character just before a rule that starts with
    one, none just after a rule that ends with one (`await ` ends with its space)."""
    head = r"(?<!\w)" if re.match(r"\w", regex) else ""
    tail = r"(?!\w)" if re.search(r"[\w)]$", regex) else ""
    return re.compile(head + regex + tail)


COMPILED_SUBS = [(_whole_word(regex), repl) for regex, repl in SUBS]


def unasync_line(line: str, used: set[int]) -> str:
    for index, (regex, repl) in enumerate(COMPILED_SUBS):
        new = regex.sub(repl, line)
        if new != line:
            used.add(index)
            line = new
    return line


def unasync_text(text: str, used: set[int]) -> str:
    return "".join(unasync_line(line, used) for line in text.splitlines(keepends=True))


def pairs() -> list[tuple[Path, Path]]:
    found = [
        (src, SYNC_DIR / src.name) for src in sorted(ASYNC_DIR.glob("*.py")) if src.name not in HAND_WRITTEN
    ]
    return [*found, *MORE_PAIRS]


def ruff(text: str, path: Path) -> str:
    """Imports sorted and pruned, then formatted: what `ruff check --fix` and `ruff format` would leave."""
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


def wanted(sources: dict[Path, str] | None = None) -> dict[Path, str]:
    """Every sync file, from the async sources (`sources` holds any not yet written to disk: a module whose
    table the generator fills). Raises SystemExit naming the rules that matched nothing."""
    used: set[int] = set()
    out: dict[Path, str] = {}
    for src, dest in pairs():
        text = (sources or {}).get(src) or src.read_text()
        header = HEADER.format(source=src.relative_to(PKG).as_posix())
        out[dest] = ruff(header + unasync_text(text, used), dest)
    unused = [SUBS[i] for i in range(len(SUBS)) if i not in used]
    if unused:
        raise SystemExit(f"unasync: these rules match nothing (remove them): {unused}")
    return out


def orphans() -> list[Path]:
    """Generated sync modules whose async source is gone."""
    sources = {p.name for p in ASYNC_DIR.glob("*.py")}
    return [
        p for p in SYNC_DIR.glob("*.py")
        if p.name not in sources and p.read_text().startswith("# Generated from")
    ]  # fmt: skip


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = [p for p in orphans()] + [p for p, t in wanted().items() if not p.exists() or p.read_text() != t]
    if check:
        for path in stale:
            print(f"out of date: {path.relative_to(ROOT)}")
        return 1 if stale else 0
    for path, text in wanted().items():
        path.write_text(text)
    for path in orphans():
        path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
