"""The verified reset against a mock server (on the real frontends: contract_tests/test_verified_reset.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from vllm_devclient import DevClient, InvalidParameterError, ResetNotVerifiedError, TierNotClearedError

COUNTERS = (
    "prefix_cache_queries",
    "prefix_cache_hits",
    "external_prefix_cache_queries",
    "external_prefix_cache_hits",
)


def metrics_text(values: dict[str, float]) -> str:
    lines = []
    for name, value in values.items():
        lines += [f"# TYPE vllm:{name} counter", f'vllm:{name}_total{{model_name="m"}} {value}']
    return "\n".join(lines) + "\n"


class Server:
    """Answers the reset, /metrics from a list of snapshots (the last one sticks), and completions."""

    def __init__(
        self, snapshots: list[dict[str, float]], success: object = True, cached: int | None = None
    ) -> None:
        self.cached = cached  # the probe answer's usage.prompt_tokens_details.cached_tokens (None: not sent)
        self.snapshots: Iterator[dict[str, float]] = iter(snapshots)
        self.last = snapshots[0]
        self.success = success
        self.paths: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        if request.url.path == "/reset_prefix_cache":
            # success=None: the bare 200 of releases before 0.26.
            return (
                httpx.Response(200)
                if self.success is None
                else httpx.Response(200, json={"success": self.success})
            )
        if request.url.path == "/metrics":
            self.last = next(self.snapshots, self.last)
            return httpx.Response(200, text=metrics_text(self.last), headers={"content-type": "text/plain"})
        body = json.loads(request.content)
        choice = {"index": 0, "text": "x", "finish_reason": "length"}
        answer = {"id": "c", "model": body["model"], "choices": [choice]}
        if self.cached is not None:
            answer["usage"] = {"prompt_tokens": 32, "prompt_tokens_details": {"cached_tokens": self.cached}}
        return httpx.Response(200, json=answer)


def client_of(server: Server) -> DevClient:
    return DevClient(
        "http://a.test", http_client=httpx.Client(transport=httpx.MockTransport(server)), model="m"
    )


def snap(q: float = 0, h: float = 0, eq: float = 0, eh: float = 0) -> dict[str, float]:
    return dict(zip(COUNTERS, (q, h, eq, eh), strict=True))


def test_a_probe_answer_without_cached_tokens_is_the_proof_one_request_more() -> None:
    server = Server([snap()], cached=0)
    done = client_of(server).reset_prefix_cache_verified("probe", reset_external=True)
    assert (done.tiers, done.evidence, done.cached_tokens, done.delta) == (
        ("GPU", "external"),
        "probe answer",
        0,
        None,
    )
    assert server.paths == ["/reset_prefix_cache", "/v1/completions"]


SLOW = [
    "/reset_prefix_cache",
    "/v1/completions",
    "/reset_prefix_cache",
    "/metrics",
    "/v1/completions",
    "/metrics",
]


@pytest.mark.parametrize("cached", [None, 16])
def test_otherwise_the_counters_around_a_second_probe_tell_the_tiers_apart(cached: int | None) -> None:
    server = Server([snap(100, 40, 60, 20), snap(132, 40, 92, 20)], cached=cached)
    done = client_of(server).reset_prefix_cache_verified("probe", reset_external=True)
    assert (done.evidence, done.cached_tokens) == ("metrics", cached)
    assert done.delta is not None and done.delta.prefix_cache_queries == 32
    assert server.paths == SLOW


def test_the_counters_are_read_again_until_they_count_the_probe() -> None:
    server = Server([snap(100), snap(100), snap(100), snap(132)])
    client_of(server).reset_prefix_cache_verified("probe")
    assert server.paths.count("/metrics") == 4


@pytest.mark.parametrize(
    ("after", "tier"), [(snap(132, 16, 16, 0), "GPU"), (snap(132, 0, 32, 32), "external")]
)
def test_a_tier_that_served_the_probe_is_named(after: dict[str, float], tier: str) -> None:
    server = Server([snap(), after])
    with pytest.raises(TierNotClearedError) as caught:
        client_of(server).reset_prefix_cache_verified("probe", reset_external=True)
    assert caught.value.tier == tier and caught.value.hits > 0


def test_an_external_tier_not_asked_to_clear_may_serve() -> None:
    done = client_of(Server([snap(), snap(132, 0, 32, 32)])).reset_prefix_cache_verified("probe")
    assert done.tiers == ("GPU",)


@pytest.mark.parametrize("success", [False, None])
def test_a_reset_not_said_to_succeed_is_not_verified_and_no_probe_is_sent(success: object) -> None:
    server = Server([snap()], success=success)
    with pytest.raises(ResetNotVerifiedError) as caught:
        client_of(server).reset_prefix_cache_verified("probe")
    assert not isinstance(caught.value, TierNotClearedError) and caught.value.tier is None
    assert server.paths == ["/reset_prefix_cache"]


def test_a_connector_that_looked_nothing_up_is_not_called_empty() -> None:
    with pytest.raises(ResetNotVerifiedError, match="is a KV connector configured") as caught:
        client_of(Server([snap(), snap(132)])).reset_prefix_cache_verified("probe", reset_external=True)
    assert caught.value.tier == "external"


def test_a_probe_never_counted_ends_at_the_deadline() -> None:
    with pytest.raises(ResetNotVerifiedError, match="did not count the probe"):
        client_of(Server([snap()])).reset_prefix_cache_verified("probe", deadline=0.1)


def test_bad_input_is_refused_before_anything_is_sent() -> None:
    server = Server([snap()])
    with pytest.raises(InvalidParameterError):
        client_of(server).reset_prefix_cache_verified("probe", deadline=-1)
    assert server.paths == []
