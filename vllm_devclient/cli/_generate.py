"""One subcommand per public method of `AsyncDevClient`, built from its signature and docstring
(`_signature.py`) and the override table (`_overrides.py`).

A parameter's shape picks its click type: bool -> `--flag` (default False) or `--flag/--no-flag`; int,
float, str; `Literal[...]` -> a choice; a list of strings -> a repeatable option; anything else -> JSON
(inline or `@file`, checked to be an object or a list as the annotation says, and validated into a
pydantic model where the annotation is one). Only the options given on the command line are passed, so
the client's own defaults apply to the rest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from pydantic import BaseModel, ValidationError

from ..fleet import AsyncFleet, FleetResult
from ._exit import EXIT_CODES_SHORT
from ._overrides import HELP, OVERRIDES, PARAM_HELP, RENDER, TOPICS, VERDICT, Opt, Override
from ._progress import FleetProgress
from ._run import Job, execute
from ._settings import SECONDS, ParamTypeBase, global_params, settings_of, split_globals
from ._signature import MethodInfo, Param, method_table

__all__ = ["JSONParam", "build_command", "kebab", "method_commands"]

_GIVEN = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT, ParameterSource.PROMPT)
SUBCOMMAND_EPILOG = "Global options (--url, -o, --timeout, ...): vllm-devclient --help. " + EXIT_CODES_SHORT


def kebab(name: str) -> str:
    return name.replace("_", "-")


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


def _help(method: str, p: Param, opt: Opt) -> str:
    text = opt.help or p.help or PARAM_HELP.get(p.name) or f"The {p.name!r} argument of {method}()."
    return text[:1].upper() + text[1:]


def _click_param(method: str, p: Param, opt: Opt) -> click.Parameter:
    """The click argument or option of one parameter."""
    if opt.argument or p.role == "argument":
        multiple = p.shape == "multiple"
        return click.Argument(
            [p.name], type=opt.type or _scalar_type(p), nargs=-1 if multiple else 1, required=p.required
        )
    decl = "--" + kebab(p.name)
    if p.role == "deadline":
        return click.Option(
            [*(opt.decls or ("--deadline",)), _dest(p)],
            type=SECONDS,
            metavar="SECONDS",
            default=None if p.required else p.default,
            required=p.required,
            show_default=True,
            help=opt.help or PARAM_HELP["deadline"],
        )
    metavar = opt.metavar
    if metavar is None and p.shape == "float" and ("interval" in p.name or "timeout" in p.name):
        metavar = "SECONDS"
    common: dict[str, Any] = {"help": _help(method, p, opt), "metavar": metavar}
    if p.required:
        common["required"] = True
    else:
        common["default"] = p.default
    if p.shape == "bool":
        if opt.decls:
            names = list(opt.decls)
        elif p.default is False and not p.optional:
            return click.Option([decl, p.name], is_flag=True, **common)
        else:
            names = [f"{decl}/--no-{kebab(p.name)}"]
        return click.Option([*names, p.name], show_default=p.default is not None, **common)
    names = [*(opt.decls or (decl,)), p.name]
    if p.shape == "multiple" or opt.multiple:
        common["default"] = None
        return click.Option(names, multiple=True, type=opt.type or click.STRING, **common)
    if p.shape == "json":
        common["default"] = None
        return click.Option(names, type=opt.type or JSONParam(p.json_kinds, p.model), **common)
    show = p.default is not None and not p.required
    return click.Option(names, type=opt.type or _scalar_type(p), show_default=show, **common)


def _dest(p: Param) -> str:
    """The click name of a parameter: its own, except a deadline (the legacy `timeout` of the waits would
    clash with the global --timeout)."""
    return "deadline" if p.role == "deadline" else p.name


def _scalar_type(p: Param) -> click.ParamType[Any]:
    if p.shape == "choice":
        return click.Choice([str(c) for c in p.choices])
    if p.shape == "int":
        return click.INT
    return click.FLOAT if p.shape == "float" else click.STRING


def _value(p: Param, value: Any) -> Any:
    """A click value as the client wants it."""
    if p.shape == "choice" and value is not None:
        return {str(c): c for c in p.choices}.get(value, value)
    if p.shape in ("multiple", "json") and isinstance(value, tuple):
        return list(value)
    return value


def _arguments(
    info: MethodInfo, ctx: click.Context, values: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The positional and keyword arguments of the client call: what the command line gave (the client's
    defaults apply to the rest), and every option of the override table."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    known = {_dest(p): p for p in info.params if p.role in ("argument", "option", "deadline")}
    for name, value in values.items():
        given = ctx.get_parameter_source(name) in _GIVEN
        p = known.get(name)
        if p is None:
            if given:
                kwargs[name] = value  # an option of the override table: its `prepare` takes it out
            continue
        if p.positional_only:
            args.append(_value(p, value))
        elif given or p.required:
            kwargs[p.name] = _value(p, value)
    return args, kwargs


def _deadline(info: MethodInfo, kwargs: Mapping[str, Any]) -> float | None:
    for p in info.params:
        if p.role == "deadline":
            value = kwargs.get(p.name, None if p.required else p.default)
            return float(value) if isinstance(value, int | float) else None
    return None


def build_command(info: MethodInfo, override: Override) -> click.Command:
    """The subcommand of one client method."""
    name = override.name or kebab(info.name)
    params: list[click.Parameter] = []
    for p in info.params:
        if p.role in ("argument", "option", "deadline"):
            params.append(_click_param(info.name, p, override.params.get(p.name, Opt())))
    params += override.extra

    def callback(**values: Any) -> None:
        ctx = click.get_current_context()
        settings = settings_of(ctx, split_globals(values))
        args, kwargs = _arguments(info, ctx, values)
        if override.prepare is not None:
            override.prepare(kwargs)
        request_timeout = info.param("request_timeout")
        if settings.timeout_given and request_timeout is not None:
            kwargs[request_timeout.name] = settings.timeout
        execute(ctx, settings, _job(name, info, override, args, kwargs))

    summary = info.summary or HELP.get(info.name) or f"AsyncDevClient.{info.name}()."
    return click.Command(
        name,
        callback=callback,
        params=[*params, *global_params(top=False)],
        help=summary,
        short_help=summary,
        epilog=SUBCOMMAND_EPILOG,
    )


def _job(name: str, info: MethodInfo, override: Override, args: list[Any], kwargs: dict[str, Any]) -> Job:
    async def call(fleet: AsyncFleet, progress: FleetProgress) -> FleetResult[Any]:
        if override.fleet_call is not None:
            result: FleetResult[Any] = await override.fleet_call(fleet, kwargs)
            return result

        def one(client: Any) -> Any:
            hooks = {"on_attempt": progress.attempt_hook(client.base_url)} if info.accepts_on_attempt else {}
            return getattr(client, info.name)(*args, **kwargs, **hooks)

        return await fleet.map(one, operation=info.name)

    verdict = VERDICT.get(info.name)
    return Job(
        command=name,
        call=call,
        verdict=None if verdict is None else (lambda value: verdict(value, kwargs)),
        render=override.render or RENDER.get(info.name),
        result=override.result,
        deadline=_deadline(info, kwargs),
    )


def method_commands() -> list[tuple[click.Command, str, tuple[str, ...]]]:
    """(command, category, aliases) for every client method; the aliases are the method name, as it is and
    in kebab case, where they differ from the command's name."""
    out = []
    table = method_table()
    topic_of = {method: topic for topic, methods in TOPICS.items() for method in methods}
    ordered = [m for m in topic_of if m in table] + [m for m in table if m not in topic_of]
    for method in ordered:
        command = build_command(table[method], OVERRIDES.get(method, Override()))
        aliases = tuple(a for a in dict.fromkeys((method, kebab(method))) if a != command.name)
        out.append((command, topic_of.get(method, "more"), aliases))
    return out
