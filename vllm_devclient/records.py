"""What a client method is, as data: its parameters (real types, defaults, one line of help each), a one-line
doc, the type of its answer, and how the command line shows it.

A `Route` is one HTTP exchange: its record (`routes.py`) generates the async route method, and from it the
sync twin, the `with_raw_response` table and both fleets' tables (`make generate`). A `Call` is a client
method written by hand because it spans several exchanges (completions, the barrier, the waits, `request`);
its record (`calls.py`) describes that method, and a test keeps the two the same. The command line, its
help and the JSON schema of each command's `result` are built from both kinds.

No I/O and no click here: the records are read by the generator (`scripts/generate.py`), the CLI and the
tests, never when a client is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .endpoints import Endpoint

__all__ = ["REQUIRED", "TOPICS", "Call", "Cli", "Method", "Param", "Role", "Route", "Topic"]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


# The default of a parameter that has none.
REQUIRED: Any = _Required()

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


@dataclass(frozen=True, kw_only=True)
class Route(Method):
    """One HTTP exchange. The generated method calls `endpoint(**arguments)` (a builder of `endpoints.py`,
    whose reader gives `answer`) and takes the per-call options (`RequestOptions`)."""

    endpoint: Callable[..., Endpoint[Any]]


# Which options a hand-written method takes besides its parameters: the per-call ones (`RequestOptions`),
# a wait's (`WaitOptions`, listed as its parameters), or none.
Options = Literal["request", "wait", "none"]


@dataclass(frozen=True, kw_only=True)
class Call(Method):
    """A client method written by hand (several exchanges); the record says what its signature is."""

    options: Options = "request"
