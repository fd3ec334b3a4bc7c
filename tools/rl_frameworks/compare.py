"""Whether the SDK's call does what a framework's requests did, on one server, as observed.

The SDK covers a framework's step on a server when, for every request the framework sent there:

- route: the SDK sent a request with the same method and path;
- status: one of those got the same status (a framework request the server refused is not covered by an SDK
  request it accepted);
- engine: every engine call the framework's request caused is among those the SDK's requests caused (same
  utility, same arguments by vLLM's names): the arguments that mean something to the server are the ones
  that reach the engine; one the server ignores (TRL's `is_checkpoint_format` on `/start_weight_update`)
  changes nothing.

For a framework that calls the engine in its own process (verl), every transcribed engine call must be among
those the SDK's requests caused. The differences are returned as short strings; none means covered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["engine_text", "in_process_differences", "request_differences", "request_text"]

Record = Mapping[str, Any]


def request_text(record: Record) -> str:
    """`POST /pause?mode=keep` (the query as sent, in order)."""
    query = "&".join(f"{k}={v}" for k, v in record.get("query", []))
    return f"{record['method']} {record['path']}" + (f"?{query}" if query else "")


def engine_text(call: Record) -> str:
    """`pause_generation(mode='keep', clear_cache=True)`."""
    return f"{call['method']}({', '.join(f'{k}={v!r}' for k, v in call.get('kwargs', {}).items())})"


def request_differences(framework: Sequence[Record], sdk: Record) -> list[str]:
    """What the SDK's observed requests (`sdk["requests"]`, `sdk["engine"]`) leave out of the framework's."""
    out: list[str] = []
    sdk_engine = list(sdk["engine"])
    for record in framework:
        route = (record["method"], record["path"])
        same_route = [r for r in sdk["requests"] if (r["method"], r["path"]) == route]
        if not same_route:
            out.append(f"route {record['method']} {record['path']}")
            continue
        statuses = sorted({r["status"] for r in same_route}, key=str)
        if record["status"] not in statuses:
            shown = "/".join(str(s) for s in statuses)
            out.append(f"status {record['method']} {record['path']}: {record['status']}, the SDK's {shown}")
        out += [_engine_difference(c, sdk_engine) for c in record["engine"] if c not in sdk_engine]
    return _unique(out)


def in_process_differences(calls: Sequence[Record], sdk: Record) -> list[str]:
    """The transcribed engine calls the SDK's requests did not cause."""
    sdk_engine = list(sdk["engine"])
    return _unique([_engine_difference(c, sdk_engine) for c in calls if c not in sdk_engine])


def _engine_difference(call: Record, sdk_engine: Sequence[Record]) -> str:
    """`engine M: a 1, the SDK's 2` against the SDK's closest call of the same method, else the whole call."""
    mine = _leaves(call.get("kwargs", {}))
    closest: list[tuple[str, Any, Any]] | None = None
    for other in sdk_engine:
        if other["method"] != call["method"]:
            continue
        theirs = _leaves(other.get("kwargs", {}))
        diff = [
            (k, mine.get(k), theirs.get(k))
            for k in dict.fromkeys([*mine, *theirs])
            if mine.get(k) != theirs.get(k)
        ]
        if closest is None or len(diff) < len(closest):
            closest = diff
    if not closest:
        return f"engine {engine_text(call)}, which the SDK's requests did not cause"
    shown = "; ".join(f"{k} {a!r}, the SDK's {b!r}" for k, a, b in closest)
    return f"engine {call['method']}: {shown}"


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as `a.b` -> leaf value."""
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_leaves(item, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
