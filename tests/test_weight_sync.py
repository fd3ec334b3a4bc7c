"""WeightSync (vLLM's VLLMWeightSyncClient over our clients and fleets) against mock transports; vLLM's own
trainer engines drive it against the real frontends in contract_tests/test_vllm_weight_sync.py."""

from __future__ import annotations

import asyncio
import base64
import json
import pickle
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from vllm_devclient import (
    AsyncDevClient,
    AsyncFleet,
    DevClient,
    EngineCallError,
    FleetError,
    InvalidParameterError,
    WeightSync,
)
from vllm_devclient.fleet import Fleet

OK = {"message": "ok"}
TYPING = Path(__file__).resolve().parent / "typing"


def engine_failure(method: str, message: str) -> httpx.Response:
    body = {"error": {"message": f"Call to {method} method failed: {message}", "type": "InternalServerError"}}
    return httpx.Response(500, json=body, headers={"server": "uvicorn"})


class Server:
    """Records (host, path, body) and fails the paths listed per host."""

    def __init__(self, failing: dict[tuple[str, str], str] | None = None) -> None:
        self.failing = failing or {}
        self.seen: list[tuple[str, str, object]] = []
        self.lock = threading.Lock()

    def answer(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        with self.lock:
            self.seen.append((request.url.host, request.url.path, body))
        message = self.failing.get((request.url.host, request.url.path))
        return engine_failure("collective_rpc", message) if message else httpx.Response(200, json=OK)

    async def async_answer(self, request: httpx.Request) -> httpx.Response:
        return self.answer(request)

    def paths(self, host: str) -> list[str]:
        return [p for h, p, _ in self.seen if h == host]


def client_over(server: Server) -> DevClient:
    return DevClient("http://a.test", http_client=httpx.Client(transport=httpx.MockTransport(server.answer)))


def async_client_over(server: Server) -> AsyncDevClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(server.async_answer))
    return AsyncDevClient("http://a.test", http_client=http, max_retries=0)


def fleet_over(server: Server) -> AsyncFleet:
    http = httpx.AsyncClient(transport=httpx.MockTransport(server.async_answer))
    return AsyncFleet(["http://a.test", "http://b.test"], http_client=http, max_retries=0)


def test_is_vllms_protocol_at_run_time() -> None:
    protocol = pytest.importorskip("vllm.distributed.weight_transfer").VLLMWeightSyncClient
    with DevClient("http://a.test") as client, Fleet(["http://a.test"]) as fleet:
        for target in (client, fleet, AsyncDevClient("http://a.test"), AsyncFleet(["http://a.test"])):
            view = WeightSync(target)
            assert isinstance(view, protocol)
            view.close()


def test_a_round_over_one_client_returns_none_and_sends_the_version() -> None:
    server = Server()
    sync = WeightSync(client_over(server))
    assert sync.init_weight_transfer_engine({"packed": False}) is None
    assert sync.start_weight_update() is None
    assert sync.update_weights({"names": ["w"], "dtype_names": ["bfloat16"], "shapes": [[2]]}) is None
    assert sync.finish_weight_update("step-3") is None  # positional, as vLLM's protocol calls it
    assert server.paths("a.test") == [
        "/init_weight_transfer_engine", "/start_weight_update", "/update_weights", "/finish_weight_update",
    ]  # fmt: skip
    assert server.seen[-1][2] == {"weight_version": "step-3"}


def test_ipc_handles_travel_pickled_as_vllms_http_client_sends_them() -> None:
    server = Server()
    handles = [{"GPU-1": (print, (2, 3), b"\x00handle", 0)}]  # a function among them: not JSON
    WeightSync(client_over(server)).update_weights(
        {"names": ["w"], "dtype_names": ["bfloat16"], "shapes": [[2, 3]], "ipc_handles": handles,
         "ipc_handles_pickled": None, "tensor_sizes": None}
    )  # fmt: skip
    sent = server.seen[0][2]
    assert isinstance(sent, dict)
    info = sent["update_info"]
    assert sorted(info) == ["dtype_names", "ipc_handles_pickled", "names", "shapes", "tensor_sizes"]
    assert pickle.loads(base64.b64decode(info["ipc_handles_pickled"])) == handles


def test_ipc_handles_refused_twice_or_unpicklable() -> None:
    client = client_over(Server())
    with pytest.raises(InvalidParameterError, match="both ipc_handles and ipc_handles_pickled"):
        client.update_weights({"names": [], "ipc_handles": [{}], "ipc_handles_pickled": "eA=="})
    with pytest.raises(InvalidParameterError, match=r"update_info\[\]\.ipc_handles cannot be pickled"):
        client.update_weights([{"names": [], "ipc_handles": [lambda: 0]}])


def test_a_failed_batch_finishes_the_update_without_a_version_and_raises_the_typed_error() -> None:
    server = Server({("a.test", "/update_weights"): "bad batch"})
    sync = WeightSync(client_over(server))
    sync.start_weight_update()
    with pytest.raises(EngineCallError, match="bad batch"):
        sync.update_weights({"names": ["w"]})
    assert server.paths("a.test") == ["/start_weight_update", "/update_weights", "/finish_weight_update"]
    assert server.seen[-1][2] == {}


def test_a_refused_batch_leaves_the_update_open() -> None:
    server = Server()
    sync = WeightSync(client_over(server))
    sync.start_weight_update()
    with pytest.raises(InvalidParameterError):
        sync.update_weights({"names": [float("nan")]})
    assert server.paths("a.test") == ["/start_weight_update"]


def test_over_a_fleet_a_partial_start_is_finished_where_it_went_through() -> None:
    server = Server({("b.test", "/start_weight_update"): "no memory"})
    sync = WeightSync(fleet_over(server))
    with pytest.raises(FleetError) as caught:
        sync.start_weight_update()
    err = caught.value
    assert list(err.errors) == ["http://b.test"] and "rolled back with finish_weight_update" in str(err)
    assert server.paths("a.test") == ["/start_weight_update", "/finish_weight_update"]
    assert server.paths("b.test") == ["/start_weight_update"]
    sync.close()


def test_over_a_fleet_a_partial_init_is_shut_down_where_it_went_through() -> None:
    server = Server({("a.test", "/init_weight_transfer_engine"): "rendezvous failed"})
    sync = WeightSync(fleet_over(server))
    with pytest.raises(FleetError, match="rendezvous failed"):
        sync.init_weight_transfer_engine({"packed": True})
    assert server.paths("b.test") == ["/init_weight_transfer_engine", "/shutdown_weight_transfer_engine"]
    sync.close()


def test_over_a_fleet_a_failed_batch_finishes_every_target() -> None:
    server = Server({("a.test", "/update_weights"): "bad batch"})
    sync = WeightSync(fleet_over(server))
    sync.start_weight_update()
    with pytest.raises(FleetError) as caught:
        sync.update_weights({"names": ["w"]})
    assert caught.value.result.rollback is not None and caught.value.result.rollback.all_ok
    for host in ("a.test", "b.test"):
        assert server.paths(host) == ["/start_weight_update", "/update_weights", "/finish_weight_update"]
    sync.close()


def test_a_fleet_that_raises_on_error_still_rolls_back() -> None:
    server = Server({("b.test", "/start_weight_update"): "no memory"})
    http = httpx.AsyncClient(transport=httpx.MockTransport(server.async_answer))
    fleet = AsyncFleet(["http://a.test", "http://b.test"], http_client=http, raise_on_error=True)
    with pytest.raises(FleetError):
        WeightSync(fleet).start_weight_update()
    assert server.paths("a.test") == ["/start_weight_update", "/finish_weight_update"]


def test_an_async_client_runs_on_the_views_loop_or_on_the_loop_given() -> None:
    server = Server()
    sync = WeightSync(async_client_over(server))
    sync.start_weight_update()
    sync.close()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        WeightSync(async_client_over(server), loop=loop).finish_weight_update(None)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
    assert server.paths("a.test") == ["/start_weight_update", "/finish_weight_update"]


async def test_called_on_its_targets_own_loop_it_refuses_instead_of_blocking() -> None:
    sync = WeightSync(async_client_over(Server()), loop=asyncio.get_running_loop())
    with pytest.raises(InvalidParameterError, match=r"asyncio\.to_thread"):
        sync.start_weight_update()


def test_refuses_other_targets() -> None:
    with pytest.raises(InvalidParameterError, match="DevClient, AsyncDevClient, Fleet or AsyncFleet"):
        WeightSync("http://a.test")  # type: ignore[arg-type]
    with DevClient("http://a.test") as client, pytest.raises(InvalidParameterError, match="loop="):
        WeightSync(client, loop=asyncio.new_event_loop())


@pytest.fixture(scope="module")
def mypy_strict() -> Iterator[str]:
    pytest.importorskip("vllm.distributed.weight_transfer")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(TYPING / "mypy.ini"), "--no-incremental",
         str(TYPING / "vllm_trainer.py"), str(TYPING / "vllm_trainer_direct.py")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    yield done.stdout + done.stderr


def test_mypy_strict_takes_weight_sync_as_vllms_client(mypy_strict: str) -> None:
    assert "vllm_trainer.py:" not in mypy_strict, mypy_strict


def test_mypy_strict_rejects_the_clients_themselves(mypy_strict: str) -> None:
    """Why the view exists: the typed answers and the keyword-only version are not vLLM's protocol."""
    direct = (TYPING / "vllm_trainer_direct.py").read_text().splitlines()
    marked = {i + 1 for i, line in enumerate(direct) if line.endswith("# rejected")}
    rejected = {int(n) for n in re.findall(r"vllm_trainer_direct\.py:(\d+): error", mypy_strict)}
    assert marked and rejected == marked, mypy_strict


def test_the_views_timeout_bounds_every_call() -> None:
    seen: list[float | None] = []  # the read timeout httpx got

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"]["read"])
        return httpx.Response(200, json=OK)

    http = httpx.Client(transport=httpx.MockTransport(answer))
    sync = WeightSync(DevClient("http://a.test", http_client=http), timeout=7.5)
    sync.start_weight_update()
    sync.finish_weight_update()
    WeightSync(DevClient("http://a.test", http_client=http)).start_weight_update()
    # What is left of the whole-call bound when the read starts: a little under 7.5 s.
    assert len(seen) == 3 and seen[2] is None
    assert all(t is not None and 7 < t <= 7.5 for t in seen[:2]), seen
    with pytest.raises(InvalidParameterError, match="timeout"):
        WeightSync(DevClient("http://a.test"), timeout=-1)
