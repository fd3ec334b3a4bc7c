"""The contract scenarios: one definition used by the contract tests, the parity report, the recorder
and the replay tests.

A :class:`Scenario` names an engine script to apply, one SDK call, the frontend setup it needs and what
must come out: the typed SDK result or exception (:class:`Expect`) and the engine calls the request caused.
:func:`run_scenario` / :func:`arun_scenario` make the call through a recording httpx transport, so one run
gives the typed outcome, every raw HTTP exchange and the engine's call log together.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

import httpx
from pydantic import BaseModel

from .. import errors
from ..client import AsyncDevClient, DevClient
from ..endpoints import PauseMode
from .engine import Action, Delay, EngineCall, Hang, Raise, Return, ScriptedEngine

__all__ = [
    "API_KEY",
    "HEADERS_THAT_MATTER",
    "MASK",
    "SCENARIOS",
    "SETUPS",
    "Check",
    "Client",
    "EngineCallSpec",
    "Exchange",
    "Expect",
    "FrontendName",
    "LiveServer",
    "RecordingAsyncTransport",
    "RecordingTransport",
    "Scenario",
    "ScenarioRun",
    "Setup",
    "Target",
    "arun_scenario",
    "call",
    "dedupe",
    "get_scenario",
    "jsonable",
    "mask_exchange",
    "mask_text",
    "mask_value",
    "observed_calls",
    "raises",
    "resolve",
    "returns",
    "returns_model",
    "run_scenario",
    "summarize_outcome",
    "timing_independent",
]

Client: TypeAlias = DevClient | AsyncDevClient
FrontendName = Literal["python", "rust"]
Mode = Literal["sync", "async"]
# default: dev mode on, no API key. api_key: dev mode on and --api-key API_KEY. dev_mode_off: dev mode off.
# dead_engine: a frontend whose engine declared itself dead (a frontend of its own: it stays dead).
Setup = Literal["default", "api_key", "dev_mode_off", "dead_engine"]
SETUPS: tuple[Setup, ...] = ("default", "api_key", "dev_mode_off", "dead_engine")
API_KEY = "sk-devclient-contract"
# Headers whose value the SDK reads (server: which frontend answered; allow: 405 hint).
HEADERS_THAT_MATTER = ("allow", "content-type", "server", "www-authenticate")


# ---------------------------------------------------------------------------------------- expectations


@dataclass(frozen=True)
class Check:
    """A property of the outcome that is not a plain value (a type, a range); `test` gets the outcome."""

    description: str
    test: Callable[[Any], bool]


@dataclass(frozen=True)
class Expect:
    """What the SDK call must give: the exact class name of the result or exception, and attribute values.

    `fields` maps an attribute path to its value: "" is the result itself, "a.b.0" walks attributes, keys
    and indexes, "len(data)" is a length.
    """

    type: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    checks: tuple[Check, ...] = ()
    error: bool = False

    def problems(self, outcome: Any) -> list[str]:
        """Why `outcome` (a result, or the raised exception) does not meet this expectation."""
        got = type(outcome).__name__
        out: list[str] = []
        if self.error != isinstance(outcome, BaseException) or got != self.type:
            what = "raise" if self.error else "return"
            return [f"expected to {what} {self.type}, got {got}: {_short(outcome)}"]
        for path, want in self.fields.items():
            try:
                value = resolve(outcome, path)
            except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:
                out.append(f"{path or 'value'}: cannot read it ({exc!r}) from {_short(outcome)}")
                continue
            if jsonable(value) != jsonable(want) or type(value) is not type(want):
                out.append(f"{path or 'value'}: expected {want!r}, got {value!r}")
        for check in self.checks:
            try:
                passed = check.test(outcome)
            except Exception as exc:
                passed = False
                out.append(f"check {check.description!r} raised {exc!r}")
                continue
            if not passed:
                out.append(f"check failed: {check.description} (outcome {_short(outcome)})")
        return out

    def project(self, outcome: Any, paths: Sequence[str] | None = None) -> dict[str, Any]:
        """The outcome reduced to this expectation's type and fields, as JSON data (for comparing)."""
        values: dict[str, Any] = {}
        for path in paths if paths is not None else self.fields:
            try:
                values[path] = jsonable(resolve(outcome, path))
            except (AttributeError, KeyError, IndexError, TypeError, ValueError):
                values[path] = "<missing>"
        kind = "error" if isinstance(outcome, BaseException) else "result"
        return {"kind": kind, "type": type(outcome).__name__, "fields": values}


def returns(value: Any) -> Expect:
    """The call returns exactly `value` (a bool, int, str, list, dict or None)."""
    return Expect(type(value).__name__, {"": value})


def returns_model(type_name: str, fields: Mapping[str, Any] | None = None, *checks: Check) -> Expect:
    return Expect(type_name, dict(fields or {}), tuple(checks))


def raises(exc: type[BaseException], fields: Mapping[str, Any] | None = None, *checks: Check) -> Expect:
    return Expect(exc.__name__, dict(fields or {}), tuple(checks), error=True)


@dataclass(frozen=True)
class EngineCallSpec:
    """One engine call a scenario must cause: a utility method with its arguments, or an ADD request
    ("add_request", args = (max_tokens,))."""

    method: str
    args: tuple[Any, ...] = ()

    def as_json(self) -> list[Any]:
        return [self.method, jsonable(list(self.args))]


def call(method: str, *args: Any) -> EngineCallSpec:
    return EngineCallSpec(method, args)


def observed_calls(calls: Sequence[EngineCall]) -> list[list[Any]]:
    """The engine log as [method, args] pairs; an ADD is reduced to its max_tokens (the rest is noise)."""
    out: list[list[Any]] = []
    for c in calls:
        if c.kind == "add":
            sampling = c.args[1] if len(c.args) > 1 and isinstance(c.args[1], Mapping) else {}
            out.append(["add_request", [sampling.get("max_tokens")]])
        else:
            out.append([c.method, jsonable(list(c.args))])
    return out


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

    def script_json(self) -> dict[str, list[Any]]:
        """The engine script as JSON data (for fixtures and reports)."""
        return {m: [_action_json(a) for a in acts] for m, acts in sorted(self.script.items())}


def _action_json(action: Action) -> Any:
    name = type(action).__name__
    data = dataclasses.asdict(action)
    return {name: jsonable(data)} if data else name


# ---------------------------------------------------------------------------------------- recording


@dataclass
class Exchange:
    """One HTTP request and its response (or the transport error that ended it), as JSON-ready data."""

    request: dict[str, Any]
    response: dict[str, Any] | None
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"request": self.request}
        if self.error is not None:
            out["error"] = self.error
        else:
            out["response"] = self.response
        return out


def _body(content: bytes, content_type: str) -> dict[str, Any]:
    text = content.decode("utf-8", errors="replace")
    if text.strip() and "json" in content_type:
        try:
            return {"json": json.loads(text)}
        except ValueError:
            pass
    return {"text": text}


def _request_json(request: httpx.Request) -> dict[str, Any]:
    content = request.content if hasattr(request, "_content") else b""
    out: dict[str, Any] = {
        "method": request.method,
        "path": request.url.path,
        "query": [[k, v] for k, v in request.url.params.multi_items()],
        "auth": "authorization" in request.headers,
    }
    if content:
        out.update(_body(content, request.headers.get("content-type", "")))
    return out


def _response_json(response: httpx.Response) -> dict[str, Any]:
    headers = {k: response.headers[k] for k in HEADERS_THAT_MATTER if k in response.headers}
    out: dict[str, Any] = {"status": response.status_code, "headers": headers}
    out.update(_body(response.content, response.headers.get("content-type", "")))
    return out


class RecordingTransport(httpx.BaseTransport):
    """Wraps a transport and logs every exchange (bodies read), also those that fail (timeouts)."""

    def __init__(self, inner: httpx.BaseTransport | None = None) -> None:
        self.inner = inner if inner is not None else httpx.HTTPTransport()
        self.exchanges: list[Exchange] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        req = _request_json(request)
        try:
            response = self.inner.handle_request(request)
            response.read()
        except httpx.HTTPError as exc:
            self.exchanges.append(Exchange(req, None, type(exc).__name__))
            raise
        self.exchanges.append(Exchange(req, _response_json(response)))
        return response

    def close(self) -> None:
        self.inner.close()


class RecordingAsyncTransport(httpx.AsyncBaseTransport):
    """The async twin of :class:`RecordingTransport`."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.inner = inner if inner is not None else httpx.AsyncHTTPTransport()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        req = _request_json(request)
        try:
            response = await self.inner.handle_async_request(request)
            await response.aread()
        except httpx.HTTPError as exc:
            self.exchanges.append(Exchange(req, None, type(exc).__name__))
            raise
        self.exchanges.append(Exchange(req, _response_json(response)))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


# ---------------------------------------------------------------------------------------- running


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
        lines = [f"scenario {self.scenario.name} on {self.frontend} ({self.mode}): {_short(self.outcome)}"]
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
    with httpx.Client(timeout=1.0) as http:
        while time.monotonic() < deadline:
            try:
                if http.get(base_url + "/health").status_code != 200:
                    return
            except httpx.ConnectError:
                return  # the Python frontend may exit once its engine is dead
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    raise RuntimeError(f"{base_url}: /health still answers 200 {timeout:.0f} s after the engine died")


def _client_kwargs(scenario: Scenario) -> dict[str, Any]:
    return {
        "api_key": scenario.client_api_key(),
        "timeout": scenario.timeout,
        "max_retries": scenario.max_retries,
    }


def run_scenario(
    scenario: Scenario, target: Target, *, transport: httpx.BaseTransport | None = None
) -> ScenarioRun:
    """Run the scenario with a DevClient. `transport` replaces the network (replay); exchanges are logged."""
    engine = _prepare(scenario, target) if transport is None else None
    recorder = RecordingTransport(transport)
    http = httpx.Client(transport=recorder, timeout=scenario.timeout)
    start = time.monotonic()
    with DevClient(target.base_url, http_client=http, **_client_kwargs(scenario)) as client:
        try:
            outcome: Any = scenario.call(client)
            if inspect.isawaitable(outcome):
                raise TypeError(f"scenario {scenario.name!r} returned an awaitable from a sync client")
        except errors.DevClientError as exc:
            outcome = exc
    elapsed = time.monotonic() - start
    http.close()
    if engine is not None and any(ex.error for ex in recorder.exchanges):
        time.sleep(_SETTLE_S)
    model = getattr(target, "model", None)
    return ScenarioRun(
        scenario, target.frontend, "sync", outcome, recorder.exchanges, _calls(engine), elapsed, model
    )


async def arun_scenario(
    scenario: Scenario, target: Target, *, transport: httpx.AsyncBaseTransport | None = None
) -> ScenarioRun:
    """Run the scenario with an AsyncDevClient (see :func:`run_scenario`)."""
    engine = _prepare(scenario, target) if transport is None else None
    recorder = RecordingAsyncTransport(transport)
    http = httpx.AsyncClient(transport=recorder, timeout=scenario.timeout)
    start = time.monotonic()
    async with AsyncDevClient(target.base_url, http_client=http, **_client_kwargs(scenario)) as client:
        try:
            pending = scenario.call(client)
            outcome: Any = await pending if inspect.isawaitable(pending) else pending
        except errors.DevClientError as exc:
            outcome = exc
    elapsed = time.monotonic() - start
    await http.aclose()
    if engine is not None and any(ex.error for ex in recorder.exchanges):
        await asyncio.sleep(_SETTLE_S)
    model = getattr(target, "model", None)
    return ScenarioRun(
        scenario, target.frontend, "async", outcome, recorder.exchanges, _calls(engine), elapsed, model
    )


# After a request the client gave up on, the frontend may still pass it to the engine a moment later: wait,
# so that the call lands in this run's log and not the next one's.
_SETTLE_S = 0.2


def _calls(engine: ScriptedEngine | None) -> list[list[Any]] | None:
    return None if engine is None else observed_calls(engine.calls)


# ---------------------------------------------------------------------------------------- outcome data


def resolve(obj: Any, path: str) -> Any:
    """Walk `path` ("a.b.0", "len(a.b)", "" for obj itself) through attributes, keys and indexes."""
    if path.startswith("len(") and path.endswith(")"):
        return len(resolve(obj, path[4:-1]))
    cur = obj
    for part in path.split(".") if path else ():
        if isinstance(cur, Mapping):
            cur = cur[int(part)] if part not in cur and part.lstrip("-").isdigit() else cur[part]
        elif isinstance(cur, list | tuple) and part.lstrip("-").isdigit():
            cur = cur[int(part)]
        else:
            cur = getattr(cur, part)
    return cur


def jsonable(value: Any) -> Any:
    """Plain JSON data for any outcome value (models dumped, responses reduced to status and body)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, httpx.Response):
        return {
            "status_code": value.status_code,
            **_body(value.content, value.headers.get("content-type", "")),
        }
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


_ERROR_ATTRS = ("status_code", "method", "engine_message", "param", "attempts", "engine_steps")


def summarize_outcome(outcome: Any) -> dict[str, Any]:
    """A readable, JSON-ready account of a result or exception (for reports; not compared)."""
    if isinstance(outcome, BaseException):
        attrs = {
            a: jsonable(getattr(outcome, a)) for a in _ERROR_ATTRS if getattr(outcome, a, None) is not None
        }
        return {"raised": type(outcome).__name__, **attrs}
    return {"returned": type(outcome).__name__, "value": jsonable(outcome)}


def _short(outcome: Any, limit: int = 300) -> str:
    if isinstance(outcome, BaseException):
        text = f"{type(outcome).__name__}({outcome})"
    else:
        text = f"{type(outcome).__name__} {json.dumps(jsonable(outcome), sort_keys=True)}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------- masking

MASK = "<masked>"
_CALL_ID = re.compile(r"call_id=\d+")
_PORT = re.compile(r"(127\.0\.0\.1|localhost|0\.0\.0\.0):\d+")
_FINGERPRINT_HASH = re.compile(r"-[0-9a-f]{6,}$")
_VOLATILE_ID = re.compile(r"^(cmpl|chatcmpl|modelperm|req)-[0-9a-zA-Z-]+$")
# Keys whose values change from run to run (timestamps, random ids, timings).
_VOLATILE_KEYS = frozenset({"created", "instance_id", "elapsed_s", "waited_s", "arrival_time", "timestamp"})


def mask_text(text: str, model: str | None = None) -> str:
    """Replace run-specific parts of a string: the model directory, call ids, ports."""
    if model:
        text = text.replace(model, "<model>")
    text = _CALL_ID.sub("call_id=<n>", text)
    return _PORT.sub(r"\1:<port>", text)


def mask_value(value: Any, model: str | None = None) -> Any:
    """Mask volatile fields anywhere in JSON data (see `mask_text` and the volatile keys)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k in _VOLATILE_KEYS and v is not None:
                out[k] = MASK
            elif k == "id" and isinstance(v, str) and _VOLATILE_ID.match(v):
                out[k] = MASK
            elif k == "system_fingerprint" and isinstance(v, str):
                # "vllm-0.33.0-f0d9092f": the release stays, the config hash (paths, ports) goes
                out[k] = _FINGERPRINT_HASH.sub("-<hash>", v)
            else:
                out[k] = mask_value(v, model)
        return out
    if isinstance(value, list):
        return [mask_value(v, model) for v in value]
    if isinstance(value, str):
        return mask_text(value, model)
    return value


def _mask_server_info(body: Any) -> Any:
    # Machine, environment and full config: keep only the shape (top-level config keys), which is what
    # the SDK reads and what changes between releases.
    if not isinstance(body, dict):
        return body
    out = dict(body)
    config = out.get("vllm_config")
    if isinstance(config, dict):
        out["vllm_config"] = {k: MASK for k in config}
    elif isinstance(config, str):
        out["vllm_config"] = MASK
    for key in ("vllm_env", "system_env"):
        if isinstance(out.get(key), dict):
            out[key] = {}
    return out


def _mask_metrics(text: str) -> str:
    # Sample values change with every request; the TYPE lines say which families are exported. Only the
    # families a MetricsSnapshot reads: others (HTTP instrumentation, sleep-mode timings) appear once some
    # route was hit, which would make the recording depend on what ran before.
    from vllm_devclient.metrics import SNAPSHOT_FAMILIES

    wanted = tuple(f"# TYPE {name}" for name in SNAPSHOT_FAMILIES)
    types = sorted({line for line in text.splitlines() if line.startswith(wanted)})
    return "\n".join(types) + ("\n" if types else "")


def mask_exchange(exchange: Mapping[str, Any], model: str | None = None) -> dict[str, Any]:
    """An exchange (see `Exchange.as_json`) with everything that varies between runs masked."""
    out: dict[str, Any] = mask_value(json.loads(json.dumps(exchange)), model)
    request, response = out["request"], out.get("response")
    if response is not None:
        if request["path"] == "/server_info" and "json" in response:
            response["json"] = _mask_server_info(response["json"])
        elif request["path"] == "/metrics" and "text" in response:
            response["text"] = _mask_metrics(response["text"])
    return out


def timing_independent(
    exchanges: Sequence[dict[str, Any]], calls: Sequence[list[Any]] | None
) -> tuple[list[dict[str, Any]], list[list[Any]] | None]:
    """What a deadline-bound run (polls until a deadline) did, without what the timing decided: each
    distinct exchange and engine call once, and no try that the deadline cut short (timed out)."""
    kept = dedupe([ex for ex in exchanges if "error" not in ex])
    return kept, None if calls is None else dedupe(calls)


def dedupe(items: Sequence[Any]) -> list[Any]:
    """Keep the first of equal items (JSON-equal), in order: a timing-dependent run's distinct steps."""
    seen: set[str] = set()
    out: list[Any] = []
    for item in items:
        key = json.dumps(item, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


# ---------------------------------------------------------------------------------------- the scenarios


def _engine_steps_match_adds(run: ScenarioRun) -> str | None:
    steps = getattr(run.outcome, "engine_steps", None)
    if run.engine_calls is None or steps is None:
        return None
    adds = sum(1 for c in run.engine_calls if c[0] == "add_request")
    resets = sum(1 for c in run.engine_calls if c[0] == "reset_prefix_cache")
    attempts = getattr(run.outcome, "attempts", None)
    # A step the client gave up on near the deadline still reached the engine but is not counted.
    timed_out_step = any(ex.error and ex.request["path"] == "/v1/completions" for ex in run.exchanges)
    if adds != steps and not (timed_out_step and adds == steps + 1):
        return f"the engine saw {adds} ADD requests but the SDK reports {steps} engine steps"
    if resets != attempts:
        return f"the engine saw {resets} reset_prefix_cache calls but the SDK reports {attempts} attempts"
    return None


def _refused_or_timed_out(err: Any) -> bool:
    last = getattr(err, "last", None)
    return isinstance(last, errors.APITimeoutError) or getattr(last, "success", None) is False


def _is(kind: type, what: str) -> Check:
    return Check(f"{what} is a {kind.__name__}", lambda o: isinstance(resolve(o, what), kind))


_RPC_ARGS = ("echo", None, [1, "x"], {"k": "v"})
_COLLECTIVE_RPC = (call("collective_rpc", *_RPC_ARGS),)
_PY_STRINGS = "the Python frontend str()s every per-worker result that is not a dict, list or None"
_BARRIER_TIMEOUT = 1.0
_BARRIER_MAX_POLL = 0.1
_HANG_TIMEOUT = 0.5


def _rpc(c: Client) -> object:
    return c.collective_rpc("echo", args=[1, "x"], kwargs={"k": "v"})


def _sleep(level: int, mode: PauseMode) -> Callable[[Client], object]:
    return lambda c: c.sleep(level=level, mode=mode)


def _raw(method: str, path: str, params: Mapping[str, str]) -> Callable[[Client], object]:
    return lambda c: c.request(method, path, params=params)


def _default_scenarios() -> list[Scenario]:
    s: list[Scenario] = []
    add = s.append
    # ---- read-only routes
    add(Scenario("health", "GET /health on a healthy server", lambda c: c.health(), returns(True), safe=True))
    add(
        Scenario(
            "version",
            "GET /version names the release, and the frontend by whether rust_frontend_version is there",
            lambda c: c.version(),
            {
                "python": returns_model("VersionInfo", {"frontend": "python", "rust_frontend_version": None}),
                "rust": returns_model("VersionInfo", {"frontend": "rust"}, _is(str, "rust_frontend_version")),
            },
            sdk_difference="by design: VersionInfo.frontend tells which frontend answered",
            safe=True,
        )
    )
    add(
        Scenario(
            "models",
            "GET /v1/models lists the one served model with its max_model_len",
            lambda c: c.models(),
            returns_model("ModelList", {"len(data)": 1, "data.0.max_model_len": 128}, _is(str, "data.0.id")),
            safe=True,
        )
    )
    add(
        Scenario(
            "metrics_text",
            "GET /metrics answers Prometheus text (the content type differs)",
            lambda c: c.metrics_text(),
            Expect("str", {}, (Check("has # TYPE lines", lambda o: "# TYPE" in o),)),
            safe=True,
        )
    )
    add(
        Scenario(
            "server_info_json",
            "GET /server_info?config_format=json: vllm_config is an object",
            lambda c: c.server_info("json"),
            returns_model(
                "ServerInfo", {}, _is(dict, "vllm_config"), _is(dict, "vllm_env"), _is(dict, "system_env")
            ),
            safe=True,
        )
    )
    add(
        Scenario(
            "server_info_text",
            "GET /server_info?config_format=text: vllm_config is a string",
            lambda c: c.server_info("text"),
            returns_model("ServerInfo", {}, _is(str, "vllm_config")),
            safe=True,
        )
    )
    add(
        Scenario(
            "kv_event_sources_none",
            "GET /kv_event_sources with KV events off: no sources",
            lambda c: c.kv_event_sources(),
            returns({}),
            safe=True,
        )
    )
    add(
        Scenario(
            "get_world_size",
            "GET /get_world_size (default include_dp=true)",
            lambda c: c.get_world_size(),
            returns(1),
            safe=True,
        )
    )
    add(
        Scenario(
            "get_world_size_no_dp",
            "GET /get_world_size?include_dp=false",
            lambda c: c.get_world_size(include_dp=False),
            returns(1),
            safe=True,
        )
    )
    # ---- prefix cache and other caches
    add(
        Scenario(
            "reset_prefix_cache",
            "POST /reset_prefix_cache with the defaults; the engine answers true",
            lambda c: c.reset_prefix_cache(),
            returns_model("ResetPrefixCacheResult", {"success": True, "status_code": 200}),
            (call("reset_prefix_cache", False, False),),
        )
    )
    add(
        Scenario(
            "reset_prefix_cache_all_flags",
            "reset_running_requests and reset_external reach the engine as booleans",
            lambda c: c.reset_prefix_cache(reset_running_requests=True, reset_external=True),
            returns_model("ResetPrefixCacheResult", {"success": True}),
            (call("reset_prefix_cache", True, True),),
        )
    )
    add(
        Scenario(
            "reset_prefix_cache_refused",
            "the engine refuses the reset (blocks still held): success is False, not an error",
            lambda c: c.reset_prefix_cache(),
            returns_model("ResetPrefixCacheResult", {"success": False, "status_code": 200}),
            (call("reset_prefix_cache", False, False),),
            script={"reset_prefix_cache": [Return(False)]},
        )
    )
    add(
        Scenario(
            "reset_mm_cache",
            "POST /reset_mm_cache answers an empty 200",
            lambda c: c.reset_mm_cache(),
            returns(None),
            (call("reset_mm_cache"),),
        )
    )
    add(
        Scenario(
            "reset_encoder_cache",
            "POST /reset_encoder_cache answers an empty 200",
            lambda c: c.reset_encoder_cache(),
            returns(None),
            (call("reset_encoder_cache"),),
        )
    )
    # ---- sleep / wake
    modes: tuple[tuple[int, PauseMode], ...] = ((1, "abort"), (0, "keep"), (2, "wait"))
    for level, mode in modes:
        add(
            Scenario(
                f"sleep_level{level}_{mode}",
                f"POST /sleep?level={level}&mode={mode}",
                _sleep(level, mode),
                returns_model("SleepResult", {"status": "sleeping", "level": level}),
                (call("sleep", level, mode),),
            )
        )
    add(
        Scenario(
            "wake_up",
            "POST /wake_up with no tags wakes everything",
            lambda c: c.wake_up(),
            returns_model("WakeUpResult", {"awake": True, "status": "awake", "tags": None}),
            (call("wake_up", None),),
        )
    )
    add(
        Scenario(
            "wake_up_tags",
            "POST /wake_up?tags=weights&tags=kv_cache passes the tags in order",
            lambda c: c.wake_up(["weights", "kv_cache"]),
            returns_model("WakeUpResult", {"awake": True, "tags": ["weights", "kv_cache"]}),
            (call("wake_up", ["weights", "kv_cache"]),),
        )
    )
    add(
        Scenario(
            "wake_up_partial",
            "the engine answers false (still partly asleep): status sleeping, awake False",
            lambda c: c.wake_up(["weights"]),
            returns_model("WakeUpResult", {"awake": False, "status": "sleeping", "tags": ["weights"]}),
            (call("wake_up", ["weights"]),),
            script={"wake_up": [Return(False)]},
        )
    )
    add(
        Scenario(
            "is_sleeping_false",
            "GET /is_sleeping, engine awake",
            lambda c: c.is_sleeping(),
            returns(False),
            (call("is_sleeping"),),
            safe=True,
        )
    )
    add(
        Scenario(
            "is_sleeping_true",
            "GET /is_sleeping, engine asleep",
            lambda c: c.is_sleeping(),
            returns(True),
            (call("is_sleeping"),),
            script={"is_sleeping": [Return(True)]},
        )
    )
    add(
        Scenario(
            "release_kv_cache_memory",
            "POST /release_kv_cache_memory",
            lambda c: c.release_kv_cache_memory(),
            returns_model("StatusResult", {"status": "kv_cache_released"}),
            (call("release_kv_cache_memory"),),
        )
    )
    add(
        Scenario(
            "wait_until_sleeping",
            "wait_until_sleeping polls /is_sleeping until the engine says true (false, false, true)",
            lambda c: c.wait_until_sleeping(timeout=10.0, interval=0.01),
            returns(None),
            (call("is_sleeping"), call("is_sleeping"), call("is_sleeping")),
            script={"is_sleeping": [Return(False), Return(False), Return(True)]},
        )
    )
    add(
        Scenario(
            "wait_until_awake",
            "wait_until_awake polls /is_sleeping until the engine says false (true, false)",
            lambda c: c.wait_until_awake(timeout=10.0, interval=0.01),
            returns(None),
            (call("is_sleeping"), call("is_sleeping")),
            script={"is_sleeping": [Return(True), Return(False)]},
        )
    )
    add(
        Scenario(
            "wait_until_ready",
            "wait_until_ready on a healthy server: one /health",
            lambda c: c.wait_until_ready(timeout=10.0),
            returns(None),
            (),
            safe=True,
        )
    )
    # ---- pause / resume
    add(
        Scenario(
            "pause",
            "POST /pause with the defaults: mode abort, clear_cache left to the server (true)",
            lambda c: c.pause(),
            returns_model("StatusResult", {"status": "paused"}),
            (call("pause_generation", "abort", True),),
        )
    )
    add(
        Scenario(
            "pause_keep_no_clear",
            "POST /pause?mode=keep&clear_cache=false",
            lambda c: c.pause(mode="keep", clear_cache=False),
            returns_model("StatusResult", {"status": "paused"}),
            (call("pause_generation", "keep", False),),
        )
    )
    add(
        Scenario(
            "pause_wait",
            "POST /pause?mode=wait",
            lambda c: c.pause(mode="wait"),
            returns_model("StatusResult", {"status": "paused"}),
            (call("pause_generation", "wait", True),),
        )
    )
    add(
        Scenario(
            "resume",
            "POST /resume",
            lambda c: c.resume(),
            returns_model("StatusResult", {"status": "resumed"}),
            (call("resume_scheduler"),),
        )
    )
    add(
        Scenario(
            "is_paused_false",
            "GET /is_paused, scheduler running",
            lambda c: c.is_paused(),
            returns(False),
            (call("is_scheduler_paused"),),
            safe=True,
        )
    )
    add(
        Scenario(
            "is_paused_true",
            "GET /is_paused, scheduler paused",
            lambda c: c.is_paused(),
            returns(True),
            (call("is_scheduler_paused"),),
            script={"is_scheduler_paused": [Return(True)]},
        )
    )
    add(
        Scenario(
            "wait_until_paused",
            "wait_until_paused polls /is_paused until the engine says true (false, true)",
            lambda c: c.wait_until_paused(timeout=10.0, interval=0.01),
            returns(None),
            (call("is_scheduler_paused"), call("is_scheduler_paused")),
            script={"is_scheduler_paused": [Return(False), Return(True)]},
        )
    )
    add(
        Scenario(
            "wait_until_resumed",
            "wait_until_resumed polls /is_paused until the engine says false",
            lambda c: c.wait_until_resumed(timeout=10.0, interval=0.01),
            returns(None),
            (call("is_scheduler_paused"),),
        )
    )
    add(
        Scenario(
            "abort_requests_ids",
            "POST /abort_requests with ids that are not running: nothing reaches the engine",
            lambda c: c.abort_requests(["req-a", "req-b"]),
            {
                "python": returns_model("AbortRequestsResult", {"status": "aborted", "aborted": 2}),
                "rust": returns_model("AbortRequestsResult", {"status": "aborted", "aborted": 2}),
            },
            (),
        )
    )
    add(
        Scenario(
            "abort_requests_all",
            "POST /abort_requests with no ids aborts everything in flight (nothing is)",
            lambda c: c.abort_requests(),
            {
                "python": returns_model("AbortRequestsResult", {"status": "aborted", "aborted": 0}),
                "rust": returns_model("AbortRequestsResult", {"status": "aborted", "aborted": None}),
            },
            (),
            sdk_difference="aborting all: Python counts what was in flight, Rust's empty 200 cannot say",
        )
    )
    # ---- collective_rpc: what the engine returns, and how each frontend shapes it
    add(
        Scenario(
            "collective_rpc_worker_scalar",
            "one worker answers the scalar 7 (engine result [7])",
            _rpc,
            {"python": returns(["7"]), "rust": returns([7])},
            _COLLECTIVE_RPC,
            script={"collective_rpc": [Return([7])]},
            sdk_difference=_PY_STRINGS,
        )
    )
    add(
        Scenario(
            "collective_rpc_worker_list",
            "one worker answers a list (engine result [[1, 'x']])",
            _rpc,
            returns([[1, "x"]]),
            _COLLECTIVE_RPC,
            script={"collective_rpc": [Return([[1, "x"]])]},
        )
    )
    add(
        Scenario(
            "collective_rpc_worker_dict",
            "one worker answers a dict (engine result [{'a': 1}])",
            _rpc,
            returns([{"a": 1}]),
            _COLLECTIVE_RPC,
            script={"collective_rpc": [Return([{"a": 1}])]},
        )
    )
    add(
        Scenario(
            "collective_rpc_worker_none",
            "one worker answers None (engine result [None]): the default",
            _rpc,
            returns([None]),
            _COLLECTIVE_RPC,
        )
    )
    add(
        Scenario(
            "collective_rpc_two_workers",
            "two workers (engine result [1, 2])",
            _rpc,
            {"python": returns(["1", "2"]), "rust": returns([1, 2])},
            _COLLECTIVE_RPC,
            script={"collective_rpc": [Return([1, 2])]},
            sdk_difference=_PY_STRINGS,
        )
    )
    add(
        Scenario(
            "collective_rpc_bare_none",
            "the engine result is None itself: Python answers an empty 200, Rust [null]; both give [None]",
            _rpc,
            returns([None]),
            _COLLECTIVE_RPC,
            script={"collective_rpc": [Return(None)]},
        )
    )
    add(
        Scenario(
            "collective_rpc_bare_scalar",
            "the engine result is the scalar 7, not a per-worker list",
            _rpc,
            {
                "python": raises(errors.BadRequestError, {"status_code": 400}),
                "rust": returns([7]),
            },
            _COLLECTIVE_RPC,
            script={"collective_rpc": [Return(7)]},
            sdk_difference="Python iterates the result and fails with 400; Rust wraps a scalar in a list",
        )
    )
    add(
        Scenario(
            "collective_rpc_bare_dict",
            "the engine result is a dict, not a per-worker list",
            _rpc,
            {"python": returns(["a"]), "rust": returns([{"a": 1}])},
            _COLLECTIVE_RPC,
            script={"collective_rpc": [Return({"a": 1})]},
            sdk_difference="Python iterates the dict (its keys, str()-ed); Rust wraps a map in a list",
        )
    )
    add(
        Scenario(
            "collective_rpc_timeout",
            "rpc_timeout reaches the engine as the collective_rpc timeout",
            lambda c: c.collective_rpc("echo", args=[], rpc_timeout=5.0),
            returns([None]),
            (call("collective_rpc", "echo", 5.0, [], {}),),
        )
    )
    # ---- weight transfer
    add(
        Scenario(
            "init_weight_transfer_engine",
            "POST /init_weight_transfer_engine becomes a collective_rpc",
            lambda c: c.init_weight_transfer_engine({"backend": "nccl", "rank": 0}),
            returns_model("MessageResult", {"message": "Weight transfer initialized"}),
            (
                call(
                    "collective_rpc",
                    "init_weight_transfer_engine",
                    None,
                    [],
                    {"init_info": {"backend": "nccl", "rank": 0}},
                ),
            ),
        )
    )
    add(
        Scenario(
            "start_weight_update",
            "POST /start_weight_update (Python sends kwargs None, Rust {})",
            lambda c: c.start_weight_update(),
            returns_model("MessageResult", {"message": "Weight update started"}),
            {
                "python": (call("collective_rpc", "start_weight_update", None, [], None),),
                "rust": (call("collective_rpc", "start_weight_update", None, [], {}),),
            },
        )
    )
    add(
        Scenario(
            "update_weights",
            "POST /update_weights passes update_info through",
            lambda c: c.update_weights({"names": ["w"], "dtype_names": ["bfloat16"], "shapes": [[2]]}),
            returns_model("MessageResult", {"message": "Weights updated"}),
            (
                call(
                    "collective_rpc",
                    "update_weights",
                    None,
                    [],
                    {"update_info": {"names": ["w"], "dtype_names": ["bfloat16"], "shapes": [[2]]}},
                ),
            ),
        )
    )
    add(
        Scenario(
            "finish_weight_update",
            "POST /finish_weight_update with a version: two engine calls",
            lambda c: c.finish_weight_update(weight_version="v2"),
            returns_model("MessageResult", {"message": "Weight update finished"}),
            {
                "python": (
                    call("collective_rpc", "finish_weight_update", None, [], None),
                    call("set_weight_version", "v2"),
                ),
                "rust": (
                    call("collective_rpc", "finish_weight_update", None, [], {}),
                    call("set_weight_version", "v2"),
                ),
            },
        )
    )
    add(
        Scenario(
            "update_weight_version",
            "POST /update_weight_version",
            lambda c: c.update_weight_version("v3"),
            returns_model("WeightVersionResult", {"success": True, "new_version": "v3"}),
            (call("set_weight_version", "v3"),),
        )
    )
    add(
        Scenario(
            "weight_info",
            "GET /weight_info answers the engine's weight version",
            lambda c: c.weight_info(),
            returns_model("WeightInfo", {"weight_version": "w-7"}),
            (call("get_weight_version"),),
            script={"get_weight_version": [Return("w-7")]},
        )
    )
    # ---- engine stepping and the barrier
    add(
        Scenario(
            "step_engine",
            "a 1-token completion: /v1/models once, then /v1/completions; the engine sees one ADD",
            lambda c: c.step_engine(),
            Expect("str", {}, (Check("a non-empty completion", lambda o: bool(o)),)),
            (call("add_request", 1),),
        )
    )
    add(
        Scenario(
            "barrier_success_third_try",
            "reset answers false, false, true: success after 3 attempts and exactly 2 engine steps",
            lambda c: c.reset_prefix_cache_until_success(timeout=10.0, interval=0.01),
            returns_model("BarrierResult", {"attempts": 3, "engine_steps": 2}),
            (
                call("reset_prefix_cache", False, False),
                call("add_request", 1),
                call("reset_prefix_cache", False, False),
                call("add_request", 1),
                call("reset_prefix_cache", False, False),
            ),
            script={"reset_prefix_cache": [Return(False), Return(False), Return(True)]},
            run_checks=(_engine_steps_match_adds,),
        )
    )
    add(
        Scenario(
            "barrier_no_stepping",
            "step_engine=False: retries without completions",
            lambda c: c.reset_prefix_cache_until_success(timeout=10.0, step_engine=False, interval=0.01),
            returns_model("BarrierResult", {"attempts": 2, "engine_steps": 0}),
            (call("reset_prefix_cache", False, False), call("reset_prefix_cache", False, False)),
            script={"reset_prefix_cache": [Return(False), Return(True)]},
        )
    )
    add(
        Scenario(
            "barrier_external",
            "reset_external=True is sent on every attempt",
            lambda c: c.reset_prefix_cache_until_success(timeout=10.0, reset_external=True, interval=0.01),
            returns_model("BarrierResult", {"attempts": 2, "engine_steps": 1}),
            (
                call("reset_prefix_cache", False, True),
                call("add_request", 1),
                call("reset_prefix_cache", False, True),
            ),
            script={"reset_prefix_cache": [Return(False), Return(True)]},
        )
    )
    add(
        Scenario(
            "barrier_timeout",
            f"the engine never succeeds: BarrierTimeoutError at the {_BARRIER_TIMEOUT:.0f} s deadline "
            "plus one poll",
            lambda c: c.reset_prefix_cache_until_success(
                timeout=_BARRIER_TIMEOUT, interval=0.02, max_interval=_BARRIER_MAX_POLL
            ),
            raises(
                errors.BarrierTimeoutError,
                {},
                # The last try may be one the deadline cut short: a refusal or a timed-out try, never success.
                Check("the last answer was a refusal or a timed-out try", _refused_or_timed_out),
                Check("at least 3 attempts", lambda e: e.attempts >= 3),
                Check(
                    "one engine step between attempts (the last may have timed out)",
                    lambda e: e.attempts - 2 <= e.engine_steps <= e.attempts - 1,
                ),
                Check("waited at least the deadline", lambda e: e.waited_s >= _BARRIER_TIMEOUT),
            ),
            None,
            script={"reset_prefix_cache": [Return(False)]},
            timing_dependent=True,
            min_elapsed_s=_BARRIER_TIMEOUT,
            # the deadline, one poll interval, one request on a slow 2-core machine
            max_elapsed_s=_BARRIER_TIMEOUT + _BARRIER_MAX_POLL + 1.0,
            run_checks=(_engine_steps_match_adds,),
        )
    )
    # ---- engine failures: the engine raises, both frontends answer 500, the SDK names method and message
    failures: list[tuple[str, str, Callable[[Client], object], Sequence[Any]]] = [
        ("reset_prefix_cache", "reset_prefix_cache", lambda c: c.reset_prefix_cache(), (False, False)),
        ("sleep", "sleep", lambda c: c.sleep(), (1, "abort")),
        ("wake_up", "wake_up", lambda c: c.wake_up(), (None,)),
        ("is_sleeping", "is_sleeping", lambda c: c.is_sleeping(), ()),
        ("pause", "pause_generation", lambda c: c.pause(), ("abort", True)),
        ("is_paused", "is_scheduler_paused", lambda c: c.is_paused(), ()),
        ("collective_rpc", "collective_rpc", _rpc, _RPC_ARGS),
        ("weight_info", "get_weight_version", lambda c: c.weight_info(), ()),
    ]
    for label, method, fn, args in failures:
        msg = f"{method} exploded on purpose"
        add(
            Scenario(
                f"engine_error_{label}",
                f"the engine's {method} raises: 500 on both, EngineCallError with method and message",
                fn,
                raises(
                    errors.EngineCallError,
                    {"status_code": 500, "method": method, "engine_message": msg},
                ),
                (call(method, *args),),
                script={method: [Raise(msg)]},
                tags=("engine_error",),
            )
        )
    # ---- timeouts: neither frontend times out a hung engine call; the SDK's timeout ends it
    add(
        Scenario(
            "hung_is_sleeping",
            f"the engine never answers is_sleeping: APITimeoutError after the {_HANG_TIMEOUT} s "
            "client timeout",
            lambda c: c.is_sleeping(timeout=_HANG_TIMEOUT),
            raises(errors.APITimeoutError, {"method": "GET"}),
            (call("is_sleeping"),),
            script={"is_sleeping": [Hang()]},
            min_elapsed_s=_HANG_TIMEOUT,
            max_elapsed_s=_HANG_TIMEOUT + 1.5,
        )
    )
    add(
        Scenario(
            "hung_reset_prefix_cache",
            "a hung reset with a per-call timeout: APITimeoutError",
            lambda c: c.reset_prefix_cache(timeout=_HANG_TIMEOUT),
            raises(errors.APITimeoutError, {"method": "POST"}),
            (call("reset_prefix_cache", False, False),),
            script={"reset_prefix_cache": [Hang()]},
            min_elapsed_s=_HANG_TIMEOUT,
            max_elapsed_s=_HANG_TIMEOUT + 1.5,
        )
    )
    add(
        Scenario(
            "slow_engine_within_timeout",
            "an engine call that takes 0.3 s under a 5 s timeout succeeds",
            lambda c: c.is_sleeping(timeout=5.0),
            returns(True),
            (call("is_sleeping"),),
            script={"is_sleeping": [Delay(0.3, True)]},
            min_elapsed_s=0.3,
        )
    )
    # ---- server-side rejections through the escape hatch (values the typed methods refuse to send)
    add(
        Scenario(
            "raw_bool_true_lowercase",
            "client.request() with a Python bool sends lowercase 'true': accepted by both",
            lambda c: c.request("POST", "/reset_prefix_cache", params={"reset_external": True}),
            Expect("Response", {"status_code": 200}),
            (call("reset_prefix_cache", False, True),),
        )
    )
    for label, value in (("True", "True"), ("1", "1")):
        add(
            Scenario(
                f"raw_bad_bool_{label}",
                f"reset_external={value}: Python reads it as true, Rust accepts only true/false",
                _raw("POST", "/reset_prefix_cache", {"reset_external": value}),
                {
                    "python": Expect("Response", {"status_code": 200}),
                    "rust": raises(errors.BadRequestError, {"status_code": 400, "param": "reset_external"}),
                },
                {"python": (call("reset_prefix_cache", False, True),), "rust": ()},
                sdk_difference="Python's bool parsing is lenient; the SDK itself always sends true/false",
            )
        )
    for route, label, params, param in (
        ("/sleep", "sleep_level_5", {"level": "5"}, "level"),
        ("/sleep", "sleep_mode_bogus", {"mode": "bogus"}, "mode"),
        ("/pause", "pause_mode_bogus", {"mode": "bogus"}, "mode"),
    ):
        add(
            Scenario(
                f"raw_{label}",
                f"POST {route}?{next(iter(params))}={next(iter(params.values()))} is rejected with 400",
                _raw("POST", route, params),
                raises(errors.BadRequestError, {"status_code": 400, "param": param}),
                (),
            )
        )
    add(
        Scenario(
            "raw_collective_rpc_no_method",
            "POST /collective_rpc without 'method' is rejected with 400 before the engine",
            lambda c: c.request("POST", "/collective_rpc", json={"args": []}),
            raises(errors.BadRequestError, {"status_code": 400}),
            (),
        )
    )
    add(
        Scenario(
            "raw_wrong_method",
            "GET /reset_prefix_cache: 405 with an allow header on both (Rust sends no body)",
            lambda c: c.request("GET", "/reset_prefix_cache"),
            raises(
                errors.MethodNotAllowedError,
                {"status_code": 405, "message": "GET is not allowed on /reset_prefix_cache; allowed: POST"},
            ),
            (),
        )
    )
    return s


def _special_scenarios() -> list[Scenario]:
    s: list[Scenario] = []
    add = s.append
    # ---- dev mode off: dev routes 404, the rest still served
    add(
        Scenario(
            "dev_off_reset_prefix_cache",
            "dev mode off: a dev route is 404 and the SDK says how to turn it on",
            lambda c: c.reset_prefix_cache(),
            raises(
                errors.DevModeDisabledError,
                {"status_code": 404},
                Check("says VLLM_SERVER_DEV_MODE=1", lambda e: "VLLM_SERVER_DEV_MODE=1" in str(e)),
            ),
            (),
            setup="dev_mode_off",
        )
    )
    add(
        Scenario(
            "dev_off_is_sleeping",
            "dev mode off: GET /is_sleeping is 404",
            lambda c: c.is_sleeping(),
            raises(errors.DevModeDisabledError, {"status_code": 404}),
            (),
            setup="dev_mode_off",
        )
    )
    add(
        Scenario(
            "dev_off_collective_rpc",
            "dev mode off: POST /collective_rpc is 404",
            _rpc,
            raises(errors.DevModeDisabledError, {"status_code": 404}),
            (),
            setup="dev_mode_off",
        )
    )
    add(
        Scenario(
            "dev_off_health",
            "dev mode off: /health is not a dev route",
            lambda c: c.health(),
            returns(True),
            (),
            setup="dev_mode_off",
        )
    )
    # ---- --api-key: only /v1 is guarded
    add(
        Scenario(
            "api_key_models_without_key",
            "--api-key set, no key sent: /v1/models is 401",
            lambda c: c.models(),
            raises(errors.AuthenticationError, {"status_code": 401}),
            (),
            setup="api_key",
            api_key="",
        )
    )
    add(
        Scenario(
            "api_key_models_wrong_key",
            "--api-key set, a wrong key: /v1/models is 401",
            lambda c: c.models(),
            raises(errors.AuthenticationError, {"status_code": 401}),
            (),
            setup="api_key",
            api_key="sk-wrong",
        )
    )
    add(
        Scenario(
            "api_key_models_with_key",
            "--api-key set, the key sent: /v1/models answers",
            lambda c: c.models(),
            returns_model("ModelList", {"len(data)": 1}),
            (),
            setup="api_key",
        )
    )
    add(
        Scenario(
            "api_key_dev_route_without_key",
            "--api-key set, no key sent: dev routes are NOT protected (reset goes through)",
            lambda c: c.reset_prefix_cache(),
            returns_model("ResetPrefixCacheResult", {"success": True}),
            (call("reset_prefix_cache", False, False),),
            setup="api_key",
            api_key="",
        )
    )
    add(
        Scenario(
            "api_key_collective_rpc_without_key",
            "--api-key set, no key sent: even /collective_rpc answers",
            _rpc,
            returns([None]),
            _COLLECTIVE_RPC,
            setup="api_key",
            api_key="",
        )
    )
    add(
        Scenario(
            "api_key_server_info_without_key",
            "--api-key set, no key sent: /server_info answers",
            lambda c: c.server_info(),
            returns_model("ServerInfo", {}, _is(dict, "vllm_config")),
            (),
            setup="api_key",
            api_key="",
        )
    )
    add(
        Scenario(
            "api_key_step_engine_without_key",
            "--api-key set, no key sent: engine stepping (/v1/models) is 401",
            lambda c: c.step_engine(),
            raises(errors.AuthenticationError, {"status_code": 401}),
            (),
            setup="api_key",
            api_key="",
        )
    )
    add(
        Scenario(
            "kv_event_sources",
            "the engine announces a KV-events publisher: /kv_event_sources passes its config through",
            lambda c: c.kv_event_sources(),
            returns_model(
                "dict",
                {
                    "len()": 1,
                    "0.endpoint": "tcp://*:5557",
                    "0.replay_endpoint": "tcp://*:5558",
                    "0.topic": "kv-events",
                    "0.publisher": "zmq",
                },
            ),
            (),
            setup="api_key",
            api_key="",
        )
    )
    add(
        Scenario(
            "dev_off_kv_event_sources",
            "dev mode off: /kv_event_sources is not a dev route",
            lambda c: c.kv_event_sources(),
            returns({}),
            (),
            setup="dev_mode_off",
        )
    )
    # ---- dead engine
    add(
        Scenario(
            "dead_engine_health",
            "the engine declared itself dead: /health is 503 and the SDK raises EngineDeadError",
            lambda c: c.health(),
            raises(errors.EngineDeadError, {"status_code": 503}),
            (),
            setup="dead_engine",
        )
    )
    return s


SCENARIOS: tuple[Scenario, ...] = tuple(_default_scenarios() + _special_scenarios())


def _check_unique() -> None:
    seen: set[str] = set()
    for sc in SCENARIOS:
        if sc.name in seen:
            raise RuntimeError(f"duplicate scenario name {sc.name!r}")
        seen.add(sc.name)


_check_unique()


def get_scenario(name: str) -> Scenario:
    for sc in SCENARIOS:
        if sc.name == name:
            return sc
    raise KeyError(f"no scenario named {name!r}")
