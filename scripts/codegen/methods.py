"""The async route methods (`_async/routes.py`), one per route record, and the tables of the methods derived
from them (`with_raw_response`'s, the blocking client's): all from the records of `vllm_devclient/routes/`."""

from __future__ import annotations

import re
import textwrap

from vllm_devclient.records import REQUIRED, Method, Param, Route
from vllm_devclient.routes import ROUTES

from . import GenerateError
from .source import Imports, source, value

SOURCE = "vllm_devclient/routes/"
HEADER = f"# Generated from {SOURCE} by scripts/generate.py; do not edit.\n"
# A table inside a hand-written module: `# -- generated: <name> --` ... `# -- end generated --`.
MARK = re.compile(
    r"(?P<indent>[ \t]*)# -- generated: (?P<name>[^\n]+?) --\n.*?(?P=indent)# -- end generated --\n", re.S
)
RAW_TABLE = f"the raw-response methods, from {SOURCE}"
SYNC_TABLE = f"the sync route methods, from {SOURCE}"


def check_params(method: Method) -> None:
    seen_keyword = False
    for p in method.params:
        if p.positional and seen_keyword:
            raise GenerateError(f"{method.name}: positional {p.name} after a keyword-only parameter")
        seen_keyword = seen_keyword or not p.positional
    if len(method.doc) > 99 or "\n" in method.doc:  # the docstring's first line fits in 110 columns
        raise GenerateError(f"{method.name}: the doc is one line of at most 99 characters")


def check_route(route: Route) -> None:
    """A route's record says where each parameter goes; no two go to the same place."""
    check_params(route)
    if not route.path.startswith("/"):
        raise GenerateError(f"{route.name}: the path {route.path!r} does not start with /")
    keys = [(p.send, p.key or p.name) for p in route.params]
    for p in route.params:
        if p.send is None:
            raise GenerateError(f"{route.name}.{p.name}: say where it goes (send='query' or 'body')")
    if len(set(keys)) != len(keys):
        raise GenerateError(f"{route.name}: two parameters go to the same place: {keys}")


def docstring(method: Method, indent: str) -> str:
    lines = [f'{indent}"""{method.doc}']
    if method.params:
        lines += ["", f"{indent}Args:"]
        for p in method.params:
            text = f"{p.name}: {p.help[:1].lower()}{p.help[1:]}"
            lines += textwrap.wrap(
                text, 110, initial_indent=indent + "    ", subsequent_indent=indent + "        "
            )
        lines.append(f'{indent}"""')
    else:
        lines[0] += '"""'
    return "\n".join(line if line.strip() else "" for line in lines)


def signature(params: tuple[Param, ...], imports: Imports) -> list[str]:
    out = ["self"]
    star = False
    for p in params:
        if not p.positional and not star:
            out.append("*")
            star = True
        text = f"{p.name}: {source(p.type, imports)}"
        out.append(text if p.default is REQUIRED else f"{text} = {value(p.default)}")
    return [*out, "**options: Unpack[RequestOptions]"]


def route_method(route: Route, imports: Imports) -> str:
    check_route(route)
    params = ", ".join(signature(route.params, imports))
    answer = source(route.answer, imports)
    arguments = "".join(f", {p.name}={p.name}" for p in route.params)
    return (
        f"    async def {route.name}({params}) -> {answer}:\n"
        f"{docstring(route, ' ' * 8)}\n"
        f"        ep: Endpoint[{answer}] = endpoint({route.name!r}{arguments})\n"
        f"        return await self._send(ep, options)\n"
    )


def routes_module() -> str:
    imports = Imports()
    methods = "\n".join(route_method(r, imports) for r in ROUTES)
    now, later = imports.lines(runtime=("models",))
    typing_block = ["", "if TYPE_CHECKING:", *(f"    {line}" for line in later)] if later else []
    return "\n".join(
        [
            HEADER.rstrip("\n"),
            '"""The route methods of a client: one HTTP exchange each, built from its record."""',
            "",
            "from __future__ import annotations",
            "",
            *now,
            "",
            "from typing_extensions import Unpack",
            "",
            "from .._base_client import RequestOptions",
            "from ..endpoints import Endpoint",
            "from ..routes import endpoint",
            "from .core import _AsyncCore",
            *typing_block,
            "",
            '__all__ = ["_AsyncRoutes"]',
            "",
            "",
            "class _AsyncRoutes(_AsyncCore):",
            f'    """Every route, one method each (generated from `{SOURCE}`)."""',
            "",
            methods,
        ]
    )


def tables() -> dict[str, str]:
    raw = "\n".join(f"{r.name} = _AsyncRaw(_AsyncRoutes.{r.name})" for r in ROUTES)
    sync = "\n".join(f"{r.name} = _SyncRoute(_AsyncRoutes.{r.name})" for r in ROUTES)
    return {RAW_TABLE: raw, SYNC_TABLE: sync}


def fill(text: str, filled: dict[str, str]) -> str:
    """The marked tables of a hand-written module, written anew."""

    def replace(m: re.Match[str]) -> str:
        name, indent = m.group("name"), m.group("indent")
        if name not in filled:
            raise GenerateError(f"no table named {name!r}")
        body = "".join(f"{indent}{line}\n" for line in filled[name].splitlines())
        return f"{indent}# -- generated: {name} --\n{body}{indent}# -- end generated --\n"

    return MARK.sub(replace, text)
