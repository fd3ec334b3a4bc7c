"""watchdog() on real frontends (one killed mid-way) and on a misbehaving server: the typed error names the
server and its last error, the asyncio surfaces cancel the caller's work, the blocking ones raise at the
block's end, and no thread or task is left behind."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vllm_devclient import (
    APIConnectionError,
    AsyncDevClient,
    AsyncFleet,
    DevClient,
    Fleet,
    InternalServerError,
    ServerUnhealthyError,
)
from vllm_devclient.testing.frontends import Frontend, RustFrontend
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import Answer

pytestmark = pytest.mark.frontend

INTERVAL, FAILURES, CHECK_TIMEOUT = 0.1, 3, 2.0
# Generous: the checks of a killed server each wait out the client's retries on a shared, loaded CPU.
DEADLINE = 60.0


def _watchdog_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "vllm-devclient-watchdog"]


def _until(condition: object, what: str) -> None:
    end = time.monotonic() + DEADLINE
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < end, f"{what} within {DEADLINE} s"
        time.sleep(0.05)


@pytest.fixture
def doomed(tiny_model_dir: Path) -> Iterator[Frontend]:
    """A Rust frontend of its own (the test kills it)."""
    with RustFrontend(model_dir=tiny_model_dir) as fe:
        yield fe


def _kill_later(fe: Frontend, after: float) -> threading.Thread:
    def kill() -> None:
        time.sleep(after)
        fe.stop()

    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    return killer


def test_a_healthy_server_is_watched_and_left_alone(frontend: Frontend) -> None:
    with (
        DevClient(frontend.base_url) as client,
        client.watchdog(INTERVAL, FAILURES, request_timeout=CHECK_TIMEOUT) as watch,
    ):
        _until(lambda: watch.checks >= 5, "five checks")
        assert _watchdog_threads()
    assert not watch.tripped and set(watch.in_a_row.values()) == {0}
    assert _watchdog_threads() == []


def test_a_killed_server_trips_the_blocking_client_at_its_next_check(doomed: Frontend) -> None:
    seen: list[ServerUnhealthyError] = []
    with DevClient(doomed.base_url) as client:
        with (
            pytest.raises(ServerUnhealthyError) as caught,
            client.watchdog(INTERVAL, FAILURES, request_timeout=CHECK_TIMEOUT, on_trip=seen.append) as watch,
        ):
            _until(lambda: watch.checks >= 2, "two checks")
            _kill_later(doomed, 0.2).join()
            while True:  # the caller's work, checking the watchdog as it goes
                watch.check()
                time.sleep(0.05)
    err = caught.value
    assert err.url == doomed.base_url and err.failures == 3 and isinstance(err.last, APIConnectionError)
    assert doomed.base_url in str(err) and seen == [err]
    assert _watchdog_threads() == []


def test_the_blocking_client_raises_at_the_blocks_end_when_it_never_checked(doomed: Frontend) -> None:
    with DevClient(doomed.base_url) as client, pytest.raises(ServerUnhealthyError) as caught:
        with client.watchdog(INTERVAL, FAILURES, request_timeout=CHECK_TIMEOUT) as watch:
            doomed.stop()
            _until(lambda: watch.tripped, "the watchdog to trip")
    assert caught.value.url == doomed.base_url
    assert _watchdog_threads() == []


def test_a_killed_server_cancels_the_async_callers_work(doomed: Frontend) -> None:
    async def main() -> tuple[ServerUnhealthyError, int, int]:
        async with AsyncDevClient(doomed.base_url) as client:
            killer = _kill_later(doomed, 0.5)
            start = time.monotonic()
            with pytest.raises(ServerUnhealthyError) as caught:
                async with client.watchdog(INTERVAL, FAILURES, request_timeout=CHECK_TIMEOUT):
                    await asyncio.sleep(3600)  # the work: only the watchdog ends it
            assert time.monotonic() - start < DEADLINE
            await asyncio.to_thread(killer.join)
            me = asyncio.current_task()
            assert me is not None
            return caught.value, getattr(me, "cancelling", lambda: 0)(), len(asyncio.all_tasks() - {me})

    err, cancelling, others = asyncio.run(main())
    assert err.url == doomed.base_url and isinstance(err.__cause__, asyncio.CancelledError)
    assert cancelling == 0, "the watchdog's cancellation was not taken back"
    assert others == 0, "a task was left behind"


def test_a_misbehaving_health_trips_only_after_failures_in_a_row(server: MisbehavingServer) -> None:
    # Two failures, a pass, two failures, a pass ...: never three in a row.
    flaky = [Answer(500, json={"error": "busy"}), Answer(500, json={"error": "busy"}), Answer(200)]
    server.script("/health", flaky * 4 + [Answer(500, json={"error": "gone"})])
    with DevClient(server.base_url, max_retries=0) as client, pytest.raises(ServerUnhealthyError) as caught:
        with client.watchdog(interval=0.05, failures=3) as watch:
            _until(lambda: watch.tripped, "the watchdog to trip")
    err = caught.value
    assert isinstance(err.last, InternalServerError) and "gone" in str(err.last)
    assert len(server.requests) == 12 + 3  # the flaky dozen never tripped it; the next three did
    assert _watchdog_threads() == []


def test_a_block_that_fails_on_its_own_raises_its_own_error(server: MisbehavingServer) -> None:
    server.script("/health", Answer(200))
    with DevClient(server.base_url) as client, pytest.raises(KeyError, match="mine"):
        with client.watchdog(interval=0.05, failures=1):
            raise KeyError("mine")
    assert _watchdog_threads() == []


def test_a_fleet_names_the_server_that_went_down(
    python_frontend: Frontend, rust_frontend: Frontend, doomed: Frontend
) -> None:
    urls = [python_frontend.base_url, rust_frontend.base_url, doomed.base_url]
    before = threading.active_count()
    with Fleet(urls) as fleet, pytest.raises(ServerUnhealthyError) as caught:
        with fleet.watchdog(INTERVAL, FAILURES, request_timeout=CHECK_TIMEOUT) as watch:
            _until(lambda: watch.checks >= 6, "two rounds of checks")
            doomed.stop()
            _until(lambda: watch.tripped, "the watchdog to trip")
            assert watch.in_a_row[python_frontend.base_url] == 0
    assert caught.value.url == doomed.base_url
    assert threading.active_count() <= before  # no thread of its own; the fleet's loop thread is gone


def test_an_async_fleet_cancels_the_callers_work(
    python_frontend: Frontend, rust_frontend: Frontend, doomed: Frontend
) -> None:
    urls = [python_frontend.base_url, rust_frontend.base_url, doomed.base_url]

    async def main() -> tuple[ServerUnhealthyError, int]:
        async with AsyncFleet(urls) as fleet:
            killer = _kill_later(doomed, 0.5)
            with pytest.raises(ServerUnhealthyError) as caught:
                async with fleet.watchdog(INTERVAL, FAILURES, request_timeout=CHECK_TIMEOUT):
                    await asyncio.sleep(3600)
            await asyncio.to_thread(killer.join)
            me = asyncio.current_task()
            return caught.value, len(asyncio.all_tasks() - {me})

    err, others = asyncio.run(main())
    assert err.url == doomed.base_url and others == 0
