"""The real `vllm-devclient` command line, run as a subprocess against real Rust frontends, scripted engines.

One module-wide fleet of 8 targets: 6 healthy Rust frontends (the tests script some of their engines to fail),
one frontend with dev mode off, and one URL whose port is closed. Each test resets the engines first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vllm_devclient.testing.engine import Hang, Raise, Return, ScriptedEngine
from vllm_devclient.testing.frontends import Frontend, RustFrontend
from vllm_devclient.testing.processes import free_port

pytestmark = pytest.mark.frontend

CLI = str(Path(sys.executable).with_name("vllm-devclient"))


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.stdout)
        return data


def run(*args: str, urls: Sequence[str] = (), env: dict[str, str] | None = None, timeout: float = 60) -> Run:
    """The installed console script, exactly as a shell would run it."""
    clean = {k: v for k, v in os.environ.items() if k not in ("VLLM_API_KEY", "VLLM_DEVCLIENT_URL")}
    cmd = [CLI, *(a for url in urls for a in ("--url", url)), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**clean, **(env or {})}, timeout=timeout)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


@dataclass
class LiveFleet:
    healthy: list[Frontend]
    dev_off: Frontend
    closed: str

    @property
    def healthy_urls(self) -> list[str]:
        return [f.base_url for f in self.healthy]

    @property
    def urls(self) -> list[str]:
        return [*self.healthy_urls, self.dev_off.base_url, self.closed]


@pytest.fixture(scope="module")
def live() -> Iterator[LiveFleet]:
    frontends: list[Frontend] = []
    try:
        # Stateful engines: is_paused / is_sleeping follow the pause, sleep and resume calls they saw.
        for _ in range(6):
            frontends.append(RustFrontend(engine=ScriptedEngine(stateful=True)).start())
        frontends.append(RustFrontend(dev_mode=False).start())
        yield LiveFleet(healthy=frontends[:6], dev_off=frontends[6], closed=closed_port_url())
    finally:
        for frontend in frontends:
            frontend.stop()


@pytest.fixture
def fleet(live: LiveFleet) -> LiveFleet:
    for frontend in [*live.healthy, live.dev_off]:
        frontend.engine.reset()
    return live


def test_fleet_of_eight_reports_every_target_and_its_exit_code(fleet: LiveFleet) -> None:
    wedged, refusing = fleet.healthy[4], fleet.healthy[5]
    wedged.engine.script("reset_prefix_cache", Raise("cache is wedged"))
    refusing.engine.script("reset_prefix_cache", Return(False))
    result = run("--json", "--retries", "0", "reset-prefix-cache", "--reset-external", urls=fleet.urls)
    # Failures of different kinds (engine error, success=false, dev mode off, unreachable): exit 1.
    assert result.code == 1, result.stderr
    doc = result.doc
    assert doc["command"] == "reset-prefix-cache" and doc["ok"] is False
    targets = doc["targets"]
    assert list(targets) == fleet.urls
    for frontend in fleet.healthy[:4]:
        entry = targets[frontend.base_url]
        assert (entry["ok"], entry["exit_code"], entry["result"]["success"]) == (True, 0, True)
        assert [c.args for c in frontend.engine.calls_for("reset_prefix_cache")] == [(False, True)]
    error = targets[wedged.base_url]["error"]
    assert targets[wedged.base_url]["exit_code"] == 1
    assert (error["type"], error["engine_method"], error["engine_message"], error["frontend"]) == (
        "EngineCallError",
        "reset_prefix_cache",
        "cache is wedged",
        "rust",
    )
    refused = targets[refusing.base_url]
    assert (refused["ok"], refused["exit_code"], refused["result"]["success"]) == (False, 1, False)
    off = targets[fleet.dev_off.base_url]
    assert (off["exit_code"], off["error"]["type"], off["error"]["status_code"]) == (
        5,
        "DevModeDisabledError",
        404,
    )
    assert fleet.dev_off.engine.calls == []
    closed = targets[fleet.closed]
    assert (closed["exit_code"], closed["error"]["type"]) == (3, "APIConnectionError")


def test_human_table_names_each_target(fleet: LiveFleet) -> None:
    result = run("--retries", "0", "is-paused", urls=fleet.urls)
    assert result.code == 1
    for url in fleet.urls:
        assert url in result.stdout
    assert result.stdout.count("FAIL") == 2
    assert "dev mode off: 404 on /is_paused" in result.stdout
    assert "6 of 8 targets ok" in result.stderr


@pytest.mark.parametrize(("extra", "code"), [("dev_off", 5), ("closed", 3), (None, 0)])
def test_exit_code_is_the_failure_kind_the_targets_share(
    fleet: LiveFleet, extra: str | None, code: int
) -> None:
    urls = fleet.healthy_urls + (
        [] if extra is None else [fleet.dev_off.base_url if extra == "dev_off" else fleet.closed]
    )
    result = run("--json", "--retries", "0", "is-paused", urls=urls)
    assert result.code == code
    assert [t["result"] for t in result.doc["targets"].values() if t["ok"]] == [False] * 6


def test_barrier_over_the_fleet(fleet: LiveFleet) -> None:
    slow = fleet.healthy[2]
    slow.engine.script("reset_prefix_cache", [Return(False), Return(False), Return(True)])
    result = run("--json", "barrier", "--deadline", "20", urls=fleet.healthy_urls)
    assert result.code == 0, result.stdout + result.stderr
    entry = result.doc["targets"][slow.base_url]["result"]
    assert (entry["attempts"], entry["engine_steps"]) == (3, 2)
    assert slow.engine.requests_added == 2  # the engine really ran two steps
    assert all(t["result"]["attempts"] == 1 for u, t in result.doc["targets"].items() if u != slow.base_url)

    stuck = fleet.healthy[3]
    stuck.engine.script("reset_prefix_cache", Return(False))
    late = run("--json", "barrier", "--deadline", "0.5", urls=fleet.healthy_urls)
    assert late.code == 4
    error = late.doc["targets"][stuck.base_url]["error"]
    assert error["type"] == "BarrierTimeoutError" and error["attempts"] >= 2
    assert sum(t["ok"] for t in late.doc["targets"].values()) == 5


def test_pause_rollback_resumes_only_what_it_paused(fleet: LiveFleet) -> None:
    result = run("--json", "--retries", "0", "pause", "--rollback", "--mode", "keep", urls=fleet.urls)
    assert result.code == 1  # dev mode off (5) and unreachable (3) together
    assert list(result.doc["rollback"]) == fleet.healthy_urls
    for frontend in fleet.healthy:
        assert [c.args for c in frontend.engine.calls_for("pause_generation")] == [("keep", True)]
        assert len(frontend.engine.calls_for("resume_scheduler")) == 1
    after = run("--json", "is-paused", urls=fleet.healthy_urls)
    assert [t["result"] for t in after.doc["targets"].values()] == [False] * 6

    # Without --rollback the targets that paused stay paused.
    kept = run("--json", "--retries", "0", "pause", urls=fleet.urls)
    assert kept.code == 1 and "rollback" not in kept.doc
    assert run("is-paused", urls=fleet.healthy_urls[:1]).stdout.strip() == "true"
    assert run("resume", urls=fleet.healthy_urls).code == 0


def test_http_timeout_exits_three_and_wait_deadline_four(fleet: LiveFleet) -> None:
    hung = fleet.healthy[0]
    hung.engine.script("is_sleeping", Hang())
    result = run("--json", "--timeout", "0.5", "--retries", "0", "is-sleeping", urls=[hung.base_url])
    assert result.code == 3
    assert result.doc["targets"][hung.base_url]["error"]["type"] == "APITimeoutError"
    waited = run("wait-ready", "--deadline", "0.5", urls=[fleet.closed])
    assert waited.code == 4 and "WaitTimeoutError" in waited.stderr
    assert run("wait-ready", urls=fleet.healthy_urls).code == 0


def test_sleep_wake_and_info_commands(fleet: LiveFleet) -> None:
    url = fleet.healthy[1].base_url
    engine = fleet.healthy[1].engine
    assert run("sleep", "--level", "2", "--mode", "wait", urls=[url]).code == 0
    assert [c.args for c in engine.calls_for("sleep")] == [(2, "wait")]
    assert run("wait-sleeping", "--deadline", "5", urls=[url]).code == 0
    assert run("wake-up", "--tag", "weights", urls=[url]).code == 0
    assert engine.calls_for("wake_up")[-1].args == (["weights"],)
    version = run("--json", "version", urls=fleet.healthy_urls)
    assert all(t["result"]["rust_frontend_version"] for t in version.doc["targets"].values())
    world = run("get-world-size", urls=[url])
    assert world.code == 0 and world.stdout.strip().isdigit()


def test_api_key_is_used_and_never_printed() -> None:
    with RustFrontend(api_key="sk-live-secret") as guarded:
        denied = run("models", urls=[guarded.base_url])
        assert denied.code == 6 and "AuthenticationError" in denied.stderr
        allowed = run("--json", "models", urls=[guarded.base_url], env={"VLLM_API_KEY": "sk-live-secret"})
        assert allowed.code == 0
        assert allowed.doc["targets"][guarded.base_url]["result"]["data"][0]["id"] == guarded.model
        flagged = run("--api-key", "sk-live-secret", "models", urls=[guarded.base_url])
        assert flagged.code == 0
        for output in (denied, allowed, flagged):
            assert "sk-live-secret" not in output.stdout + output.stderr


def test_parity_between_two_live_servers(fleet: LiveFleet) -> None:
    a, b = fleet.healthy_urls[:2]
    result = run("--json", "parity", "--url", a, "--url", b, timeout=120)
    assert result.code == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["mode"] == "live" and report["sdk_mismatches"] == [] and report["rows"]
    assert sorted(report["versions"].values()) == sorted([a, b])
    # Read-only scenarios only: neither engine saw a state-changing call.
    for frontend in fleet.healthy[:2]:
        assert not frontend.engine.calls_for("reset_prefix_cache")
        assert not frontend.engine.calls_for("pause_generation")


def test_parity_embedded_starts_both_real_frontends(tmp_path: Path) -> None:
    """The README's first command: no --url, the real Python and Rust frontends on scripted engines."""
    path = tmp_path / "parity.md"
    result = run("--json", "parity", "--report", str(path), timeout=290)
    assert result.code == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["mode"] == "harness" and report["sdk_mismatches"] == []
    assert set(report["versions"]) == {"python", "rust"}
    markdown = path.read_text()
    assert markdown.startswith("# Parity report: python vs rust")
    assert "| scenario |" in markdown and "SDK mismatches: 0" in markdown


# ---- kv-events tail: vLLM's own publisher, found through a real frontend's /kv_event_sources -----------


@pytest.fixture(scope="module")
def vllm_kv_events() -> Any:
    """vllm.distributed.kv_events (imports torch: a few seconds, once per module)."""
    import vllm.distributed.kv_events as vkv

    return vkv


def test_kv_events_tail_discovers_the_publisher_through_the_server(vllm_kv_events: Any) -> None:
    vkv = vllm_kv_events
    port, replay = free_port(), free_port()
    config = {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": f"tcp://*:{port}",
        "replay_endpoint": f"tcp://*:{replay}",
        "topic": "kv",
        # The Rust frontend reads the whole config from the engine's handshake: every field is required.
        "buffer_steps": 10000,
        "hwm": 100000,
        "max_queue_size": 100000,
    }
    pub = vkv.ZmqEventPublisher(
        0, endpoint=config["endpoint"], replay_endpoint=config["replay_endpoint"], topic="kv"
    )
    try:
        for i in range(3):
            event = vkv.BlockStored(
                block_hashes=[100 + i], parent_block_hash=None, token_ids=[1, 2], block_size=16,
                lora_id=None, medium="CPU" if i else "GPU", lora_name=None,
            )  # fmt: skip
            pub.publish(vkv.KVEventBatch(ts=1000.0 + i, events=[event]))
        pub.publish(vkv.KVEventBatch(ts=1003.0, events=[vkv.AllBlocksCleared()]))
        with RustFrontend(engine=ScriptedEngine(kv_events_config=config)) as server:
            # Published before anyone subscribed: the tail gets them back by replay (--backlog).
            result = run(
                "--json", "kv-events", "tail", "--count", "4", "--duration", "30", urls=[server.base_url]
            )
            assert result.code == 0, result.stderr
            batches = [json.loads(line) for line in result.stdout.splitlines()]
            assert [b["seq"] for b in batches] == [0, 1, 2, 3]
            assert [b["events"][0]["block_hashes"] for b in batches[:3]] == [[100], [101], [102]]
            assert [b["events"][0]["medium"] for b in batches[:3]] == ["GPU", "CPU", "CPU"]
            assert batches[3]["events"][0]["type"] == "AllBlocksCleared"
            assert "4 batches; blocks stored: GPU 1, CPU 2" in result.stderr
            human = run("kv-events", "tail", "--count", "6", "--duration", "1", urls=[server.base_url])
            assert human.code == 4  # only 4 batches exist: the duration ends the wait
            assert "rank 0 seq 1 (replayed): stored CPU 1 block [65]" in human.stdout
    finally:
        pub.shutdown()


def test_kv_events_tail_without_publisher_or_with_a_bad_endpoint(fleet: LiveFleet) -> None:
    none = run("kv-events", "tail", "--count", "1", urls=fleet.healthy_urls[:1])
    assert none.code == 1 and "reports no KV-event publishers" in none.stderr
    bad = run("kv-events", "tail", "--endpoint", "udp://x:1", "--count", "1")
    assert bad.code == 2
    two = run("kv-events", "tail", urls=fleet.healthy_urls[:2])
    assert two.code == 2 and "one --url" in two.stderr
