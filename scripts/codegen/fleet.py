"""Both fleets' methods (`fleet/_async_methods/`, `fleet/_sync_methods/`): one real method per route and
call record that the fleet class does not write itself, with the record's signature and docstring,
answering `FleetResult[answer]` (a method with a `deadline` parameter gives every target the same moment).

One mixin module per topic of the records (`cache.py`: `_AsyncCacheMethods`, `_CacheMethods`), and the
package's `__init__.py` composing them into `_AsyncFleetMethods` and `_FleetMethods`, which the fleet
classes inherit."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from vllm_devclient.calls import CALLS
from vllm_devclient.records import TOPICS, Call, Method
from vllm_devclient.routes import ROUTES

from . import PKG, GenerateError
from .methods import check_params, docstring, signature
from .source import Imports, source

TOOL = "by scripts/generate.py; do not edit."
# Each kind: the package, the fleet class, the composed mixin, a topic's mixin ("{}": the topic, titled).
KINDS = {
    "async": ("_async_methods", "AsyncFleet", "_AsyncFleetMethods", "_Async{}Methods"),
    "sync": ("_sync_methods", "Fleet", "_FleetMethods", "_{}Methods"),
}

# What a topic's mixin needs of the fleet class that composes it (type checkers only).
HOOKS = {
    "async": [
        "    if TYPE_CHECKING:",
        "",
        "        async def _each(",
        "            self,",
        "            method: Callable[..., Awaitable[T]],",
        "            arguments: dict[str, Any],",
        "            *,",
        "            shared_deadline: bool = False,",
        "        ) -> FleetResult[T]: ...",
    ],
    "sync": [
        "    if TYPE_CHECKING:",
        "        _fleet: AsyncFleet",
        "",
        "        def _run(self, coro: Coroutine[Any, Any, T]) -> T: ...",
    ],
}

# How a fleet method passes on each kind of options (records.Options): its trailing parameter and argument.
_OPTIONS = {"request": ("**options: Unpack[RequestOptions]", "**options"), "wait": None, "none": None}


def _fleet_signature(method: Method, imports: Imports) -> tuple[str, str]:
    """(the parameters after self, the arguments passing them on by name)."""
    options = _OPTIONS[method.options] if isinstance(method, Call) else _OPTIONS["request"]
    params = signature(method.params, imports)[1:]
    names = [f"{p.name}={p.name}" for p in method.params]
    if options is None:
        params = params[:-1]
    else:
        names.append(options[1])
    return ", ".join(params), ", ".join(names)


def _fleet_doc(method: Method, indent: str) -> str:
    """The client method's docstring, then what the fleet adds."""
    text = docstring(method, indent)
    closing = f'\n{indent}"""' if method.params else '"""'
    body = text[: -len(closing)] if text.endswith(closing) else text.removesuffix('"""')
    note = [
        f"{indent}On every target at once: a FleetResult of each target's answer; when any target failed,",
        f"{indent}FleetError with every target's outcome (a fleet made with raise_on_error=False returns the",
        f"{indent}FleetResult, failures inside).",
    ]
    if method.deadline is not None:
        note.append(f"{indent}The deadline is one moment for all targets.")
    return f"{body}\n\n" + "\n".join(note) + f'\n{indent}"""'


def _fleet_method(method: Method, kind: str, imports: Imports) -> str:
    check_params(method)
    params, arguments = _fleet_signature(method, imports)
    answer = f"FleetResult[{source(method.answer, imports)}]"
    doc = _fleet_doc(method, " " * 8)
    if kind == "async":
        shared = ", shared_deadline=True" if method.deadline is not None else ""
        body = f"return await self._each(AsyncDevClient.{method.name}, dict({arguments}){shared})"
        return f"    async def {method.name}(self, {params}) -> {answer}:\n{doc}\n        {body}\n"
    body = f"return self._run(self._fleet.{method.name}({arguments}))"
    return f"    def {method.name}(self, {params}) -> {answer}:\n{doc}\n        {body}\n"


def _homes() -> dict[str, str]:
    """Each record's name -> the module of the package that holds it (a generated file names its sources)."""
    from vllm_devclient import routes

    homes = {m.name: "calls.py" for m in CALLS}
    for info in pkgutil.iter_modules(routes.__path__):
        family = importlib.import_module(f"{routes.__name__}.{info.name}")
        homes.update({r.name: f"routes/{info.name}.py" for r in family.ROUTES})
    if missing := [r.name for r in ROUTES if r.name not in homes]:
        raise GenerateError(f"routes in no module of vllm_devclient/routes/: {missing}")
    return homes


def by_topic() -> dict[str, list[Method]]:
    """The fleets' generated methods by topic, in the order of records.TOPICS (a topic with none: left out).
    A method with parameters of the fleet's own (pause's rollback) is written by the fleet class itself."""
    every = [m for m in (*ROUTES, *CALLS) if not m.cli.fleet_params]
    grouped = {topic: [m for m in every if m.cli.topic == topic] for topic in TOPICS}
    return {topic: methods for topic, methods in grouped.items() if methods}


def _header(sources: list[str]) -> str:
    """The first line: the sources, the first with the package's path, the rest relative to the package
    (`vllm_devclient/routes/cache.py and calls.py`)."""
    *most, last = dict.fromkeys(sources)
    named = f"{', '.join(most)} and {last}" if most else last
    return f"# Generated from vllm_devclient/{named} {TOOL}"


def topic_module(kind: str, topic: str, methods: list[Method], homes: dict[str, str]) -> str:
    """`fleet/_async_methods/<topic>.py` (kind "async") or `fleet/_sync_methods/<topic>.py` ("sync")."""
    _, what, _, mixin = KINDS[kind]
    imports = Imports()
    bodies = [_fleet_method(m, kind, imports) for m in methods]
    imports.abc |= {"Awaitable", "Callable"} if kind == "async" else {"Coroutine"}
    now, later = imports.lines(runtime=("models",), package="...")
    head = ["from ...client import AsyncDevClient"] if kind == "async" else []
    if kind == "sync":
        later = [*later, "from ..async_fleet import AsyncFleet"]
    typing_block = ["", "if TYPE_CHECKING:", *(f"    {line}" for line in later)] if later else []
    return "\n".join(
        [
            _header([homes[m.name] for m in methods]),
            f'"""The {topic} methods of {what}, each on every target (the client method\'s signature and '
            'docstring)."""',
            "",
            "from __future__ import annotations",
            "",
            *now,
            "from typing import TYPE_CHECKING, Any, TypeVar",
            "",
            "from typing_extensions import Unpack",
            "",
            "from ..._base_client import RequestOptions",
            *head,
            "from ..results import FleetResult",
            *typing_block,
            "",
            f'__all__ = ["{mixin.format(topic.title())}"]',
            "",
            'T = TypeVar("T")',
            "",
            "",
            f"class {mixin.format(topic.title())}:",
            f'    """The {topic} client methods on every target of the {what}."""',
            "",
            *HOOKS[kind],
            "",
            "\n".join(bodies),
        ]
    )


def composed_module(kind: str, topics: list[str]) -> str:
    """`fleet/_async_methods/__init__.py` or `fleet/_sync_methods/__init__.py`: one mixin of every topic's."""
    _, what, name, mixin = KINDS[kind]
    mixins = {topic: mixin.format(topic.title()) for topic in topics}
    return "\n".join(
        [
            _header(["routes/", "calls.py", "records.py"]),  # records.TOPICS: the order
            f'"""The methods of {what} that fan a client method out to every target, a mixin per topic."""',
            "",
            *(f"from .{topic} import {m}" for topic, m in mixins.items()),
            "",
            f'__all__ = ["{name}"]',
            "",
            "",
            f"class {name}({', '.join(mixins.values())}):",
            f'    """Every client method on every target of the {what} (generated from the records)."""',
            "",
        ]
    )


def fleet_modules() -> dict[Path, str]:
    """Every module of both fleets' methods (not yet formatted), by path."""
    homes, topics = _homes(), by_topic()
    out: dict[Path, str] = {}
    for kind, (package, *_) in KINDS.items():
        folder = PKG / "fleet" / package
        out[folder / "__init__.py"] = composed_module(kind, list(topics))
        for topic, methods in topics.items():
            out[folder / f"{topic}.py"] = topic_module(kind, topic, methods, homes)
    return out
