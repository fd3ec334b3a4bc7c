"""Send each framework's requests and perform each SDK call on the real frontends, and record what happened.

`observe(frontends)` takes running kit frontends (`vllm_devclient.testing`: a real Python or Rust frontend
on a `ScriptedEngine`, with LoRA enabled, as the kit's `extras` setup starts them), puts a `RecordingProxy` in
front of each, and for every step of `STEPS`, on each frontend alone (or on all at once for a fleet step):

- sends each framework's requests raw (httpx), server by server, in order, and records each as it reached
  the server (method, path, query, body), its status and the engine calls it caused;
- performs the SDK's calls (a `DevClient`, or a `Fleet` over all) and records the requests, statuses and
  engine calls the same way, per server (and the error, if one was raised);
- compares them (`compare`).

Every engine is reset before each framework's run and the SDK's. The kit's LoRA directory appears as
`ADAPTER` in what is recorded, so the record is the same on any machine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from vllm_devclient import DevClient, DevClientError, Fleet

from .compare import in_process_differences, request_differences
from .proxy import RecordingProxy
from .sdk import perform, render
from .spec import NO_BODY, Env, FrameworkStep, Send, Step, resolve, to_json
from .transcription import ADAPTER, FRAMEWORKS, STEPS, VALUES

__all__ = ["Server", "observe"]

_TIMEOUT_S = 30.0


@dataclass
class Server:
    """A kit frontend (`base_url`, `engine`), the proxy in front of it, and its `/get_world_size`."""

    name: str
    frontend: Any
    proxy: RecordingProxy
    world_size: int = 1

    def reset(self) -> None:
        self.frontend.engine.reset()
        self.proxy.take()

    def engine_calls(self) -> list[dict[str, Any]]:
        return [_call(c) for c in self.frontend.engine.calls if c.kind == "utility"]


def observe(
    frontends: Mapping[str, Any], adapter: str, steps: Sequence[Step] = STEPS
) -> list[dict[str, Any]]:
    """Every step as observed on `frontends` (name -> running kit frontend); `adapter` is the LoRA directory
    the frontends may load. The steps' JSON, in order."""
    proxies = {name: RecordingProxy(fe.base_url).start() for name, fe in frontends.items()}
    try:
        servers = [Server(name, fe, proxies[name]) for name, fe in frontends.items()]
        for server in servers:
            server.world_size = _world_size(server.frontend.base_url)
        values = {**VALUES, "adapter": adapter}
        return [_masked(_step(step, servers, values), adapter) for step in steps]
    finally:
        for proxy in proxies.values():
            proxy.close()


def _world_size(base_url: str) -> int:
    # Asked of the frontend itself, not through the proxy: the runner's own question, not a step's.
    answer = httpx.get(f"{base_url}/get_world_size", timeout=_TIMEOUT_S)
    answer.raise_for_status()
    return int(answer.json()["world_size"])


def _runs(step: Step, servers: Sequence[Server]) -> dict[str, list[Server]]:
    if step.servers == "fleet":
        return {"+".join(s.name for s in servers): list(servers)}
    return {s.name: [s] for s in servers}


def _step(step: Step, servers: Sequence[Server], values: Mapping[str, Any]) -> dict[str, Any]:
    runs = _runs(step, servers)
    target = "fleet" if step.servers == "fleet" else "client"
    sdk = {name: _sdk_run(step, run, values) for name, run in runs.items()}
    frameworks: dict[str, Any] = {}
    for key in FRAMEWORKS:
        part = step.frameworks.get(key)
        frameworks[key] = None if part is None else _framework(part, runs, values, sdk)
    return {
        "step": step.name,
        "servers": step.servers,
        "not_exercised": step.not_exercised,
        "frameworks": frameworks,
        "sdk": {
            "calls": [render(c, f"{target}.") for c in step.sdk],
            "spec": to_json(step.sdk),
            "observed": sdk,
        },
    }


def _framework(
    part: FrameworkStep, runs: Mapping[str, list[Server]], values: Mapping[str, Any], sdk: Mapping[str, Any]
) -> dict[str, Any]:
    out: dict[str, Any] = {"source": to_json(part.source), "note": part.note}
    if part.in_process:
        calls = [_jsonable({"method": c.method, "kwargs": dict(c.kwargs)}) for c in part.in_process]
        out["in_process"] = calls
        out["differs"] = {
            name: {s.name: in_process_differences(calls, sdk[name]["servers"][s.name]) for s in run}
            for name, run in runs.items()
        }
        return out
    out["sends"] = to_json(part.sends)
    observed = {name: _sends_run(part.sends, run, values) for name, run in runs.items()}
    out["observed"] = observed
    out["differs"] = {
        name: {s.name: request_differences(observed[name][s.name], sdk[name]["servers"][s.name]) for s in run}
        for name, run in runs.items()
    }
    return out


def _env(run: Sequence[Server], i: int) -> Env:
    return Env(i, tuple(s.world_size for s in run))


def _sends_run(sends: Sequence[Send], run: Sequence[Server], values: Mapping[str, Any]) -> dict[str, Any]:
    """Each server of the run gets the framework's requests, in order, one server after the other."""
    for server in run:
        server.reset()
    out: dict[str, Any] = {}
    for i, server in enumerate(run):
        records = []
        with httpx.Client(base_url=server.proxy.base_url, timeout=_TIMEOUT_S) as client:
            for send in sends:
                before = len(server.engine_calls())
                kwargs: dict[str, Any] = {"params": resolve(dict(send.query), _env(run, i), values)}
                if send.json is not NO_BODY:
                    kwargs["json"] = resolve(send.json, _env(run, i), values)
                client.request(send.method, send.path, **kwargs)
                (record,) = server.proxy.take()
                records.append({**record, "engine": server.engine_calls()[before:]})
        out[server.name] = _jsonable(records)
    return out


def _sdk_run(step: Step, run: Sequence[Server], values: Mapping[str, Any]) -> dict[str, Any]:
    """The step's SDK calls on a DevClient (one server) or a Fleet (several), as the servers saw them."""
    for server in run:
        server.reset()
    urls = [s.proxy.base_url for s in run]
    target: DevClient | Fleet = DevClient(urls[0]) if len(run) == 1 else Fleet(urls)
    error = None
    try:
        with target:
            perform(step.sdk, target, lambda v: resolve(v, _env(run, 0), values))
    except DevClientError as raised:
        error = f"{type(raised).__name__}: {raised}"
    servers = {s.name: _jsonable({"requests": s.proxy.take(), "engine": s.engine_calls()}) for s in run}
    return {"error": error, "servers": servers}


# vLLM's LoRARequest travels as an array; its id (index 1) is the frontend's counter of the adapters it
# loaded, which depends on what the frontend loaded before this run, not on the request.
_LORA_ID = "{lora id}"


def _call(call: Any) -> dict[str, Any]:
    kwargs = dict(call.kwargs)
    request = kwargs.get("lora_request")
    if call.method == "add_lora" and isinstance(request, list | tuple) and len(request) > 1:
        kwargs["lora_request"] = [request[0], _LORA_ID, *request[2:]]
    return {"method": call.method, "kwargs": kwargs}


def _jsonable(value: Any) -> Any:
    """As JSON keeps it (tuples become lists, bytes their repr): comparisons see what the file holds."""
    return json.loads(json.dumps(value, default=repr))


def _masked(value: Any, adapter: str) -> Any:
    if isinstance(value, str):
        return value.replace(adapter, ADAPTER)
    if isinstance(value, dict):
        return {k: _masked(v, adapter) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, adapter) for v in value]
    return value
