"""The GPU suite's CPU tests: the campaign's planning, measuring (against a fake server), judging, reports and
tables, without a GPU. `python -m pytest gpu_tests/tests` (part of `make test`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# GSM8K for the tests: $VLLM_DEVCLIENT_GSM8K_DIR, else the shared copy beside the checkout (never downloaded).
_SHARED_GSM8K = Path(__file__).resolve().parents[3] / "shared" / "data" / "gsm8k"
GSM8K_DIR = Path(os.environ.get("VLLM_DEVCLIENT_GSM8K_DIR") or _SHARED_GSM8K)


@pytest.fixture(autouse=True)
def _httpx_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same transport as the unit suite (tests/conftest.py): the checks' clients send through httpx.
    monkeypatch.setenv("VLLM_DEVCLIENT_TRANSPORT", "httpx")


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    # Retries sleep for real; keep the suite quick without changing the policy's shape.
    from vllm_devclient.operations import RetryPolicy

    monkeypatch.setattr(RetryPolicy, "delay", lambda self, retry: 0.001)
