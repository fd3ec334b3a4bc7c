"""Load on the check's server: the reset under load (vLLM #48102's stale ``transfer_jobs``: a full reset while
requests run), and many requests in flight at once (the Simple connector's races need 64 and 256).

The sequence runs on ``FakeServer``; ``ServerIO`` runs against the real Python frontend over a scripted
engine that holds the generation requests, so what is in flight is what the engine holds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_tests.offload_check.case import measure_and_judge
from gpu_tests.offload_check.probe_files import GroupLayout
from gpu_tests.offload_check.probes import Probe, load_probes
from gpu_tests.offload_check.rates import failure_rate, failure_rates
from gpu_tests.offload_check.report import OffloadCheckReport
from gpu_tests.offload_check.server_io import LOAD_RESETS, ServerIO
from gpu_tests.offload_check.settings import CheckSettings
from vllm_devclient import InvalidParameterError
from vllm_devclient.testing import Frontend, Hang, Return, ScriptedEngine

from .offload_fake import FakeServer
from .test_offload_check import EXPECT, _probes

FULL = [GroupLayout(index=0, kind="full", block_size=16)]


def test_load_probes_are_long_and_each_starts_a_prefix_of_its_own() -> None:
    probes = list(_probes())
    load = load_probes(probes, 12, 1000)
    assert len(load) == 12 and {p.length for p in load} == {1000} and {p.kind for p in load} == {"load"}
    firsts = [p.token_ids[:64] for p in load]
    assert len(set(firsts)) == 12  # no two share a first block
    assert not set(firsts) & {p.token_ids[:64] for p in probes}  # nor one with a probe
    assert load_probes(probes, 0, 1000) == [] and len(load_probes(probes, 3, 50_000)) == 3  # tiled


def _check(server: FakeServer, **settings: Any) -> OffloadCheckReport:
    kw: dict[str, Any] = {"reference_digests": True, "mutation_expectations": EXPECT, **settings}
    return measure_and_judge(server, CheckSettings(**kw), list(_probes()), FULL)


def test_the_reset_under_load_ends_each_clean_pass_and_a_correct_connector_passes_it() -> None:
    server = FakeServer(layout=FULL, bare_200=True, gpu_events=True)
    report = _check(server, iterations=2, reset_under_load=6, load_length=200)
    assert report.status == "passed", report.summary()
    for it in report.iterations:
        load = it.runs["load"]
        assert len(load.answers) == 6 and load.failed_requests == 0 and load.concurrency is None
        assert [r.message for r in it.load_resets] == ["a bare 200"]  # fired under load, not judged
        assert it.barriers["after_load"].confirmed_by == "AllBlocksCleared"
        assert "after_load by AllBlocksCleared" in it.assertion("resets_honoured").message
    assert server.load_resets == 2 and {p.kind for p in report.probes} >= {"load"}
    assert "reset under load: 6 prompts, 0 failed; resets fired: a bare 200" in report.summary()
    # Off by default, and never in a mutation's pass.
    plain = _check(FakeServer(layout=FULL), iterations=1)
    assert all("load" not in it.runs and "after_load" not in it.barriers for it in plain.iterations)


def test_a_reset_under_load_that_kills_the_engine_ends_the_case_with_the_failed_requests_kept() -> None:
    """vLLM 0.22.0-0.25.1: the running requests' stale jobs kill the engine once they finish."""
    server = FakeServer(layout=FULL, bare_200=True, gpu_events=True, dies_after_load_reset=True)
    report = _check(server, iterations=2, reset_under_load=6, load_length=200)
    (it,) = report.iterations  # the case stops with the engine
    assert it.runs["load"].failed_requests == 3 and it.error is not None and "engine died" in it.error
    assert "after_load" not in it.barriers and it.status == "error" and report.status == "error"
    assert "reload" in it.runs  # what the pass measured before the load stays


def test_the_cli_turns_the_reset_under_load_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpu_tests.offload_check.cli as check_cli

    seen: list[dict[str, Any]] = []

    def run_case(case: Any, **kwargs: Any) -> OffloadCheckReport:
        seen.append(kwargs)
        raise InvalidParameterError("seen")  # the command says it and exits 2: nothing is started

    monkeypatch.setattr(check_cli, "run_case", run_case)
    assert check_cli.main(["--reset-under-load", "64"]) == 2
    assert seen[-1]["reset_under_load"] == 64
    assert check_cli.main([]) == 2 and seen[-1]["reset_under_load"] == 0
    # The runner's case arguments carry it (the history scenarios turn it on), and parse back.
    from gpu_tests.runner.jobs import case_args

    def args(**kw: Any) -> tuple[str, ...]:
        common = {"report_dir": Path("r"), "gsm8k_dir": None, "server_args": "", "iterations": 2}
        return case_args("tiny-llama", "offloading", "python", **common, **kw)

    on = args(reset_under_load=64, concurrency=0)
    assert check_cli.main(list(on)) == 2 and seen[-1]["reset_under_load"] == 64
    assert seen[-1]["concurrency"] is None  # 0: every run at once
    assert "--reset-under-load" not in args()


# ---------------------------------------------------------------- ServerIO against a real frontend


@pytest.fixture
def frontend(offload_python: Frontend) -> Iterator[Frontend]:
    """The session's Python offload frontend (gpu_tests/tests/conftest.py), its engine reset after."""
    yield offload_python
    offload_python.engine.reset()


def _probes_n(n: int, length: int = 24) -> list[Probe]:
    return [Probe(f"q{i:03d}", "gsm8k", tuple(range(10 + i, 10 + i + length)), i, 1, 2) for i in range(n)]


def _in_background(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


def _held(engine: ScriptedEngine, count: int, deadline: float = 20.0) -> int:
    end = time.monotonic() + deadline
    while len(engine.held_request_ids) < count and time.monotonic() < end:
        time.sleep(0.02)
    return len(engine.held_request_ids)


@pytest.mark.parametrize(("concurrency", "n", "expect"), [(None, 256, 256), (64, 96, 64)])
def test_the_check_holds_as_many_requests_in_flight_as_it_is_asked(
    frontend: Frontend, concurrency: int | None, n: int, expect: int
) -> None:
    """256 at once is more than the client's own pool of 100: the check widens the pool to the load."""
    engine = frontend.engine
    assert engine is not None
    engine.reset()
    engine.script("add_request", Hang())
    io = ServerIO(frontend.base_url, num_shots=0, concurrency=concurrency, model=None)
    try:
        thread, out = _in_background(lambda: io.run("reload", _probes_n(n)))
        assert _held(engine, expect) == expect
        time.sleep(0.3)
        assert len(engine.held_request_ids) == expect  # and never more than asked
        engine.script("add_request", Return())
        engine.release_requests()
        thread.join(60)
    finally:
        io.close()
    (run,) = out
    assert len(run.answers) == n and run.failed_requests == 0 and run.concurrency == concurrency


def test_server_io_fires_full_resets_while_the_load_runs_and_records_each_answer(
    frontend: Frontend,
) -> None:
    engine = frontend.engine
    assert engine is not None
    engine.reset()
    engine.script("add_request", Hang())
    io = ServerIO(frontend.base_url, num_shots=0, concurrency=1, model=None)
    try:
        thread, out = _in_background(lambda: io.run_resetting("load", _probes_n(8, 200)))
        engine.wait_for_call("reset_prefix_cache", deadline=20.0, count=LOAD_RESETS)
        # Every reset went out while all eight requests were held (running), none after they finished.
        assert len(engine.held_request_ids) == 8
        engine.script("add_request", Return())
        engine.release_requests()
        thread.join(60)
    finally:
        io.close()
    (result,) = out
    run, fired = result
    assert len(run.answers) == 8 and run.failed_requests == 0 and run.concurrency is None
    assert len(fired) == LOAD_RESETS and all(r.external and r.confirmed_by == "success" for r in fired)
    resets = engine.calls_for("reset_prefix_cache")
    assert len(resets) == LOAD_RESETS


def _race() -> OffloadCheckReport:
    """A reload corrupted in passes 2 and 4 of 5, the fifth ended by the server going away."""
    server = FakeServer(layout=FULL)

    def between(report: OffloadCheckReport) -> None:
        done = len(report.iterations)
        server.corrupt = {"q03"} if done + 1 in (2, 4) else set()
        server.raise_in = "reload" if done + 1 == 5 else None

    settings = CheckSettings(reference_digests=True, iterations=5)
    return measure_and_judge(server, settings, list(_probes()), FULL, on_iteration=between)


def test_a_race_that_fails_some_passes_reads_as_k_of_n_iterations() -> None:
    """Each assertion's rate counts the passes that evaluated it, and names the ones that failed."""
    report = _race()
    assert [it.status for it in report.iterations] == ["passed", "failed", "passed", "failed", "error"]
    rate = failure_rate(report, "kv_bytes_identical")
    assert (rate.failed, rate.evaluated, rate.iterations, rate.errored) == (2, 4, 5, 1)
    assert rate.failed_in == ["clean-2", "clean-4"] and rate.rate == 0.5
    assert str(rate) == "kv_bytes_identical: 2 of 4 iterations failed (1 of 5 ended in an error)"
    rates = failure_rates(report)
    assert rates["answers_unchanged"].failed_in == ["clean-2", "clean-4"]
    assert rates["reload_proven"].failed == 0 and rates["reload_proven"].evaluated == 4
    assert failure_rate(report, "no_such_assertion").evaluated == 0
    assert failure_rate(report, "no_such_assertion").rate is None


def test_the_command_prints_the_rates_of_a_case_of_several_passes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import gpu_tests.offload_check.cli as check_cli

    report = _race()
    monkeypatch.setattr(check_cli, "run_case", lambda case, **kw: report)
    assert check_cli.main(["--iterations", "5"]) == 2  # the fifth pass's error
    out = capsys.readouterr().out.splitlines()
    rates = "kv_bytes_identical: 2 of 4 iterations failed (1 of 5 ended in an error)"
    assert out[-1].startswith("  rates: ") and rates in out[-1]
