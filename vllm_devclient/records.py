"""What a client method is, as data: its parameters (real types, defaults, one line of help each), a one-line
doc, the type of its answer, and how the command line shows it.

A `Route` is one HTTP exchange and everything about it: the wire facts (method, path, where each parameter
goes, how each is checked, the reader of the answer, whether it may be resent) and the method's face. From
its record (`routes/`) the request is built at run time (`endpoints.build`), and `make generate` writes the
async route method, the tables deriving its blocking twin and its `with_raw_response` method from it, the
command's result schema and the docs' route table; both fleets derive their method from the client's
(`fleet/methods.py`). A `Call` is a client method written by hand because it spans several exchanges
(completions, the barrier, the waits, `request`); its record (`calls.py`) describes that method, and a
test keeps the two the same. The command line, its help and the JSON schema of each command's
`result` are built from both kinds.

No I/O and no click here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .answers import Reader

__all__ = ["OMIT", "REQUIRED", "TOPICS", "Call", "Cli", "Method", "Param", "Role", "Route", "Topic", "When"]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


# The default of a parameter that has none.
REQUIRED: Any = _Required()


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


# What a route parameter sends when it is None: nothing (the server's default applies).
OMIT: Any = _Omit()

# Checks one argument and gives what is sent: (value, its name) -> the value on the wire (see arguments.py).
Check = Callable[[Any, str], Any]

# What a parameter is to the command line: a value (an argument or an option), the whole wait's bound
# (`--deadline`, exit 4), the bound of each try (filled by the global `--timeout`), or a hook the
# progress display fills.
Role = Literal["value", "deadline", "request_timeout", "hook"]

# Where `vllm-devclient --help` lists a command, in this order (the tools come after).
Topic = Literal["server", "cache", "sleep", "pause", "wait", "weights", "lora", "engine"]
TOPICS: tuple[Topic, ...] = ("server", "cache", "sleep", "pause", "wait", "weights", "lora", "engine")


@dataclass(frozen=True, kw_only=True)
class Param:
    """One parameter of a client method."""

    name: str
    type: Any  # a real type: bool, int, Sequence[str] | None, Literal["json", "text"], ...
    help: str  # one line: the method's `Args:` entry and the option's --help
    default: Any = REQUIRED
    positional: bool = False  # may be passed by position (else keyword-only)
    role: Role = "value"
    # The command line's own name for it, when not `--<name>` (`--tag` for a list of tags).
    option: str | None = None
    # An argument on the command line (any number of them, for a list), though not a required positional.
    argument: bool = False
    # None, when it means something drastic, must be asked for with a flag: (flag, its help).
    none_flag: tuple[str, str] | None = None
    # The only values the server takes, when the type cannot say (sleep's level): the command line lists them.
    choices: tuple[Any, ...] = ()
    # A route's parameter on the wire: in the query (a list repeats the key; booleans go out as true/false)
    # or a member of the JSON body; `key` when the wire's name is not the parameter's.
    send: Literal["query", "body"] | None = None
    key: str | None = None
    check: Check | None = None  # refuses a bad value before anything is sent, and gives the one sent
    none: Any = OMIT  # what None sends (OMIT: nothing)
    # The first vLLM release that takes it: a value other than None is refused before sending to an older
    # server (which would ignore it), after one /version lookup per client.
    added_in: str | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


# An answer that comes back but counts as a failure: (answer, the command line's arguments) -> why, or None.
Verdict = Callable[[Any, Mapping[str, Any]], "str | None"]


@dataclass(frozen=True, kw_only=True)
class Cli:
    """How the command line shows a client method."""

    topic: Topic
    command: str | None = None  # the command's name, when not the method's in kebab case
    render: Callable[[Any], str] | None = None  # one answer for a person (default: one line of fields)
    verdict: Verdict | None = None
    # The JSON `result` of a target, when not the answer itself, and its type (for the schema).
    result: Callable[[Any], Any] | None = None
    result_type: Any = None
    # Parameters the fleet's own method of this name adds (it is written by hand: pause's rollback).
    fleet_params: tuple[Param, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Method:
    name: str
    doc: str  # one line: the docstring's first line and the command's help
    answer: Any  # the type of the answer
    params: tuple[Param, ...] = ()
    cli: Cli

    @property
    def command(self) -> str:
        """The name of its command: `cli.command`, else the method's name in kebab case."""
        return self.cli.command or self.name.replace("_", "-")

    @property
    def deadline(self) -> Param | None:
        return next((p for p in self.params if p.role == "deadline"), None)


@dataclass(frozen=True)
class When:
    """A wire fact that depends on the arguments: `test` reads the checked ones; `text` says when (docs)."""

    text: str
    test: Callable[[Mapping[str, Any]], bool]


GATEWAY_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True, kw_only=True)
class Route(Method):
    """One HTTP exchange. The generated method passes its arguments to `endpoints.build`, which checks them
    (each `Param.check`, then `rule` across them) and builds the request; `reader` gives `answer`. The
    method takes the per-call options (`RequestOptions`)."""

    method: Literal["GET", "POST"]
    path: str
    reader: Reader[Any]
    # Safe to send again after it may have reached the server.
    idempotent: bool | When = False
    # Blocks through a rendezvous or a large transfer: no bound on the answer unless timeout= is given.
    long_running: bool | When = False
    # Served only in dev mode: a 404 there means dev mode is off or the release lacks it.
    dev_route: bool = True
    # Statuses worth retrying for this route (the gateway family, unless the route gives 503 a meaning).
    retry_statuses: frozenset[int] = GATEWAY_STATUSES
    # Non-2xx statuses this route's reader reads itself (Rust's 409 for a refused reset).
    ok_statuses: frozenset[int] = frozenset()
    # Whether a body whose every member was left out goes as `{}` (else no body at all).
    empty_body: bool = True
    # A check across the checked arguments (raises InvalidParameterError), after each parameter's own.
    rule: Callable[[Mapping[str, Any]], None] | None = None


# Which options a hand-written method takes besides its parameters: the per-call ones (`RequestOptions`),
# a wait's (`WaitOptions`, listed as its parameters), or none.
Options = Literal["request", "wait", "none"]


@dataclass(frozen=True, kw_only=True)
class Call(Method):
    """A client method written by hand (several exchanges); the record says what its signature is."""

    options: Options = "request"
