"""Launch the real vLLM frontends against a :class:`ScriptedEngine`.

``RustFrontend`` runs the ``vllm-rs`` binary from the installed vllm wheel (up in a fraction of
a second); ``PythonFrontend`` runs the stock ``vllm serve`` with no local engine (about 10-20 s
to start). Both are context managers that leave no process behind: each frontend runs in its
own session (process group), is stopped with SIGTERM then SIGKILL, and is also stopped at
interpreter exit, on SIGTERM/SIGHUP, and (Linux) when the launching process dies.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..client import DevClient
from ..errors import DevClientError
from .engine import ScriptedEngine
from .engine_protocol import EngineCall
from .engine_transport import EngineStartupError
from .model_dir import make_model_dir
from .processes import free_port, listener, spawn, stop_group
from .processes import log_tail as _log_tail

if TYPE_CHECKING:
    from .certificates import Certificates

__all__ = [
    "INSTALL_HINT",
    "Frontend",
    "FrontendStartupError",
    "PythonFrontend",
    "RustFrontend",
    "VllmNotInstalledError",
    "find_vllm_rs",
]

INSTALL_HINT = (
    "The real-frontend test harness needs vLLM installed (CPU build is enough). From a checkout "
    "of vllm-devclient run: bash scripts/setup.sh"
)


class FrontendStartupError(RuntimeError):
    """A frontend did not become healthy; the message ends with the tail of its log."""


class VllmNotInstalledError(FrontendStartupError):
    """vLLM (or its ``vllm-rs`` binary) is not installed where the harness looks."""


def find_vllm_rs() -> Path:
    """The ``vllm-rs`` binary shipped in the installed vllm wheel.

    ``VLLM_DEVCLIENT_VLLM_RS`` overrides the location.
    """
    override = os.environ.get("VLLM_DEVCLIENT_VLLM_RS")
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise VllmNotInstalledError(f"VLLM_DEVCLIENT_VLLM_RS={override} is not an executable file")
        return path
    try:
        dist = importlib.metadata.distribution("vllm")
    except importlib.metadata.PackageNotFoundError:
        raise VllmNotInstalledError(f"the 'vllm' package is not installed. {INSTALL_HINT}") from None
    path = Path(str(dist.locate_file("vllm/vllm-rs")))
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise VllmNotInstalledError(
            f"vllm {dist.version} is installed but has no vllm-rs binary at {path}. {INSTALL_HINT}"
        )
    return path


# ---------------------------------------------------------------------- process safety

_live: set[Frontend] = set()
_live_lock = threading.Lock()
_handlers_installed = False


def _stop_all_live() -> None:
    with _live_lock:
        launchers = list(_live)
    for launcher in launchers:
        with contextlib.suppress(Exception):
            launcher.stop()


def _on_signal(signum: int, frame: types.FrameType | None) -> None:
    _stop_all_live()
    # Then die the way the signal would have killed us.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_safety_nets() -> None:
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    atexit.register(_stop_all_live)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            # Only where nobody else handles the signal: never replace a user's handler.
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _on_signal)


# ---------------------------------------------------------------------- launchers


class Frontend:
    """A running real frontend wired to a :class:`ScriptedEngine`.

    Use as a context manager (or call :meth:`start` / :meth:`stop`). Attributes once started:
    ``base_url``, ``engine``, ``frontend`` (``"python"`` or ``"rust"``), ``model_dir``,
    ``model`` (the served model name), ``pid``, ``startup_seconds``, ``startup_calls`` (engine
    calls the frontend made while starting; the engine's log is cleared after startup).

    On Linux the frontend process gets SIGTERM when the thread that started it exits (so a killed
    test run leaves nothing behind): start it from a thread that lives as long as it should.
    """

    frontend: ClassVar[Literal["python", "rust"]]
    default_startup_timeout: ClassVar[float]

    def __init__(
        self,
        *,
        dev_mode: bool = True,
        api_key: str | None = None,
        env: Mapping[str, str] | None = None,
        engine: ScriptedEngine | None = None,
        model_dir: str | os.PathLike[str] | None = None,
        max_model_len: int = 128,
        startup_timeout: float | None = None,
        log_path: str | os.PathLike[str] | None = None,
        keep_log: bool = False,
        tls: Certificates | None = None,
        require_client_cert: bool = False,
    ) -> None:
        """Configure (not start) a frontend.

        ``dev_mode`` sets ``VLLM_SERVER_DEV_MODE``; ``api_key`` guards the ``/v1`` routes;
        ``env`` adds environment variables for the frontend process; ``engine`` is an unstarted
        :class:`ScriptedEngine` to use (default: a new one with ``max_model_len``);
        ``model_dir`` defaults to :func:`make_model_dir`; ``log_path`` keeps the frontend's
        output (default: a temporary file, deleted by :meth:`stop` unless ``keep_log`` or the
        start failed). ``tls`` (from :func:`~vllm_devclient.testing.certificates.make_certificates`)
        serves https with its ``server`` certificate; ``require_client_cert`` then requires a client
        certificate its CA signed (mTLS). ``client_tls`` is what a client passes to reach it.
        """
        if require_client_cert and tls is None:
            raise ValueError("require_client_cert needs tls= (the CA that signs the client certificates)")
        self.tls = tls
        self.require_client_cert = require_client_cert
        if engine is not None and engine.running:
            raise ValueError("pass an engine that was not started yet; each frontend starts its own")
        self.dev_mode = dev_mode
        self.api_key = api_key
        self.extra_env = dict(env or {})
        self.engine = engine if engine is not None else ScriptedEngine(max_model_len=max_model_len)
        self.max_model_len = int(self.engine.ready_response["max_model_len"])
        self._model_dir_arg = model_dir
        self.model_dir: Path | None = None
        self.startup_timeout = startup_timeout or self.default_startup_timeout
        self._log_path_arg = log_path
        self.keep_log = keep_log
        self._own_log = False
        self.log_path: Path | None = None
        self._log_file: Any = None
        self.process: subprocess.Popen[bytes] | None = None
        self.base_url = ""
        self.port = 0
        self.startup_seconds = 0.0
        self.startup_calls: list[EngineCall] = []
        self._stopped = False

    # -- public

    @property
    def model(self) -> str:
        """The model name the frontend serves (the model directory path)."""
        return str(self.model_dir)

    @property
    def pid(self) -> int | None:
        """The frontend process id, once started."""
        return self.process.pid if self.process is not None else None

    @property
    def running(self) -> bool:
        """Whether the frontend process is alive."""
        return self.process is not None and self.process.poll() is None

    @property
    def client_tls(self) -> dict[str, Any]:
        """`verify=` and `cert=` for a client of this frontend (nothing for plain http)."""
        if self.tls is None:
            return {}
        cert = (self.tls.client, self.tls.client_key) if self.require_client_cert else None
        return {"verify": self.tls.ca, "cert": cert}

    def _url(self, port: int) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{port}"

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the frontend's output."""
        return _log_tail(self.log_path, lines)

    def start(self) -> Frontend:
        """Start engine and frontend and wait until ``/health`` answers 200."""
        if self.process is not None:
            raise RuntimeError(f"{type(self).__name__} was already started; create a new one")
        _install_safety_nets()
        self.model_dir = make_model_dir(self._model_dir_arg) if self._model_dir_arg else make_model_dir()
        if self._log_path_arg is not None:
            self.log_path = Path(self._log_path_arg)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        else:
            fd, name = tempfile.mkstemp(prefix=f"vllm-{self.frontend}-frontend-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
            self._own_log = True
        self._log_file = open(self.log_path, "ab")  # closed in stop()
        t0 = time.monotonic()
        with _live_lock:
            _live.add(self)
        try:
            self._launch()
            deadline = t0 + self.startup_timeout
            self._wait_engine(deadline)
            self._wait_health(deadline)
        except BaseException as exc:
            tail = self.log_tail()
            self.keep_log = True  # the whole log stays for the post-mortem
            self.stop()
            if isinstance(exc, FrontendStartupError):
                raise
            if isinstance(exc, EngineStartupError | OSError):
                raise FrontendStartupError(f"{self._describe()}: {exc}\n--- log tail ---\n{tail}") from exc
            raise
        self.startup_seconds = time.monotonic() - t0
        self.startup_calls = self.engine.calls
        self.engine.clear_calls()
        return self

    def stop(self, grace: float = 10.0) -> None:
        """Stop the frontend (SIGTERM, then SIGKILL after ``grace`` seconds) and the engine. Idempotent."""
        proc = self.process
        if proc is not None and not self._stopped:
            self._stopped = True
            # A handler waiting on a hung engine call would hold up a graceful shutdown.
            if self.engine.running and not self.engine.dead and self.engine.hung_calls:
                self.engine.release_hung("frontend shutting down")
                time.sleep(0.1)
            # SIGTERM, then SIGKILL; anything still in the group, or that left it, goes too.
            stop_group(proc, grace=grace)
        self.engine.close()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
            if self._own_log and not self.keep_log and self.log_path is not None:
                with contextlib.suppress(OSError):
                    self.log_path.unlink()
        with _live_lock:
            _live.discard(self)

    def __enter__(self) -> Frontend:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.base_url or '(not started)'} pid={self.pid}>"

    # -- subclass hooks

    def _launch(self) -> None:
        raise NotImplementedError

    # -- helpers

    def _describe(self) -> str:
        return f"the {self.frontend} frontend ({type(self).__name__})"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # Nothing from the caller's shell may change what the test sees.
        for key in ("VLLM_SERVER_DEV_MODE", "VLLM_API_KEY", "VLLM_USE_RUST_FRONTEND"):
            env.pop(key, None)
        env["VLLM_SERVER_DEV_MODE"] = "1" if self.dev_mode else "0"
        # The model is a local directory: never reach for the hub.
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.update(self.extra_env)
        return env

    def _spawn(self, cmd: Sequence[str], env: Mapping[str, str], pass_fds: Sequence[int] = ()) -> None:
        # Tied to the starting thread (the pool starts frontends from keeper threads that outlive them).
        self.process = spawn(cmd, env=env, stdout=self._log_file, pass_fds=pass_fds, thread_bound=True)

    def _check_alive(self) -> None:
        assert self.process is not None
        code = self.process.poll()
        if code is not None:
            raise FrontendStartupError(
                f"{self._describe()} exited with code {code} while starting\n"
                f"--- log tail ({self.log_path}) ---\n{self.log_tail()}"
            )

    def _timeout(self, what: str) -> FrontendStartupError:
        return FrontendStartupError(
            f"{self._describe()}: {what} within {self.startup_timeout:.0f} s\n"
            f"--- log tail ({self.log_path}) ---\n{self.log_tail()}"
        )

    def _wait_engine(self, deadline: float) -> None:
        while not self.engine.registered:
            self._check_alive()
            if self.engine._error is not None:
                self.engine.wait_registered(0)  # raises EngineStartupError with the cause
            if time.monotonic() > deadline:
                raise self._timeout("the scripted engine did not register")
            time.sleep(0.02)

    def _wait_health(self, deadline: float) -> None:
        # In slices, to notice a frontend that exits meanwhile; short tries: the Rust frontend accepts TCP
        # before it can answer.
        with DevClient(
            self.base_url, api_key=self.api_key or "", timeout=_HEALTH_TRY_S, **self.client_tls
        ) as client:
            while True:
                self._check_alive()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._timeout("GET /health did not answer 200")
                try:
                    client.wait_until_ready(
                        deadline=min(_HEALTH_SLICE_S, remaining), interval=0.02, request_timeout=_HEALTH_TRY_S
                    )
                except DevClientError:
                    time.sleep(0.02)  # not yet (or an answer other than 200): poll on until the deadline
                else:
                    return


# Readiness: one try's timeout, and how long to poll /health between checks that the process still runs.
_HEALTH_TRY_S = 0.5
_HEALTH_SLICE_S = 1.0


class RustFrontend(Frontend):
    """The ``vllm-rs frontend`` binary with inherited listeners; the engine registers directly.

    ``binary`` overrides the ``vllm-rs`` location; ``args`` adds keys to its ``--args-json``
    (the shared ``vllm serve`` options, e.g. ``{"served_model_name": ["m"]}``).
    """

    frontend = "rust"
    default_startup_timeout = 30.0

    def __init__(
        self,
        *,
        binary: str | os.PathLike[str] | None = None,
        args: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.binary = Path(binary) if binary is not None else None
        self.extra_args = dict(args or {})

    def _launch(self) -> None:
        binary = self.binary or find_vllm_rs()
        http, inputs, outputs = listener(), listener(), listener()
        try:
            self.port = http.getsockname()[1]
            self.base_url = self._url(self.port)
            args: dict[str, Any] = {"model_tag": self.model, "max_model_len": self.max_model_len}
            if self.api_key is not None:
                args["api_key"] = self.api_key
            if self.tls is not None:
                args.update(ssl_certfile=str(self.tls.server), ssl_keyfile=str(self.tls.server_key))
                if self.require_client_cert:
                    args.update(ssl_ca_certs=str(self.tls.ca), ssl_cert_reqs=2)
            args.update(self.extra_args)
            fds = [http.fileno(), inputs.fileno(), outputs.fileno()]
            cmd = [
                str(binary), "frontend",
                "--listen-fd", str(fds[0]),
                "--input-listener-fd", str(fds[1]),
                "--output-listener-fd", str(fds[2]),
                "--engine-start-index", str(self.engine.rank),
                "--engine-count", "1",
                "--data-parallel-size", "1",
                "--args-json", json.dumps(args),
            ]  # fmt: skip
            self._spawn(cmd, self._env(), pass_fds=fds)
            input_addr = f"tcp://127.0.0.1:{inputs.getsockname()[1]}"
            output_addr = f"tcp://127.0.0.1:{outputs.getsockname()[1]}"
        finally:
            # The child holds its own copies of the listening sockets.
            for s in (http, inputs, outputs):
                s.close()
        self.engine.start_direct(input_addr, output_addr)


class PythonFrontend(Frontend):
    """The stock ``vllm serve MODEL --data-parallel-size-local 0``; the engine does the handshake.

    ``python`` is the interpreter with vllm installed (default: this one); ``extra_args`` are
    appended to the ``vllm serve`` command line.
    """

    frontend = "python"
    default_startup_timeout = 180.0

    def __init__(
        self,
        *,
        python: str | os.PathLike[str] | None = None,
        extra_args: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.python = str(python) if python is not None else sys.executable
        self.extra_args = list(extra_args)

    def _launch(self) -> None:
        if self.python == sys.executable and importlib.util.find_spec("vllm") is None:
            raise VllmNotInstalledError(f"the 'vllm' package is not importable here. {INSTALL_HINT}")
        self.port, rpc_port = free_port(), free_port()
        self.base_url = self._url(self.port)
        cmd = [
            self.python, "-m", "vllm.entrypoints.cli.main", "serve", self.model,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--max-model-len", str(self.max_model_len),
            "--enforce-eager",
            "--data-parallel-size", "1",
            "--data-parallel-size-local", "0",
            "--data-parallel-address", "127.0.0.1",
            "--data-parallel-rpc-port", str(rpc_port),
        ]  # fmt: skip
        if self.api_key is not None:
            cmd += ["--api-key", self.api_key]
        if self.tls is not None:
            cmd += ["--ssl-certfile", str(self.tls.server), "--ssl-keyfile", str(self.tls.server_key)]
            if self.require_client_cert:
                cmd += ["--ssl-ca-certs", str(self.tls.ca), "--ssl-cert-reqs", "2"]
        cmd += self.extra_args
        env = self._env()
        env.setdefault("VLLM_TARGET_DEVICE", "cpu")
        # vLLM 0.34 refuses an x86 CPU without Triton; Triton with no active driver is accepted where the
        # visible devices are set empty (vLLM's allowance for Ray actors), as they are on a CPU machine.
        env.setdefault("CUDA_VISIBLE_DEVICES", "")
        # No usage reporting from tests.
        env.setdefault("VLLM_NO_USAGE_STATS", "1")
        self._spawn(cmd, env)
        self.engine.start_handshake(f"tcp://127.0.0.1:{rpc_port}")
