"""Failure accounting as upstream's GSM8K evaluator does it, against both real frontends.

The scripted engine fails chosen generation requests (``engine.script("add_request", ...)`` with ``Raise``):
each frontend answers 500, the check's run counts the probe as an invalid (empty) answer and says how many
failed, and a run with more than 5% failed requests makes the iteration an *error*, not a pass. The frontends,
the client and the check's server I/O are the real ones; only the engine is scripted.
"""

from __future__ import annotations

import pytest

from gpu_tests.offload_check.assertions import requests_ok
from gpu_tests.offload_check.probes import Probe
from gpu_tests.offload_check.report import Run
from gpu_tests.offload_check.server_io import ServerIO
from vllm_devclient.testing import Frontend, Raise, Return

N = 20  # one failure is 5% (allowed), two are 10% (an error)


@pytest.fixture
def frontend(offload_frontend: Frontend) -> Frontend:
    """Each of the session's offload frontends (gpu_tests/tests/conftest.py)."""
    return offload_frontend


def _run(frontend: Frontend, failing: set[int]) -> Run:
    engine = frontend.engine
    assert engine is not None
    engine.reset()
    # One request at a time, in probe order: the i-th ADD is probe i.
    engine.script("add_request", [Raise("boom") if i in failing else Return() for i in range(N)] + [Return()])
    probes = [Probe(f"q{i:02d}", "gsm8k", tuple(range(10 + i, 40 + i)), i, 18, 2) for i in range(N)]
    io = ServerIO(frontend.base_url, num_shots=0)
    try:
        return io.run("cold", probes)
    finally:
        io.close()


def test_a_failed_request_is_an_invalid_answer_with_the_count(frontend: Frontend) -> None:
    run = _run(frontend, {3})
    assert run.failed_requests == 1
    failed = run.answers[3]
    assert failed.text is None and failed.prediction is None
    assert failed.error is not None and "500" in failed.error
    assert all(a.error is None and a.output_tokens == 2 for i, a in enumerate(run.answers) if i != 3)
    # Every other answer is "18", the label: accuracy counts the failed request as wrong, as upstream does.
    assert run.accuracy == pytest.approx((N - 1) / N)
    assert requests_ok({"cold": run}, 0.05).passed  # exactly 5%: allowed


def test_more_than_five_percent_failed_is_over_the_limit(frontend: Frontend) -> None:
    run = _run(frontend, {2, 7})
    assert run.failed_requests == 2
    verdict = requests_ok({"cold": run}, 0.05)
    assert not verdict.passed and "over the limit" in verdict.message and "500" in verdict.message
