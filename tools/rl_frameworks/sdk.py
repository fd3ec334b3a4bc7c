"""The SDK side of a step: its `Call`s performed on a DevClient or a Fleet, through the public API only.

A call is `getattr(target, method)(*args, **kwargs)`, with `Ref`/`Expr` resolved first; `via="WeightSync"`
sends it through `WeightSync(target)`; a call with a `block` is entered as a context manager and runs the
block inside: calls on the object it yields, or a named action of `BLOCK_ACTIONS` (what a caller's code would
do there that the SDK does not). `render` writes a call as Python.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vllm_devclient import DevClient, Fleet, WeightSync

from .spec import Call, Expr, Ref

__all__ = ["BLOCK_ACTIONS", "perform", "render"]

_FIRST_CHECK_S = 10.0


def _first_check(watch: Any) -> None:
    """Wait, inside a watchdog block, until its first health check ran (it runs at once, on its thread)."""
    deadline = time.monotonic() + _FIRST_CHECK_S
    while watch.checks < 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the watchdog made no check within {_FIRST_CHECK_S:g} s")
        time.sleep(0.005)


BLOCK_ACTIONS: Mapping[str, Callable[[Any], None]] = {"first check": _first_check}

Resolve = Callable[[Any], Any]


def perform(calls: Sequence[Call], target: DevClient | Fleet, value: Resolve) -> None:
    """Run `calls` on `target` in order; `value` resolves a template argument."""
    for call in calls:
        _perform(call, target, value)


def _perform(call: Call, owner: Any, value: Resolve) -> None:
    if call.via == "WeightSync":
        sync = WeightSync(owner)
        try:
            _perform(
                Call(call.method, call.args, call.kwargs, block=call.block, handle=call.handle), sync, value
            )
        finally:
            sync.close()
        return
    method = getattr(owner, call.method)
    args = [value(a) for a in call.args]
    kwargs = {k: value(v) for k, v in call.kwargs.items()}
    if call.block is None:
        method(*args, **kwargs)
        return
    with method(*args, **kwargs) as handle:
        for inner in call.block:
            if isinstance(inner, str):
                BLOCK_ACTIONS[inner](handle)
            else:
                _perform(inner, handle, value)


def render(call: Call, target: str = "") -> str:
    """`call` as Python: `paused("keep", clear_cache=False)`, `with weight_update(...) as update: ...`;
    `target` prefixes the method (e.g. `fleet.`)."""
    owner = f"WeightSync({target.rstrip('.') or 'client'})." if call.via == "WeightSync" else target
    args = [_value(a) for a in call.args] + [f"{k}={_value(v)}" for k, v in call.kwargs.items()]
    text = f"{owner}{call.method}({', '.join(args)})"
    if call.block is None:
        return text
    head = f"with {text}" + (f" as {call.handle}" if call.handle else "")
    inner = [f"({b})" if isinstance(b, str) else render(b, f"{call.handle}.") for b in call.block]
    return f"{head}: {'; '.join(inner) or '...'}"


def _value(v: Any) -> str:
    if isinstance(v, Ref):
        return v.name
    if isinstance(v, Expr):
        return v.text
    if isinstance(v, bool) or v is None:
        return repr(v)
    return json.dumps(v)
