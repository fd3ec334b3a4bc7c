"""The check's resets on every release: what confirms each one (``success``, else the stream's
``AllBlocksCleared`` where vLLM before 0.26 answers a bare 200), a refused full reset as evidence, and the
tier that a full reset leaves serving.

The barrier is sans-IO (``resets.confirm_reset``): the first tests feed it answers by hand; the check's tests
run it inside ``FakeServer`` (tests/offload_fake.py); the last ones run ``ServerIO`` against a mocked bare-200
server and against the real Python and Rust frontends over a scripted engine whose reset raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import pytest
import respx

from gpu_tests.offload_check.case import measure_and_judge
from gpu_tests.offload_check.events import EventWatcher, GroupEventAccount
from gpu_tests.offload_check.probe_files import GroupLayout
from gpu_tests.offload_check.report import OffloadCheckReport, ResetResult
from gpu_tests.offload_check.resets import (
    Answered,
    Look,
    NotYet,
    Pause,
    Post,
    Refused,
    Seen,
    Step,
    confirm_reset,
)
from gpu_tests.offload_check.server_io import ServerIO
from gpu_tests.offload_check.settings import CheckSettings
from vllm_devclient.kv_events import AllBlocksCleared
from vllm_devclient.testing import Frontend, Raise, Return

from .offload_fake import FakeServer
from .test_offload_check import _probes

FULL = [GroupLayout(index=0, kind="full", block_size=16)]
REFUSAL = "SimpleCPUOffloadConnector does not support reset_cache()."


class Script:
    """Drives ``confirm_reset`` by hand: answers each Post from ``answers``, and the stream's count goes up
    by one on the step after each post in ``clears_after`` (1-based)."""

    def __init__(self, answers: Sequence[Any], clears_after: set[int], stream: bool = True) -> None:
        self.answers = list(answers)
        self.clears_after = clears_after
        self.stream = stream
        self.now = 0.0
        self.cleared = 0
        self.posts = 0
        self.effects: list[str] = []
        self.pending = False
        self.late = False  # the first pause brings an AllBlocksCleared

    def run(self, op: Any) -> ResetResult:
        answer: Any = None
        try:
            while True:
                effect = op.send(answer)
                self.effects.append(type(effect).__name__)
                answer = None
                if isinstance(effect, Post):
                    self.posts += 1
                    answer = self.answers[min(self.posts, len(self.answers)) - 1]
                    self.pending = self.posts in self.clears_after
                elif isinstance(effect, Step):
                    self.now += 0.01
                    if self.pending:
                        self.cleared += 1
                        self.pending = False
                elif isinstance(effect, Look):
                    answer = Seen(now=self.now, cleared=self.cleared if self.stream else None)
                elif isinstance(effect, Pause):
                    self.now += effect.seconds
                    self.cleared += self.late
                    self.late = False
        except StopIteration as stop:
            result: ResetResult = stop.value
            return result


BARE = Answered(None)


def test_a_bare_200_is_confirmed_by_the_all_blocks_cleared_the_next_step_brings() -> None:
    script = Script([BARE], clears_after={1})
    result = script.run(confirm_reset(external=True, deadline=5.0))
    assert result.outcome == "confirmed" and result.confirmed_by == "AllBlocksCleared"
    assert (result.attempts, result.engine_steps, result.external) == (1, 1, True)
    assert script.effects[:4] == ["Look", "Post", "Step", "Look"]


def test_a_success_answer_confirms_at_once_without_a_step() -> None:
    script = Script([Answered(True)], clears_after=set())
    result = script.run(confirm_reset(external=False, deadline=5.0))
    assert (result.outcome, result.confirmed_by, result.engine_steps) == ("confirmed", "success", 0)


def test_resets_that_fail_silently_are_sent_again_until_one_clears() -> None:
    """Blocks held: the release answers 200 to each reset and the pool clears nothing until the third."""
    script = Script([BARE, NotYet("502 from the gateway"), BARE], clears_after={3})
    result = script.run(confirm_reset(external=False, deadline=5.0))
    assert result.confirmed_by == "AllBlocksCleared" and result.attempts == 3 and result.engine_steps == 3


def test_a_late_event_confirms_the_reset_already_sent_without_sending_another() -> None:
    script = Script([BARE], clears_after=set())
    script.late = True  # the stream's event lands during the pause after the first step
    result = script.run(confirm_reset(external=False, deadline=5.0))
    assert result.confirmed_by == "AllBlocksCleared" and script.posts == 1 and result.attempts == 1


def test_nothing_confirms_a_bare_200_without_a_stream_and_it_is_never_success() -> None:
    script = Script([BARE], clears_after={1}, stream=False)
    result = script.run(confirm_reset(external=True, deadline=5.0))
    assert result.outcome == "unconfirmed" and result.confirmed_by is None
    assert "no KV-event stream" in result.message and not result.confirmed


def test_a_reset_nothing_confirms_ends_at_the_deadline_with_the_counts() -> None:
    script = Script([BARE], clears_after=set())
    result = script.run(confirm_reset(external=False, deadline=2.0))
    assert result.outcome == "unconfirmed" and script.now >= 2.0
    assert result.attempts == script.posts >= 3 and result.engine_steps >= 3
    assert f"{result.attempts} reset(s) sent" in result.message and "last answer a bare 200" in result.message


def test_a_refused_reset_is_a_result_with_the_status_and_the_servers_words() -> None:
    script = Script([Refused(500, REFUSAL)], clears_after=set())
    result = script.run(confirm_reset(external=True, deadline=5.0))
    assert (result.outcome, result.http_status, result.message) == ("refused", 500, REFUSAL)
    assert script.posts == 1


def test_the_sdk_barriers_one_try_counts_when_its_event_comes_with_the_first_step() -> None:
    script = Script([BARE], clears_after=set())
    script.pending = True  # the SDK's reset went out before the barrier was handed over
    result = script.run(confirm_reset(external=False, deadline=5.0, sent=1, cleared_before=0))
    assert result.confirmed_by == "AllBlocksCleared" and result.attempts == 1 and script.posts == 0


# ---------------------------------------------------------------- the check on older releases (FakeServer)


def _check(server: FakeServer, iterations: int = 2) -> OffloadCheckReport:
    settings = CheckSettings(reference_digests=True, iterations=iterations)
    return measure_and_judge(server, settings, list(_probes()), FULL)


def test_a_bare_200_release_passes_with_every_reset_confirmed_by_the_stream() -> None:
    report = _check(FakeServer(layout=FULL, bare_200=True, gpu_events=True, version_name="0.25.1"))
    assert report.status == "passed", report.summary()
    for it in report.iterations:
        assert {r.confirmed_by for r in it.barriers.values()} == {"AllBlocksCleared"}
        honoured = it.assertion("resets_honoured")
        assert honoured.passed and "full by AllBlocksCleared" in honoured.message
    # vLLM 0.26 says success itself: the same check names that signal instead.
    report = _check(FakeServer(layout=FULL), iterations=1)
    assert "full by success" in report.iterations[0].assertion("resets_honoured").message


def test_a_bare_200_release_without_the_stream_fails_every_reset_with_the_reason() -> None:
    report = _check(FakeServer(layout=FULL, bare_200=True), iterations=1)
    honoured = report.iterations[0].assertion("resets_honoured")
    assert (
        not honoured.passed
        and "not confirmed" in honoured.message
        and "no KV-event stream" in honoured.message
    )
    assert report.status == "failed"


def test_a_refused_full_reset_fails_with_its_status_and_words_and_keeps_the_measurements() -> None:
    """vLLM 0.20.2-0.23.0's Simple connector: ``reset_external`` answers 500 after the GPU part ran."""
    server = FakeServer(
        layout=FULL,
        connector="SimpleCPUOffloadConnector",
        bare_200=True,
        gpu_events=True,
        refuse_external=REFUSAL,
        version_name="0.23.0",
    )
    report = _check(server)
    first, second = report.iterations
    assert first.error is None and {"cold", "warm", "reload"} <= set(first.runs)
    assert first.barriers["full"].outcome == "refused" and first.barriers["gpu_only"].confirmed
    honoured = first.assertion("resets_honoured")
    assert (
        not honoured.passed
        and f"full reset (reset_external) refused: HTTP 500: {REFUSAL}" in honoured.message
    )
    assert first.assertion("kv_bytes_identical").passed  # the rest is judged as measured
    # The tier the refused reset kept serves the next cold run: reload_proven's own evidence.
    proven = second.assertion("reload_proven")
    assert not proven.passed and "grew in the cold run" in proven.message
    assert report.status == "failed"


def test_a_full_reset_that_says_success_and_keeps_the_tier_fails_reload_proven() -> None:
    """vLLM 0.20.2's OffloadingConnector: the reset is confirmed (the GPU pool cleared), its tier serves."""
    server = FakeServer(layout=FULL, bare_200=True, gpu_events=True, keeps_cpu_tier=True)
    report = _check(server)
    first, second = report.iterations
    assert first.assertion("resets_honoured").passed and second.assertion("resets_honoured").passed
    # The first pass's second cold run (after its full reset) and the next pass's cold run load from it.
    assert "external prefix-cache hits grew in the cold2 run" in first.assertion("reload_proven").message
    proven = second.assertion("reload_proven")
    assert not proven.passed and "external prefix-cache hits grew in the cold run" in proven.message
    assert report.status == "failed"
    fixed = _check(FakeServer(layout=FULL, bare_200=True, gpu_events=True))
    assert all(it.assertion("reload_proven").passed for it in fixed.iterations)


def test_resets_held_a_while_are_confirmed_after_the_tries_it_took() -> None:
    report = _check(FakeServer(layout=FULL, bare_200=True, gpu_events=True, held_resets=2), iterations=1)
    full = report.iterations[0].barriers["full"]
    assert full.confirmed and full.attempts == 3 and report.status == "passed"


# ---------------------------------------------------------------- ServerIO over HTTP


class _Batches:
    """A KV-events subscriber whose AllBlocksCleared comes with the first engine step after a reset."""

    def __init__(self) -> None:
        self.queue: list[Any] = []

    def poll(self, timeout: float = 0.0) -> Any:
        return self.queue.pop(0) if self.queue else None

    def close(self) -> None:
        pass


def _uvicorn(status: int, **kw: Any) -> httpx.Response:
    return httpx.Response(status, headers={"server": "uvicorn"}, **kw)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no-stream"])
def test_server_io_confirms_a_bare_200_by_the_stream_after_the_sdk_barrier_refuses(stream: bool) -> None:
    batches = _Batches()
    watcher = EventWatcher(batches, GroupEventAccount()) if stream else None
    reset_calls: list[int] = []
    pending: list[bool] = []  # a reset that went through, its AllBlocksCleared out with the next step

    def reset(request: httpx.Request) -> httpx.Response:
        reset_calls.append(1)
        pending.append(True)
        return _uvicorn(200)

    def step(request: httpx.Request) -> httpx.Response:
        if pending:
            batches.queue.append(type("Batch", (), {"events": [AllBlocksCleared()]})())
            pending.clear()
        return _uvicorn(200, json={"choices": [{"text": "x"}]})

    with respx.mock(base_url="http://vllm.test", assert_all_called=False) as mock:
        mock.post("/reset_prefix_cache").mock(side_effect=reset)
        mock.post("/v1/completions").mock(side_effect=step)
        io = ServerIO("http://vllm.test", num_shots=0, model="tiny", watcher=watcher, barrier_timeout=1.0)
        try:
            first = io.reset_prefix_cache(True)
            second = io.reset_prefix_cache(False)
        finally:
            io.close()
    if not stream:
        assert first.outcome == "unconfirmed" and "no KV-event stream" in first.message
        return
    assert io.bare_200 and first.confirmed_by == "AllBlocksCleared" and first.attempts == 1
    # Once known, the next reset goes to the stream's barrier at once: one reset sent, not two.
    assert second.confirmed_by == "AllBlocksCleared" and second.attempts == 1 and len(reset_calls) == 2
    assert watcher is not None and watcher.account.cleared == 2


def test_an_earlier_resets_late_event_never_confirms_the_next_reset() -> None:
    """A reset fired under load cleared the pool once the requests had gone; its AllBlocksCleared waits for
    the next step. The next reset finds blocks held and clears nothing: it must end unconfirmed."""
    batches = _Batches()
    watcher = EventWatcher(batches, GroupEventAccount())
    pending = [1]  # the earlier reset's event, published with the next step

    def step(request: httpx.Request) -> httpx.Response:
        if pending[0]:
            batches.queue.append(type("Batch", (), {"events": [AllBlocksCleared()]})())
            pending[0] = 0
        return _uvicorn(200, json={"choices": [{"text": "x"}]})

    with respx.mock(base_url="http://vllm.test", assert_all_called=False) as mock:
        mock.post("/reset_prefix_cache").mock(return_value=_uvicorn(200))  # held: clears nothing
        mock.post("/v1/completions").mock(side_effect=step)
        io = ServerIO("http://vllm.test", num_shots=0, model="tiny", watcher=watcher, barrier_timeout=0.3)
        io.bare_200 = True
        try:
            result = io.reset_prefix_cache(True)
        finally:
            io.close()
    assert result.outcome == "unconfirmed" and "no AllBlocksCleared" in result.message
    assert watcher.account.cleared == 1  # the earlier reset's, seen before this one was sent


@pytest.fixture
def frontend(offload_frontend: Frontend) -> Frontend:
    """Each of the session's offload frontends (gpu_tests/tests/conftest.py)."""
    return offload_frontend


def test_server_io_reports_a_refused_full_reset_and_a_confirmed_one(frontend: Frontend) -> None:
    engine = frontend.engine
    assert engine is not None
    engine.reset()
    engine.script("reset_prefix_cache", [Raise(REFUSAL), Return(True)])
    io = ServerIO(frontend.base_url, num_shots=0, barrier_timeout=5.0)
    try:
        refused = io.reset_prefix_cache(True)
        done = io.reset_prefix_cache(True)
    finally:
        io.close()
    assert refused.outcome == "refused" and refused.http_status == 500 and REFUSAL in refused.message
    assert done.outcome == "confirmed" and done.confirmed_by == "success"


def test_a_reset_is_never_confirmed_by_default_and_a_stored_sdk_barrier_result_reads_as_success() -> None:
    with pytest.raises(ValueError, match="outcome"):
        ResetResult.model_validate({"attempts": 1, "engine_steps": 0, "elapsed_s": 0.1, "confirmed_by": None})
    old = ResetResult.model_validate({"attempts": 2, "engine_steps": 1, "elapsed_s": 0.1})
    assert old.confirmed and old.confirmed_by == "success"
