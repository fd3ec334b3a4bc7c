"""Failure accounting as upstream's GSM8K evaluator does it, against both real frontends.

The scripted engine fails chosen generation requests (``engine.script("add_request", ...)`` with
``Raise``): each frontend answers 500, the evaluator counts the question as an invalid (empty) answer and
says how many failed, and the check turns a run with more than 5% failed requests into an *error*, not a
pass. The frontends and the evaluator are the real ones; only the engine is scripted.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vllm_devclient.offload_check.check import run_check
from vllm_devclient.offload_check.gsm8k import GSM8KResult, build_prompts, evaluate_gsm8k, load_gsm8k
from vllm_devclient.offload_check.judge import CheckSettings, requests_ok, status_of
from vllm_devclient.testing.engine import Raise, Return, ScriptedEngine
from vllm_devclient.testing.frontends import Frontend, PythonFrontend, RustFrontend

from .conftest import GSM8K_DIR
from .test_offload_check import FakeServer

N = 20  # one failure is 5% (allowed), two are 10% (an error)


@pytest.fixture(scope="module", params=["rust", "python"])
def frontend(request: pytest.FixtureRequest) -> Iterator[Frontend]:
    engine = ScriptedEngine(token_ids=(19, 26), max_model_len=2048)
    cls = RustFrontend if request.param == "rust" else PythonFrontend
    with cls(engine=engine, max_model_len=2048) as fe:
        yield fe


def _run(frontend: Frontend, failing: set[int]) -> GSM8KResult:
    engine = frontend.engine
    assert engine is not None
    engine.reset()
    # One request at a time, in question order: the i-th ADD is question i.
    engine.script("add_request", [Raise("boom") if i in failing else Return() for i in range(N)] + [Return()])
    train, test = load_gsm8k(data_dir=GSM8K_DIR)
    prompts = build_prompts(train, test, N, num_shots=1)  # short prompts: the tiny tokenizer is verbose
    return evaluate_gsm8k(frontend.base_url, prompts=prompts, max_tokens=2, concurrency=1, progress=False)


def test_a_failed_request_is_an_invalid_answer_with_the_count(frontend: Frontend) -> None:
    result = _run(frontend, {3})
    assert result.failed_requests == 1 and result.failed_rate == 1 / N
    failed = result.questions[3]
    assert failed.text == "" and failed.prediction is None and not failed.correct
    assert failed.error is not None and "500" in failed.error
    assert all(q.error is None and q.text == "18" for i, q in enumerate(result.questions) if i != 3)
    # Upstream's accounting: the failed request counts in the invalid rate (no other answer is invalid).
    assert result.invalid_rate == pytest.approx(1 / N)
    right = sum(q.label == 18 for i, q in enumerate(result.questions) if i != 3)  # every answer is "18"
    assert right >= 1 and result.accuracy == pytest.approx(right / N)
    assert requests_ok({"cold": result}, 0.05).passed  # exactly 5%: allowed


def test_more_than_five_percent_failed_makes_the_case_an_error(frontend: Frontend) -> None:
    result = _run(frontend, {2, 7})
    assert result.failed_requests == 2
    verdict = requests_ok({"cold": result}, 0.05)
    assert not verdict.passed and "over the limit" in verdict.message and "500" in verdict.message
    assert status_of([verdict]) == "error"


def test_the_check_reports_failed_requests_as_an_error_not_a_failure() -> None:
    # A healthy offload in every other respect: only the failed requests decide the status.
    server = FakeServer(fail={"reload": {0}})
    report = run_check(server, CheckSettings(expected_frontend="python"), num_questions=8)
    assert report.runs["reload"].failed_requests == 1
    assert report.status == "error" and not report.passed
    assert not report.assertion("requests_ok").passed
    assert report.runs["reload"].errors == ["InternalServerError: 500"]


def test_a_check_that_stops_half_way_keeps_its_partial_result() -> None:
    server = FakeServer(raise_in="reload")
    report = run_check(server, CheckSettings(expected_frontend="python"), num_questions=8)
    assert report.status == "error" and report.error is not None and "server went away" in report.error
    assert set(report.runs) == {"cold", "warm"}  # what was measured before the failure is kept
    assert report.barriers["gpu_only"].attempts == 2 and "cold" in report.windows
    assert report.assertions == [] and report.timings["check_s"] >= 0
