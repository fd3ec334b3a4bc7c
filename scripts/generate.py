"""Generate what must never be written twice by hand (run by `make generate`; `--check` in `make lint`).

1. The route methods of the async client (`_async/routes.py`), one per record of `vllm_devclient/routes.py`:
   the signature from the record's parameters (real types, rendered back to source), the docstring from its
   doc and their help, the body `return await self._send(endpoints.<builder>(...), options)`.
2. The method table of `with_raw_response` (every route record), between the markers
   `# -- generated: <name> --` and `# -- end generated --`; and both fleets' methods
   (`fleet/_async_methods.py`, `fleet/_sync_methods.py`): one real method per route and call record that
   the fleet class does not write itself, with the record's signature and docstring, answering
   `FleetResult[answer]` (a method with a `deadline` parameter gives every target the same moment).
3. The sync surfaces: every module of `vllm_devclient/_async/` (but `_support.py`) and the KV-event
   subscriber's async driver are rewritten by token substitution (`async def` -> `def`, ...), the way
   httpcore generates its sync code, then sorted and formatted by ruff. A substitution that no longer
   matches anything is an error, as in httpcore: the table cannot rot.
4. The JSON schema of the command line (`cli/schema.json`): `$defs.results`, each command's `result`
   schema, from the records' answer types (pydantic's serialization schema).

`--check` changes nothing and exits 1 naming every file that is not what the generator would write.
"""

from __future__ import annotations

import ast
import collections.abc
import difflib
import inspect
import json
import re
import subprocess
import sys
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "vllm_devclient"
# The package without its __init__ (which imports the clients): the records never need the generated code,
# so a generated file that is broken or out of date cannot stop its own regeneration.
_bare = types.ModuleType("vllm_devclient")
_bare.__path__ = [str(PKG)]
sys.modules.setdefault("vllm_devclient", _bare)

from vllm_devclient.calls import CALLS  # noqa: E402
from vllm_devclient.records import REQUIRED, Call, Method, Param, Route  # noqa: E402
from vllm_devclient.routes import ROUTES  # noqa: E402

ASYNC_DIR, SYNC_DIR = PKG / "_async", PKG / "_sync"
# (async source, generated sync module) besides `_async/` -> `_sync/`.
MORE_PAIRS = ((PKG / "kv_events" / "_async_driver.py", PKG / "kv_events" / "_sync_driver.py"),)
HEADER = "# Generated from vllm_devclient/{name} by scripts/generate.py; do not edit.\n"
SCHEMA = PKG / "cli" / "schema.json"
FLEET_ASYNC, FLEET_SYNC = PKG / "fleet" / "_async_methods.py", PKG / "fleet" / "_sync_methods.py"

# Longer names first: each is a plain text substitution.
SUBS = [
    ("Asynchronous client for", "Synchronous client for"),
    (
        "Use one AsyncDevClient from one event loop at a time; from another loop it opens new connections.",
        "One DevClient may be shared by many threads: its connection pool is locked.",
    ),
    ("The source of `_sync/client.py`", "Generated from `_async/client.py`"),
    ("The source of `_sync_driver.py`", "Generated from `_async_driver.py`"),
    ("the asyncio driver of", "the blocking driver of"),
    (
        "Waits on zmq.asyncio; use it from one event loop",
        "Waits on zmq.Poller; use it from one thread",
    ),
    ("`async with`", "`with`"),
    ("SupportsAsyncKVEventSources", "SupportsKVEventSources"),
    ("AsyncKVEventSubscriber", "KVEventSubscriber"),
    ("AsyncDevClient", "DevClient"),
    ("_Async", "_Sync"),
    ("AsyncRawResponses", "RawResponses"),
    ("AsyncWeightUpdate", "WeightUpdate"),
    ("AsyncTransport", "SyncTransport"),
    ("make_async_transport", "make_sync_transport"),
    ("httpx.AsyncClient", "httpx.Client"),
    ("AsyncIterator", "Iterator"),
    ("asynccontextmanager", "contextmanager"),
    ("new_async_poller", "new_poller"),
    ("async_wait_for", "wait_for"),
    ("__aenter__", "__enter__"),
    ("__aexit__", "__exit__"),
    ("__aiter__", "__iter__"),
    ("__anext__", "__next__"),
    ("StopAsyncIteration", "StopIteration"),
    ("aclose", "close"),
    ("Awaitable[RawResponse[T]]", "RawResponse[T]"),
    ("Awaitable[T]", "T"),
    ("async with ", "with "),
    ("async def ", "def "),
    ("await ", ""),
    ("the async face of", "the sync face of"),
]

MARK = re.compile(
    r"(?P<indent>[ \t]*)# -- generated: (?P<name>[^\n]+?) --\n.*?(?P=indent)# -- end generated --\n", re.S
)


class GenerateError(SystemExit):
    def __init__(self, message: str) -> None:
        super().__init__(f"generate: {message}")


# ---- types and values back to source ---------------------------------------------------------------------


class Imports:
    """What a generated module imports for the types it names."""

    def __init__(self) -> None:
        self.typing: set[str] = set()
        self.abc: set[str] = set()
        self.package: dict[str, set[str]] = {}  # module (relative to the package) -> names
        self.modules: set[str] = set()  # imported whole (httpx)

    def lines(self, *, runtime: tuple[str, ...]) -> tuple[list[str], list[str]]:
        """(imports at run time, imports for type checkers only): the package's `runtime` modules load
        anyway; any other (metrics) only for annotations."""
        now: list[str] = []
        later: list[str] = []
        if self.abc:
            now.append(f"from collections.abc import {', '.join(sorted(self.abc))}")
        later += [f"import {module}" for module in sorted(self.modules)]
        for module, names in sorted(self.package.items()):
            line = f"from ..{module} import {', '.join(sorted(names))}"
            (now if module in runtime else later).append(line)
        names = self.typing | ({"TYPE_CHECKING"} if later else set())
        if names:
            now.append(f"from typing import {', '.join(sorted(names))}")
        return now, later


def source(tp: Any, imports: Imports) -> str:
    """A type as the source text that names it."""
    if tp is None or tp is type(None):
        return "None"
    if tp is Any:
        imports.typing.add("Any")
        return "Any"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(source(a, imports) for a in args)
    if origin is typing.Literal:
        imports.typing.add("Literal")
        return f"Literal[{', '.join(repr(a) for a in args)}]"
    if origin is collections.abc.Callable:
        imports.abc.add("Callable")
        params, ret = args
        return f"Callable[[{', '.join(source(a, imports) for a in params)}], {source(ret, imports)}]"
    if origin is not None:
        return f"{_named(origin, imports)}[{', '.join(source(a, imports) for a in args)}]"
    if isinstance(tp, type):
        return _named(tp, imports)
    raise GenerateError(f"cannot name the type {tp!r} in generated code")


def _named(cls: type, imports: Imports) -> str:
    if cls.__module__ == "builtins":
        return cls.__name__
    if cls.__module__ == "collections.abc":
        imports.abc.add(cls.__name__)
        return cls.__name__
    if cls.__module__.split(".")[0] == "httpx":
        imports.modules.add("httpx")
        return f"httpx.{cls.__name__}"
    if cls.__module__.startswith("vllm_devclient."):
        imports.package.setdefault(cls.__module__.removeprefix("vllm_devclient."), set()).add(cls.__name__)
        return cls.__name__
    raise GenerateError(
        f"{cls.__module__}.{cls.__name__}: a route's types come from the package or the stdlib"
    )


def value(default: Any) -> str:
    if isinstance(default, bool | int | float | str | type(None)) or default == ():
        return repr(default)
    raise GenerateError(f"a default must be a plain value, got {default!r}")


# ---- the route methods -----------------------------------------------------------------------------------


def _check_route(route: Route) -> None:
    builder = route.endpoint
    if builder.__module__ != "vllm_devclient.endpoints":
        raise GenerateError(f"{route.name}: its builder {builder.__qualname__} is not in endpoints.py")
    wanted = [p.name for p in route.params]
    # inspect.signature reads names only: nothing is evaluated.
    names = list(inspect.signature(builder).parameters)
    if names != wanted:
        raise GenerateError(f"{route.name}: the record's parameters {wanted} are not the builder's {names}")
    _check_params(route)


def _check_params(method: Method) -> None:
    seen_keyword = False
    for p in method.params:
        if p.positional and seen_keyword:
            raise GenerateError(f"{method.name}: positional {p.name} after a keyword-only parameter")
        seen_keyword = seen_keyword or not p.positional
    if len(method.doc) > 99 or "\n" in method.doc:  # the docstring's first line fits in 110 columns
        raise GenerateError(f"{method.name}: the doc is one line of at most 99 characters")


def _docstring(method: Method, indent: str) -> str:
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


def _signature(params: tuple[Param, ...], imports: Imports) -> list[str]:
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
    _check_route(route)
    signature = ", ".join(_signature(route.params, imports))
    answer = source(route.answer, imports)
    arguments = ", ".join(f"{p.name}={p.name}" for p in route.params)
    return (
        f"    async def {route.name}({signature}) -> {answer}:\n"
        f"{_docstring(route, ' ' * 8)}\n"
        f"        return await self._send(endpoints.{route.endpoint.__name__}({arguments}), options)\n"
    )


def routes_module() -> str:
    imports = Imports()
    methods = "\n".join(route_method(r, imports) for r in ROUTES)
    now, later = imports.lines(runtime=("models",))
    typing_block = ["", "if TYPE_CHECKING:", *(f"    {line}" for line in later)] if later else []
    return "\n".join(
        [
            HEADER.format(name="routes.py").rstrip("\n"),
            '"""The route methods of the async client: one HTTP exchange each, from `routes.py`."""',
            "",
            "from __future__ import annotations",
            "",
            *now,
            "",
            "from typing_extensions import Unpack",
            "",
            "from .. import endpoints",
            "from .._base_client import RequestOptions",
            "from .core import _AsyncCore",
            *typing_block,
            "",
            '__all__ = ["_AsyncRoutes"]',
            "",
            "",
            "class _AsyncRoutes(_AsyncCore):",
            '    """Every route, one method each (generated from `vllm_devclient/routes.py`)."""',
            "",
            methods,
        ]
    )


# ---- the tables ------------------------------------------------------------------------------------------


def _defined(cls: str) -> set[str]:
    """What a fleet class writes itself (pause with rollback, the flows): left out of its table."""
    for path in sorted((PKG / "fleet").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                return {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    raise GenerateError(f"class {cls} not found in fleet/")


# How a fleet method passes on each kind of options (records.Options): its trailing parameter and argument.
_OPTIONS = {"request": ("**options: Unpack[RequestOptions]", "**options"), "wait": None, "none": None}


def _fleet_signature(method: Method, imports: Imports) -> tuple[str, str]:
    """(the parameters after self, the arguments passing them on by name)."""
    options = _OPTIONS[method.options] if isinstance(method, Call) else _OPTIONS["request"]
    params = _signature(method.params, imports)[1:]
    names = [f"{p.name}={p.name}" for p in method.params]
    if options is None:
        params = params[:-1]
    else:
        names.append(options[1])
    return ", ".join(params), ", ".join(names)


def _fleet_doc(method: Method, indent: str) -> str:
    """The client method's docstring, then what the fleet adds."""
    text = _docstring(method, indent)
    closing = f'\n{indent}"""' if method.params else '"""'
    body = text[: -len(closing)] if text.endswith(closing) else text.removesuffix('"""')
    note = [f"{indent}On every target at once: a FleetResult holds each target's answer or error."]
    if method.deadline is not None:
        note.append(f"{indent}The deadline is one moment for all targets.")
    return f"{body}\n\n" + "\n".join(note) + f'\n{indent}"""'


def fleet_module(kind: str) -> str:
    """`fleet/_async_methods.py` (kind "async") or `fleet/_sync_methods.py` ("sync")."""
    cls = "AsyncFleet" if kind == "async" else "Fleet"
    own = _defined(cls)
    every = [*ROUTES, *CALLS]
    for m in every:
        if m.cli.fleet_params and m.name not in own:
            raise GenerateError(f"{m.name} has fleet_params: {cls} must write {m.name}() itself")
    imports = Imports()
    methods = []
    for m in every:
        if m.name in own:
            continue
        _check_params(m)
        params, arguments = _fleet_signature(m, imports)
        answer = f"FleetResult[{source(m.answer, imports)}]"
        doc = _fleet_doc(m, " " * 8)
        if kind == "async":
            shared = ", shared_deadline=True" if m.deadline is not None else ""
            body = f"return await self._each(AsyncDevClient.{m.name}, dict({arguments}){shared})"
            methods.append(f"    async def {m.name}(self, {params}) -> {answer}:\n{doc}\n        {body}\n")
        else:
            body = f"return self._run(self._fleet.{m.name}({arguments}))"
            methods.append(f"    def {m.name}(self, {params}) -> {answer}:\n{doc}\n        {body}\n")
    imports.abc |= {"Awaitable", "Callable"} if kind == "async" else {"Coroutine"}
    now, later = imports.lines(runtime=("models",))
    if kind == "async":
        head = [
            "from ..client import AsyncDevClient",
            "from .results import FleetResult",
        ]
        hooks = [
            "    if TYPE_CHECKING:",
            "",
            "        async def _each(",
            "            self,",
            "            method: Callable[..., Awaitable[T]],",
            "            arguments: dict[str, Any],",
            "            *,",
            "            shared_deadline: bool = False,",
            "        ) -> FleetResult[T]: ...",
        ]
        name, what = "_AsyncFleetMethods", "AsyncFleet"
    else:
        head = ["from .results import FleetResult"]
        hooks = [
            "    if TYPE_CHECKING:",
            "        _fleet: AsyncFleet",
            "",
            "        def _run(self, coro: Coroutine[Any, Any, T]) -> T: ...",
        ]
        later = [*later, "from .async_fleet import AsyncFleet"]
        name, what = "_FleetMethods", "Fleet"
    typing_block = ["", "if TYPE_CHECKING:", *(f"    {line}" for line in later)]
    return "\n".join(
        [
            HEADER.format(name="routes.py and calls.py").rstrip("\n"),
            f'"""The methods of {what} that fan a client method out to every target (its signature, its '
            'docstring)."""',
            "",
            "from __future__ import annotations",
            "",
            *now,
            "from typing import TYPE_CHECKING, Any, TypeVar",
            "",
            "from typing_extensions import Unpack",
            "",
            "from .._base_client import RequestOptions",
            *head,
            *typing_block,
            "",
            f'__all__ = ["{name}"]',
            "",
            'T = TypeVar("T")',
            "",
            "",
            f"class {name}:",
            f'    """Every client method on every target of the {what} (generated from the records)."""',
            "",
            *hooks,
            "",
            "\n".join(methods),
        ]
    )


def tables() -> dict[str, str]:
    every = [*ROUTES, *CALLS]
    names = [m.name for m in every]
    if len(set(names)) != len(names):
        raise GenerateError("two records have the same name")
    raw = "\n".join(f"{r.name} = _AsyncRaw(_AsyncRoutes.{r.name})" for r in ROUTES)
    return {"raw-response methods (make generate)": raw}


def fill(text: str, filled: dict[str, str]) -> str:
    def replace(m: re.Match[str]) -> str:
        name, indent = m.group("name"), m.group("indent")
        if name not in filled:
            raise GenerateError(f"no table named {name!r}")
        body = "".join(f"{indent}{line}\n" for line in filled[name].splitlines())
        return f"{indent}# -- generated: {name} --\n{body}{indent}# -- end generated --\n"

    return MARK.sub(replace, text)


# ---- the sync surfaces -----------------------------------------------------------------------------------


def unasync(text: str, used: set[int]) -> str:
    for i, (old, new) in enumerate(SUBS):
        if old in text:
            used.add(i)
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


def _pairs() -> list[tuple[Path, Path]]:
    found = [
        (src, SYNC_DIR / src.name)
        for src in sorted(ASYNC_DIR.glob("*.py"))
        if src.name not in ("_support.py", "__init__.py")
    ]
    return [*found, *MORE_PAIRS]


# ---- the CLI's result schemas ----------------------------------------------------------------------------


def _tidy(node: Any) -> Any:
    """No titles; a float may be null (non-finite floats are written as null, see docs/cli.md)."""
    if isinstance(node, dict):
        out = {k: _tidy(v) for k, v in node.items() if k != "title"}
        if out.get("type") == "number":
            out["type"] = ["number", "null"]
        return out
    if isinstance(node, list):
        return [_tidy(v) for v in node]
    return node


def result_schemas() -> dict[str, Any]:
    from pydantic import TypeAdapter

    defs: dict[str, Any] = {}
    rules = []
    for method in (*ROUTES, *CALLS):
        kind = method.cli.result_type or method.answer
        if kind is None:
            schema: dict[str, Any] = {"type": "object", "maxProperties": 0, "description": "done: no answer"}
        else:
            schema = TypeAdapter(kind).json_schema(
                mode="serialization", ref_template="#/$defs/results/$defs/{model}"
            )
            defs.update(schema.pop("$defs", {}))
        result = {"anyOf": [{"type": "null"}, _tidy(schema)]}
        targets = {"additionalProperties": {"properties": {"result": result}}}
        rules.append(
            {
                "if": {"properties": {"command": {"const": method.command}}, "required": ["command"]},
                "then": {"properties": {"targets": targets}},
            }
        )
    return {
        "description": "Each command's target result, from the records' answer types (make generate).",
        "allOf": rules,
        "$defs": {name: _tidy(d) for name, d in sorted(defs.items())},
    }


_RESULTS = ',\n    "results": '


def schema_text() -> str:
    """schema.json with `$defs.results` (its last member) written anew, one rule or model per line; the rest
    of the file is written by hand and kept as it is."""
    text = SCHEMA.read_text()
    head = text[: text.index(_RESULTS)] if _RESULTS in text else text[: text.rindex("\n  }\n}")]
    results = result_schemas()
    rules = ",\n".join(f"        {json.dumps(rule)}" for rule in results["allOf"])
    defs = ",\n".join(f"        {json.dumps(name)}: {json.dumps(d)}" for name, d in results["$defs"].items())
    block = (
        f'{{\n      "description": {json.dumps(results["description"])},\n'
        f'      "allOf": [\n{rules}\n      ],\n      "$defs": {{\n{defs}\n      }}\n    }}'
    )
    out = f"{head}{_RESULTS}{block}\n  }}\n}}\n"
    if json.loads(out)["$defs"]["results"] != results:
        raise GenerateError("schema.json: $defs.results must be the last member of $defs")
    return out


# ---- the files -------------------------------------------------------------------------------------------


def wanted() -> dict[Path, str]:
    out: dict[Path, str] = {ASYNC_DIR / "routes.py": ruff(routes_module(), ASYNC_DIR / "routes.py")}
    for kind, path in (("async", FLEET_ASYNC), ("sync", FLEET_SYNC)):
        out[path] = ruff(fleet_module(kind), path)
    filled = tables()
    for path in sorted(ASYNC_DIR.glob("*.py")):
        text = out.get(path, path.read_text())
        if "# -- generated:" in text:
            out[path] = fill(text, filled)
    used: set[int] = set()
    for src, dest in _pairs():
        text = out.get(src, src.read_text())
        if text.startswith("# Generated"):  # the source is generated itself: one header is enough
            text = text.partition("\n")[2]
        name = src.relative_to(PKG).as_posix()
        out[dest] = ruff(HEADER.format(name=name) + unasync(text, used), dest)
    unused = [SUBS[i] for i in range(len(SUBS)) if i not in used]
    if unused:
        raise GenerateError(f"substitutions that match nothing (remove them): {unused}")
    out[SCHEMA] = schema_text()
    return out


def _orphans() -> list[Path]:
    """Generated sync modules whose async source is gone."""
    sources = {p.name for p in ASYNC_DIR.glob("*.py")}
    return [
        p for p in SYNC_DIR.glob("*.py")
        if p.name not in sources and p.read_text().startswith("# Generated from")
    ]  # fmt: skip


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = list(_orphans())
    if not check:
        for path in stale:
            path.unlink()
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
