"""The route table of `docs/frontends.md`, between `<!-- generated:routes -->` and `<!-- /generated -->`: one
row per route record, its wire facts as the record gives them."""

from __future__ import annotations

import re

from vllm_devclient.records import Route, When
from vllm_devclient.routes import ROUTES

from . import ROOT, GenerateError

DOC = ROOT / "docs" / "frontends.md"
MARK = re.compile(r"(<!-- generated:(?P<name>[\w-]+) -->\n).*?(<!-- /generated -->)", re.S)
NOTE = "<!-- written by `make generate` from vllm_devclient/routes/ (scripts/codegen/docs.py) -->"


def _fact(fact: bool | When) -> str:
    return fact.text if isinstance(fact, When) else ("yes" if fact else "no")


def _resent(route: Route) -> str:
    """Whether a try that may have reached the server is sent again (one that did not always may be)."""
    if route.idempotent is False:
        return "no"
    statuses = ", ".join(str(s) for s in sorted(route.retry_statuses))
    return f"{_fact(route.idempotent)} (a failed try, {statuses})"


def _params(route: Route, where: str) -> str:
    names = [f"`{p.key or p.name}`" for p in route.params if p.send == where]
    return ", ".join(names) or "-"


def route_table() -> str:
    rows = [
        "| method | request | query | JSON body | sent again once it may have arrived "
        "| no bound on the answer | dev only |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in ROUTES:
        rows.append(
            f"| `{r.name}` | `{r.method} {r.path}` | {_params(r, 'query')} | {_params(r, 'body')} "
            f"| {_resent(r)} | {_fact(r.long_running)} | {'yes' if r.dev_route else 'no'} |"
        )
    return "\n".join(rows)


def doc_text() -> str:
    tables = {"routes": route_table()}
    text = DOC.read_text()
    seen: set[str] = set()

    def replace(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in tables:
            raise GenerateError(f"{DOC.name}: no generated table named {name!r}")
        seen.add(name)
        return f"{m.group(1)}{NOTE}\n\n{tables[name]}\n\n{m.group(3)}"

    out = MARK.sub(replace, text)
    if seen != set(tables):
        raise GenerateError(f"{DOC.name}: no marker for {sorted(set(tables) - seen)}")
    return out
