"""The watchdog contexts' edges against mock transports (the real frontends and a misbehaving server drive
them in contract_tests/test_watchdog.py): a block that swallows the cancellation, a cancellation of the
caller's own, a failing on_trip, a healthy fleet; never a task or thread left behind."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from vllm_devclient import AsyncDevClient, AsyncFleet, DevClient, ServerUnhealthyError

URL = "http://a.test"


def health(status: int) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/health"
        return httpx.Response(status, json={"error": {"message": "engine busy"}} if status != 200 else None)

    return httpx.MockTransport(answer)


def async_client(status: int) -> AsyncDevClient:
    return AsyncDevClient(URL, http_client=httpx.AsyncClient(transport=health(status)), max_retries=0)


def test_a_block_that_swallows_the_cancellation_still_raises_the_watchdogs_error() -> None:
    async def main() -> tuple[ServerUnhealthyError, int]:
        async with async_client(500) as client:
            with pytest.raises(ServerUnhealthyError) as caught:
                async with client.watchdog(0.01, 2):
                    try:
                        await asyncio.sleep(3600)
                    except asyncio.CancelledError:
                        pass  # the caller's code ignores it: the context must not
            return caught.value, len(asyncio.all_tasks()) - 1

    err, others = asyncio.run(main())
    assert err.url == URL and err.failures == 2 and others == 0


def test_a_cancellation_of_the_callers_own_is_not_taken_for_the_watchdogs() -> None:
    async def work(client: AsyncDevClient, entered: asyncio.Event) -> None:
        async with client.watchdog(0.01, 1000):
            entered.set()
            await asyncio.sleep(3600)

    async def main() -> int:
        async with async_client(500) as client:
            entered = asyncio.Event()
            task = asyncio.ensure_future(work(client, entered))
            await entered.wait()
            await asyncio.sleep(0.05)  # a few failed checks, far from tripping
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return len(asyncio.all_tasks()) - 1

    assert asyncio.run(main()) == 0


def test_a_failing_on_trip_is_raised_at_the_blocks_end_not_lost() -> None:
    def on_trip(error: ServerUnhealthyError) -> None:
        raise RuntimeError("the trainer's abort hook failed")

    client = DevClient(URL, http_client=httpx.Client(transport=health(503)), max_retries=0)
    with client, pytest.raises(RuntimeError, match="abort hook failed"):
        with client.watchdog(0.01, 1, on_trip=on_trip) as watch:
            while not watch.tripped:
                threading.Event().wait(0.01)
    assert not [t for t in threading.enumerate() if t.name == "vllm-devclient-watchdog"]


def test_a_healthy_async_fleet_counts_every_target_and_leaves_no_task() -> None:
    urls = ["http://a.test", "http://b.test", "http://c.test"]

    async def main() -> tuple[bool, int]:
        fleet = AsyncFleet(urls, http_client=httpx.AsyncClient(transport=health(200)), max_retries=0)
        async with fleet, fleet.watchdog(0.01, 1) as watch:
            for _ in range(1000):  # about 10 s at most
                if watch.checks >= 9:
                    break
                await asyncio.sleep(0.01)
        counted = watch.checks >= 9 and set(watch.in_a_row) == set(urls) and not watch.tripped
        return counted, len(asyncio.all_tasks()) - 1

    assert asyncio.run(main()) == (True, 0)
