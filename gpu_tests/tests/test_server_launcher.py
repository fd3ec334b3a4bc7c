"""offload_check.server: the `vllm serve` command line, KV-events pairing, and the managed process.

The process tests run the launcher for real (subprocess, process group, readiness polling, shutdown) with
a small stand-in for `python -m vllm.entrypoints.cli.main` that serves /health and /v1/models and starts a
worker child, the way vLLM's API server starts its engine core.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
import zmq

from gpu_tests.offload_check.server import (
    KVEventsSettings,
    ServerConfig,
    ServerStartError,
    VllmServer,
    build_command,
    build_env,
    engine_fault,
    kv_transfer_config,
)
from vllm_devclient import InvalidParameterError

GIB = 1 << 30


def publisher_binds(endpoint: str) -> bool:
    """vLLM's rule (ZmqEventPublisher._socket_setup, 0.26 to 0.33): bind on a wildcard, else connect."""
    return "*" in endpoint or "::" in endpoint or endpoint.startswith(("ipc://", "inproc://"))


def _flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


# ---- command line and environment -------------------------------------------------------------------


def test_offloading_connector_config_is_vllm_cis() -> None:
    assert kv_transfer_config("OffloadingConnector", 4) == {
        "kv_connector": "OffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "spec_name": "CPUOffloadingSpec",
            "cpu_bytes_to_use": 4 * GIB,
            "eviction_policy": "lru",
        },
    }
    cfg = kv_transfer_config("OffloadingConnector", 0.5, block_size=64, extra={"spec_name": "Mine", "x": 1})
    assert cfg["kv_connector_extra_config"] == {
        "spec_name": "Mine",
        "cpu_bytes_to_use": GIB // 2,
        "eviction_policy": "lru",
        "block_size": 64,
        "x": 1,
    }


def test_simple_connector_config() -> None:
    assert kv_transfer_config("SimpleCPUOffloadConnector", 1) == {
        "kv_connector": "SimpleCPUOffloadConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"cpu_bytes_to_use": GIB},
    }
    with pytest.raises(InvalidParameterError, match="block_size"):
        kv_transfer_config("SimpleCPUOffloadConnector", 1, block_size=64)


@pytest.mark.parametrize(
    ("connector", "gib"), [("LMCacheConnector", 1), ("OffloadingConnector", 0), ("OffloadingConnector", -1)]
)
def test_bad_connector_settings(connector: str, gib: float) -> None:
    with pytest.raises(InvalidParameterError):
        kv_transfer_config(connector, gib)  # type: ignore[arg-type]


def test_command_line() -> None:
    events = KVEventsSettings(port=5557, topic="kv")
    cfg = ServerConfig(
        model="/models/smol",
        served_model_name="smol",
        connector="OffloadingConnector",
        cpu_gib=1,
        offload_block_size=64,
        kv_events=events,
        extra_args=("--dtype", "bfloat16"),
        launcher=("python3", "-m", "vllm.entrypoints.cli.main"),
    )
    cmd = build_command(cfg, 8123)
    assert cmd[:5] == ["python3", "-m", "vllm.entrypoints.cli.main", "serve", "/models/smol"]
    assert _flag(cmd, "--port") == "8123" and _flag(cmd, "--host") == "127.0.0.1"
    assert _flag(cmd, "--served-model-name") == "smol"
    assert _flag(cmd, "--max-model-len") == "4096"
    assert "--enforce-eager" in cmd and "--enable-prefix-caching" in cmd
    transfer = json.loads(_flag(cmd, "--kv-transfer-config"))
    assert transfer["kv_connector_extra_config"]["block_size"] == 64
    assert json.loads(_flag(cmd, "--kv-events-config")) == {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": "tcp://127.0.0.1:5557",
        "topic": "kv",
    }
    assert cmd[-2:] == ["--dtype", "bfloat16"]  # extra args last, so they can override


def test_no_connector_no_events() -> None:
    cmd = build_command(ServerConfig(model="m", max_model_len=None, enable_prefix_caching=False), 1)
    assert "--kv-transfer-config" not in cmd and "--kv-events-config" not in cmd
    assert "--max-model-len" not in cmd and "--enable-prefix-caching" not in cmd


def test_environment_picks_dev_mode_and_frontend() -> None:
    base = {"VLLM_USE_RUST_FRONTEND": "1", "VLLM_SERVER_DEV_MODE": "1", "KEEP": "x"}
    rust = build_env(ServerConfig(model="m", frontend="rust"), {})
    assert rust["VLLM_USE_RUST_FRONTEND"] == "1" and rust["VLLM_SERVER_DEV_MODE"] == "1"
    python = build_env(ServerConfig(model="m", frontend="python", dev_mode=False), base)
    assert "VLLM_USE_RUST_FRONTEND" not in python and "VLLM_SERVER_DEV_MODE" not in python
    assert python["KEEP"] == "x"
    extra = build_env(ServerConfig(model="m", env={"VLLM_USE_FLASHINFER_SAMPLER": "0"}), {})
    assert extra["VLLM_USE_FLASHINFER_SAMPLER"] == "0"


def test_bad_server_config() -> None:
    with pytest.raises(InvalidParameterError, match="frontend"):
        ServerConfig(model="m", frontend="go")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="connector"):
        ServerConfig(model="m", connector="Nope")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="bind"):
        KVEventsSettings(port=1, bind="both")  # type: ignore[arg-type]


# ---- KV-events pairing: exactly one end binds ------------------------------------------------------------


@pytest.mark.parametrize("bind", ["subscriber", "publisher"])
def test_kv_events_endpoints_pair_up(bind: str) -> None:
    settings = KVEventsSettings.on_free_port(bind=bind, topic="kv")  # type: ignore[arg-type]
    server_endpoint = settings.server_config()["endpoint"]
    # The publisher binds only on a wildcard endpoint: exactly one of the two ends binds.
    assert publisher_binds(server_endpoint) is (bind == "publisher")
    assert settings.subscriber_binds is (bind == "subscriber")
    assert settings.subscriber_endpoint == f"tcp://127.0.0.1:{settings.port}"

    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    sub = ctx.socket(zmq.SUB)
    try:
        sub.setsockopt(zmq.SUBSCRIBE, b"kv")
        if settings.subscriber_binds:
            sub.bind(settings.subscriber_endpoint)
        else:
            sub.connect(settings.subscriber_endpoint)
        # What vLLM's ZmqEventPublisher does with the endpoint it was given.
        if publisher_binds(server_endpoint):
            pub.bind(server_endpoint)
        else:
            pub.connect(server_endpoint)
        poller = zmq.Poller()
        poller.register(sub, zmq.POLLIN)
        deadline = time.monotonic() + 5
        got = None
        while got is None and time.monotonic() < deadline:
            pub.send_multipart([b"kv", (0).to_bytes(8, "big"), b"payload"])  # slow joiner: resend
            if poller.poll(50):
                got = sub.recv_multipart()
        assert got == [b"kv", bytes(8), b"payload"]
    finally:
        pub.close(linger=0)
        sub.close(linger=0)
        ctx.term()


# ---- the managed process ----------------------------------------------------------------------------------

FAKE_SERVE = textwrap.dedent(
    """
    import http.server, json, os, signal, subprocess, sys, time
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    out = os.environ["FAKE_OUT"]
    mode = os.environ.get("FAKE_MODE", "ok")
    worker_code = "import signal, time\\n"
    if mode == "stubborn":
        worker_code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
    worker_code += "time.sleep(300)\\n"
    worker = subprocess.Popen([sys.executable, "-c", worker_code])
    with open(out, "w") as fh:
        json.dump({"argv": args, "worker": worker.pid, "pid": os.getpid(),
                   "dev": os.environ.get("VLLM_SERVER_DEV_MODE"),
                   "rust": os.environ.get("VLLM_USE_RUST_FRONTEND")}, fh)
    print("INFO starting fake vllm serve", flush=True)
    if mode == "exit":
        print("ERROR boom: no such model", flush=True)
        worker.kill()
        sys.exit(3)
    if mode == "never":
        time.sleep(300)

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            models = json.dumps({"data": [{"id": "fake"}]}).encode()
            body = {"/health": b"", "/v1/models": models}.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")
        def log_message(self, *a):
            pass

    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


@pytest.fixture
def fake(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "fake_serve.py"
    script.write_text(FAKE_SERVE)
    return script, tmp_path / "fake.json"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _config(fake: tuple[Path, Path], mode: str, **kw: object) -> ServerConfig:
    script, out = fake
    return ServerConfig(
        model="/models/fake",
        launcher=(sys.executable, str(script)),
        env={"FAKE_OUT": str(out), "FAKE_MODE": mode},
        startup_timeout=kw.pop("startup_timeout", 30.0),  # type: ignore[arg-type]
        shutdown_grace=kw.pop("shutdown_grace", 5.0),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def test_start_ready_and_stop_leaves_no_process(fake: tuple[Path, Path]) -> None:
    with VllmServer(_config(fake, "ok", frontend="rust")) as server:
        info = json.loads(fake[1].read_text())
        assert server.ready_after_s is not None
        assert server.pid == info["pid"]
        assert info["argv"][:2] == ["serve", "/models/fake"]
        assert info["dev"] == "1" and info["rust"] == "1"
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        assert _alive(info["worker"])
        log_path = server.log_path
        assert log_path is not None and "starting fake vllm serve" in server.log_tail()
    assert not _alive(info["pid"]) and not _alive(info["worker"])
    assert not log_path.exists()  # our own temporary log is removed after a clean run


def test_stubborn_children_are_killed(fake: tuple[Path, Path]) -> None:
    server = VllmServer(_config(fake, "stubborn", shutdown_grace=1.0)).start()
    info = json.loads(fake[1].read_text())
    started = time.monotonic()
    server.close()
    assert not _alive(info["worker"]), "a worker that ignores SIGTERM must be SIGKILLed"
    assert time.monotonic() - started < 15


def test_exit_during_startup_reports_the_log(fake: tuple[Path, Path], tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with pytest.raises(ServerStartError, match="exited with code 3") as info:
        VllmServer(_config(fake, "exit", log_path=log)).start()
    assert info.value.returncode == 3
    assert "boom: no such model" in info.value.log_tail
    assert "boom: no such model" in str(info.value)
    assert info.value.log_path == log and log.exists()  # a given log path is kept


def test_startup_timeout_reports_the_log_and_cleans_up(fake: tuple[Path, Path]) -> None:
    with pytest.raises(ServerStartError, match="not ready") as info:
        VllmServer(_config(fake, "never", startup_timeout=1.5)).start()
    assert "starting fake vllm serve" in info.value.log_tail
    pids = json.loads(fake[1].read_text())
    assert not _alive(pids["pid"]) and not _alive(pids["worker"])


def test_failure_inside_the_block_stops_the_server(fake: tuple[Path, Path]) -> None:
    with pytest.raises(RuntimeError, match="test failed"), VllmServer(_config(fake, "ok")) as server:
        pid = server.pid
        raise RuntimeError("test failed")
    assert pid is not None and not _alive(pid)
    assert server.log_path is not None and server.log_path.exists()  # kept to read after a failure
    server.log_path.unlink()


def test_cannot_start_twice(fake: tuple[Path, Path]) -> None:
    server = VllmServer(_config(fake, "ok")).start()
    try:
        assert os.getpgid(server.pid or 0) == server.pid != os.getpgid(os.getpid())  # its own group
        with pytest.raises(InvalidParameterError):
            server.start()
    finally:
        server.close()
    assert server.process is not None and server.process.returncode == -signal.SIGTERM


# vLLM 0.26.0's log of the engine's death (issue 33's fifth run, Nemotron-H 8B; paths shortened), cut: the
# fatal block, then what the API server logs after it.
_ENGINE = "(EngineCore pid=9968) ERROR 12-03 18:27:56 [core.py:1332] "
_DEATH = "\n".join(
    [
        "(APIServer pid=9858) INFO 12-03 18:27:47 [loggers.py:310] Engine 000: Running: 43 reqs",
        *(
            _ENGINE + x
            for x in (
                "EngineCore encountered a fatal error.",
                "Traceback (most recent call last):",
                '  File "/v/core.py", line 1323, in run_engine_core',
                "    engine_core.run_busy_loop()",
                "               ^^^^^^^^^^^^^^^^^^^^^^^^^^",
                '  File "/v/offloading/scheduler.py", line 816, in update_state_after_alloc',
                "    num_locally_computed_tokens",
                "AssertionError",
            )
        ),
        "(APIServer pid=9858) ERROR 12-03 18:27:56 [async_llm.py:704] AsyncLLM output_handler failed.",
        "(APIServer pid=9858) ERROR 12-03 18:27:56 [async_llm.py:704] Traceback (most recent call last):",
        _ENGINE + "EngineCore encountered a fatal error.",
        _ENGINE + "RuntimeError: a later consequence",
    ]
)


def test_the_engine_s_death_is_read_from_its_log_innermost_frames_last(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(_DEATH)
    fault = engine_fault(log, frames=3)
    assert fault is not None
    assert fault.splitlines() == [
        '  File "/v/offloading/scheduler.py", line 816, in update_state_after_alloc',
        "    num_locally_computed_tokens",
        "AssertionError",
    ]
    assert "^" not in (engine_fault(log) or "") and "RuntimeError" not in (engine_fault(log) or "")
    log.write_text("\n".join(x for x in _DEATH.splitlines() if "fatal" not in x))
    assert engine_fault(log) is None  # an engine that did not die
    assert engine_fault(tmp_path / "absent.log") is None and engine_fault(None) is None
