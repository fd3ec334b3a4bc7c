"""The client's behaviour, written once for both the sync and the async client.

An operation is a generator that yields effects (`Transmit` one HTTP exchange, `Sleep`) and gets their
outcome back; the clients run effects with their transport and `time.sleep` / `asyncio.sleep`. Retries, the
engine stepping and the whole-call bound live here, and the barrier and the waits beside it (`polling.py`),
so the two clients cannot drift apart.

The rules every operation keeps:
- Two bounds, each with one meaning. `timeouts` bound each try as a whole. A `Bound` (the caller's
  `total_timeout`, or a wait's `deadline`) bounds the operation as a whole: it travels on the `RetryPolicy`,
  so every try, retry, pause and inner call of the operation gets only what is left of it, and no pause
  that would end past it is taken (the last error is raised instead). With no `Bound`, only the tries and
  `max_retries` bound a call.
- Resend only what is safe. A request is sent again when it provably never left (no connection), or when
  its route is idempotent: after a retryable answer or failure (up to `max_retries`), and once, not counted,
  when a kept-alive connection turned out closed before any answer came. A route that is not idempotent is
  never sent twice; its request travels on a connection of its own, so a stale pooled one cannot fail it.
- Errors are built in one place (`failures.py`), with secrets masked.

A module per concept, lowest first:
- `context.py`: `CallContext`, what errors are built with;
- `effects.py`: the effects (`Transmit`, `Sleep`), `Operation`, and the log line of each exchange;
- `bounds.py`: the whole-call `Bound`, the `RetryPolicy` that carries it, how errors say what bounded a call;
- `failures.py`: what a failed exchange becomes (and the probe after a dev route's 404);
- `route_call.py`: one route call, `call`, with its tries and resends;
- `completions.py`: the served model, a completion, one engine step.
"""

from __future__ import annotations

from .bounds import NO_RETRY, Bound, RetryPolicy, per_try
from .completions import ModelCache, completion, served_model, step_engine
from .context import CallContext
from .effects import Effect, Operation, Sleep, Transmit, log
from .failures import dev_routes_served
from .route_call import call

__all__ = [
    "NO_RETRY",
    "Bound",
    "CallContext",
    "Effect",
    "ModelCache",
    "Operation",
    "RetryPolicy",
    "Sleep",
    "Transmit",
    "call",
    "completion",
    "dev_routes_served",
    "log",
    "per_try",
    "served_model",
    "step_engine",
]
