"""The offload barrier and the waits, sync and async."""

from __future__ import annotations

import itertools
import time

import httpx
import pytest
import respx

from vllm_devclient import (
    BarrierTimeoutError,
    BarrierUnsupportedError,
    InvalidParameterError,
    WaitTimeoutError,
)

from .conftest import Either, python, rust


def _completions(mock: respx.MockRouter) -> respx.Route:
    mock.get("/v1/models").mock(return_value=httpx.Response(200, json={"data": [{"id": "tiny"}]}))
    return mock.post("/v1/completions").mock(
        return_value=httpx.Response(200, json={"choices": [{"text": "x"}]})
    )


async def test_false_false_true_gives_three_attempts_two_steps(dc: Either, mock: respx.MockRouter) -> None:
    reset = mock.post("/reset_prefix_cache").mock(
        side_effect=[
            python(200, json={"success": False}),
            python(200, json={"success": False}),
            python(200, json={"success": True}),
        ]
    )
    steps = _completions(mock)
    result = await dc.reset_prefix_cache_until_success(deadline=5.0)
    assert (result.attempts, result.engine_steps) == (3, 2)
    assert reset.call_count == 3
    assert steps.call_count == 2
    assert reset.calls.last.request.url.params["reset_external"] == "false"
    assert 0 <= result.elapsed_s < 5.0


async def test_rust_conflict_counts_as_not_yet(dc: Either, mock: respx.MockRouter) -> None:
    mock.post("/reset_prefix_cache").mock(side_effect=[rust(409), rust(200, json={"success": True})])
    _completions(mock)
    result = await dc.reset_prefix_cache_until_success(deadline=5.0, reset_external=True)
    assert (result.attempts, result.engine_steps) == (2, 1)


async def test_no_stepping_when_asked(dc: Either, mock: respx.MockRouter) -> None:
    mock.post("/reset_prefix_cache").mock(
        side_effect=[python(200, json={"success": False}), python(200, json={"success": True})]
    )
    steps = _completions(mock)
    result = await dc.reset_prefix_cache_until_success(deadline=5.0, step_engine=False)
    assert (result.attempts, result.engine_steps) == (2, 0)
    assert steps.call_count == 0


async def test_deadline_raises_with_attempts_and_last_answer(dc: Either, mock: respx.MockRouter) -> None:
    reset = mock.post("/reset_prefix_cache").mock(return_value=python(200, json={"success": False}))
    steps = _completions(mock)
    start = time.monotonic()
    with pytest.raises(BarrierTimeoutError) as info:
        await dc.reset_prefix_cache_until_success(deadline=0.5, interval=0.01, max_interval=0.1)
    elapsed = time.monotonic() - start
    err = info.value
    # The counts are what the server got; no step is started too close to the deadline to finish.
    assert err.attempts == reset.call_count >= 3
    assert err.engine_steps == steps.call_count <= err.attempts - 1
    assert err.last is not None and err.last.success is False  # type: ignore[attr-defined]
    assert "success=False" in str(err)
    assert 0.5 <= elapsed < 0.5 + 0.5  # the deadline plus at most one short last try


async def test_bare_200_fails_loudly(dc: Either, mock: respx.MockRouter) -> None:
    mock.post("/reset_prefix_cache").mock(return_value=python(200))
    with pytest.raises(BarrierUnsupportedError, match="bare 200"):
        await dc.reset_prefix_cache_until_success(deadline=1.0)


async def test_barrier_rejects_a_bad_deadline(dc: Either, mock: respx.MockRouter) -> None:
    with pytest.raises(InvalidParameterError):
        await dc.reset_prefix_cache_until_success(deadline=0)
    with pytest.raises(InvalidParameterError):
        await dc.reset_prefix_cache_until_success(interval=-1)
    assert not mock.calls


async def test_poll_interval_backs_off(dc: Either, mock: respx.MockRouter) -> None:
    times: list[float] = []

    def answer(request: httpx.Request) -> httpx.Response:
        times.append(time.monotonic())
        return python(200, json={"success": len(times) >= 6})

    mock.post("/reset_prefix_cache").mock(side_effect=answer)
    await dc.reset_prefix_cache_until_success(
        deadline=5.0, step_engine=False, interval=0.02, max_interval=0.16
    )
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps[0] < 0.1  # fast at first
    assert gaps[-1] > gaps[0] * 2  # then backing off
    assert max(gaps) < 0.16 + 0.15


async def test_wait_until_ready_rides_out_startup(dc: Either, mock: respx.MockRouter) -> None:
    route = mock.get("/health").mock(
        side_effect=[httpx.ConnectError("refused"), httpx.ReadTimeout("no answer yet"), python(200)]
    )
    await dc.wait_until_ready(deadline=5.0, interval=0.01)
    assert route.call_count == 3


async def test_wait_until_ready_times_out(dc: Either, mock: respx.MockRouter) -> None:
    mock.get("/health").mock(side_effect=httpx.ConnectError("refused"))
    with pytest.raises(WaitTimeoutError, match="/health") as info:
        await dc.wait_until_ready(deadline=0.3, interval=0.01)
    assert info.value.waited_s >= 0.3


async def test_wait_until_sleeping_awake_paused(dc: Either, mock: respx.MockRouter) -> None:
    sleeping = mock.get("/is_sleeping").mock(
        side_effect=[python(200, json={"is_sleeping": False}), python(200, json={"is_sleeping": True})]
    )
    await dc.wait_until_sleeping(deadline=5.0, interval=0.01)
    assert sleeping.call_count == 2
    sleeping.mock(side_effect=None, return_value=rust(200, json={"is_sleeping": False}))
    await dc.wait_until_awake(deadline=5.0, interval=0.01)
    mock.get("/is_paused").mock(return_value=rust(200, json={"is_paused": False}))
    with pytest.raises(WaitTimeoutError, match="is_paused == true"):
        await dc.wait_until_paused(deadline=0.2, interval=0.01)
    await dc.wait_until_resumed(deadline=1.0)


async def test_tries_that_time_out_end_in_barrier_timeout(dc: Either, mock: respx.MockRouter) -> None:
    # A hung engine call: each try times out; the barrier still ends with its own typed error.
    reset = mock.post("/reset_prefix_cache").mock(side_effect=httpx.ReadTimeout("hung"))
    _completions(mock)
    with pytest.raises(BarrierTimeoutError) as info:
        await dc.reset_prefix_cache_until_success(deadline=0.3, request_timeout=0.05, interval=0.01)
    assert info.value.attempts >= 1
    assert reset.call_count >= info.value.attempts
    assert "timed out" in str(info.value)
