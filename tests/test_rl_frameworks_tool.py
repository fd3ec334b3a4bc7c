"""The parts of tools/rl_frameworks, without vLLM: the templates, the coverage rule, the recording proxy (in
front of the kit's raw server), the rendering of bodies and the comparison of two records."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tools.rl_frameworks.cli import differences
from tools.rl_frameworks.compare import in_process_differences, request_differences
from tools.rl_frameworks.proxy import RecordingProxy
from tools.rl_frameworks.render import _compact
from tools.rl_frameworks.spec import Env, Expr, Ref, SpecError, resolve
from vllm_devclient import DevClient
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import Answer


def test_templates_resolve_per_server() -> None:
    values = {"addr": "127.0.0.1", "info": {"addr": Ref("addr"), "world": Expr("1 + total")}}
    template = {"info": Ref("info"), "rank": Expr("1 + before"), "share": Expr("i * (total // n)")}
    second = Env(1, (2, 4))
    assert resolve(template, second, values) == {
        "info": {"addr": "127.0.0.1", "world": 7},
        "rank": 3,
        "share": 3,
    }
    with pytest.raises(SpecError, match="no fact named 'rank'"):
        resolve(Expr("rank + 1"), second, values)
    with pytest.raises(SpecError, match="only whole numbers"):
        resolve(Expr("ws / 2"), second, values)
    with pytest.raises(SpecError, match="no value named 'port'"):
        resolve(Ref("port"), second, values)


def _record(
    method: str, path: str, status: int, engine: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "method": method,
        "path": path,
        "query": [],
        "body": None,
        "status": status,
        "engine": engine or [],
    }


PAUSE_KEEP = {"method": "pause_generation", "kwargs": {"mode": "keep", "clear_cache": False}}


def test_the_sdk_covers_a_request_on_its_route_status_and_engine_calls() -> None:
    sdk = {
        "requests": [_record("POST", "/pause", 200), _record("GET", "/is_paused", 200)],
        "engine": [PAUSE_KEEP],
    }
    assert request_differences([_record("POST", "/pause", 200, [PAUSE_KEEP])], sdk) == []
    cleared = {"method": "pause_generation", "kwargs": {"mode": "keep", "clear_cache": True}}
    assert request_differences([_record("POST", "/pause", 200, [cleared])], sdk) == [
        "engine pause_generation: clear_cache True, the SDK's False"
    ]
    assert request_differences([_record("POST", "/pause", 400)], sdk) == [
        "status POST /pause: 400, the SDK's 200"
    ]
    assert request_differences([_record("POST", "/init_broadcaster", 404)], sdk) == [
        "route POST /init_broadcaster"
    ]
    resume = {"method": "resume_scheduler", "kwargs": {}}
    assert in_process_differences([resume], sdk) == [
        "engine resume_scheduler(), which the SDK's requests did not cause"
    ]


def test_the_proxy_records_what_reached_the_server_and_passes_the_answer_back() -> None:
    with MisbehavingServer() as backend, RecordingProxy(backend.base_url) as proxy:
        backend.script("/pause", [Answer(409, json={"error": "busy"}, server="uvicorn")])
        with httpx.Client(base_url=proxy.base_url) as client:
            answer = client.post("/pause", params={"mode": "keep", "tags": ["a", "b"]}, json={"x": [1]})
            chunked = client.post("/wake_up", content=iter([b'{"tags": ', b'["weights"]}']))
        assert (answer.status_code, answer.json(), answer.headers["server"]) == (
            409,
            {"error": "busy"},
            "uvicorn",
        )
        assert chunked.status_code == 404
        first, second = proxy.take()
        assert first == {
            "method": "POST",
            "path": "/pause",
            "query": [["mode", "keep"], ["tags", "a"], ["tags", "b"]],
            "body": {"x": [1]},
            "status": 409,
        }
        assert (second["body"], second["status"]) == ('{"tags": ["weights"]}', 404)
        assert backend.requests[1].body == b'{"tags": ["weights"]}'  # the chunks reached it whole
        assert proxy.take() == []


def test_the_sdk_works_through_the_proxy() -> None:
    with MisbehavingServer() as backend, RecordingProxy(backend.base_url) as proxy:
        backend.script("/health", [Answer(200)])
        with DevClient(proxy.base_url) as client:
            assert client.health() is True
        assert [(r["method"], r["path"], r["status"]) for r in proxy.take()] == [("GET", "/health", 200)]


def test_a_body_shows_named_values_by_name() -> None:
    names = {"update_info": {"names": ["w"]}, "master_port": 29500}
    body = {"update_info": {"names": ["w"]}, "port": 29500, "packed": True, "rank_offset": 1}
    assert _compact(body, names) == "{update_info, port: master_port, packed: true, rank_offset: 1}"


def test_two_records_differ_in_what_was_observed_not_in_their_provenance() -> None:
    base = {"run": {"vllm": "0.34.0", "date": "2026-12-05", "commit": "a"}, "steps": [{"status": 200}]}
    later = {"run": {"vllm": "0.34.0", "date": "2026-12-06", "commit": "b"}, "steps": [{"status": 200}]}
    assert differences(base, later) == []
    changed = {**later, "steps": [{"status": 404}]}
    assert differences(base, changed) == ["steps[0].status: 200 -> 404"]
