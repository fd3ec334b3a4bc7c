"""Write what must never be written twice by hand, from the records (run by `make generate`; `--check` in
`make lint`). Each surface has its own module under `codegen/`:

1. `codegen/methods.py`: the route methods of the async client (`_async/routes.py`), one per record of
   `vllm_devclient/routes/`, and the `with_raw_response` table (between `# -- generated: ... --` markers).
2. `codegen/fleet.py`: both fleets' methods (`fleet/_async_methods/`, `fleet/_sync_methods/`), one per
   route and call record, a module per topic.
3. `codegen/schema.py`: each command's `result` schema in `cli/schema.json`.
4. `codegen/docs.py`: the route table of `docs/frontends.md`.
5. `unasync.py`: the sync code from the async code (whole-word rules, as httpcore's).

`--check` changes nothing and exits 1 naming every file that is not what the generator would write, and
every generated module of the package it no longer writes (a plain run deletes those).
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

import unasync
from codegen import PKG, ROOT, GenerateError, docs, fleet, methods, schema

ASYNC_DIR = PKG / "_async"


def wanted() -> dict[Path, str]:
    from vllm_devclient.calls import CALLS
    from vllm_devclient.routes import ROUTES

    names = [m.name for m in (*ROUTES, *CALLS)]
    if len(set(names)) != len(names):
        raise GenerateError("two records have the same name")
    routes = ASYNC_DIR / "routes.py"
    out: dict[Path, str] = {routes: unasync.ruff(methods.routes_module(), routes)}
    for path, text in fleet.fleet_modules().items():
        out[path] = unasync.ruff(text, path)
    filled = methods.tables()
    for path in sorted(ASYNC_DIR.glob("*.py")):
        text = out.get(path, path.read_text())
        if "# -- generated:" in text:
            out[path] = methods.fill(text, filled)
    out.update(unasync.wanted(out))
    out[schema.SCHEMA] = schema.schema_text()
    out[docs.DOC] = docs.doc_text()
    return out


def orphans(out: dict[Path, str]) -> list[Path]:
    """The package's generated modules that the generator no longer writes (a sync twin whose source is
    gone, a fleet topic that has no method left, a module since split)."""
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
