"""The test harness itself, against the real vLLM frontends (Python and Rust)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from tokenizers import Tokenizer

from vllm_devclient.testing import (
    Delay,
    EngineState,
    Frontend,
    FrontendStartupError,
    Hang,
    PythonFrontend,
    Raise,
    Return,
    RustFrontend,
    ScriptedEngine,
    VllmNotInstalledError,
    find_vllm_rs,
    make_model_dir,
)
from vllm_devclient.testing.processes import descendants, is_running

pytestmark = pytest.mark.frontend


def _alive(pid: int) -> bool:
    # A zombie (exited, not yet reaped by someone else) counts as gone.
    return is_running(pid)


def _tree(pid: int) -> list[int]:
    return [pid, *(p.pid for p in descendants(pid))]


# ------------------------------------------------------------------ without a frontend


def test_model_dir_is_built_once_and_loads(tmp_path: Path) -> None:
    first = make_model_dir(tmp_path / "m")
    stamp = (first / "tokenizer.json").stat().st_mtime_ns
    again = make_model_dir(tmp_path / "m")
    assert again == first and (first / "tokenizer.json").stat().st_mtime_ns == stamp
    config = json.loads((first / "config.json").read_text())
    assert config["num_hidden_layers"] == 1 and config["architectures"] == ["LlamaForCausalLM"]
    assert "chat_template" in json.loads((first / "tokenizer_config.json").read_text())
    tok = Tokenizer.from_file(str(first / "tokenizer.json"))
    assert tok.get_vocab_size() <= config["vocab_size"]
    # The engine's default tokens must decode to text, not to broken bytes.
    assert tok.decode(list(ScriptedEngine().token_ids)) == "hello"


def test_script_rejects_bad_actions() -> None:
    engine = ScriptedEngine()
    with pytest.raises(TypeError, match="not an action"):
        engine.script("reset_prefix_cache", [True])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="empty"):
        engine.script("reset_prefix_cache", [])
    with pytest.raises(TypeError, match="msgpack"):
        engine.script("collective_rpc", Return(object()))
    engine.close()


def test_missing_vllm_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    def missing(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.delenv("VLLM_DEVCLIENT_VLLM_RS", raising=False)
    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(VllmNotInstalledError, match=r"bash scripts/setup\.sh"):
        find_vllm_rs()
    with pytest.raises(VllmNotInstalledError, match=r"bash scripts/setup\.sh"):
        RustFrontend().start()


# ------------------------------------------------------------------ both frontends


def test_handshake_and_health(frontend: Frontend) -> None:
    assert frontend.engine.registered
    r = httpx.get(f"{frontend.base_url}/health", timeout=5)
    assert r.status_code == 200
    version = httpx.get(f"{frontend.base_url}/version", timeout=5).json()
    assert ("rust_frontend_version" in version) == (frontend.frontend == "rust")
    models = httpx.get(f"{frontend.base_url}/v1/models", timeout=5).json()
    assert models["data"][0]["id"] == frontend.model
    assert models["data"][0]["max_model_len"] == frontend.engine.ready_response["max_model_len"]
    if frontend.frontend == "python":
        assert {c.method for c in frontend.startup_calls} >= {"get_supported_tasks"}


def test_utility_round_trip_and_sticky_script(frontend: Frontend, engine: ScriptedEngine) -> None:
    url = f"{frontend.base_url}/reset_prefix_cache"
    with httpx.Client(timeout=5) as client:
        assert client.post(url).json() == {"success": True}
        engine.script("reset_prefix_cache", [Return(False), Return(False), Return(True)])
        answers = [client.post(url, params={"reset_external": "true"}).json()["success"] for _ in range(4)]
    assert answers == [False, False, True, True]
    calls = engine.calls_for("reset_prefix_cache")
    assert [c.args for c in calls] == [(False, False)] + [(False, True)] * 4
    assert all(c.kind == "utility" for c in calls)


def test_route_to_utility_names(frontend: Frontend, engine: ScriptedEngine) -> None:
    with httpx.Client(base_url=frontend.base_url, timeout=5) as client:
        assert client.post("/pause", params={"mode": "keep", "clear_cache": "false"}).json() == {
            "status": "paused"
        }
        assert client.post("/resume").json() == {"status": "resumed"}
        assert client.get("/is_paused").json() == {"is_paused": False}
        assert client.post("/sleep", params={"level": "2"}).json() == {"status": "sleeping", "level": 2}
        rpc = client.post("/collective_rpc", json={"method": "echo", "args": ["a"], "kwargs": {"k": "v"}})
        assert rpc.json() == {"results": [None]}
    # vLLM 0.34 adds sleep's reset_connector (the scenarios check it): its first two arguments here.
    assert [(c.method, c.args[:2] if c.method == "sleep" else c.args) for c in engine.calls] == [
        ("pause_generation", ("keep", False)),
        ("resume_scheduler", ()),
        ("is_scheduler_paused", ()),
        ("sleep", (2, "abort")),
        ("collective_rpc", ("echo", None, ["a"], {"k": "v"})),
    ]


def test_completion_of_one_token(frontend: Frontend, engine: ScriptedEngine) -> None:
    body = {"model": frontend.model, "prompt": "hello", "max_tokens": 1}
    r = httpx.post(f"{frontend.base_url}/v1/completions", json=body, timeout=10)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "length" and choice["text"] == "h"
    assert engine.requests_added == 1
    assert engine.calls_for("add_request")[0].args[1]["max_tokens"] == 1
    assert engine.errors == []


def test_engine_raise_gives_500_with_engine_message(frontend: Frontend, engine: ScriptedEngine) -> None:
    engine.script("reset_prefix_cache", Raise("blocks still held"))
    # A fresh connection: the Python frontend closes the connection after this 500.
    r = httpx.post(f"{frontend.base_url}/reset_prefix_cache", timeout=5)
    assert r.status_code == 500
    message = r.json()["error"]["message"]
    assert "Call to reset_prefix_cache method failed: blocks still held" in message


def test_hang_keeps_request_open_until_client_timeout(frontend: Frontend, engine: ScriptedEngine) -> None:
    engine.script("is_sleeping", [Hang(), Return(True)])
    t0 = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(f"{frontend.base_url}/is_sleeping", timeout=0.5)
    assert time.monotonic() - t0 >= 0.5
    engine.wait_for_call("is_sleeping", deadline=2)
    assert engine.hung_calls == 1
    # The frontend is still usable; the script moved on to its sticky last action.
    assert httpx.get(f"{frontend.base_url}/is_sleeping", timeout=5).json() == {"is_sleeping": True}


class _BusyOnIsPaused(ScriptedEngine):
    """Holds its thread 0.5 s in each is_scheduler_paused call (GET /is_paused), as a starved machine holds
    it: the messages sent meanwhile queue up."""

    def _utility(self, client_index: int, call_id: int, method: str, args: list[Any]) -> None:
        if method == "is_scheduler_paused":
            time.sleep(0.5)
        super()._utility(client_index, call_id, method, args)


def test_a_reset_releases_the_calls_hung_before_it_never_the_one_after(tiny_model_dir: Path) -> None:
    """A reset's release waits for the engine's thread; a call sent after the reset may reach the thread
    first (a loaded machine): it must stay hung, not be failed by the earlier reset."""
    engine = _BusyOnIsPaused()
    with RustFrontend(model_dir=tiny_model_dir, engine=engine) as fe:
        busy = threading.Thread(target=lambda: httpx.get(f"{fe.base_url}/is_paused", timeout=10))
        busy.start()
        engine.wait_for_call("is_scheduler_paused", deadline=5)
        engine.reset()
        engine.script("is_sleeping", Hang())
        with pytest.raises(httpx.ReadTimeout):  # a 500 "released by ScriptedEngine" without the ordering
            httpx.get(f"{fe.base_url}/is_sleeping", timeout=1.5)
        assert engine.hung_calls == 1
        busy.join(10)


def test_delay(frontend: Frontend, engine: ScriptedEngine) -> None:
    engine.script("wake_up", Delay(0.3, False))
    t0 = time.monotonic()
    r = httpx.post(f"{frontend.base_url}/wake_up", params={"tags": "weights"}, timeout=5)
    assert time.monotonic() - t0 >= 0.3
    assert r.json() == {"status": "sleeping", "tags": ["weights"]}


def test_abort_all_ends_held_request(frontend: Frontend, engine: ScriptedEngine) -> None:
    engine.hold_requests = True
    result: dict[str, httpx.Response] = {}
    body = {"model": frontend.model, "prompt": "hello", "max_tokens": 4}

    def generate() -> None:
        result["r"] = httpx.post(f"{frontend.base_url}/v1/completions", json=body, timeout=10)

    worker = threading.Thread(target=generate)
    worker.start()
    added = engine.wait_for_call("add_request", deadline=5)
    assert engine.held_request_ids == [added.args[0]]
    assert httpx.post(f"{frontend.base_url}/abort_requests", json={}, timeout=5).status_code == 200
    worker.join(10)
    assert result["r"].json()["choices"][0]["finish_reason"] == "abort"
    assert engine.wait_for_call("abort_requests", deadline=5).args == ([added.args[0]],)
    assert engine.held_request_ids == [] and engine.errors == []


# ------------------------------------------------------------------ separate frontends


@pytest.mark.parametrize("launcher", [RustFrontend, PythonFrontend], ids=["rust", "python"])
def test_declare_dead_then_no_process_left(launcher: type[Frontend], tiny_model_dir: Path) -> None:
    with launcher(model_dir=tiny_model_dir) as fe:
        assert fe.pid is not None
        pids = _tree(fe.pid)
        assert httpx.get(f"{fe.base_url}/health", timeout=5).status_code == 200
        fe.engine.declare_dead()
        deadline = time.monotonic() + 10
        while (status := httpx.get(f"{fe.base_url}/health", timeout=5).status_code) != 503:
            assert time.monotonic() < deadline, f"/health still {status}"
            time.sleep(0.05)
    assert not fe.running and not fe.engine.running
    assert [pid for pid in pids if _alive(pid)] == []


def test_startup_failure_reports_log_tail(tiny_model_dir: Path) -> None:
    fe = RustFrontend(model_dir=tiny_model_dir, args={"model_tag": "/nonexistent/model"}, startup_timeout=20)
    with pytest.raises(FrontendStartupError, match="log tail") as info:
        fe.start()
    assert "/nonexistent/model" in str(info.value)
    assert fe.pid is not None and not _alive(fe.pid)
    # A failed start keeps its whole log for the post-mortem.
    assert fe.log_path is not None and fe.log_path.exists()
    fe.log_path.unlink()


def test_dev_mode_off_and_api_key(tiny_model_dir: Path) -> None:
    with RustFrontend(model_dir=tiny_model_dir, dev_mode=False, api_key="sk-test") as fe:
        assert httpx.post(f"{fe.base_url}/reset_prefix_cache", timeout=5).status_code == 404
        assert httpx.get(f"{fe.base_url}/v1/models", timeout=5).status_code == 401
        ok = httpx.get(f"{fe.base_url}/v1/models", headers={"Authorization": "Bearer sk-test"}, timeout=5)
        assert ok.status_code == 200
        assert fe.engine.calls == []


def test_stop_is_idempotent_and_env_is_clean(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A caller's VLLM_API_KEY / dev-mode setting must not leak into the frontend.
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "0")
    monkeypatch.setenv("VLLM_API_KEY", "leaked")
    fe = RustFrontend(model_dir=tiny_model_dir).start()
    try:
        assert httpx.get(f"{fe.base_url}/is_sleeping", timeout=5).json() == {"is_sleeping": False}
        assert httpx.get(f"{fe.base_url}/v1/models", timeout=5).status_code == 200
    finally:
        fe.stop()
        fe.stop()
    assert fe.pid is not None and not _alive(fe.pid)
    assert os.environ["VLLM_API_KEY"] == "leaked"
    assert fe.log_path is not None and not fe.log_path.exists()


def test_stateful_engine_follows_sleep_and_pause(tiny_model_dir: Path) -> None:
    with RustFrontend(model_dir=tiny_model_dir, engine=ScriptedEngine()) as fe:
        with httpx.Client(base_url=fe.base_url, timeout=5) as client:
            assert client.get("/is_sleeping").json() == {"is_sleeping": False}
            client.post("/sleep", params={"level": "1"})
            assert client.get("/is_sleeping").json() == {"is_sleeping": True}
            client.post("/wake_up")
            assert client.get("/is_sleeping").json() == {"is_sleeping": False}
            client.post("/pause", params={"mode": "keep"})
            assert client.get("/is_paused").json() == {"is_paused": True}
            client.post("/resume")
            assert client.get("/is_paused").json() == {"is_paused": False}


def test_the_default_engine_keeps_vllms_state_and_reset_forgets_it(tiny_model_dir: Path) -> None:
    """Issue 37: by default (no stateful=True, which no doc named) a pause, a sleep, a partial wake and a
    weight update are remembered as vLLM's engine remembers them; scripts answer first; reset() forgets."""
    with (
        RustFrontend(model_dir=tiny_model_dir) as fe,
        httpx.Client(base_url=fe.base_url, timeout=5) as client,
    ):
        engine = fe.engine
        client.post("/pause", params={"mode": "keep"})
        assert client.get("/is_paused").json() == {"is_paused": True}
        engine.reset()
        assert client.get("/is_paused").json() == {"is_paused": False} and engine.calls[-1].kwargs == {}
        client.post("/sleep", params={"level": "1"})
        assert engine.state.asleep == {"weights", "kv_cache"} and engine.state.paused
        assert client.post("/wake_up", params={"tags": "weights"}).json()["status"] == "sleeping"
        assert client.get("/is_sleeping").json() == {"is_sleeping": True}  # the KV cache still sleeps
        client.post("/wake_up", params={"tags": "kv_cache"})
        assert client.get("/is_sleeping").json() == {"is_sleeping": False} and not engine.state.paused
        # A weight update out of order fails with vLLM's words; in order it goes through.
        refused = client.post("/update_weights", json={"update_info": {"names": []}})
        assert refused.status_code == 500 and "start_weight_update must be called before" in refused.text
        assert client.post("/start_weight_update").status_code == 200 and engine.state.weight_update
        assert client.post("/start_weight_update").status_code == 500  # already active
        client.post("/finish_weight_update", json={"weight_version": "v7"})
        assert not engine.state.weight_update and engine.state.weight_version == "v7"
        # A script answers before the state.
        engine.script("is_scheduler_paused", Return(True))
        assert client.get("/is_paused").json() == {"is_paused": True} and not engine.state.paused
        engine.reset()
        assert engine.state == EngineState() and not engine.calls


def test_engine_calls_name_their_arguments_as_vllm_does(tiny_model_dir: Path) -> None:
    with (
        RustFrontend(model_dir=tiny_model_dir) as fe,
        httpx.Client(base_url=fe.base_url, timeout=5) as client,
    ):
        client.post("/sleep", params={"level": "2", "mode": "wait"})
        client.post("/reset_prefix_cache", params={"reset_external": "true"})
        client.post("/collective_rpc", json={"method": "report", "args": [1]})
        sleep, reset, rpc = (
            fe.engine.calls_for(m)[0] for m in ("sleep", "reset_prefix_cache", "collective_rpc")
        )
    # vllm-rs 0.34 sends reset_connector (its default, true); an older one sends two arguments, and the
    # engine fills vLLM's default in.
    assert sleep.kwargs == {"level": 2, "mode": "wait", "reset_connector": True}
    assert reset.kwargs == {"reset_running_requests": False, "reset_connector": True}
    assert rpc.kwargs["method"] == "report" and list(rpc.kwargs["args"]) == [1]


def test_the_engine_state_answers_vllm_0_34_s_readiness_and_checkpoint_cycle() -> None:
    """`is_inference_ready` (vllm-rs 0.34 asks it at connect): false asleep or mid weight update. The
    checkpoint cycle: PREPARING until nothing is in flight, then PREPARED with the KV cache released; a wake
    is refused until restored; a second prepare is a no-op; a prepare while asleep is refused by answer."""
    from vllm_devclient.testing.engine_state import EngineState

    state = EngineState()
    assert state.answer("is_inference_ready") is True
    state.track("sleep", [1])
    assert state.answer("is_inference_ready") is False
    assert state.answer("checkpoint_prepare") is None
    state.track("checkpoint_prepare", ["wait"])
    assert state.answer("checkpoint_prepare") == "Preparing for a checkpoint requires an awake engine"
    assert state.answer("checkpoint_state") == ["running", None]
    state.track("wake_up", [None])
    state.track("collective_rpc", ["start_weight_update"])
    assert state.answer("is_inference_ready") is False
    state.track("collective_rpc", ["finish_weight_update"])
    assert state.answer("is_inference_ready") is True

    state.track("checkpoint_prepare", ["wait"])
    assert state.answer("checkpoint_state") == ["preparing", None]
    assert state.refusal("wake_up", [None]) == "Cannot wake up while the checkpoint state is preparing"
    state.drained()
    assert state.answer("checkpoint_state") == ["prepared", None] and state.asleep == {"kv_cache"}
    state.track("checkpoint_prepare", ["wait"])
    assert state.answer("checkpoint_prepare") is None and state.checkpoint == "prepared"
    assert state.refusal("checkpoint_restore", []) is None
    state.track("checkpoint_restore", [])
    assert (state.checkpoint, state.paused, state.asleep) == ("running", False, frozenset())
    assert state.answer("is_inference_ready") is True
