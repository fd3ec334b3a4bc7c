"""One subcommand per record of a client method (`routes/`, `calls.py`): its arguments and options from the
record's parameters, its help from their one-line docs, how an answer reads and which answers fail from the
record's `Cli`.

A parameter's type picks its click type: bool -> `--flag` (default False) or `--flag/--no-flag`; int,
float, str; `Literal[...]` -> a choice; a list of strings -> a repeatable option; a list of (key, value)
pairs -> a repeatable `KEY=VALUE`; a union holding str -> text; anything else -> JSON (inline or `@file`,
checked to be an object or a list as the type says, and validated into a pydantic model where the type is
one). Only the options given
on the command line are passed, so the client's own defaults apply to the rest.
"""

from __future__ import annotations

import collections.abc as cabc
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import click
from click.core import ParameterSource
from pydantic import BaseModel, ValidationError

from ..calls import CALLS
from ..errors import InvalidParameterError
from ..fleet import AsyncFleet, FleetResult
from ..records import TOPICS, Method, Param
from ..routes import ROUTES
from ._exit import EXIT_CODES_SHORT
from ._progress import FleetProgress
from ._run import Job, execute
from ._settings import SECONDS, ParamTypeBase, global_params, settings_of, split_globals

__all__ = ["CATEGORIES", "JSONParam", "build_command", "kebab", "method_commands"]

_GIVEN = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT, ParameterSource.PROMPT)
SUBCOMMAND_EPILOG = "Global options (--url, -o, --timeout, ...): vllm-devclient --help. " + EXIT_CODES_SHORT
# `--help` lists the commands by topic in this order; the tools last.
CATEGORIES = (*TOPICS, "tools")

Kind = Literal["bool", "int", "float", "str", "choice", "multiple", "pairs", "json", "callable"]
_SEQUENCES = {list, tuple, set, frozenset, cabc.Sequence, cabc.Iterable, cabc.Collection, cabc.Set}
_MAPPINGS = {dict, cabc.Mapping, cabc.MutableMapping}
_SCALARS = {"int", "float", "str", "choice"}


def kebab(name: str) -> str:
    return name.replace("_", "-")


@dataclass(frozen=True)
class Shape:
    """What a type is to the command line."""

    kind: Kind
    optional: bool = False  # None is accepted
    choices: tuple[Any, ...] = ()
    json_kinds: tuple[type, ...] = ()  # dict and/or list; empty: any JSON value
    model: type[BaseModel] | None = None


def shape(tp: Any) -> Shape:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        optional = len(members) < len(args)
        shapes = [shape(m) for m in members]
        if len(shapes) == 1:
            return Shape(shapes[0].kind, optional, shapes[0].choices, shapes[0].json_kinds, shapes[0].model)
        if any(s.kind == "pairs" for s in shapes):
            return Shape("pairs", optional)
        if any(s.kind == "str" for s in shapes):  # text or something else: the command line gives text
            return Shape("str", optional)
        kinds = tuple(dict.fromkeys(k for s in shapes for k in s.json_kinds))
        any_json = any(s.kind == "json" and not s.json_kinds for s in shapes)
        return Shape("json", optional, json_kinds=() if any_json else kinds)
    simple: dict[Any, Kind] = {bool: "bool", int: "int", float: "float", str: "str"}
    if tp in simple:
        return Shape(simple[tp])
    if origin is Literal:
        return Shape("choice", None in args, tuple(a for a in args if a is not None))
    if origin is cabc.Callable:
        return Shape("callable")
    if origin in _MAPPINGS:
        return Shape("json", json_kinds=(dict,))
    if origin in _SEQUENCES:
        item = args[0] if args else Any
        if item is str:
            return Shape("multiple")
        if typing.get_origin(item) is tuple and typing.get_args(item)[:1] == (str,):
            return Shape("pairs")
        return Shape("json", json_kinds=(list,))
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return Shape("json", json_kinds=(dict,), model=tp)
    return Shape("json")


class JSONParam(ParamTypeBase):
    """A JSON value given inline or as @path to a file holding it."""

    name = "JSON"

    def __init__(self, kinds: tuple[type, ...] = (), model: type[BaseModel] | None = None) -> None:
        self.kinds = kinds
        self.model = model

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        text = value
        if value.startswith("@"):
            try:
                text = Path(value[1:]).read_text()
            except OSError as exc:
                self.fail(f"cannot read {value[1:]}: {exc.strerror}", param, ctx)
        try:
            data = json.loads(text)
        except ValueError as exc:
            self.fail(f"not valid JSON ({exc}): {value[:80]!r}", param, ctx)
        if self.kinds and not isinstance(data, self.kinds):
            wanted = " or ".join("an object" if k is dict else "a list" for k in self.kinds)
            self.fail(f"must be {wanted}, got {type(data).__name__}", param, ctx)
        if self.model is not None:
            try:
                return self.model.model_validate(data)
            except ValidationError as exc:
                self.fail(f"not a valid {self.model.__name__}: {exc}", param, ctx)
        return data


class KeyValue(ParamTypeBase):
    name = "KEY=VALUE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        key, sep, val = str(value).partition("=")
        if not sep or not key:
            self.fail(f"expected KEY=VALUE, got {value!r}", param, ctx)
        return (key, val)


# ---- parameters ----------------------------------------------------------------------------------------


def _is_argument(p: Param, s: Shape) -> bool:
    return p.argument or (p.positional and p.required and s.kind in _SCALARS)


def _shown(p: Param) -> bool:
    """On the command line: values and the deadline; each try's bound comes from --timeout, hooks from
    the progress display."""
    return p.role in ("value", "deadline")


def param_shape(p: Param) -> Shape:
    """`shape(p.type)`, narrowed to the record's choices when it has some."""
    s = shape(p.type)
    return Shape("choice", s.optional, p.choices) if p.choices else s


def _click_param(p: Param) -> click.Parameter:
    s = param_shape(p)
    if _is_argument(p, s):
        many = s.kind == "multiple"
        required = p.required and p.none_flag is None
        return click.Argument([p.name], type=_scalar_type(s), nargs=-1 if many else 1, required=required)
    if p.role == "deadline":
        return click.Option(
            [p.option or "--deadline", p.name],
            type=SECONDS,
            metavar="SECONDS",
            default=None if p.required else p.default,
            required=p.required,
            show_default=True,
            help=f"{p.help} Exit 4 when it passes.",
        )
    decl = p.option or "--" + kebab(p.name)
    metavar = "SECONDS" if s.kind == "float" and ("interval" in p.name or "timeout" in p.name) else None
    common: dict[str, Any] = {"help": p.help, "metavar": metavar}
    if p.required:
        common["required"] = True
    else:
        common["default"] = p.default
    if s.kind == "bool":
        if p.default is False and not s.optional:
            return click.Option([decl, p.name], is_flag=True, **common)
        names = [f"{decl}/--no-{decl.removeprefix('--')}", p.name]
        return click.Option(names, show_default=p.default is not None, **common)
    if s.kind in ("multiple", "pairs"):
        kind = KeyValue() if s.kind == "pairs" else click.STRING
        return click.Option([decl, p.name], multiple=True, type=kind, **{**common, "default": None})
    if s.kind == "json":
        plain = list(p.default) if isinstance(p.default, tuple) else p.default
        default_text = "" if p.required or p.default is None else f"  [default: {json.dumps(plain)}]"
        common.update(default=None, help=f"{p.help} Inline or @file.{default_text}")
        return click.Option([decl, p.name], type=JSONParam(s.json_kinds, s.model), **common)
    show = p.default is not None and not p.required
    return click.Option([decl, p.name], type=_scalar_type(s), show_default=show, **common)


def _scalar_type(s: Shape) -> click.ParamType[Any]:
    if s.kind == "choice":
        return click.Choice([str(c) for c in s.choices])
    if s.kind == "int":
        return click.INT
    return click.FLOAT if s.kind == "float" else click.STRING


def _value(s: Shape, value: Any) -> Any:
    """A click value as the client wants it."""
    if s.kind == "choice" and value is not None:
        return {str(c): c for c in s.choices}.get(value, value)
    if s.kind in ("multiple", "json", "pairs") and isinstance(value, tuple):
        return list(value)
    return value


def _none_flag(p: Param) -> click.Option:
    assert p.none_flag is not None
    flag, help = p.none_flag
    return click.Option([flag, f"none_{p.name}"], is_flag=True, help=help)


def _arguments(method: Method, ctx: click.Context, values: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of the client call: what the command line gave (the client's defaults apply to
    the rest)."""
    kwargs: dict[str, Any] = {}
    for p in (*method.params, *method.cli.fleet_params):
        if not _shown(p):
            continue
        value = values.get(p.name)
        given = ctx.get_parameter_source(p.name) in _GIVEN and value not in (None, ())
        if p.none_flag is not None:
            if bool(values.get(f"none_{p.name}")) == given:
                what = p.name.upper()
                raise click.UsageError(f"give {what} or {p.none_flag[0]} (not both, not neither)", ctx)
            kwargs[p.name] = _value(param_shape(p), value) if given else None
        elif given or p.required:
            kwargs[p.name] = _value(param_shape(p), value)
    return kwargs


# ---- commands ------------------------------------------------------------------------------------------


def build_command(method: Method) -> click.Command:
    """The subcommand of one client method."""
    name = method.command
    params: list[click.Parameter] = []
    for p in (*method.params, *method.cli.fleet_params):
        if _shown(p):
            params.append(_click_param(p))
            if p.none_flag is not None:
                params.append(_none_flag(p))
    request_timeout = next((p for p in method.params if p.role == "request_timeout"), None)

    def callback(**values: Any) -> None:
        ctx = click.get_current_context()
        try:
            settings = settings_of(ctx, split_globals(values))
            kwargs = _arguments(method, ctx, values)
            if settings.timeout_given and request_timeout is not None:
                kwargs[request_timeout.name] = settings.timeout
            execute(ctx, settings, _job(name, method, kwargs))
        except InvalidParameterError as exc:  # refused before sending: this command's usage, not the group's
            raise click.UsageError(str(exc), ctx) from exc

    return click.Command(
        name,
        callback=callback,
        params=[*params, *global_params(top=False)],
        help=method.doc,
        short_help=method.doc,
        epilog=SUBCOMMAND_EPILOG,
    )


def _job(name: str, method: Method, kwargs: dict[str, Any]) -> Job:
    hook = next((p.name for p in method.params if p.role == "hook"), None)

    async def call(fleet: AsyncFleet, progress: FleetProgress) -> FleetResult[Any]:
        if method.cli.fleet_params:  # the fleet's own method (pause with rollback)
            result: FleetResult[Any] = await getattr(fleet, method.name)(**kwargs)
            return result

        def one(client: Any) -> Any:
            hooks = {hook: progress.attempt_hook(client.base_url)} if hook is not None else {}
            return getattr(client, method.name)(**kwargs, **hooks)

        return await fleet.map(one, operation=method.name)

    verdict = method.cli.verdict
    deadline = method.deadline
    return Job(
        command=name,
        call=call,
        verdict=None if verdict is None else (lambda value: verdict(value, kwargs)),
        render=method.cli.render,
        result=method.cli.result,
        deadline=None if deadline is None else float(kwargs.get(deadline.name, deadline.default)),
    )


def method_commands(
    methods: tuple[Method, ...] = (*ROUTES, *CALLS),
) -> list[tuple[click.Command, str, tuple[str, ...]]]:
    """(command, topic, aliases) for every record, by topic; the aliases are the method name, as it is and
    in kebab case, where they differ from the command's name."""
    out: list[tuple[click.Command, str, tuple[str, ...]]] = []
    for method in sorted(methods, key=lambda m: TOPICS.index(m.cli.topic)):
        command = build_command(method)
        aliases = tuple(a for a in dict.fromkeys((method.name, kebab(method.name))) if a != command.name)
        out.append((command, method.cli.topic, aliases))
    return out
