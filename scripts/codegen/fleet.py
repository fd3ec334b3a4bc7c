"""Both fleets' methods (`fleet/_async_methods.py`, `fleet/_sync_methods.py`): one real method per route and
call record that the fleet class does not write itself, with the record's signature and docstring,
answering `FleetResult[answer]` (a method with a `deadline` parameter gives every target the same moment)."""

from __future__ import annotations

from vllm_devclient.calls import CALLS
from vllm_devclient.records import Call, Method
from vllm_devclient.routes import ROUTES

from .methods import check_params, docstring, signature
from .source import Imports, source

HEADER = "# Generated from vllm_devclient/routes/ and calls.py by scripts/generate.py; do not edit.\n"


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
    note = [f"{indent}On every target at once: a FleetResult holds each target's answer or error."]
    if method.deadline is not None:
        note.append(f"{indent}The deadline is one moment for all targets.")
    return f"{body}\n\n" + "\n".join(note) + f'\n{indent}"""'


def fleet_module(kind: str) -> str:
    """`fleet/_async_methods.py` (kind "async") or `fleet/_sync_methods.py` ("sync")."""
    every = [*ROUTES, *CALLS]
    # A method with parameters of the fleet's own (pause's rollback) is written by the fleet class itself.
    own = {m.name for m in every if m.cli.fleet_params}
    imports = Imports()
    methods = []
    for m in every:
        if m.name in own:
            continue
        check_params(m)
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
            HEADER.rstrip("\n"),
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
