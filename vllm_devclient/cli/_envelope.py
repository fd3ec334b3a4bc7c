"""The JSON document every command prints under `-o json`: schema 1, documented in docs/cli.md and checked
against `schema.json` (next to this file) by the tests.

Stable rules: every key is always present; floats are rounded (durations, keys ending in `_s`, to the
millisecond; other floats to 6 decimals; non-finite ones are null); `result` is null only when the call
raised; `error.type` is the class name of the exception (the SDK's own, `UnsuccessfulResultError` for an
answer that says the operation did not happen, `InvalidParameterError` for a usage error, `ImportError`
for a missing extra, `KeyboardInterrupt` for Ctrl-C).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import pydantic_core

from ..errors import (
    APIConnectionError,
    APIStatusError,
    BarrierTimeoutError,
    EngineCallError,
    WaitTimeoutError,
)
from ..transports.stacks import is_http_response
from ._exit import ExitCode, UnsuccessfulResultError, combine, exit_code_for

__all__ = [
    "SCHEMA_VERSION",
    "Verdict",
    "dumps",
    "envelope",
    "error_json",
    "jsonable",
    "rounded",
    "target_entry",
]

SCHEMA_VERSION = 1

# A command's judgement of an answer that came back: None when it is what was asked for, else why not.
Verdict = Callable[[Any], str | None]


def rounded(value: Any, key: str = "") -> Any:
    """`value` with every float rounded (see the module docstring), recursively."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return round(value, 3 if key.endswith("_s") else 6)
    if isinstance(value, Mapping):
        return {k: rounded(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v, key) for v in value]
    return value


def jsonable(value: Any) -> Any:
    """Any answer of the client as JSON data (rounded)."""
    if is_http_response(value):
        try:
            body: Any = value.json()
        except ValueError:
            body = value.text
        value = {"status_code": value.status_code, "body": body}
    return rounded(pydantic_core.to_jsonable_python(value, serialize_unknown=True))


def error_json(error: BaseException, message: str | None = None) -> dict[str, Any]:
    """What an error carries, by its type (the field names are part of the schema)."""
    out: dict[str, Any] = {"type": type(error).__name__, "message": message or str(error)}
    if isinstance(error, APIStatusError):
        out.update(
            status_code=error.status_code,
            http_method=error.http_method,
            path=error.path,
            frontend=error.frontend,
        )
        if error.param is not None:
            out["param"] = error.param
    if isinstance(error, EngineCallError):
        out.update(engine_method=error.engine_method, engine_message=error.engine_message)
    if isinstance(error, APIConnectionError):
        out["url"] = error.url
    if isinstance(error, WaitTimeoutError):
        out["waited_s"] = error.waited_s
    if isinstance(error, BarrierTimeoutError):
        out.update(attempts=error.attempts, engine_steps=error.engine_steps)
    done: dict[str, Any] = rounded(out)
    return done


def target_entry(
    value: Any,
    error: BaseException | None,
    elapsed_s: float,
    *,
    verdict: Verdict | None = None,
    result: Callable[[Any], Any] | None = None,
) -> dict[str, Any]:
    """One target's entry: the answer (as `result` shapes it) or the error, with its exit code."""
    if error is not None:
        code: int = exit_code_for(error)
        return {
            "ok": False,
            "exit_code": code,
            "result": None,
            "error": error_json(error),
            "elapsed_s": rounded(elapsed_s, "elapsed_s"),
        }
    problem = verdict(value) if verdict is not None else None
    data = jsonable(result(value) if result is not None else value)
    return {
        "ok": problem is None,
        "exit_code": ExitCode.FAILED if problem else ExitCode.OK,
        "result": {} if data is None else data,
        "error": None if problem is None else error_json(UnsuccessfulResultError(problem)),
        "elapsed_s": rounded(elapsed_s, "elapsed_s"),
    }


def envelope(
    command: str | None,
    *,
    elapsed_s: float,
    targets: Mapping[str, Mapping[str, Any]] | None = None,
    result: Any = None,
    error: BaseException | None = None,
    error_message: str | None = None,
    exit_code: int | None = None,
    rollback: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The whole document. The exit code is the targets' combined one unless given (tool commands)."""
    entries = dict(targets or {})
    if exit_code is None:
        codes = [int(t["exit_code"]) for t in entries.values()]
        if error is not None:
            codes.append(exit_code_for(error))
        exit_code = combine(codes)
    return {
        "schema": SCHEMA_VERSION,
        "command": command,
        "ok": exit_code == ExitCode.OK,
        "exit_code": int(exit_code),
        "elapsed_s": rounded(elapsed_s, "elapsed_s"),
        "targets": entries,
        "result": jsonable(result),
        "error": None if error is None else error_json(error, error_message),
        "rollback": None if rollback is None else dict(rollback),
    }


def dumps(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=2)
