"""Write what must never be written twice by hand, from the records (run by `make generate`; `--check` in
`make lint`). Each surface has its own module under `codegen/`:

1. `codegen/methods.py`: the route methods of the async client (`_async/routes.py`), one per record of
   `vllm_devclient/routes/`, and the tables of the methods derived from them, between
   `# -- generated: ... --` markers: `with_raw_response`'s and the blocking client's (`_sync/routes.py`).
2. `codegen/schema.py`: each command's `result` schema in `cli/schema.json`.
3. `codegen/docs.py`: the route table of `docs/frontends.md`.
4. `unasync.py`: the sync code from the async code (whole-word rules, as httpcore's).

The fleets' methods are derived from the client's at run time (`fleet/methods.py`), from a table kept by
hand (a test checks that it lists every record).

`--check` changes nothing and exits 1 naming every file that is not what the generator would write, and
every generated module of the package it no longer writes (a plain run deletes those).
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

import unasync
from codegen import PKG, ROOT, GenerateError, docs, methods, schema

ASYNC_DIR = PKG / "_async"
# The hand-written modules holding tables of the generator's (`# -- generated: ... --`).
TABLES = (*sorted(ASYNC_DIR.glob("*.py")), PKG / "_sync" / "routes.py")


def wanted() -> dict[Path, str]:
    from vllm_devclient.calls import CALLS
    from vllm_devclient.routes import ROUTES

    names = [m.name for m in (*ROUTES, *CALLS)]
    if len(set(names)) != len(names):
        raise GenerateError("two records have the same name")
    routes = ASYNC_DIR / "routes.py"
    out: dict[Path, str] = {routes: unasync.ruff(methods.routes_module(), routes)}
    filled = methods.tables()
    for path in TABLES:
        text = out.get(path, path.read_text())
        if "# -- generated:" in text:
            out[path] = methods.fill(text, filled)
    out.update(unasync.wanted(out))
    out[schema.SCHEMA] = schema.schema_text()
    out[docs.DOC] = docs.doc_text()
    return out


def orphans(out: dict[Path, str]) -> list[Path]:
    """The package's generated modules that the generator no longer writes (a sync twin whose source is
    gone or written by hand now, a module since split or removed)."""
    return [
        p for p in sorted(PKG.rglob("*.py"))
        if p not in out and p.read_text().startswith("# Generated from ")
    ]  # fmt: skip


def main(argv: list[str]) -> int:
    check = "--check" in argv
    out = wanted()
    stale = orphans(out)
    if not check:
        for path in stale:
            path.unlink()
    for path, text in out.items():
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
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
    if check and stale:
        print(f"out of date: {', '.join(str(p.relative_to(ROOT)) for p in stale)}; run `make generate`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
