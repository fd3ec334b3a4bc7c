"""The fault suite, the whole-call bound (issue 51): `total_timeout` bounds a call as a whole, its retries
and their pauses included, on every method of both clients, a fleet and the command line.

Against `MisbehavingServer(default=Hang())`, a server that reads every request and never answers, with the
issue's numbers: `timeout=3` per try and `total_timeout=4`. Without the bound a retried route takes its
3 tries of 3 s (9 s and more) and a wait its whole deadline (60 s); with it, every route method (iterated
from the route records, so a route added later is covered), every hand-written method (the `Call` records:
the waits, the barrier, completions, `request`), the flows and a fleet's calls end within 4 s plus the
allowance (`testing/bounds.py`: one short last try of a wait, and the scheduling delay of a shared machine).
The calls of one client run at once (threads, or one event loop), so the whole suite takes seconds, not
minutes; each call is timed from its own start. Their starts are spread over `SPREAD_S`: a hundred bounds
ending on the same tick of one event loop measure that loop's backlog on a shared 2-core machine (CI saw
4.53 s once), not the SDK's bound; no user's calls all end at one instant.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from click.testing import CliRunner

from vllm_devclient import (
    APITimeoutError,
    AsyncDevClient,
    AsyncFleet,
    DevClient,
    DevClientError,
    Fleet,
    FleetError,
    WaitTimeoutError,
)
from vllm_devclient.calls import CALLS
from vllm_devclient.cli import ExitCode, cli
from vllm_devclient.records import Method
from vllm_devclient.routes import ROUTES
from vllm_devclient.testing.bounds import deadline_bound
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import Hang
from vllm_devclient.testing.scenarios import SCENARIOS

pytestmark = pytest.mark.timeout(120)

PER_TRY = 3.0
TOTAL = 4.0
# What each call may take: the bound, one short last try of a wait, the scheduling allowance (0.5 s in all).
LIMIT = deadline_bound(TOTAL)
# Without the bound, a retried route takes 3 tries of PER_TRY: the limit must tell the two apart.
assert LIMIT < 3 * PER_TRY
SPREAD_S = 1.0


def _starts(n: int) -> list[float]:
    """When each of n calls starts, relative to the first: evenly over SPREAD_S."""
    return [i * SPREAD_S / n for i in range(n)]


@pytest.fixture(scope="module")
def silent() -> Iterator[MisbehavingServer]:
    """A server that reads every request and never answers any."""
    with MisbehavingServer(default=Hang()) as server:
        yield server


def _example_arguments() -> dict[str, tuple[tuple[Any, ...], dict[str, Any]]]:
    """Each client method's arguments as the first scenario that calls it passes them (read with a spy)."""
    found: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}

    class Spy:
        def __getattr__(self, name: str) -> Callable[..., None]:
            def record(*args: Any, **kwargs: Any) -> None:
                found.setdefault(name, (args, kwargs))

            return record

    for scenario in SCENARIOS:
        scenario.call(Spy())  # type: ignore[arg-type]
    return found


ARGUMENTS = _example_arguments()
METHODS: tuple[Method, ...] = (*ROUTES, *CALLS)


def _call_of(method: Method) -> tuple[tuple[Any, ...], dict[str, Any]]:
    assert method.name in ARGUMENTS, f"no scenario calls {method.name}"
    args, kwargs = ARGUMENTS[method.name]
    # The wait's own deadline (10 s in the scenarios, 60 s by default) is not what should end it here.
    return args, {k: v for k, v in kwargs.items() if k != "deadline"}


def _check(name: str, took: float, error: BaseException | None) -> str | None:
    """What is wrong with one call's outcome, or None."""
    if error is None:
        return f"{name} returned after {took:.2f} s from a server that never answers"
    if not isinstance(error, APITimeoutError | WaitTimeoutError):
        return f"{name} raised {type(error).__name__}, not a timeout: {error}"
    if took > LIMIT:
        return f"{name} took {took:.2f} s; the bound is {TOTAL:g} s (+ {LIMIT - TOTAL:.1f} s allowed)"
    return None


def _bind(target: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[[], Any]:
    return lambda: getattr(target, name)(*args, **kwargs)


def _sync_calls(client: DevClient) -> dict[str, Callable[[], object]]:
    def flow(name: str) -> Callable[[], object]:
        def run() -> object:
            with getattr(client, name)():
                raise AssertionError(f"{name}() entered its block")

        return run

    calls: dict[str, Callable[[], object]] = {}
    for method in METHODS:
        args, kwargs = _call_of(method)
        calls[method.name] = _bind(client, method.name, args, kwargs)
    calls.update({f"{name}()": flow(name) for name in ("paused", "sleeping", "weight_update")})
    return calls


def _timed(fn: Callable[[], object], delay: float = 0.0) -> tuple[float, BaseException | None]:
    time.sleep(delay)
    start = time.monotonic()
    try:
        fn()
    except DevClientError as exc:
        return time.monotonic() - start, exc
    return time.monotonic() - start, None


def test_every_method_and_flow_of_the_sync_client_ends_within_the_total_timeout(
    silent: MisbehavingServer,
) -> None:
    with DevClient(silent.base_url, timeout=PER_TRY, total_timeout=TOTAL) as client:
        calls = _sync_calls(client)
        with ThreadPoolExecutor(max_workers=len(calls)) as pool:
            timed = pool.map(_timed, calls.values(), _starts(len(calls)))
            outcomes = dict(zip(calls, timed, strict=True))
    wrong = [p for name, (took, err) in outcomes.items() if (p := _check(name, took, err)) is not None]
    assert not wrong, "\n".join(wrong)


async def _async_timed(
    make: Callable[[], Awaitable[object]], delay: float = 0.0
) -> tuple[float, BaseException | None]:
    await asyncio.sleep(delay)
    start = time.monotonic()
    try:
        await make()
    except DevClientError as exc:
        return time.monotonic() - start, exc
    return time.monotonic() - start, None


def _async_calls(client: AsyncDevClient) -> dict[str, Callable[[], Awaitable[object]]]:
    def flow(name: str) -> Callable[[], Awaitable[object]]:
        async def run() -> object:
            async with getattr(client, name)():
                raise AssertionError(f"{name}() entered its block")

        return run

    calls: dict[str, Callable[[], Awaitable[object]]] = {}
    for method in METHODS:
        args, kwargs = _call_of(method)
        calls[method.name] = _bind(client, method.name, args, kwargs)
    calls.update({f"{name}()": flow(name) for name in ("paused", "sleeping", "weight_update")})
    return calls


def test_every_method_and_flow_of_the_async_client_ends_within_the_total_timeout(
    silent: MisbehavingServer,
) -> None:
    async def run() -> dict[str, tuple[float, BaseException | None]]:
        async with AsyncDevClient(silent.base_url, timeout=PER_TRY, total_timeout=TOTAL) as client:
            calls = _async_calls(client)
            starts = _starts(len(calls))
            timed = await asyncio.gather(*map(_async_timed, calls.values(), starts))
        return dict(zip(calls, timed, strict=True))

    outcomes = asyncio.run(run())
    wrong = [p for name, (took, err) in outcomes.items() if (p := _check(name, took, err)) is not None]
    assert not wrong, "\n".join(wrong)


def _fleet_check(name: str, took: float, error: BaseException | None) -> str | None:
    if not isinstance(error, FleetError):
        return f"{name} gave {error!r} instead of a FleetError"
    return _check(name, took, next(iter(error.errors.values())))


def test_a_fleet_bounds_every_route_and_call_as_a_whole(silent: MisbehavingServer) -> None:
    """Both fleets over the silent server, every client method by its record: a FleetError within the bound,
    the target's error a timeout."""
    methods = [m for m in METHODS if m.name != "request"]  # not a fleet method (a raw exchange)

    async def run() -> dict[str, tuple[float, BaseException | None]]:
        async with AsyncFleet([silent.base_url], timeout=PER_TRY, total_timeout=TOTAL) as fleet:

            def call(m: Method) -> Callable[[], Awaitable[object]]:
                args, kwargs = _call_of(m)
                return lambda: getattr(fleet, m.name)(*args, **kwargs)

            timed = await asyncio.gather(*(_async_timed(call(m)) for m in methods))
        return {m.name: t for m, t in zip(methods, timed, strict=True)}

    outcomes = asyncio.run(run())
    with Fleet([silent.base_url], timeout=PER_TRY, total_timeout=TOTAL) as fleet:
        sync = {name: getattr(fleet, name) for name in ("pause", "health", "wait_until_paused", "barrier")}
        with ThreadPoolExecutor(max_workers=len(sync)) as pool:
            outcomes.update(zip((f"Fleet.{n}" for n in sync), pool.map(_timed, sync.values()), strict=True))
    wrong = [p for name, (took, err) in outcomes.items() if (p := _fleet_check(name, took, err)) is not None]
    assert not wrong, "\n".join(wrong)


def test_errors_say_each_bound_once(silent: MisbehavingServer) -> None:
    with DevClient(silent.base_url, timeout=0.6, total_timeout=1.0) as client:
        with pytest.raises(APITimeoutError) as route:
            client.pause()
        with pytest.raises(WaitTimeoutError) as wait:
            client.wait_until_paused()
        with pytest.raises(WaitTimeoutError) as barrier:
            client.reset_prefix_cache_until_success(step_engine=False)
    assert "2 tries, timeout 0.6 s per try, the last try cut short by the total timeout of 1 s" in str(
        route.value
    )
    for caught in (wait, barrier):
        message = str(caught.value)
        assert message.count("per try") == 1 and "timeout 0.6 s per try" in message, message
        assert message.count("total timeout of 1 s") == 1 and "deadline" not in message.split(";")[0], message
        assert "total_timeout=" in message.split(";")[-1], message  # the hint names the bound that ended it


def test_without_a_bound_a_retried_call_takes_every_try(silent: MisbehavingServer) -> None:
    """Behaviour unchanged with no bound set: 3 tries of the per-try timeout, each named."""
    with DevClient(silent.base_url, timeout=0.4) as client:
        before = silent.count("/is_paused")
        start = time.monotonic()
        with pytest.raises(APITimeoutError) as caught:
            client.is_paused()
        took = time.monotonic() - start
    assert silent.count("/is_paused") - before == 3
    assert took >= 3 * 0.4
    assert "3 tries, timeout 0.4 s per try)" in str(caught.value)


def test_per_call_and_with_options_override_the_clients_bound(silent: MisbehavingServer) -> None:
    with DevClient(silent.base_url, timeout=0.4, total_timeout=0.5) as client:
        before = silent.count("/health")
        with pytest.raises(APITimeoutError) as unbounded:
            client.health(total_timeout=None)  # this call: no whole-call bound, every try
        assert silent.count("/health") - before == 3 and "total timeout" not in str(unbounded.value)
        start = time.monotonic()
        with pytest.raises(APITimeoutError):
            client.with_options(total_timeout=0.3).health()
        assert time.monotonic() - start < 0.3 + 0.3


def test_the_environment_and_the_command_line_set_the_bound(
    silent: MisbehavingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_DEVCLIENT_TOTAL_TIMEOUT", "0.5")
    with DevClient(silent.base_url, timeout=0.4) as client:
        assert client._config.total_timeout == 0.5
    monkeypatch.delenv("VLLM_DEVCLIENT_TOTAL_TIMEOUT")
    env = {"VLLM_DEVCLIENT_URL": "", "VLLM_API_KEY": "", "VLLM_DEVCLIENT_TIMEOUT": ""}
    for args, extra in (
        (["--total-timeout", "1"], {}),
        ([], {"VLLM_DEVCLIENT_TOTAL_TIMEOUT": "1"}),
    ):
        start = time.monotonic()
        result = CliRunner().invoke(
            cli,
            ["--url", silent.base_url, "--timeout", "0.7", *args, "pause"],
            env={**env, **extra},
            catch_exceptions=False,
        )
        took = time.monotonic() - start
        assert result.exit_code == ExitCode.CONNECTION, result.output
        assert "the last try cut short by the total timeout of 1 s" in " ".join(result.output.split())
        assert took < deadline_bound(1.0) + 0.5, f"the command took {took:.2f} s"  # + its own start


@pytest.mark.parametrize("where", ["fleet", "call"])
def test_over_a_fleet_the_bound_is_one_moment_for_every_target(where: str) -> None:
    """Three silent targets, one slot: the targets that wait for the slot get what is left of the bound."""
    servers = [MisbehavingServer(default=Hang()).start() for _ in range(3)]
    urls = [s.base_url for s in servers]
    on_fleet: dict[str, Any] = {"total_timeout": 0.6} if where == "fleet" else {}
    per_call: dict[str, Any] = {"total_timeout": 0.6} if where == "call" else {}
    try:
        with Fleet(urls, timeout=0.5, max_concurrency=1, **on_fleet) as fleet:
            start = time.monotonic()
            with pytest.raises(FleetError) as caught:
                fleet.health(**per_call)
            took = time.monotonic() - start
    finally:
        for server in servers:
            server.close()
    assert set(caught.value.errors) == set(urls)
    assert all(isinstance(e, APITimeoutError) for e in caught.value.errors.values())
    assert took < deadline_bound(0.6), (
        f"the fleet call took {took:.2f} s (3 targets in turn would take 1.8 s)"
    )


def test_the_commands_barrier_names_its_bounds_once_in_flags(silent: MisbehavingServer) -> None:
    env = {"VLLM_DEVCLIENT_URL": "", "VLLM_API_KEY": "", "VLLM_DEVCLIENT_TIMEOUT": ""}
    args = ["--url", silent.base_url, "--timeout", "0.4", "barrier", "--deadline", "1", "--no-step-engine"]
    result = CliRunner().invoke(cli, args, env=env, catch_exceptions=False)
    assert result.exit_code == ExitCode.DEADLINE, result.output
    flat = " ".join(result.output.split())
    assert "within the deadline of 1 s" in flat and flat.count("per try") == 1, flat
    assert "timeout 0.4 s per try" in flat and "raise --timeout or --deadline" in flat, flat
