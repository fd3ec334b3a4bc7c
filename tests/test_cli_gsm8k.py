"""The `gsm8k` command: a score per target, one fan-out through the fleet, missing data or module."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from vllm_devclient.cli import ExitCode

from .cli_support import (
    A,
    B,
    cli_mock,  # noqa: F401  (the `mock` fixture: respx without a base URL)
    doc,
    invoke,
)


def test_gsm8k_scores_each_target_and_writes_the_report(mock: respx.MockRouter, tmp_path: Path) -> None:
    # The first two test answers are 18 and 3: A answers both right, B gets one wrong.
    def answer(url: str, right: bool) -> Any:
        calls = iter(["The answer is 18.", "It takes 3 bolts." if right else "I think 7."])

        def respond(request: httpx.Request) -> httpx.Response:
            usage = {"completion_tokens": 5, "prompt_tokens": 1, "total_tokens": 6}
            return httpx.Response(200, json={"choices": [{"text": next(calls), "index": 0}], "usage": usage})

        mock.post(f"{url}/v1/completions").mock(side_effect=respond)
        mock.get(f"{url}/v1/models").respond(200, json={"data": [{"id": "m", "object": "model"}]})

    answer(A, True)
    answer(B, False)
    report = tmp_path / "gsm8k.json"
    args = [
        "--num-questions",
        "2",
        "--concurrency",
        "1",
        "--sample",
        "--report",
        str(report),
    ]
    result = invoke("--url", f"{A}/v1", "--url", B, "--json", "gsm8k", *args)
    assert result.exit_code == 0, result.output
    data = doc(result)
    assert data["command"] == "gsm8k"
    assert [data["targets"][u]["result"]["accuracy"] for u in (A, B)] == [1.0, 0.5]
    assert json.loads(report.read_text())[B]["result"]["questions"][1]["prediction"] == 7


def test_gsm8k_fans_out_through_the_fleet(mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm_devclient.fleet import AsyncFleet

    mapped: list[tuple[str, ...]] = []
    original = AsyncFleet.map

    async def spy(self: AsyncFleet, fn: Any, **kw: Any) -> Any:
        mapped.append(self.urls)
        return await original(self, fn, **kw)

    monkeypatch.setattr(AsyncFleet, "map", spy)
    for url in (A, B):
        mock.get(f"{url}/v1/models").respond(200, json={"data": [{"id": "m", "object": "model"}]})
        mock.post(f"{url}/v1/completions").respond(200, json={"choices": [{"text": "18", "index": 0}]})
    args = ["--num-questions", "1", "--sample"]
    result = invoke("--url", A, "--url", B, "--json", "gsm8k", *args)
    assert result.exit_code == 0, result.output
    assert mapped == [(A, B)]  # one fan-out over every target, not a loop of its own


def test_gsm8k_without_its_data_is_one_error_of_the_command(tmp_path: Path) -> None:
    result = invoke("--json", "gsm8k", "--data-dir", str(tmp_path))
    data = json.loads(result.stdout)
    assert result.exit_code == data["exit_code"] != 0 and data["targets"] == {}
    assert data["error"]["type"] == "GSM8KDataError"


def test_gsm8k_without_its_module_exits_seven(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm_devclient.gsm8k", None)
    result = invoke("gsm8k", "--num-questions", "1")
    assert result.exit_code == ExitCode.UNAVAILABLE and "pip install 'vllm-devclient[gsm8k]'" in result.stderr


def test_gsm8k_reports_the_shots_its_prompts_were_built_with(mock: respx.MockRouter) -> None:
    sent: list[str] = []

    def respond(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content)["prompt"])
        return httpx.Response(200, json={"choices": [{"text": "18", "index": 0}]})

    mock.get(f"{A}/v1/models").respond(200, json={"data": [{"id": "m", "object": "model"}]})
    mock.post(f"{A}/v1/completions").mock(side_effect=respond)
    result = invoke("--url", A, "--json", "gsm8k", "--sample", "--num-questions", "1", "--num-shots", "2")
    assert result.exit_code == 0, result.output
    assert doc(result)["targets"][A]["result"]["num_shots"] == 2
    assert [p.count("Question: ") for p in sent] == [3]
