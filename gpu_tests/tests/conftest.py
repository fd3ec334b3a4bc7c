"""The GPU suite's CPU tests: the campaign's planning, measuring (against a fake server), judging, reports and
tables, without a GPU. `python -m pytest gpu_tests/tests` (part of `make test`)."""

from __future__ import annotations

import pytest

from vllm_devclient.gsm8k import SAMPLE_DIR

# GSM8K for the tests: the sample in the package (50 test, 10 train items), never a folder outside the repo.
GSM8K_DIR = SAMPLE_DIR


@pytest.fixture(autouse=True)
def _httpx_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same transport as the unit suite (tests/conftest.py): the checks' clients send through httpx.
    monkeypatch.setenv("VLLM_DEVCLIENT_TRANSPORT", "httpx")
