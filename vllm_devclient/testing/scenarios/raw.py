"""Server-side rejections through the escape hatch `client.request()` (values the typed methods refuse to
send)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ... import errors
from ..contract import Client, Expect, Scenario, call, raises


def _raw(method: str, path: str, params: Mapping[str, str]) -> Callable[[Client], object]:
    return lambda c: c.request(method, path, params=params)


def _bad_bool(label: str, value: str) -> Scenario:
    return Scenario(
        f"raw_bad_bool_{label}",
        f"reset_external={value}: both read it as true (vllm-rs before 0.34.0 took only true/false)",
        _raw("POST", "/reset_prefix_cache", {"reset_external": value}),
        Expect("Response", {"status_code": 200}),
        (call("reset_prefix_cache", False, True),),
    )


def _rejected(route: str, label: str, params: Mapping[str, str], param: str) -> Scenario:
    return Scenario(
        f"raw_{label}",
        f"POST {route}?{next(iter(params))}={next(iter(params.values()))} is rejected with 400",
        _raw("POST", route, params),
        raises(errors.BadRequestError, {"status_code": 400, "param": param}),
        (),
    )


_REJECTED: tuple[tuple[str, str, Mapping[str, str], str], ...] = (
    ("/sleep", "sleep_level_5", {"level": "5"}, "level"),
    ("/sleep", "sleep_mode_bogus", {"mode": "bogus"}, "mode"),
    ("/pause", "pause_mode_bogus", {"mode": "bogus"}, "mode"),
)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "raw_bool_true_lowercase",
        "client.request() with a Python bool sends lowercase 'true': accepted by both",
        lambda c: c.request("POST", "/reset_prefix_cache", params={"reset_external": True}),
        Expect("Response", {"status_code": 200}),
        (call("reset_prefix_cache", False, True),),
    ),
    *(_bad_bool(label, value) for label, value in (("True", "True"), ("1", "1"))),
    *(_rejected(*rejected) for rejected in _REJECTED),
    Scenario(
        "raw_collective_rpc_no_method",
        "POST /collective_rpc without 'method' is rejected with 400 before the engine",
        lambda c: c.request("POST", "/collective_rpc", json={"args": []}),
        raises(errors.BadRequestError, {"status_code": 400}),
        (),
    ),
    Scenario(
        "raw_wrong_method",
        "GET /reset_prefix_cache: 405 with an allow header on both (Rust sends no body)",
        lambda c: c.request("GET", "/reset_prefix_cache"),
        raises(
            errors.MethodNotAllowedError,
            {"status_code": 405, "message": "GET is not allowed on /reset_prefix_cache; allowed: POST"},
        ),
        (),
    ),
)
