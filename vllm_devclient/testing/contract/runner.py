"""Run a scenario: prepare the target's engine, make the SDK call through a recording transport, and
collect the typed outcome, every raw HTTP exchange and the engine's call log in one :class:`ScenarioRun`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from ... import errors
from ..engine import ScriptedEngine
from .clients import make_client
from .expect import observed_calls
from .outcome import short
from .scenario import Mode, Scenario
from .transport import Exchange, RecordingTransport

__all__ = ["LiveServer", "ScenarioRun", "Target", "arun_scenario", "run_scenario"]


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


@dataclass
class ScenarioRun:
    """What one scenario run gave: the typed outcome, the raw exchanges and the engine calls."""

    scenario: Scenario
    frontend: str
    mode: Mode
    outcome: Any
    exchanges: list[Exchange]
    engine_calls: list[list[Any]] | None
    elapsed_s: float
    # The served model name (a harness frontend's model directory), masked in reports and fixtures.
    model: str | None = None

    @property
    def raised(self) -> bool:
        return isinstance(self.outcome, BaseException)

    def problems(self) -> list[str]:
        """Everything that differs from the scenario's contract on this frontend (empty: it holds)."""
        sc = self.scenario
        out = [f"SDK outcome: {p}" for p in sc.expect_for(self.frontend).problems(self.outcome)]
        wanted = sc.engine_calls_for(self.frontend)
        if wanted is not None and self.engine_calls is not None:
            want = [c.as_json() for c in wanted]
            if self.engine_calls != want:
                out.append(f"engine calls: expected {want}, got {self.engine_calls}")
        if sc.max_elapsed_s is not None and self.elapsed_s > sc.max_elapsed_s:
            out.append(f"took {self.elapsed_s:.2f} s, more than the {sc.max_elapsed_s:.2f} s allowed")
        if sc.min_elapsed_s is not None and self.elapsed_s < sc.min_elapsed_s:
            out.append(f"took {self.elapsed_s:.2f} s, less than {sc.min_elapsed_s:.2f} s")
        for check in sc.run_checks:
            msg = check(self)
            if msg:
                out.append(msg)
        return out

    def describe(self) -> str:
        lines = [f"scenario {self.scenario.name} on {self.frontend} ({self.mode}): {short(self.outcome)}"]
        for ex in self.exchanges:
            lines.append("  " + json.dumps(ex.as_json(), sort_keys=True)[:600])
        lines.append(f"  engine calls: {self.engine_calls}")
        return "\n".join(lines)


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
    if scenario.setup == "dead_engine":
        _ensure_dead(engine, target.base_url)
    engine.clear_calls()
    return engine


def _ensure_dead(engine: ScriptedEngine, base_url: str, timeout: float = 15.0) -> None:
    if not engine.dead:
        engine.declare_dead()
    # The frontend learns of the death asynchronously; wait until /health says so.
    deadline = time.monotonic() + timeout
    with make_client(base_url, kind="sync", timeout=1.0) as client:
        while time.monotonic() < deadline:
            try:
                client.health()
            except errors.APIStatusError:
                return
            except errors.APITimeoutError:
                pass
            except errors.APIConnectionError:
                return  # the Python frontend may exit once its engine is dead
            time.sleep(0.05)
    raise RuntimeError(f"{base_url}: /health still answers 200 {timeout:.0f} s after the engine died")


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
    scenario: Scenario, target: Target, *, transport: httpx.BaseTransport | None = None
) -> ScenarioRun:
    """Run the scenario with a DevClient. `transport` replaces the network (replay); exchanges are logged."""
    engine = _prepare(scenario, target) if transport is None else None
    recorder = RecordingTransport(transport)
    start = time.monotonic()
    with make_client(target, kind="sync", transport=recorder, **_options(scenario)) as client:
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
    scenario: Scenario, target: Target, *, transport: httpx.AsyncBaseTransport | None = None
) -> ScenarioRun:
    """Run the scenario with an AsyncDevClient (see :func:`run_scenario`)."""
    engine = _prepare(scenario, target) if transport is None else None
    recorder = RecordingTransport(transport)
    start = time.monotonic()
    async with make_client(target, kind="async", transport=recorder, **_options(scenario)) as client:
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


def _options(scenario: Scenario) -> dict[str, Any]:
    return {
        "api_key": scenario.client_api_key(),
        "timeout": scenario.timeout,
        "max_retries": scenario.max_retries,
    }
