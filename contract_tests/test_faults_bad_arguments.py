"""The fault suite, bad arguments (issue 11, class 6): refused with InvalidParameterError before anything
is sent (the misbehaving server, conftest.py's `server`, sees no connection)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fault_answers import COMPLETION

from vllm_devclient import (
    DevClient,
    Fleet,
    InvalidParameterError,
)
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import Answer

NAN, INF = float("nan"), float("inf")


BAD_ARGUMENTS: dict[str, Callable[[DevClient, str], Any]] = {
    # per-call timeouts
    "health(timeout=-1)": lambda c, u: c.health(timeout=-1),
    "health(timeout=nan)": lambda c, u: c.health(timeout=NAN),
    "health(timeout='5')": lambda c, u: c.health(timeout="5"),  # type: ignore[arg-type]
    "health(timeout=True)": lambda c, u: c.health(timeout=True),
    "collective_rpc(timeout=-1)": lambda c, u: c.collective_rpc("m", timeout=-1),
    "collective_rpc(timeout=nan)": lambda c, u: c.collective_rpc("m", timeout=NAN),
    # client timeouts
    "DevClient(timeout=-1)": lambda c, u: DevClient(u, timeout=-1).health(),
    "DevClient(timeout='30')": lambda c, u: DevClient(u, timeout="30").health(),  # type: ignore[arg-type]
    "DevClient(timeout=nan)": lambda c, u: DevClient(u, timeout=NAN).health(),
    "with_options(timeout=-1)": lambda c, u: c.with_options(timeout=-1).health(),
    "with_options(timeout='30')": lambda c, u: c.with_options(timeout="30").health(),  # type: ignore[arg-type]
    # collective_rpc
    "collective_rpc(args='abc')": lambda c, u: c.collective_rpc("m", args="abc"),
    "collective_rpc(args=[nan])": lambda c, u: c.collective_rpc("m", args=[NAN]),
    "collective_rpc(args=[inf])": lambda c, u: c.collective_rpc("m", args=[INF]),
    "collective_rpc(kwargs={'x': nan})": lambda c, u: c.collective_rpc("m", kwargs={"x": NAN}),
    "collective_rpc(kwargs=[1, 2])": lambda c, u: c.collective_rpc("m", kwargs=[1, 2]),  # type: ignore[arg-type]
    "collective_rpc(rpc_timeout=nan)": lambda c, u: c.collective_rpc("m", rpc_timeout=NAN),
    "collective_rpc(rpc_timeout=-1)": lambda c, u: c.collective_rpc("m", rpc_timeout=-1),
    "collective_rpc(rpc_timeout='5')": lambda c, u: c.collective_rpc("m", rpc_timeout="5"),  # type: ignore[arg-type]
    # other routes
    "wake_up(5)": lambda c, u: c.wake_up(5),  # type: ignore[arg-type]
    "abort_requests(5)": lambda c, u: c.abort_requests(5),  # type: ignore[arg-type]
    "update_weights(5)": lambda c, u: c.update_weights(5),  # type: ignore[arg-type]
    "update_weights({'x': inf})": lambda c, u: c.update_weights({"x": INF}),
    "init_weight_transfer_engine({'x': nan})": lambda c, u: c.init_weight_transfer_engine({"x": NAN}),
    "finish_weight_update(weight_version=5)": lambda c, u: c.finish_weight_update(weight_version=5),  # type: ignore[arg-type]
    "completion(temperature=nan)": lambda c, u: c.completion("x", model="m", temperature=NAN),
    "completion(max_tokens=True)": lambda c, u: c.completion("x", model="m", max_tokens=True),
    "completion(max_tokens='16')": lambda c, u: c.completion("x", model="m", max_tokens="16"),  # type: ignore[arg-type]
    # the barrier and the waits
    "barrier(interval=nan)": lambda c, u: c.reset_prefix_cache_until_success(interval=NAN),
    "barrier(interval=0)": lambda c, u: c.reset_prefix_cache_until_success(interval=0),
    "barrier(interval=-1)": lambda c, u: c.reset_prefix_cache_until_success(interval=-1),
    "barrier(max_interval=nan)": lambda c, u: c.reset_prefix_cache_until_success(max_interval=NAN),
    "barrier(deadline=nan)": lambda c, u: c.reset_prefix_cache_until_success(deadline=NAN),
    "barrier(deadline=-1)": lambda c, u: c.reset_prefix_cache_until_success(deadline=-1),
    "barrier(request_timeout=nan)": lambda c, u: c.reset_prefix_cache_until_success(request_timeout=NAN),
    "barrier(request_timeout=-1)": lambda c, u: c.reset_prefix_cache_until_success(request_timeout=-1),
    "wait_until_sleeping(interval=nan)": lambda c, u: c.wait_until_sleeping(interval=NAN),
    "wait_until_ready(request_timeout=nan)": lambda c, u: c.wait_until_ready(request_timeout=NAN),
    "wait_until_ready(deadline=nan)": lambda c, u: c.wait_until_ready(deadline=NAN),
    # the escape hatch's path: one plain path (a NUL used to reach the transport and fail there)
    "request(path with NUL)": lambda c, u: c.request("GET", "/health\x00x"),
    "request(path with CR LF)": lambda c, u: c.request("GET", "/health\r\nX-Injected: 1"),
    "request(path with a tab)": lambda c, u: c.request("GET", "/health\tx"),
    "request(path with DEL)": lambda c, u: c.request("GET", "/health\x7f"),
    # base URLs
    "DevClient('http://')": lambda c, u: DevClient("http://").health(),
    "DevClient(url + '?token=x')": lambda c, u: DevClient(u + "?token=x").health(),
    "DevClient(url + '#frag')": lambda c, u: DevClient(u + "#frag").health(),
    "DevClient('ftp://h')": lambda c, u: DevClient("ftp://h").health(),
    "DevClient('')": lambda c, u: DevClient("").health(),
    "DevClient('http://127.0.0.1:99999')": lambda c, u: DevClient("http://127.0.0.1:99999").health(),
    "Fleet([url + '?token=x'])": lambda c, u: Fleet([u + "?token=x"]).health(),
}


@pytest.mark.parametrize("case", list(BAD_ARGUMENTS))
def test_a_bad_argument_is_refused_before_anything_is_sent(server: MisbehavingServer, case: str) -> None:
    # Were anything sent, it would succeed at once: the routes answer what the calls wait for.
    server.script("/reset_prefix_cache", Answer(200, json={"success": True}))
    server.script("/is_sleeping", Answer(200, json={"is_sleeping": True}))
    server.script("/v1/completions", COMPLETION)
    server.default = Answer(200, json={})
    with DevClient(server.base_url, max_retries=0) as client, pytest.raises(InvalidParameterError):
        BAD_ARGUMENTS[case](client, server.base_url)
    sent = [r.target for r in server.requests]
    assert not sent and server.connections == 0, f"sent before refusing: {sent}"
