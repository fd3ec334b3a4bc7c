"""The shapes of the transcription: what a framework sends at a step, where its source says so, and the SDK
call that does the step; the values they share, and how a template becomes the request sent to one server.

Templates hold plain JSON values and two markers, resolved per server by `resolve`:

- `Ref("update_info")`: a named value of `VALUES` (shown by its name; the JSON writes `{"$": "update_info"}`);
- `Expr("1 + i * ws")`: arithmetic (`+`, `-`, `*`, `//`, whole numbers) over the server's facts (`Env`):
  `i` its index in the targets, `n` the number of servers, `ws` its `/get_world_size`, `total` the servers'
  sum, `before` the sum of the servers before it (the JSON writes `{"=": "1 + i * ws"}`).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "NO_BODY",
    "Call",
    "Engine",
    "Env",
    "Expr",
    "Framework",
    "FrameworkStep",
    "Ref",
    "Send",
    "Source",
    "SpecError",
    "Step",
    "resolve",
    "to_json",
]


class SpecError(ValueError):
    """A template names an unknown value or fact, or holds arithmetic `Expr` does not allow."""


@dataclass(frozen=True)
class Ref:
    """A named value of the transcription's `VALUES`."""

    name: str


@dataclass(frozen=True)
class Expr:
    """Whole-number arithmetic over a server's facts (see the module docstring)."""

    text: str


@dataclass(frozen=True)
class Env:
    """One server's facts, for `Expr`: its index, the number of servers and their world sizes."""

    i: int
    world_sizes: tuple[int, ...]

    def names(self) -> dict[str, int]:
        ws = self.world_sizes
        return {"i": self.i, "n": len(ws), "ws": ws[self.i], "total": sum(ws), "before": sum(ws[: self.i])}


@dataclass(frozen=True)
class Source:
    """Where a framework's source does a step: a file and a function (at the framework's commit, or at
    `commit`)."""

    path: str
    function: str
    commit: str | None = None


@dataclass(frozen=True)
class Framework:
    """An RL framework: its repository and the commit read, and its HTTP client as its source sets it up."""

    name: str
    repo: str
    commit: str
    client: str


class _NoBody:
    def __repr__(self) -> str:
        return "NO_BODY"


NO_BODY: Any = _NoBody()


@dataclass(frozen=True)
class Send:
    """One HTTP request as a framework sends it: method, path, query (as it encodes the values), JSON body."""

    method: Literal["GET", "POST"]
    path: str
    query: Mapping[str, Any] = field(default_factory=dict)
    json: Any = NO_BODY


@dataclass(frozen=True)
class Engine:
    """One call a framework makes on vLLM's engine in its own process (AsyncLLM), as the engine receives it:
    the utility method and its arguments by vLLM's names, defaults filled in."""

    method: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FrameworkStep:
    """What a framework does at a step: HTTP requests to each server (`sends`) or engine calls in its own
    process (`in_process`), where its source does it, and what a reader must know (`note`)."""

    source: tuple[Source, ...]
    sends: tuple[Send, ...] = ()
    in_process: tuple[Engine, ...] = ()
    note: str | None = None


@dataclass(frozen=True)
class Call:
    """One SDK call on the target (a DevClient, or a Fleet on a fleet row).

    `via="WeightSync"` calls it on `WeightSync(target)`. `block` makes it a `with` block: what runs inside,
    calls on the object the block yields, or the name of a block action (`sdk.BLOCK_ACTIONS`).
    """

    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    via: Literal["WeightSync"] | None = None
    block: tuple[Call | str, ...] | None = None
    handle: str = ""


@dataclass(frozen=True)
class Step:
    """A row of the table: each framework's part (None: it has no such step), the SDK calls that do it, the
    servers it runs on (`each`: each frontend alone; `fleet`: both at once), what the kit cannot exercise."""

    name: str
    frameworks: Mapping[str, FrameworkStep | None]
    sdk: tuple[Call, ...]
    servers: Literal["each", "fleet"] = "each"
    not_exercised: str | None = None


def resolve(template: Any, env: Env, values: Mapping[str, Any]) -> Any:
    """`template` with every `Ref` and `Expr` replaced by its value for the server `env` describes."""
    if isinstance(template, Ref):
        if template.name not in values:
            raise SpecError(f"no value named {template.name!r} (known: {', '.join(sorted(values))})")
        return resolve(values[template.name], env, values)
    if isinstance(template, Expr):
        return _evaluate(ast.parse(template.text, mode="eval").body, env.names(), template.text)
    if isinstance(template, Mapping):
        return {k: resolve(v, env, values) for k, v in template.items()}
    if isinstance(template, list | tuple):
        return [resolve(v, env, values) for v in template]
    return template


_OPERATORS = {
    ast.Add: int.__add__,
    ast.Sub: int.__sub__,
    ast.Mult: int.__mul__,
    ast.FloorDiv: int.__floordiv__,
}


def _evaluate(node: ast.expr, names: Mapping[str, int], text: str) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise SpecError(f"{text!r}: no fact named {node.id!r} (known: {', '.join(names)})")
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left, names, text), _evaluate(node.right, names, text)
        return _OPERATORS[type(node.op)](left, right)
    raise SpecError(f"{text!r}: only whole numbers, facts, +, -, * and // are allowed")


def to_json(template: Any) -> Any:
    """A template as the JSON writes it (`{"$": name}`, `{"=": text}`), specs as objects of their fields."""
    if isinstance(template, Ref):
        return {"$": template.name}
    if isinstance(template, Expr):
        return {"=": template.text}
    if isinstance(template, Mapping):
        return {k: to_json(v) for k, v in template.items()}
    if isinstance(template, list | tuple):
        return [to_json(v) for v in template]
    if isinstance(template, Source | Send | Engine | Call):
        return {k: to_json(v) for k, v in _fields(template).items()}
    return template


def _fields(spec: Source | Send | Engine | Call) -> dict[str, Any]:
    """The fields that say something (a default left out)."""
    out: dict[str, Any] = {}
    for name, value in vars(spec).items():
        if value is NO_BODY or value is None or value in ((), {}, ""):
            continue
        out[name] = value
    return out
