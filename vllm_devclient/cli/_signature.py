"""What each public method of `AsyncDevClient` looks like to a command line: its parameters, their roles and
shapes, and the help its docstring gives. No click here; `_generate` turns this into click commands.

Roles (by name, so a signature change on the client needs no change here):

- `deadline` is the whole wait's bound (`--deadline`); so is a float `timeout` on a method that has no
  `deadline` (the waits and the barrier before the `deadline=` rename).
- `request_timeout` is one try's HTTP bound: the global `--timeout`, when given, fills it.
- `timeout`, `extra_headers`, `extra_query`, `extra_body` are per-call options: the global options cover
  them, so they are not options of each subcommand.
- `on_attempt` (and any callable) is a hook: the progress display may fill it; never an option.

Shapes: bool, int, float, str, a choice (`Literal[...]`), a list of strings (repeatable option), or JSON
(mappings, lists of anything else, pydantic models, `Any`). Required positional parameters of a scalar
shape become arguments; everything else becomes an option.
"""

from __future__ import annotations

import collections.abc as cabc
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import typing_extensions
from pydantic import BaseModel

from ..client import AsyncDevClient
from ..fleet import CLIENT_METHODS

__all__ = [
    "REQUIRED",
    "MethodInfo",
    "Param",
    "client_methods",
    "method_table",
    "parse_docstring",
    "read_method",
]

Role = Literal["argument", "option", "deadline", "request_timeout", "per_call", "hook"]
Shape = Literal["bool", "int", "float", "str", "choice", "multiple", "json", "callable"]

PER_CALL = frozenset({"timeout", "extra_headers", "extra_query", "extra_body"})
HOOKS = frozenset({"on_attempt"})
REQUIRED: Any = inspect.Parameter.empty

_SEQUENCES = {list, tuple, set, frozenset, cabc.Sequence, cabc.Iterable, cabc.Collection, cabc.Set}
_MAPPINGS = {dict, cabc.Mapping, cabc.MutableMapping}
_SCALARS = {"int", "float", "str", "choice"}


@dataclass(frozen=True)
class Param:
    """One parameter of a client method, as the command line sees it."""

    name: str
    role: Role
    shape: Shape
    default: Any  # REQUIRED when there is none
    positional_only: bool = False
    optional: bool = False  # None is accepted
    choices: tuple[Any, ...] = ()
    json_kinds: tuple[type, ...] = ()  # dict and/or list; empty: any JSON value
    model: type[BaseModel] | None = None
    help: str | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class MethodInfo:
    name: str
    summary: str  # the docstring's first paragraph, on one line
    params: tuple[Param, ...] = field(default=())

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    @property
    def accepts_on_attempt(self) -> bool:
        return self.param("on_attempt") is not None


def client_methods() -> dict[str, Callable[..., Any]]:
    """The client's method table: every public coroutine method, by name (the fleet's list)."""
    return {name: getattr(AsyncDevClient, name) for name in sorted(CLIENT_METHODS)}


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Keyword Args|Keyword Arguments|Params):\s*$")
_ARG = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+):\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(first paragraph on one line, parameter name -> help) from a Google-style `Args:` block or
    `:param name:` lines."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    for line in lines:
        text = line.strip()
        if not text or _SECTION.match(text) or text.startswith(":"):
            break
        summary.append(text)
    helps: dict[str, list[str]] = {}
    current: str | None = None
    entry_indent = 0
    section_indent: int | None = None  # set while inside an `Args:` block
    for line in lines:
        text = line.strip()
        if not text:
            continue
        indent = len(line) - len(line.lstrip())
        sphinx = _SPHINX.match(text)
        if sphinx:
            current, entry_indent, section_indent = sphinx.group(1), indent, None
            helps[current] = [sphinx.group(2)]
            continue
        if _SECTION.match(text):
            section_indent, current = indent, None
            continue
        if section_indent is not None and indent > section_indent:
            entry = _ARG.match(text)
            if entry and (current is None or indent <= entry_indent):
                current, entry_indent = entry.group(1).lstrip("*"), indent
                helps[current] = [entry.group(3)]
            elif current is not None:
                helps[current].append(text)
            continue
        section_indent = None
        if current is not None and indent > entry_indent:  # a `:param` line continued
            helps[current].append(text)
            continue
        current = None
    joined = {name: " ".join(part for part in parts if part) for name, parts in helps.items()}
    return " ".join(summary), {name: text for name, text in joined.items() if text}


def _resolve(fn: Callable[..., Any], annotation: Any) -> Any:
    """One annotation as a type (string annotations evaluated in the method's module; Any when they name
    something only imported for type checking)."""
    if not isinstance(annotation, str):
        return annotation
    namespace = dict(vars(typing))
    namespace.update(getattr(fn, "__globals__", {}))
    try:
        return eval(annotation, namespace)
    except Exception:
        return Any


def _shape(tp: Any) -> tuple[Shape, bool, tuple[Any, ...], tuple[type, ...], type[BaseModel] | None]:
    """(shape, accepts None, choices, JSON kinds, pydantic model) of a type."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _shape(args[0])
    if origin in (typing.Union, types.UnionType):
        # NotGiven stands for "not given" like None does: the command line passes only what is given.
        members = [a for a in args if a is not type(None) and not _not_given(a)]
        optional = len(members) < len(args)
        if len(members) == 1:
            shape, _, choices, kinds, model = _shape(members[0])
            return shape, optional, choices, kinds, model
        shapes = [_shape(m) for m in members]
        if all(s[0] == "choice" for s in shapes):
            return "choice", optional, tuple(c for s in shapes for c in s[2]), (), None
        if any(s[0] == "callable" for s in shapes):
            return "callable", optional, (), (), None
        if any(s[0] == "str" for s in shapes) and all(s[0] != "json" for s in shapes):
            return "str", optional, (), (), None
        kinds = tuple(dict.fromkeys(k for s in shapes for k in s[3]))
        any_kind = any(s[0] == "json" and not s[3] for s in shapes)
        return "json", optional, (), () if any_kind else kinds, None
    if tp is bool:
        return "bool", False, (), (), None
    if tp is int:
        return "int", False, (), (), None
    if tp is float:
        return "float", False, (), (), None
    if tp is str:
        return "str", False, (), (), None
    if origin is Literal:
        return "choice", None in args, tuple(a for a in args if a is not None), (), None
    if origin is cabc.Callable or tp is cabc.Callable:
        return "callable", False, (), (), None
    if origin in _MAPPINGS or tp in _MAPPINGS:
        return "json", False, (), (dict,), None
    if origin in _SEQUENCES or tp in _SEQUENCES:
        if args and args[0] is str:
            return "multiple", False, (), (), None
        return "json", False, (), (list,), None
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "json", False, (), (dict,), tp
    return "json", False, (), (), None


def _not_given(value: Any) -> bool:
    """The client's NOT_GIVEN sentinel, or its class (or an option of an unpacked TypedDict)."""
    if value is _UNSET:
        return True
    kind = value if isinstance(value, type) else type(value)
    return kind.__name__ in ("NotGiven", "_NotGiven")


class _Unset:
    """The default of an unpacked TypedDict option: not given, and no number to show."""


_UNSET: Any = _Unset()
_UNPACKS = {typing_extensions.Unpack, *((typing.Unpack,) if hasattr(typing, "Unpack") else ())}


_DEFAULT_IN_HELP = re.compile(r"\(default:? (\d+(?:\.\d+)?)")


def _default(param: inspect.Parameter, help: str | None) -> Any:
    """The default the command line shows and counts with: the signature's, or for NOT_GIVEN the number
    the docstring names ("(default 60)"), else None (unset)."""
    if not _not_given(param.default):
        return param.default
    if param.default is _UNSET:
        return None
    found = _DEFAULT_IN_HELP.search(help or "")
    return float(found.group(1)) if found else None


def _role(param: inspect.Parameter, shape: Shape, names: set[str]) -> Role:
    name = param.name
    if name == "deadline":
        return "deadline"
    if name == "timeout":
        legacy = isinstance(param.default, int | float) and not isinstance(param.default, bool)
        # (A NOT_GIVEN `timeout` next to `deadline` is its deprecated alias; without one, a per-call option.)
        return "deadline" if legacy and "deadline" not in names else "per_call"
    if name in PER_CALL:
        return "per_call"
    if name == "request_timeout":
        return "request_timeout"
    if name in HOOKS or shape == "callable":
        return "hook"
    positional = param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD)
    if positional and param.default is REQUIRED and shape in _SCALARS:
        return "argument"
    return "option"


def _unpacked(
    fn: Callable[..., Any], param: inspect.Parameter
) -> tuple[list[inspect.Parameter], dict[str, str]]:
    """`**kw: Unpack[SomeOptions]` as keyword-only parameters (not given by default) and their help, read
    from the TypedDict's docstring (`name: text` lines); ([], {}) for anything else."""
    tp = _resolve(fn, param.annotation)
    if typing.get_origin(tp) not in _UNPACKS:
        return [], {}
    (options,) = typing.get_args(tp)
    fields = typing.get_type_hints(options)
    helps: dict[str, str] = {}
    for line in inspect.cleandoc(options.__doc__ or "").splitlines():
        key, sep, text = line.partition(":")
        if sep and key.strip() in fields:
            helps[key.strip()] = text.strip()
    kw = inspect.Parameter.KEYWORD_ONLY
    return [inspect.Parameter(n, kw, default=_UNSET, annotation=t) for n, t in fields.items()], helps


def read_method(name: str, fn: Callable[..., Any]) -> MethodInfo:
    """A client method as the command line sees it."""
    summary, helps = parse_docstring(fn.__doc__)
    signature = inspect.signature(fn)
    declared: list[inspect.Parameter] = []
    for p in list(signature.parameters.values())[1:]:  # [0] is self
        if p.kind == p.VAR_KEYWORD:
            expanded, more = _unpacked(fn, p)
            declared += expanded
            helps = {**more, **helps}
        elif p.kind != p.VAR_POSITIONAL:
            declared.append(p)
    names = {p.name for p in declared}
    params: list[Param] = []
    for p in declared:
        shape, optional, choices, kinds, model = _shape(_resolve(fn, p.annotation))
        if p.annotation is REQUIRED:
            shape = "json"
        params.append(
            Param(
                name=p.name,
                role=_role(p, shape, names),
                shape=shape,
                default=_default(p, helps.get(p.name)),
                positional_only=p.kind == p.POSITIONAL_ONLY,
                optional=optional or p.default is None or _not_given(p.default),
                choices=choices,
                json_kinds=kinds,
                model=model,
                help=helps.get(p.name),
            )
        )
    return MethodInfo(name=name, summary=summary, params=tuple(params))


def method_table() -> Mapping[str, MethodInfo]:
    return {name: read_method(name, fn) for name, fn in client_methods().items()}
