"""The fault suite, credentials (issue 11, class 4): an API key or URL password is never in str/repr of an
error, repr(client), an error's `.url`, any log record at DEBUG, or the CLI's `--json` output.

Against the real vLLM frontends (the plugin's `frontend`, `python_frontend` and `rust_frontend` fixtures,
driven by the scripted engine) where the class applies, and against `MisbehavingServer`
(vllm_devclient/testing/misbehaving.py, the `server` fixture of conftest.py). The whole suite's classes are
listed in fault_answers.py.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_answers import MODELS, engine_error

from vllm_devclient import (
    APIConnectionError,
    APIStatusError,
    DevClient,
    DevClientError,
)
from vllm_devclient.testing import Hang as EngineHang
from vllm_devclient.testing import Raise
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import EchoHeader, Hang

SECRET = "sk-faults-SECRET-0123456789"


KEYS = {
    "newline-key": SECRET + "\n",  # what a key read from a file or a Kubernetes secret has
    "non-ascii-key": SECRET + "-ключ",
}


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every logger at DEBUG (httpx, httpcore, ours, any other), captured."""
    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)]
    saved = [(lg, lg.level, lg.disabled) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
        lg.disabled = False
    caplog.set_level(logging.DEBUG)
    yield caplog
    for lg, level, disabled in saved:
        lg.setLevel(level)
        lg.disabled = disabled


def _log_text(caplog: pytest.LogCaptureFixture) -> str:
    parts = [caplog.text]
    for record in caplog.records:
        parts.append(record.getMessage())
        parts.append(repr(record.args))
    return "\n".join(parts)


def _leaks(client: Any, errors: list[BaseException], caplog: pytest.LogCaptureFixture) -> list[str]:
    found = []
    if client is not None and SECRET in repr(client):
        found.append(f"repr(client): {client!r}")
    for exc in errors:
        for where, text in (("str", str(exc)), ("repr", repr(exc)), (".url", str(getattr(exc, "url", "")))):
            if SECRET in text:
                found.append(f"{where}({type(exc).__name__}): {text[:300]}")
    if SECRET in _log_text(caplog):
        found.append("a log record at DEBUG")
    return found


def _exercise(url: str, api_key: str | None, model: str) -> tuple[Any, list[BaseException]]:
    """A success, an engine error and a timeout, with these credentials: (client or None, errors)."""
    errors: list[BaseException] = []
    try:
        client = DevClient(url, api_key=api_key, max_retries=0, model=model)
    except BaseException as exc:  # refusing the key up front is fine, if typed and silent about it
        return None, [exc]
    with client:
        for call in (
            client.models,
            lambda: client.collective_rpc("m"),
            lambda: client.is_sleeping(timeout=0.3),
        ):
            try:
                call()
            except BaseException as exc:
                errors.append(exc)
    return client, errors


def _target(request: pytest.FixtureRequest, name: str) -> tuple[str, str]:
    """(base URL, model) of a target set up to answer models(), fail collective_rpc, hang is_sleeping."""
    if name == "raw":
        srv = MisbehavingServer().start()
        request.addfinalizer(srv.close)
        srv.script("/v1/models", MODELS)
        srv.script("/collective_rpc", engine_error())
        srv.script("/is_sleeping", Hang())
        return srv.base_url, "m"
    fe = request.getfixturevalue(f"{name}_frontend")
    fe.engine.reset()
    request.addfinalizer(fe.engine.reset)
    fe.engine.script("collective_rpc", Raise("boom"))
    fe.engine.script("is_sleeping", EngineHang())
    return fe.base_url, fe.model


def _with_password(url: str) -> str:
    return url.replace("http://", f"http://user:{SECRET}@", 1)


@pytest.mark.parametrize("target", ["raw", "python", "rust"])
@pytest.mark.parametrize("case", [*KEYS, "password-in-url"])
def test_credentials_never_leak(
    request: pytest.FixtureRequest, debug_logs: pytest.LogCaptureFixture, case: str, target: str
) -> None:
    url, model = _target(request, target)
    if case == "password-in-url":
        client, errors = _exercise(_with_password(url), None, model)
    else:
        client, errors = _exercise(url, KEYS[case], model)
    raw = [f"{type(e).__name__}: {e!s:.200}" for e in errors if not isinstance(e, DevClientError)]
    assert not raw, f"raw exceptions escaped: {raw}"
    leaks = _leaks(client, errors, debug_logs)
    assert not leaks, "the secret leaked:\n" + "\n".join(leaks)


def test_a_url_password_never_leaks_from_a_connection_error(debug_logs: pytest.LogCaptureFixture) -> None:
    with MisbehavingServer() as gone:
        port = gone.port
    client = DevClient(_with_password(f"http://127.0.0.1:{port}"), max_retries=0)
    with pytest.raises(APIConnectionError) as info:
        client.health()
    client.close()
    leaks = _leaks(client, [info.value], debug_logs)
    assert not leaks, "the secret leaked:\n" + "\n".join(leaks)


def test_a_key_echoed_by_the_server_is_not_repeated(
    server: MisbehavingServer, debug_logs: pytest.LogCaptureFixture
) -> None:
    server.script("/v1/models", EchoHeader("authorization", status=401))
    server.script("/collective_rpc", EchoHeader("authorization", status=500))
    errors: list[BaseException] = []
    with DevClient(server.base_url, api_key=SECRET, max_retries=0) as client:
        for call in (client.models, lambda: client.collective_rpc("m")):
            with pytest.raises(APIStatusError) as info:
                call()
            errors.append(info.value)
    assert server.requests[0].header("authorization") == f"Bearer {SECRET}"  # it was echoed
    leaks = _leaks(client, errors, debug_logs)
    assert not leaks, "the secret leaked:\n" + "\n".join(leaks)


CLI = str(Path(sys.executable).with_name("vllm-devclient"))


@pytest.mark.parametrize("case", [*KEYS, "password-in-url", "echoed-key"])
def test_the_cli_json_output_never_shows_the_key(server: MisbehavingServer, case: str) -> None:
    server.script("/v1/models", EchoHeader("authorization") if case == "echoed-key" else MODELS)
    url, key = server.base_url, SECRET
    if case in KEYS:
        key = KEYS[case]
    elif case == "password-in-url":
        url, key = _with_password(url), "sk-unrelated"
    proc = subprocess.run(
        [CLI, "--url", url, "--api-key", key, "--json", "--timeout", "2", "--retries", "0", "models"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = proc.stdout + proc.stderr
    assert SECRET not in out, f"the secret is in the CLI output:\n{out[:2000]}"
    assert "Traceback" not in out, f"the CLI crashed (exit {proc.returncode}):\n{out[-2000:]}"
