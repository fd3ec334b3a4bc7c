"""Run a scenario: prepare the target's engine, make the SDK call through a recording transport, and
collect the typed outcome, every raw HTTP exchange and the engine's call log in one :class:`ScenarioRun`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from ... import errors
from ..engine import ScriptedEngine
from .clients import make_client
from .expect import observed_calls
from .scenario import Mode, Scenario, ScenarioRun
from .transport import RecordingTransport

__all__ = ["LiveServer", "Target", "arun_scenario", "run_scenario"]


class Target(Protocol):
    """Where a scenario runs: a harness frontend (`engine` set) or any live server (`engine` None)."""

    @property
    def base_url(self) -> str: ...

    @property
    def frontend(self) -> str: ...

    @property
    def engine(self) -> ScriptedEngine | None: ...


@dataclass(frozen=True)
class LiveServer:
    """A server the harness did not start: no engine to script or watch."""

    base_url: str
    frontend: str = "unknown"
    engine: ScriptedEngine | None = None


def _prepare(scenario: Scenario, target: Target) -> ScriptedEngine | None:
    engine = target.engine
    if engine is None:
        if scenario.script or scenario.setup != "default":
            raise ValueError(
                f"scenario {scenario.name!r} needs a scripted engine; {target.base_url} has none"
            )
        return None
    engine.reset()
    for method, actions in scenario.script.items():
        engine.script(method, list(actions))
    if scenario.in_weight_update:
        engine.begin_weight_update()
    if scenario.setup == "dead_engine":
        _ensure_dead(engine, target.base_url)
    engine.clear_calls()
    return engine


def _ensure_dead(engine: ScriptedEngine, base_url: str, deadline: float = 15.0) -> None:
    if not engine.dead:
        engine.declare_dead()
    # The frontend learns of the death asynchronously; wait until /health says so.
    end = time.monotonic() + deadline
    with make_client(base_url, kind="sync", timeout=1.0) as client:
        while time.monotonic() < end:
            try:
                client.health()
            except errors.APIStatusError:
                return
            except errors.APITimeoutError:
                pass
            except errors.APIConnectionError:
                return  # the Python frontend may exit once its engine is dead
            time.sleep(0.05)
    raise RuntimeError(f"{base_url}: /health still answers 200 {deadline:.0f} s after the engine died")


def _result(
    scenario: Scenario,
    target: Target,
    mode: Mode,
    outcome: Any,
    recorder: RecordingTransport,
    engine: ScriptedEngine | None,
    elapsed: float,
) -> ScenarioRun:
    calls = None if engine is None else observed_calls(engine.calls)
    model = getattr(target, "model", None)
    return ScenarioRun(scenario, target.frontend, mode, outcome, recorder.exchanges, calls, elapsed, model)


def _settles(engine: ScriptedEngine | None, recorder: RecordingTransport) -> bool:
    # After a request the client gave up on, the frontend may still pass it to the engine a moment later:
    # wait, so that the call lands in this run's log and not the next one's.
    return engine is not None and any(ex.error for ex in recorder.exchanges)


_SETTLE_S = 0.2


def run_scenario(
    scenario: Scenario,
    target: Target,
    *,
    transport: httpx.BaseTransport | None = None,
    http_client: Any = None,
) -> ScenarioRun:
    """Run the scenario with a DevClient. `transport` replaces the network (replay); `http_client` (live: an
    httpx or httpx2 client) carries the requests instead of the default transport; exchanges are logged."""
    engine = _prepare(scenario, target) if transport is None else None
    recorder = RecordingTransport(transport)
    start = time.monotonic()
    options = _options(scenario, http_client)
    with make_client(target, kind="sync", transport=recorder, **options) as client:
        try:
            outcome: Any = scenario.call(client)
            if inspect.isawaitable(outcome):
                raise TypeError(f"scenario {scenario.name!r} returned an awaitable from a sync client")
        except errors.DevClientError as exc:
            outcome = exc
    elapsed = time.monotonic() - start
    recorder.close()
    if _settles(engine, recorder):
        time.sleep(_SETTLE_S)
    return _result(scenario, target, "sync", outcome, recorder, engine, elapsed)


async def arun_scenario(
    scenario: Scenario,
    target: Target,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    http_client: Any = None,
) -> ScenarioRun:
    """Run the scenario with an AsyncDevClient (see :func:`run_scenario`)."""
    engine = _prepare(scenario, target) if transport is None else None
    recorder = RecordingTransport(transport)
    start = time.monotonic()
    options = _options(scenario, http_client)
    async with make_client(target, kind="async", transport=recorder, **options) as client:
        try:
            pending = scenario.call(client)
            outcome: Any = await pending if inspect.isawaitable(pending) else pending
        except errors.DevClientError as exc:
            outcome = exc
    elapsed = time.monotonic() - start
    await recorder.aclose()
    if _settles(engine, recorder):
        await asyncio.sleep(_SETTLE_S)
    return _result(scenario, target, "async", outcome, recorder, engine, elapsed)


def _options(scenario: Scenario, http_client: Any = None) -> dict[str, Any]:
    options: dict[str, Any] = {
        "api_key": scenario.client_api_key(),
        "timeout": scenario.timeout,
        "max_retries": scenario.max_retries,
    }
    if http_client is not None:
        options["http_client"] = http_client
    return options
