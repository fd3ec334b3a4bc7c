"""TLS on real sockets: both clients on every transport against an https server made here (a CA, its
certificates, `TLSProxy` in front of the misbehaving server), the environment's CA settings, `verify=`,
`cert=` and mTLS, the certificates that must be refused, pickling, and a fleet of http and https targets.
The CLI's options at the end; the real frontends serving TLS themselves are in contract_tests/test_tls.py.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import pickle
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vllm_devclient import (
    APIConnectionError,
    AsyncDevClient,
    DevClient,
    InvalidParameterError,
    TLSError,
)
from vllm_devclient import operations as ops
from vllm_devclient.arguments import Timeouts
from vllm_devclient.cli._exit import ExitCode
from vllm_devclient.fleet import AsyncFleet, Fleet
from vllm_devclient.operations import CallContext, RetryPolicy
from vllm_devclient.routes import endpoint
from vllm_devclient.testing.certificates import CLIENT_NAME, KEY_PASSWORD, Certificates
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import Answer
from vllm_devclient.testing.tls_proxy import TLSProxy
from vllm_devclient.transports import TLSFailure

from .cli_support import doc, invoke

# (client, transport): the default transports (the async one aiohttp's), the SDK's asyncio pool ("h11"),
# httpx and httpx2 (where installed), each sync and async.
CLIENTS = [("sync", "auto"), ("async", "auto"), ("async", "h11"), ("sync", "httpx"), ("async", "httpx")]
if importlib.util.find_spec("httpx2") is not None:
    CLIENTS += [("sync", "httpx2"), ("async", "httpx2")]
IDS = [f"{kind}-{transport}" for kind, transport in CLIENTS]


@pytest.fixture(autouse=True)
def _no_ca_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    # The machine's own SSL_CERT_FILE (some set it) must not decide what these tests see.
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


@pytest.fixture(scope="module")
def backend() -> Iterator[MisbehavingServer]:
    with MisbehavingServer() as server:
        server.script("/health", Answer(200, body=b""))
        server.script("/is_paused", Answer(200, json={"is_paused": False}))
        yield server


def _proxy(backend: MisbehavingServer, cert: Path, key: Path, client_ca: Path | None = None) -> TLSProxy:
    return TLSProxy(backend.base_url, cert, key, client_ca=client_ca)


@pytest.fixture(scope="module")
def https(backend: MisbehavingServer, tls_certificates: Certificates) -> Iterator[TLSProxy]:
    with _proxy(backend, tls_certificates.server, tls_certificates.server_key) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def mtls(backend: MisbehavingServer, tls_certificates: Certificates) -> Iterator[TLSProxy]:
    with _proxy(
        backend, tls_certificates.server, tls_certificates.server_key, client_ca=tls_certificates.ca
    ) as proxy:
        yield proxy


def is_paused(kind: str, transport: str, url: str, **options: Any) -> bool:
    """`is_paused()` through a new client of `kind` on `transport`, closed afterwards."""
    options = {"max_retries": 0, "timeout": 5.0, "transport": transport, **options}
    if kind == "sync":
        with DevClient(url, **options) as client:
            return client.is_paused()

    async def go() -> bool:
        async with AsyncDevClient(url, **options) as client:
            return await client.is_paused()

    return asyncio.run(go())


# ---- what is trusted ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "transport"), CLIENTS, ids=IDS)
@pytest.mark.parametrize(("variable", "ca"), [("SSL_CERT_FILE", "ca"), ("SSL_CERT_DIR", "ca_folder")])
def test_ssl_cert_file_and_dir_are_honoured_by_every_transport(
    kind: str,
    transport: str,
    variable: str,
    ca: str,
    https: TLSProxy,
    tls_certificates: Certificates,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(variable, str(getattr(tls_certificates, ca)))
    assert is_paused(kind, transport, https.base_url) is False


def test_ssl_cert_file_wins_over_ssl_cert_dir_as_in_httpx(
    https: TLSProxy, tls_certificates: Certificates, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SSL_CERT_DIR", str(tls_certificates.ca_folder))
    monkeypatch.setenv(
        "SSL_CERT_FILE", str(tls_certificates.stranger)
    )  # a CA file that did not sign the server's
    with pytest.raises(TLSError, match=r"trusting SSL_CERT_FILE="):
        is_paused("sync", "auto", https.base_url)


@pytest.mark.parametrize(("kind", "transport"), CLIENTS, ids=IDS)
@pytest.mark.parametrize("form", ["str", "Path", "folder", "SSLContext"])
def test_verify_takes_a_ca_file_a_folder_or_an_ssl_context(
    kind: str,
    transport: str,
    form: str,
    https: TLSProxy,
    tls_certificates: Certificates,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "SSL_CERT_FILE", str(tls_certificates.stranger)
    )  # a given verify= is not overridden by it
    verify: object = {
        "str": str(tls_certificates.ca),
        "Path": tls_certificates.ca,
        "folder": tls_certificates.ca_folder,
        "SSLContext": ssl.create_default_context(cafile=str(tls_certificates.ca)),
    }[form]
    assert is_paused(kind, transport, https.base_url, verify=verify) is False


@pytest.mark.parametrize(("kind", "transport"), CLIENTS, ids=IDS)
def test_verify_false_connects_and_logs_one_warning_per_client(
    kind: str, transport: str, https: TLSProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="vllm_devclient")
    assert is_paused(kind, transport, https.base_url, verify=False) is False
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "verification is off" in warnings[0].getMessage() and https.base_url in warnings[0].getMessage()


def test_verify_false_warns_once_for_a_client_and_its_derived_clients_nothing_over_http(
    https: TLSProxy, backend: MisbehavingServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="vllm_devclient")
    with DevClient(https.base_url, verify=False, transport="auto") as client:
        client.with_options(timeout=3).is_paused()
        client.is_paused()
    with DevClient(backend.base_url, verify=False, transport="auto") as plain:
        plain.is_paused()
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


# ---- client certificates (mTLS) -------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "transport"), CLIENTS, ids=IDS)
@pytest.mark.parametrize("shape", ["pair", "combined file", "encrypted key with password"])
def test_cert_in_every_httpx_shape_passes_mtls(
    kind: str, transport: str, shape: str, mtls: TLSProxy, tls_certificates: Certificates
) -> None:
    cert: object = {
        "pair": (tls_certificates.client, tls_certificates.client_key),
        "combined file": str(tls_certificates.client_combined),
        "encrypted key with password": (
            str(tls_certificates.client),
            str(tls_certificates.client_key_encrypted),
            KEY_PASSWORD,
        ),
    }[shape]
    seen = len(mtls.client_names)
    assert is_paused(kind, transport, mtls.base_url, verify=tls_certificates.ca, cert=cert) is False
    assert mtls.client_names[seen:] == [CLIENT_NAME]  # the server saw our certificate


@pytest.mark.parametrize(("kind", "transport"), CLIENTS, ids=IDS)
@pytest.mark.parametrize("given", ["none", "another CA's"])
def test_a_server_that_refuses_the_client_certificate_says_pass_cert(
    kind: str, transport: str, given: str, mtls: TLSProxy, tls_certificates: Certificates
) -> None:
    # The proxy refuses as uvicorn does (a close, no alert): the message says what that may mean.
    cert = None if given == "none" else (tls_certificates.stranger, tls_certificates.stranger_key)
    with pytest.raises(APIConnectionError) as info:
        is_paused(kind, transport, mtls.base_url, verify=tls_certificates.ca, cert=cert)
    assert "cert=" in str(info.value) and "--cert" in str(info.value)
    if cert is not None:
        assert str(tls_certificates.stranger) in str(info.value)


@pytest.mark.parametrize("transport", ["auto", "httpx"])
def test_a_wrong_key_password_is_refused_without_showing_it(
    transport: str, https: TLSProxy, tls_certificates: Certificates
) -> None:
    # The default transports load certificates at their first https connection, httpx when it is made.
    password = "not-the-password-42"
    cert = (tls_certificates.client, tls_certificates.client_key_encrypted, password)
    with pytest.raises(InvalidParameterError, match="cert=: cannot load the client certificate") as info:
        is_paused("sync", transport, https.base_url, verify=tls_certificates.ca, cert=cert)
    assert password not in str(info.value)


# ---- refused certificates ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "transport"), CLIENTS, ids=IDS)
@pytest.mark.parametrize(
    ("server", "verify", "reason", "fix"),
    [
        ("server", None, "is not signed by a CA this client trusts", "pass verify= the CA certificate"),
        (
            "expired",
            "ca",
            "is out of its validity period (certificate has expired",
            "needs a valid certificate",
        ),
        ("wrong_host", "ca", "is not valid for 127.0.0.1", "a host name the certificate lists"),
    ],
    ids=["untrusted", "expired", "wrong-host"],
)
def test_a_refused_certificate_is_a_tls_error_naming_host_reason_and_fix(
    kind: str,
    transport: str,
    server: str,
    verify: str | None,
    reason: str,
    fix: str,
    backend: MisbehavingServer,
    tls_certificates: Certificates,
) -> None:
    cert, key = getattr(tls_certificates, server), getattr(tls_certificates, f"{server}_key")
    options = {} if verify is None else {"verify": tls_certificates.ca}
    before = backend.count("/is_paused")
    with _proxy(backend, cert, key) as proxy, pytest.raises(TLSError) as info:
        is_paused(kind, transport, proxy.base_url, **options)
    message = str(info.value)
    host = proxy.base_url.removeprefix("https://")
    for needle in (host, reason, fix, "--insecure"):
        assert needle in message, message
    trusted = "certifi's CA bundle" if verify is None else f"verify={tls_certificates.ca}"
    assert f"trusting {trusted}" in message
    assert isinstance(info.value, APIConnectionError) and info.value.sent is False
    assert backend.count("/is_paused") == before  # nothing reached the server


def test_a_tls_error_is_never_retried() -> None:
    call = ops.call(
        endpoint("health"), timeouts=Timeouts(1.0, 1.0), retry=RetryPolicy(max_retries=5), ctx=CallContext()
    )
    assert isinstance(next(call), ops.Transmit)
    with pytest.raises(TLSError):
        call.throw(TLSFailure("TLS: the certificate of h:1 is out of its validity period"))


def test_an_alert_that_escapes_httpx_unwrapped_is_still_named() -> None:
    # anyio re-raises some ssl errors as they are (httpx does not wrap them): a refusal read late, here.
    import httpx

    class Refusing(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            alert = ssl.SSLError(
                1, "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert certificate required"
            )
            alert.reason = "TLSV13_ALERT_CERTIFICATE_REQUIRED"
            raise alert

    async def go() -> None:
        async with AsyncDevClient(
            "https://127.0.0.1:1", http_client=httpx.AsyncClient(transport=Refusing()), max_retries=0
        ) as client:
            await client.is_paused()

    with pytest.raises(TLSError, match=r"127.0.0.1:1 asks for a client certificate .* pass cert="):
        asyncio.run(go())


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_tls_error_ends_a_wait_at_once(
    kind: str, backend: MisbehavingServer, tls_certificates: Certificates
) -> None:
    # Tolerated, the wait would poll the full 60 s and end with WaitTimeoutError.
    with (
        _proxy(backend, tls_certificates.expired, tls_certificates.expired_key) as proxy,
        pytest.raises(TLSError),
    ):
        if kind == "sync":
            with DevClient(proxy.base_url, verify=tls_certificates.ca, transport="auto") as client:
                client.wait_until_ready(deadline=60)
        else:

            async def go() -> None:
                async with AsyncDevClient(
                    proxy.base_url, verify=tls_certificates.ca, transport="auto"
                ) as client:
                    await client.wait_until_paused(deadline=60)

            asyncio.run(go())


# ---- bad settings ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"verify": 1}, "verify must be True, False, the path of a CA bundle"),
        ({"verify": "/no/such/ca.pem"}, "verify: /no/such/ca.pem does not exist"),
        ({"cert": ("/no/such/cert.pem", None)}, r"cert\[0\] \(the certificate\): /no/such/cert.pem does not"),
        ({"cert": ["a", "b", "c", "d"]}, "cert must be a path to a PEM file"),
        ({"cert": 7}, "cert must be a path to a PEM file"),
    ],
)
def test_bad_tls_arguments_are_refused_before_anything_is_sent(options: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        DevClient("https://127.0.0.1:1", **options)


def test_cert_with_an_ssl_context_and_tls_options_with_an_http_client_are_refused(
    tls_certificates: Certificates,
) -> None:
    import httpx

    with pytest.raises(InvalidParameterError, match="load the client certificate into your context"):
        DevClient("https://x", verify=ssl.create_default_context(), cert=tls_certificates.client_combined)
    with pytest.raises(InvalidParameterError, match="do not reach an http_client you pass in"):
        AsyncDevClient("https://x", verify=False, http_client=httpx.AsyncClient())


@pytest.mark.parametrize(("kind", "transport"), CLIENTS, ids=IDS)
@pytest.mark.parametrize("name", ["SSL_CERT_FILE", "SSL_CERT_DIR"])
def test_an_environment_variable_naming_nothing_is_named_over_https_and_ignored_over_http(
    kind: str,
    transport: str,
    name: str,
    https: TLSProxy,
    backend: MisbehavingServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(name, "/no/such/ca")
    with pytest.raises(InvalidParameterError, match=f"cannot load the CA certificates of {name}=/no/such/ca"):
        is_paused(kind, transport, https.base_url)
    if transport == "auto":  # httpx loads the CAs when it is made, whatever the URL
        assert is_paused(kind, transport, backend.base_url) is False


@pytest.mark.parametrize(("kind", "transport"), CLIENTS, ids=IDS)
def test_a_ca_file_that_is_not_pem_is_refused_by_name(
    kind: str, transport: str, https: TLSProxy, tmp_path: Path
) -> None:
    bogus = tmp_path / "bogus.pem"
    bogus.write_text("not a certificate\n")
    with pytest.raises(InvalidParameterError, match=f"cannot load the CA certificates of verify={bogus}"):
        is_paused(kind, transport, https.base_url, verify=bogus)


# ---- pickling, fleets -------------------------------------------------------------------------------------


def test_clients_pickle_with_their_tls_settings_and_the_environment_they_read(
    mtls: TLSProxy, tls_certificates: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_certificates.ca))
    client = DevClient(
        mtls.base_url, cert=(tls_certificates.client, tls_certificates.client_key), transport="auto"
    )
    monkeypatch.delenv("SSL_CERT_FILE")  # the copy carries what the original read
    with pickle.loads(pickle.dumps(client)) as copy:
        assert copy.is_paused() is False
    client.close()
    fleet = Fleet(
        [mtls.base_url],
        verify=tls_certificates.ca,
        cert=(tls_certificates.client, tls_certificates.client_key),
    )
    with pickle.loads(pickle.dumps(fleet)) as fleet_copy:
        assert fleet_copy.is_paused().all_ok
    fleet.close()


@pytest.mark.parametrize("cls", [DevClient, AsyncDevClient, Fleet, AsyncFleet], ids=lambda c: c.__name__)
def test_an_ssl_context_refuses_pickling_with_a_clear_type_error(cls: type) -> None:
    made = cls(
        ["https://127.0.0.1:1"] if "Fleet" in cls.__name__ else "https://127.0.0.1:1",
        verify=ssl.create_default_context(),
    )
    with pytest.raises(
        TypeError, match=rf"a {cls.__name__} made with verify=<ssl.SSLContext> cannot be pickled"
    ):
        pickle.dumps(made)
    if isinstance(made, AsyncDevClient | AsyncFleet):
        asyncio.run(made.close())
    else:
        made.close()


def test_a_fleet_of_http_and_https_targets_reaches_each_and_names_the_refused_one(
    backend: MisbehavingServer, https: TLSProxy, tls_certificates: Certificates
) -> None:
    with _proxy(backend, tls_certificates.wrong_host, tls_certificates.wrong_host_key) as wrong:
        targets = [backend.base_url, https.base_url, wrong.base_url]
        with Fleet(targets, verify=tls_certificates.ca, max_retries=0, raise_on_error=False) as fleet:
            result = fleet.is_paused()

        async def run() -> Any:
            async with AsyncFleet(
                targets, verify=tls_certificates.ca, max_retries=0, raise_on_error=False
            ) as afleet:
                return await afleet.is_paused()

        aresult = asyncio.run(run())
    for outcome in (result, aresult):
        assert set(outcome.ok) == {backend.base_url, https.base_url}
        assert set(outcome.failed) == {wrong.base_url}
        assert isinstance(outcome.failed[wrong.base_url], TLSError)
        assert "is not valid for 127.0.0.1" in str(outcome.failed[wrong.base_url])


# ---- the command line: --cacert, --cert, --key, --insecure ------------------------------------------------


def cli(*args: str, env: dict[str, str] | None = None) -> Any:
    # The default transports (the unit tests' conftest sets httpx for respx).
    return invoke(*args, env={"VLLM_DEVCLIENT_TRANSPORT": "", **(env or {})})


def test_cli_cacert_and_ssl_cert_file_reach_an_https_server(
    https: TLSProxy, tls_certificates: Certificates
) -> None:
    given = cli("--url", https.base_url, "--cacert", str(tls_certificates.ca), "-o", "json", "is-paused")
    assert given.exit_code == 0, given.output
    assert doc(given)["targets"][https.base_url]["result"] is False
    after = cli(
        "is-paused", "--url", https.base_url, "--cacert", str(tls_certificates.ca_folder)
    )  # after it, too
    assert after.exit_code == 0, after.output
    env = cli("--url", https.base_url, "is-paused", env={"SSL_CERT_FILE": str(tls_certificates.ca)})
    assert env.exit_code == 0, env.output


def test_cli_cert_and_key_pass_mtls(mtls: TLSProxy, tls_certificates: Certificates) -> None:
    base = ("--url", mtls.base_url, "--cacert", str(tls_certificates.ca))
    pair = cli(
        *base, "--cert", str(tls_certificates.client), "--key", str(tls_certificates.client_key), "is-paused"
    )
    combined = cli(*base, "--cert", str(tls_certificates.client_combined), "is-paused")
    assert (pair.exit_code, combined.exit_code) == (0, 0), pair.output + combined.output
    missing = cli(*base, "-o", "json", "is-paused")
    error = doc(missing)["targets"][mtls.base_url]["error"]
    assert missing.exit_code == ExitCode.CONNECTION and "--cert" in error["message"]


def test_cli_names_the_option_that_fixes_an_untrusted_certificate(https: TLSProxy) -> None:
    result = cli("--url", https.base_url, "-o", "json", "is-paused")
    error = doc(result)["targets"][https.base_url]["error"]
    assert result.exit_code == ExitCode.CONNECTION and error["type"] == "TLSError"
    assert "--cacert" in error["message"] and "--insecure" in error["message"]


def test_cli_insecure_connects_and_warns_on_stderr(https: TLSProxy) -> None:
    code = (
        f"from vllm_devclient.cli import main; main(['--url', {https.base_url!r}, '--insecure', 'is-paused'])"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "VLLM_DEVCLIENT_TRANSPORT")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("TLS certificate verification is off") == 1, proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cacert", "ca.pem", "--insecure", "is-paused"], "--cacert and --insecure contradict each other"),
        (["--key", "client.key", "is-paused"], "--key needs --cert"),
        (["--cacert", "/no/such/ca.pem", "is-paused"], "verify: /no/such/ca.pem does not exist"),
        (["--insecure", "parity"], "parity takes no --cacert, --cert or --insecure"),
    ],
)
def test_cli_refuses_tls_options_that_cannot_work(args: list[str], message: str) -> None:
    result = cli("--url", "https://127.0.0.1:1", *args)
    assert result.exit_code == ExitCode.USAGE and message in result.stderr, result.output
