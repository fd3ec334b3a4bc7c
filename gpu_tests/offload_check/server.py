"""A real ``vllm serve`` as a managed subprocess, set up for the offload check.

What it takes care of:

- the CPU-offloading connector (``OffloadingConnector`` / ``SimpleCPUOffloadConnector``) and its config keys,
  written as vLLM's CI writes them (``spec_name`` picks another spec, e.g. ``TieringOffloadingSpec``);
- dev mode (``VLLM_SERVER_DEV_MODE=1``) and the frontend (``VLLM_USE_RUST_FRONTEND=1`` picks ``vllm-rs``);
- KV-cache events on a free loopback port with the two ZMQ ends paired: vLLM's publisher *binds* when its
  endpoint holds ``*`` and *connects* otherwise, so with ``tcp://127.0.0.1:P`` the subscriber binds;
- readiness through the client only (``wait_until_ready``, then ``models()`` lists a model); a server that
  exits or never gets there raises :class:`ServerStartError` with the end of its log;
- process handling through :mod:`vllm_devclient.testing.processes`: the server leads its own process group,
  gets SIGTERM (then SIGKILL) as a group, and SIGTERM if the launching process dies;
- the engine's death, read from its log (:func:`engine_fault`): a dead engine answers its requests with 500s
  and refused connections that do not say why, its log does.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen
from types import TracebackType
from typing import Any, Literal

from vllm_devclient import DevClientError, InvalidParameterError

__all__ = [
    "CONNECTORS",
    "FRONTENDS",
    "Connector",
    "Frontend",
    "KVEventsSettings",
    "ServerConfig",
    "ServerStartError",
    "VllmServer",
    "build_command",
    "build_env",
    "engine_fault",
    "free_port",
    "kv_transfer_config",
]

Connector = Literal["OffloadingConnector", "SimpleCPUOffloadConnector"]
Frontend = Literal["python", "rust"]
CONNECTORS: tuple[Connector, ...] = ("OffloadingConnector", "SimpleCPUOffloadConnector")
FRONTENDS: tuple[Frontend, ...] = ("python", "rust")


def free_port(host: str = "127.0.0.1") -> int:
    """A free TCP port for a child process (:func:`vllm_devclient.testing.processes.free_port`)."""
    from vllm_devclient.testing import free_port as _free_port

    return _free_port(host)


def _default_launcher() -> tuple[str, ...]:
    # Read when a config is made, not at import: the interpreter of the process that launches.
    return (sys.executable, "-m", "vllm.entrypoints.cli.main")


class ServerStartError(DevClientError):
    """``vllm serve`` exited or did not become ready in time; ``.log_tail`` holds the end of its log."""

    def __init__(self, message: str, *, log_tail: str, returncode: int | None, log_path: Path | None) -> None:
        super().__init__(f"{message}\n--- last lines of the server log ({log_path}) ---\n{log_tail}")
        self.log_tail = log_tail
        self.returncode = returncode
        self.log_path = log_path


# vLLM's log line: "(EngineCore pid=9968) ERROR 12-03 18:27:56 [core.py:1332] <message>"
_LOG_LINE = re.compile(r"^\((?P<proc>[^)]*)\) ERROR \S+ \S+ \[(?P<where>[^\]]+)\] ?(?P<msg>.*)$")
_FATAL = "EngineCore encountered a fatal error"


def engine_fault(log_path: Path | None, frames: int = 8) -> str | None:
    """The end of the engine's fatal traceback in ``log_path`` (its innermost ``frames`` lines, the exception
    last), or None where the engine did not die. The first death only: what follows is its consequences."""
    if log_path is None or not log_path.exists():
        return None
    block: list[str] = []
    tag: tuple[str, str] | None = None
    with log_path.open(errors="replace") as fh:
        for line in fh:
            m = _LOG_LINE.match(line.rstrip("\n"))
            if tag is None:
                if m is not None and _FATAL in m["msg"]:
                    tag = (m["proc"], m["where"])
                continue
            if m is None or (m["proc"], m["where"]) != tag:
                break
            block.append(m["msg"].rstrip())
    if tag is None:
        return None
    # Drop the carets Python 3.11+ prints under a call: they point, they say nothing.
    lines = [x for x in block if x.strip() and set(x.strip()) != {"^"}]
    return "\n".join(lines[-frames:]) or _FATAL


def kv_transfer_config(
    connector: Connector,
    cpu_gib: float,
    *,
    block_size: int | None = None,
    spec_name: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``--kv-transfer-config`` for a CPU-offloading connector, as vLLM's CI writes it.

    ``block_size`` (tokens per offloaded chunk, a multiple of the GPU block size) and ``spec_name`` (default
    ``CPUOffloadingSpec``) apply to the OffloadingConnector only. ``extra`` is merged into
    ``kv_connector_extra_config`` last (``spec_module_path``, ``self_describing_kv_events``...).
    """
    if cpu_gib <= 0:
        raise InvalidParameterError(f"cpu_gib must be > 0, not {cpu_gib}")
    cpu_bytes = int(cpu_gib * (1 << 30))
    extra_config: dict[str, Any]
    if connector == "OffloadingConnector":
        extra_config = {
            "spec_name": spec_name or "CPUOffloadingSpec",
            "cpu_bytes_to_use": cpu_bytes,
            "eviction_policy": "lru",
        }
        if block_size is not None:
            extra_config["block_size"] = block_size
    elif connector == "SimpleCPUOffloadConnector":
        if block_size is not None or spec_name is not None:
            raise InvalidParameterError("block_size and spec_name are OffloadingConnector settings")
        extra_config = {"cpu_bytes_to_use": cpu_bytes}
    else:
        raise InvalidParameterError(f"connector must be one of {CONNECTORS}, not {connector!r}")
    extra_config.update(extra or {})
    return {"kv_connector": connector, "kv_role": "kv_both", "kv_connector_extra_config": extra_config}


@dataclass(frozen=True)
class KVEventsSettings:
    """KV-cache events on loopback port ``port``, and which end binds.

    ``bind="subscriber"`` (default): the server gets ``tcp://127.0.0.1:P``, so its publisher connects and the
    subscriber binds (only loopback is opened). ``bind="publisher"``: the server gets ``tcp://*:P`` and binds
    on all interfaces; the subscriber connects to ``tcp://127.0.0.1:P``.
    """

    port: int
    bind: Literal["subscriber", "publisher"] = "subscriber"
    topic: str = "kv-events"
    replay_port: int | None = None

    def __post_init__(self) -> None:
        if self.bind not in ("subscriber", "publisher"):
            raise InvalidParameterError(f"bind must be 'subscriber' or 'publisher', not {self.bind!r}")
        if not 0 < self.port < 65536:
            raise InvalidParameterError(f"port must be 1..65535, not {self.port}")

    @classmethod
    def on_free_port(
        cls, bind: Literal["subscriber", "publisher"] = "subscriber", topic: str = "kv-events"
    ) -> KVEventsSettings:
        return cls(port=free_port(), bind=bind, topic=topic)

    @property
    def subscriber_binds(self) -> bool:
        return self.bind == "subscriber"

    @property
    def publisher_endpoint(self) -> str:
        """What the server is told: its publisher binds only when the endpoint holds ``*``."""
        return f"tcp://127.0.0.1:{self.port}" if self.subscriber_binds else f"tcp://*:{self.port}"

    @property
    def subscriber_endpoint(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    @property
    def replay_endpoint(self) -> str | None:
        return None if self.replay_port is None else f"tcp://*:{self.replay_port}"

    def server_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "enable_kv_cache_events": True,
            "publisher": "zmq",
            "endpoint": self.publisher_endpoint,
            "topic": self.topic,
        }
        if self.replay_endpoint is not None:
            config["replay_endpoint"] = self.replay_endpoint
        return config


@dataclass(frozen=True)
class ServerConfig:
    """How to start ``vllm serve``. ``port=None`` picks a free loopback port."""

    model: str
    served_model_name: str | None = None
    connector: Connector | None = None
    cpu_gib: float = 4.0
    offload_block_size: int | None = None
    spec_name: str | None = None
    connector_extra: Mapping[str, Any] = field(default_factory=dict)
    dev_mode: bool = True
    kv_events: KVEventsSettings | None = None
    frontend: Frontend = "python"
    host: str = "127.0.0.1"
    port: int | None = None
    enforce_eager: bool = True
    max_model_len: int | None = 4096
    enable_prefix_caching: bool = True
    extra_args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    launcher: Sequence[str] = field(default_factory=_default_launcher)
    startup_timeout: float = 600.0
    shutdown_grace: float = 30.0
    log_path: Path | None = None

    def __post_init__(self) -> None:
        if self.frontend not in FRONTENDS:
            raise InvalidParameterError(f"frontend must be 'python' or 'rust', not {self.frontend!r}")
        if self.connector is not None and self.connector not in CONNECTORS:
            raise InvalidParameterError(
                f"connector must be one of {CONNECTORS} or None, not {self.connector!r}"
            )
        if not self.launcher:
            raise InvalidParameterError("launcher must name a program")


def build_command(config: ServerConfig, port: int) -> list[str]:
    """The argv that starts the server (``launcher`` + ``serve MODEL`` + flags)."""
    cmd = [*config.launcher, "serve", config.model, "--host", config.host, "--port", str(port)]
    if config.served_model_name:
        cmd += ["--served-model-name", config.served_model_name]
    if config.enforce_eager:
        cmd.append("--enforce-eager")
    if config.max_model_len is not None:
        cmd += ["--max-model-len", str(config.max_model_len)]
    if config.enable_prefix_caching:
        # SimpleCPUOffloadConnector needs it, and the offload check is about prefix-cache hits.
        cmd.append("--enable-prefix-caching")
    if config.connector is not None:
        transfer = kv_transfer_config(
            config.connector,
            config.cpu_gib,
            block_size=config.offload_block_size,
            spec_name=config.spec_name,
            extra=config.connector_extra,
        )
        cmd += ["--kv-transfer-config", json.dumps(transfer, separators=(",", ":"))]
    if config.kv_events is not None:
        cmd += ["--kv-events-config", json.dumps(config.kv_events.server_config(), separators=(",", ":"))]
    cmd += list(config.extra_args)
    return cmd


def build_env(config: ServerConfig, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: ``base`` (default: ours) + dev mode + frontend choice + ``config.env``."""
    env = dict(os.environ if base is None else base)
    if config.dev_mode:
        env["VLLM_SERVER_DEV_MODE"] = "1"
    else:
        env.pop("VLLM_SERVER_DEV_MODE", None)
    if config.frontend == "rust":
        env["VLLM_USE_RUST_FRONTEND"] = "1"
    else:
        env.pop("VLLM_USE_RUST_FRONTEND", None)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(config.env)
    return env


class VllmServer:
    """A running ``vllm serve``; use as a context manager (``with VllmServer(cfg) as server: ...``)."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.port = config.port if config.port else free_port(config.host)
        self.command = build_command(config, self.port)
        self.env = build_env(config)
        self.process: Popen[bytes] | None = None
        self._own_log = config.log_path is None
        self.log_path: Path | None = config.log_path
        self.started_at: float | None = None
        self.ready_after_s: float | None = None

    @property
    def base_url(self) -> str:
        host = self.config.host if self.config.host not in ("0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def log_tail(self, lines: int = 60) -> str:
        from vllm_devclient.testing import log_tail

        return log_tail(self.log_path, lines, missing="(no log)")

    def start(self, wait: bool = True) -> VllmServer:
        if self.process is not None:
            raise InvalidParameterError("this server was already started")
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="vllm-serve-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        from vllm_devclient.testing import spawn

        with self.log_path.open("ab") as log:
            self.process = spawn(self.command, env=self.env, stdout=log)
        self.started_at = time.monotonic()
        if wait:
            try:
                self.wait_ready()
            except BaseException:
                self.stop()
                raise
        return self

    def wait_ready(self, timeout: float | None = None) -> float:
        """Block until ``/health`` answers 200 and ``/v1/models`` lists a model; seconds since start."""
        from vllm_devclient import DevClient

        if self.process is None or self.started_at is None:
            raise InvalidParameterError("start() the server first")
        deadline = self.started_at + (self.config.startup_timeout if timeout is None else timeout)
        last = "no answer yet"
        # Short tries: the Rust frontend accepts connections before its engine registers and answers nothing.
        with DevClient(self.base_url, timeout=2.0, max_retries=0) as client:
            while True:
                code = self.process.poll()
                if code is not None:
                    raise ServerStartError(
                        f"vllm serve exited with code {code} before it was ready ({self.base_url})",
                        log_tail=self.log_tail(),
                        returncode=code,
                        log_path=self.log_path,
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServerStartError(
                        f"vllm serve not ready at {self.base_url} after "
                        f"{time.monotonic() - self.started_at:.0f} s (last: {last})",
                        log_tail=self.log_tail(),
                        returncode=None,
                        log_path=self.log_path,
                    )
                try:
                    client.wait_until_ready(deadline=min(2.0, left), request_timeout=1.0)
                    if client.models().data:
                        self.ready_after_s = time.monotonic() - self.started_at
                        return self.ready_after_s
                    last = "/v1/models lists no model"
                except DevClientError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                time.sleep(0.2)

    def stop(self) -> int | None:
        """SIGTERM the process group, SIGKILL it after ``shutdown_grace``; returns the exit code."""
        from vllm_devclient.testing import stop_group

        if self.process is None:
            return None
        return stop_group(self.process, grace=self.config.shutdown_grace)

    def close(self) -> None:
        self.stop()
        if self._own_log and self.log_path is not None:
            with contextlib.suppress(OSError):
                self.log_path.unlink()

    def __enter__(self) -> VllmServer:
        if self.process is None:
            self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # A failing run keeps its log so the caller can read it; a clean one tidies up its temp file.
        if exc_type is None:
            self.close()
        else:
            self.stop()
