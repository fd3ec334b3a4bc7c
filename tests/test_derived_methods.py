"""The methods derived from typed methods (`_derived.py`): both fleets' client methods (`fleet/methods.py`)
and the blocking client's route methods (`_sync/routes.py`). Every record has its method on both fleets
and on the blocking client, each with its source's signature and docstring, sending what its source
sends; Python binds the arguments itself (its TypeError at the call, naming the public class); mypy sees
the source's parameters and the new answer."""

from __future__ import annotations

import asyncio
import inspect
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from vllm_devclient import AsyncDevClient, DevClient
from vllm_devclient._async.routes import _AsyncRoutes
from vllm_devclient._derived import DerivedMethod, function_with
from vllm_devclient._sync.routes import _SyncRoute, _SyncRoutes
from vllm_devclient.calls import CALLS
from vllm_devclient.fleet import AsyncFleet, Fleet
from vllm_devclient.fleet.methods import FleetMethod, _ClientMethods
from vllm_devclient.routes import ROUTES

TYPING = Path(__file__).resolve().parent / "typing"
RECORDS = (*ROUTES, *CALLS)
# Written by the fleet itself: the records with parameters of the fleet's own, and AsyncFleet's NCCL init.
HAND_WRITTEN = {(Fleet, "pause"), (AsyncFleet, "pause"), (AsyncFleet, "init_weight_transfer_engine")}


@pytest.mark.parametrize("fleet_cls", [Fleet, AsyncFleet], ids=lambda c: c.__name__)
def test_every_record_has_its_method_on_both_fleets(fleet_cls: type) -> None:
    """The guard of the fleets' table: one method per route and call record, the client method of that
    name fanned out (or the fleet's own, for the few it writes), answering FleetResult."""
    for record in RECORDS:
        method = getattr(fleet_cls, record.name)
        assert inspect.isfunction(method), (fleet_cls, record.name)
        assert str(inspect.signature(method).return_annotation).startswith("FleetResult["), record.name
        derived = inspect.getattr_static(fleet_cls, record.name)
        if (fleet_cls, record.name) in HAND_WRITTEN:
            assert not isinstance(derived, FleetMethod), record.name
            continue
        assert isinstance(derived, FleetMethod), record.name
        assert derived.source is getattr(AsyncDevClient, record.name), record.name
        assert derived.deadline == (record.deadline.default if record.deadline else None), record.name
    for record in RECORDS:  # a parameter of the fleet's own is on both fleets' method
        for p in record.cli.fleet_params:
            assert p.name in inspect.signature(getattr(fleet_cls, record.name)).parameters, record.name
    assert issubclass(fleet_cls, _ClientMethods)
    table = {name for name, value in vars(_ClientMethods).items() if isinstance(value, FleetMethod)}
    assert table - {"barrier"} == {r.name for r in RECORDS if not r.cli.fleet_params}


def test_the_blocking_route_methods_are_the_async_ones() -> None:
    table = {name: v for name, v in vars(_SyncRoutes).items() if isinstance(v, DerivedMethod)}
    assert list(table) == [r.name for r in ROUTES]
    for route in ROUTES:
        derived = table[route.name]
        assert isinstance(derived, _SyncRoute) and derived.source is getattr(_AsyncRoutes, route.name)
        method, source = getattr(DevClient, route.name), getattr(AsyncDevClient, route.name)
        assert inspect.isfunction(method) and not inspect.iscoroutinefunction(method), route.name
        assert inspect.signature(method) == inspect.signature(source), route.name
        assert method.__doc__ == source.__doc__ and method.__qualname__ == f"DevClient.{route.name}"


# Calls of every shape: positional and keyword-only parameters, query and body, options.
CALLS_OF_EVERY_SHAPE: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("health", (), {}),
    ("sleep", (2,), {"mode": "wait", "reset_connector": False}),
    ("server_info", ("text",), {"extra_query": {"x": "1"}}),
    ("wake_up", (), {"tags": ["weights"], "extra_headers": {"x-trace": "t"}}),
    ("collective_rpc", ("echo",), {"args": [1], "rpc_timeout": 2.0, "extra_body": {"y": 2}}),
    ("update_weights", ({"names": ["w"]},), {}),
    ("weight_checker", ("compare",), {"baseline": {"w": "abc"}}),
]


def _sent(call: Callable[[Any], Any], *, blocking: bool) -> httpx.Request:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(500, json={"error": {"message": "m", "type": "T"}})

    if blocking:
        with DevClient("http://a.test", max_retries=0, http_client=httpx.Client(
            transport=httpx.MockTransport(answer))) as client:  # fmt: skip
            with pytest.raises(Exception):  # noqa: B017 (only the request matters)
                call(client)
        return seen[0]

    async def run() -> None:
        http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
        async with AsyncDevClient("http://a.test", max_retries=0, http_client=http) as client:
            with pytest.raises(Exception):  # noqa: B017
                await call(client)

    asyncio.run(run())
    return seen[0]


@pytest.mark.parametrize(("name", "args", "kwargs"), CALLS_OF_EVERY_SHAPE, ids=lambda v: str(v)[:20])
def test_a_blocking_route_sends_the_request_its_async_twin_sends(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    blocking = _sent(lambda c: getattr(c, name)(*args, **kwargs), blocking=True)
    awaited = _sent(lambda c: getattr(c, name)(*args, **kwargs), blocking=False)
    assert (blocking.method, blocking.url, blocking.content) == (awaited.method, awaited.url, awaited.content)
    assert blocking.headers.get("x-trace") == awaited.headers.get("x-trace")


def test_python_binds_the_arguments_at_the_call_and_names_the_public_class() -> None:
    client, fleet, afleet = (
        DevClient("http://a.invalid"),
        Fleet(["http://a.invalid"]),
        AsyncFleet(["http://a.invalid"]),
    )
    with fleet:
        for call, name in [
            (lambda: client.sleep(1, 2), "DevClient.sleep() takes from 1 to 2 positional arguments but 3"),
            (lambda: client.update_weights(), "DevClient.update_weights() missing 1 required positional"),
            (lambda: fleet.collective_rpc(), "Fleet.collective_rpc() missing 1 required positional"),
            (lambda: afleet.is_paused(1), "AsyncFleet.is_paused() takes 1 positional argument but 2"),
            (lambda: afleet.barrier(30.0), "AsyncFleet.reset_prefix_cache_until_success() takes 1"),
        ]:
            with pytest.raises(TypeError, match=re.escape(name)):
                call()  # not awaited: an AsyncFleet method refuses the arguments at the call
    # Read from an object, an AsyncFleet method is a coroutine function too (to inspect, asyncio, retry
    # libraries); a blocking one is not.
    assert inspect.iscoroutinefunction(afleet.health) and inspect.iscoroutinefunction(AsyncFleet.health)
    assert not inspect.iscoroutinefunction(fleet.health) and not inspect.iscoroutinefunction(client.health)
    assert str(inspect.signature(afleet.sleep)).startswith("(level: 'int' = 1, *, mode:")
    client.close()


def test_a_source_that_cannot_be_mirrored_is_refused() -> None:
    def positional_only(self: object, a: int, /) -> None: ...
    def star_args(self: object, *a: int) -> None: ...
    def body_name(self: object, _run: int) -> None: ...

    for source in (positional_only, star_args, body_name):
        with pytest.raises(TypeError, match="cannot derive a method"):
            function_with(inspect.signature(source), source.__name__, print, awaits=False)
    with pytest.raises(TypeError, match="needs the client method's record"):
        FleetMethod(AsyncDevClient.close)


@pytest.fixture(scope="module")
def mypy_strict() -> Iterator[str]:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(TYPING / "mypy.ini"), "--no-incremental",
         str(TYPING / "derived_methods.py")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    yield done.stdout + done.stderr


def test_mypy_sees_the_sources_parameters_and_the_new_answers(mypy_strict: str) -> None:
    lines = (TYPING / "derived_methods.py").read_text().splitlines()
    marked = {i + 1 for i, line in enumerate(lines) if line.endswith("# rejected")}
    rejected = {int(n) for n in re.findall(r"derived_methods\.py:(\d+): error", mypy_strict)}
    assert marked and rejected == marked, mypy_strict
