"""Both real frontends serving https themselves, client certificates required: `vllm serve --ssl-certfile
--ssl-keyfile --ssl-ca-certs --ssl-cert-reqs 2` (uvicorn) and vllm-rs with the same `ssl_*` arguments
(rustls), certificates of a CA made here. What a user behind a private CA meets: both clients on every
transport, the refusals, the command line, and a fleet whose targets mix http and https.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vllm_devclient import APIConnectionError, AsyncDevClient, DevClient, TLSError
from vllm_devclient.fleet import AsyncFleet, Fleet
from vllm_devclient.testing.certificates import Certificates
from vllm_devclient.testing.frontends import Frontend, PythonFrontend, RustFrontend

pytestmark = pytest.mark.frontend

CLI = str(Path(sys.executable).with_name("vllm-devclient"))
CLIENTS = [("sync", "auto"), ("async", "auto"), ("sync", "httpx"), ("async", "httpx")]
IDS = [f"{kind}-{transport}" for kind, transport in CLIENTS]


@pytest.fixture(autouse=True)
def _no_ca_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


@pytest.fixture(scope="module")
def python_tls(tls_certificates: Certificates, tiny_model_dir: Path) -> Iterator[Frontend]:
    with PythonFrontend(model_dir=tiny_model_dir, tls=tls_certificates, require_client_cert=True) as fe:
        yield fe


@pytest.fixture(scope="module")
def rust_tls(tls_certificates: Certificates, tiny_model_dir: Path) -> Iterator[Frontend]:
    with RustFrontend(model_dir=tiny_model_dir, tls=tls_certificates, require_client_cert=True) as fe:
        yield fe


@pytest.fixture(params=["python", "rust"])
def tls_frontend(request: pytest.FixtureRequest) -> Frontend:
    fe: Frontend = request.getfixturevalue(f"{request.param}_tls")
    fe.engine.reset()
    return fe


def call(kind: str, transport: str, url: str, method: str, **options: Any) -> Any:
    """`method()` through a new client of `kind` on `transport`, closed afterwards."""
    options = {"max_retries": 0, "timeout": 10.0, "transport": transport, **options}
    if kind == "sync":
        with DevClient(url, **options) as client:
            return getattr(client, method)()

    async def go() -> Any:
        async with AsyncDevClient(url, **options) as client:
            return await getattr(client, method)()

    return asyncio.run(go())


@pytest.mark.parametrize(("kind", "transport"), CLIENTS, ids=IDS)
def test_both_clients_reach_a_frontend_that_requires_client_certificates(
    kind: str, transport: str, tls_frontend: Frontend
) -> None:
    url, tls = tls_frontend.base_url, tls_frontend.client_tls
    assert call(kind, transport, url, "version", **tls).frontend == tls_frontend.frontend
    assert call(kind, transport, url, "reset_prefix_cache", **tls).success is True
    assert len(tls_frontend.engine.calls_for("reset_prefix_cache")) == 1  # it went through to the engine


@pytest.mark.parametrize(("kind", "transport"), CLIENTS, ids=IDS)
def test_without_a_client_certificate_the_refusal_names_cert(
    kind: str, transport: str, tls_frontend: Frontend, tls_certificates: Certificates
) -> None:
    with pytest.raises(APIConnectionError) as info:
        call(kind, transport, tls_frontend.base_url, "is_paused", verify=tls_certificates.ca)
    assert "cert=" in str(info.value) and "--cert" in str(info.value)
    if tls_frontend.frontend == "rust" and (kind, transport) == ("sync", "auto"):
        # rustls says why (an alert), and the sync pool reads it: the one certain case.
        assert isinstance(info.value, TLSError) and "TLSV13_ALERT_CERTIFICATE_REQUIRED" in str(info.value)
    assert tls_frontend.engine.calls == []


@pytest.mark.parametrize(("kind", "transport"), CLIENTS, ids=IDS)
def test_a_client_that_does_not_trust_the_ca_says_how_to(
    kind: str, transport: str, tls_frontend: Frontend
) -> None:
    cert = tls_frontend.client_tls["cert"]
    with pytest.raises(TLSError, match="is not signed by a CA this client trusts") as info:
        call(kind, transport, tls_frontend.base_url, "is_paused", cert=cert)
    assert "--cacert" in str(info.value) and "SSL_CERT_FILE" in str(info.value)


@pytest.mark.parametrize(("kind", "transport"), CLIENTS, ids=IDS)
def test_https_to_a_plain_http_frontend_says_use_http(
    kind: str, transport: str, rust_frontend: Frontend
) -> None:
    url = rust_frontend.base_url.replace("http://", "https://")
    with pytest.raises(TLSError, match=r"does not answer TLS .*: if it serves plain HTTP, use http://"):
        call(kind, transport, url, "is_paused")


def test_ssl_cert_file_is_enough_to_trust_the_frontends(
    python_tls: Frontend, rust_tls: Frontend, tls_certificates: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_certificates.ca))
    for fe in (python_tls, rust_tls):
        for kind, transport in CLIENTS:
            assert call(kind, transport, fe.base_url, "health", cert=fe.client_tls["cert"]) is True


def test_a_fleet_of_http_and_https_frontends(
    python_tls: Frontend, rust_tls: Frontend, rust_frontend: Frontend, tls_certificates: Certificates
) -> None:
    urls = [rust_frontend.base_url, rust_tls.base_url, python_tls.base_url]
    tls = rust_tls.client_tls
    with Fleet(urls, **tls) as fleet:
        result = fleet.reset_prefix_cache()
    assert result.all_ok and set(result.ok) == set(urls), result

    async def run() -> Any:
        async with AsyncFleet(urls, **tls) as afleet:
            return await afleet.version()

    versions = asyncio.run(run())
    assert {url: v.frontend for url, v in versions.ok.items()} == {
        rust_frontend.base_url: "rust",
        rust_tls.base_url: "rust",
        python_tls.base_url: "python",
    }


def test_the_command_line_with_cacert_cert_and_key(
    tls_frontend: Frontend, tls_certificates: Certificates
) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR", "VLLM_DEVCLIENT_URL")
    }
    tls = [
        "--cacert",
        str(tls_certificates.ca),
        "--cert",
        str(tls_certificates.client),
        "--key",
        str(tls_certificates.client_key),
    ]
    proc = subprocess.run(
        [CLI, "--url", tls_frontend.base_url, *tls, "-o", "json", "version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    target = json.loads(proc.stdout)["targets"][tls_frontend.base_url]
    assert target["ok"] and target["result"]["version"]
    assert (target["result"]["rust_frontend_version"] is not None) == (tls_frontend.frontend == "rust")
