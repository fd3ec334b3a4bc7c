"""The contract runner: expectations, the recording transport, the one client factory, the runner, and
the projection and masking of what a run gave.

A scenario (see `vllm_devclient.testing.scenarios` for the data) names an engine script, one SDK call, the
frontend setup it needs and what must come out. :func:`run_scenario` / :func:`arun_scenario` make the call
through a :class:`RecordingTransport`, so one run gives the typed outcome, every raw HTTP exchange and the
engine's call log together.

| module | what |
| --- | --- |
| `expect` | `Expect`, `Check`, `returns`, `returns_model`, `raises`, engine-call specs (`call`) |
| `scenario` | `Scenario`, the setups (`SETUPS`, `API_KEY`) |
| `transport` | `RecordingTransport` (sync and async httpx), `Exchange` |
| `clients` | `make_client`: every SDK client of the harness is built there |
| `runner` | `run_scenario`, `arun_scenario`, `ScenarioRun`, `Target`, `LiveServer` |
| `outcome` | projection: `resolve`, `jsonable`, `summarize_outcome` |
| `masking` | `mask_exchange` and friends, `timing_independent` |
"""

from __future__ import annotations

from .clients import ClientKind, make_client
from .expect import Check, EngineCallSpec, Expect, call, observed_calls, raises, returns, returns_model
from .masking import (
    KEEP_METRIC_SAMPLES,
    MASK,
    dedupe,
    mask_exchange,
    mask_text,
    mask_value,
    masked_run,
    timing_independent,
)
from .outcome import body_data, jsonable, resolve, summarize_outcome
from .runner import LiveServer, Target, arun_scenario, run_scenario
from .scenario import API_KEY, SETUPS, Client, FrontendName, Mode, Scenario, ScenarioRun, Setup
from .transport import (
    HEADERS_THAT_MATTER,
    Exchange,
    RecordingAsyncTransport,
    RecordingTransport,
    request_data,
    response_data,
)

__all__ = [
    "API_KEY",
    "HEADERS_THAT_MATTER",
    "KEEP_METRIC_SAMPLES",
    "MASK",
    "SETUPS",
    "Check",
    "Client",
    "ClientKind",
    "EngineCallSpec",
    "Exchange",
    "Expect",
    "FrontendName",
    "LiveServer",
    "Mode",
    "RecordingAsyncTransport",
    "RecordingTransport",
    "Scenario",
    "ScenarioRun",
    "Setup",
    "Target",
    "arun_scenario",
    "body_data",
    "call",
    "dedupe",
    "jsonable",
    "make_client",
    "mask_exchange",
    "mask_text",
    "mask_value",
    "masked_run",
    "observed_calls",
    "raises",
    "request_data",
    "resolve",
    "response_data",
    "returns",
    "returns_model",
    "run_scenario",
    "summarize_outcome",
    "timing_independent",
]
