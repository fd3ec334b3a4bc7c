"""A :class:`Scenario`: one SDK call against a frontend in a known state, and what it must give.

It names an engine script to apply, the call, the frontend setup it needs and the expected outcome and
engine calls on each frontend. The scenario data itself lives in `vllm_devclient.testing.scenarios`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ...client import AsyncDevClient, DevClient
from ..engine_actions import Action
from .expect import EngineCallSpec, Expect
from .outcome import jsonable, short
from .transport import Exchange

__all__ = [
    "API_KEY", "SETUPS", "Client", "EngineCalls", "FrontendName", "Mode", "Scenario", "ScenarioRun", "Setup",
]  # fmt: skip

Client: TypeAlias = DevClient | AsyncDevClient
FrontendName = Literal["python", "rust"]
Mode = Literal["sync", "async"]
# default: dev mode on, no API key. api_key: dev mode on and --api-key API_KEY. dev_mode_off: dev mode off.
# dead_engine: a frontend whose engine declared itself dead (a frontend of its own: it stays dead).
# extras: the optional routes on: runtime LoRA updates (an adapter in LORA_DIR), the profiler, and (Python)
# /tokenizer_info.
Setup = Literal["default", "api_key", "dev_mode_off", "dead_engine", "extras"]
SETUPS: tuple[Setup, ...] = ("default", "api_key", "dev_mode_off", "dead_engine", "extras")
API_KEY = "sk-devclient-contract"

EngineCalls: TypeAlias = "Sequence[EngineCallSpec] | Mapping[str, Sequence[EngineCallSpec]] | None"


@dataclass(frozen=True)
class Scenario:
    """One SDK call against a frontend in a known state, and what it must give on each frontend.

    `expect` and `engine_calls` may map a frontend name to its own expectation where the frontends answer
    differently and the SDK cannot hide it; `sdk_difference` then says why (such scenarios are listed apart
    in the parity report, not as mismatches). `engine_calls=None` skips the engine-call check (timing
    dependent scenarios check counts in `run_checks`). `safe` marks read-only calls that may be made
    against any live server.
    """

    name: str
    description: str
    call: Callable[[Client], object]
    expect: Expect | Mapping[str, Expect]
    engine_calls: EngineCalls = ()
    script: Mapping[str, Sequence[Action]] = field(default_factory=dict)
    setup: Setup = "default"
    # "" sends no key at all; None uses API_KEY on the api_key setup and no key elsewhere.
    api_key: str | None = None
    timeout: float = 10.0
    max_retries: int = 0
    sdk_difference: str | None = None
    timing_dependent: bool = False
    max_elapsed_s: float | None = None
    min_elapsed_s: float | None = None
    run_checks: tuple[Callable[[ScenarioRun], str | None], ...] = ()
    safe: bool = False
    tags: tuple[str, ...] = ()
    # The engine starts inside a weight update (as after start_weight_update), for a step that needs one.
    in_weight_update: bool = False

    def expect_for(self, frontend: str) -> Expect:
        if isinstance(self.expect, Expect):
            return self.expect
        if frontend not in self.expect:
            raise KeyError(f"scenario {self.name!r} has no expectation for the {frontend!r} frontend")
        return self.expect[frontend]

    def engine_calls_for(self, frontend: str) -> list[EngineCallSpec] | None:
        if self.engine_calls is None:
            return None
        if isinstance(self.engine_calls, Mapping):
            return list(self.engine_calls[frontend])
        return list(self.engine_calls)

    def client_api_key(self) -> str:
        if self.api_key is not None:
            return self.api_key
        return API_KEY if self.setup == "api_key" else ""

    @property
    def per_frontend(self) -> bool:
        return not isinstance(self.expect, Expect)

    def compared_paths(self) -> list[str]:
        """The attribute paths compared across frontends (the union over per-frontend expectations)."""
        expects = [self.expect] if isinstance(self.expect, Expect) else list(self.expect.values())
        paths: list[str] = []
        for e in expects:
            paths.extend(p for p in e.fields if p not in paths)
        return paths

    def methods_called(self) -> tuple[str, ...]:
        """The client methods the call uses, in order, read by running it on a spy (nothing is sent)."""
        called: list[str] = []

        class Spy:
            def __getattr__(self, name: str) -> Any:
                called.append(name)
                return lambda *args, **kwargs: None

        self.call(Spy())  # type: ignore[arg-type]
        return tuple(called)

    def script_json(self) -> dict[str, list[Any]]:
        """The engine script as JSON data (for fixtures and reports)."""
        return {m: [_action_json(a) for a in acts] for m, acts in sorted(self.script.items())}


def _action_json(action: Action) -> Any:
    name = type(action).__name__
    data = dataclasses.asdict(action)
    return {name: jsonable(data)} if data else name


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
