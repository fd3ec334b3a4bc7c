"""The verified reset against a mock server (on the real frontends: contract_tests/test_verified_reset.py).

The mock keeps a two-tier prefix cache of whole prompts keyed by (cache_salt, prompt), counts lookups on
/metrics as vLLM does, and can lie (`keeps`), refuse resets (`refuse`), drop cached_tokens from its answers
(`details=False`) and count another client's requests on every /metrics read (`traffic`).
"""

from __future__ import annotations

import json

import httpx
import pytest

from vllm_devclient import (
    DevClient,
    InvalidParameterError,
    ResetNotVerifiableError,
    ResetNotVerifiedError,
    TierNotClearedError,
)

TOKENS = 32  # every prompt's length, in tokens: two blocks of 16
COUNTERS = (
    "prefix_cache_queries",
    "prefix_cache_hits",
    "external_prefix_cache_queries",
    "external_prefix_cache_hits",
)


class Server:
    def __init__(
        self,
        *,
        details: bool = True,
        keeps: frozenset[str] = frozenset(),
        refuse: int = 0,
        success: object = True,
        block: int = 16,
        traffic: int = 0,
        external: bool = True,
    ) -> None:
        self.details, self.keeps, self.refuse, self.success = details, keeps, refuse, success
        self.block, self.traffic, self.external = block, traffic, external
        self.tiers: dict[str, set[tuple[str | None, str]]] = {"GPU": set(), "external": set()}
        self.counters = dict.fromkeys(COUNTERS, 0.0)
        self.paths: list[str] = []
        self.salts: set[str | None] = set()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        if request.url.path == "/reset_prefix_cache":
            return self._reset(request.url.params.get("reset_external") == "true")
        if request.url.path == "/metrics":
            for _ in range(self.traffic):  # another client's requests, cached in the GPU tier
                self._count(TOKENS, TOKENS, 0)
            text = "".join(
                f'# TYPE vllm:{name} counter\nvllm:{name}_total{{model_name="m"}} {value}\n'
                for name, value in self.counters.items()
                if self.external or not name.startswith("external")
            )
            return httpx.Response(200, text=text, headers={"content-type": "text/plain"})
        return self._complete(json.loads(request.content))

    def _reset(self, external: bool) -> httpx.Response:
        if self.success is None:
            return httpx.Response(200)  # the bare 200 of releases before 0.26
        if self.refuse > 0 or self.success is False:
            self.refuse -= 1
            return httpx.Response(200, json={"success": False})
        for tier in ("GPU", "external") if external else ("GPU",):
            if tier not in self.keeps:
                self.tiers[tier].clear()
        return httpx.Response(200, json={"success": True})

    def _count(self, queries: float, gpu: float, ext: float) -> None:
        self.counters["prefix_cache_queries"] += queries
        self.counters["prefix_cache_hits"] += gpu
        self.counters["external_prefix_cache_queries"] += queries - gpu
        self.counters["external_prefix_cache_hits"] += ext

    def _complete(self, body: dict[str, object]) -> httpx.Response:
        salt = body.get("cache_salt")
        assert salt is None or isinstance(salt, str)
        self.salts.add(salt)
        key = (salt, str(body["prompt"]))
        cacheable = TOKENS >= self.block
        gpu = TOKENS if key in self.tiers["GPU"] else 0
        ext = TOKENS if not gpu and self.external and key in self.tiers["external"] else 0
        self._count(TOKENS, gpu, ext)
        if cacheable:
            self.tiers["GPU"].add(key)
            if self.external:
                self.tiers["external"].add(key)
        choice = {"index": 0, "text": "x", "finish_reason": "length"}
        usage: dict[str, object] = {"prompt_tokens": TOKENS, "completion_tokens": 1, "total_tokens": 33}
        if self.details:
            usage["prompt_tokens_details"] = {"cached_tokens": gpu + ext}
        return httpx.Response(200, json={"id": "c", "model": "m", "choices": [choice], "usage": usage})


def client_of(server: Server) -> DevClient:
    return DevClient(
        "http://a.test", http_client=httpx.Client(transport=httpx.MockTransport(server)), model="m"
    )


FAST = [
    "/reset_prefix_cache",  # the reset asked for
    "/v1/completions",  # the probe, cached
    "/v1/completions",  # ... and served from the cache
    "/reset_prefix_cache",
    "/v1/completions",  # no cached token: the proof
]


def test_an_answer_without_cached_tokens_after_a_cached_probe_is_the_proof() -> None:
    server = Server()
    done = client_of(server).reset_prefix_cache_verified("probe", reset_external=True)
    assert (done.tiers, done.evidence, done.cached_tokens, done.delta) == (
        ("GPU", "external"),
        "probe answer",
        0,
        None,
    )
    assert done.cached_before == TOKENS and done.refusals == 0
    assert server.paths == FAST
    assert server.salts == {done.cache_salt} and done.cache_salt.startswith("vllm-devclient-verify-")


def test_every_check_has_a_salt_of_its_own() -> None:
    server = Server()
    client = client_of(server)
    salts = {client.reset_prefix_cache_verified("probe").cache_salt for _ in range(3)}
    assert len(salts) == 3


def test_a_probe_never_cached_is_not_verifiable_never_a_pass() -> None:
    server = Server(block=64)  # the probe is shorter than one block
    with pytest.raises(ResetNotVerifiableError, match="not verifiable") as caught:
        client_of(server).reset_prefix_cache_verified("probe", reset_external=True)
    assert caught.value.reason == "probe not cached" and caught.value.reset is not None
    assert server.paths == FAST[:3]  # no further reset: nothing could be proven


def test_without_cached_tokens_the_counters_show_the_probe_cached() -> None:
    server = Server(details=False, block=64)
    with pytest.raises(ResetNotVerifiableError) as caught:
        client_of(server).reset_prefix_cache_verified("probe")
    assert caught.value.reason == "probe not cached"
    done = client_of(Server(details=False)).reset_prefix_cache_verified("probe", reset_external=True)
    assert (done.evidence, done.cached_tokens, done.cached_before) == ("metrics", None, TOKENS)


@pytest.mark.parametrize(("keeps", "tier"), [("GPU", "GPU"), ("external", "external")])
def test_a_tier_that_served_the_probe_is_named(keeps: str, tier: str) -> None:
    server = Server(keeps=frozenset({keeps}))
    with pytest.raises(TierNotClearedError) as caught:
        client_of(server).reset_prefix_cache_verified("probe", reset_external=True)
    assert caught.value.tier == tier and caught.value.hits == TOKENS and caught.value.delta is not None


def test_an_external_tier_not_asked_to_clear_may_serve() -> None:
    done = client_of(Server()).reset_prefix_cache_verified("probe")
    assert done.tiers == ("GPU",) and done.evidence == "metrics" and done.cached_tokens == TOKENS
    assert done.delta is not None and done.delta.prefix_cache_hits == 0


def test_other_traffic_never_blames_a_tier() -> None:
    """Another client's GPU hits on every /metrics read: the counters cannot tell, and the check says so."""
    with pytest.raises(ResetNotVerifiableError) as caught:
        client_of(Server(traffic=1)).reset_prefix_cache_verified("probe", deadline=0.3)
    assert caught.value.reason == "other traffic" and not isinstance(caught.value, TierNotClearedError)
    # The probe's answer needs no counters: a busy honest server passes with both tiers asked.
    done = client_of(Server(traffic=1)).reset_prefix_cache_verified("probe", reset_external=True)
    assert done.evidence == "probe answer"


def test_a_lying_busy_server_is_caught_by_the_answer_alone() -> None:
    server = Server(traffic=1, keeps=frozenset({"GPU"}))
    with pytest.raises(TierNotClearedError) as caught:
        client_of(server).reset_prefix_cache_verified("probe", reset_external=True, deadline=0.3)
    assert caught.value.tier is None and caught.value.hits == TOKENS


def test_a_refused_reset_is_retried_stepping_the_engine() -> None:
    server = Server(refuse=2)
    done = client_of(server).reset_prefix_cache_verified("probe", reset_external=True)
    assert done.refusals == 2 and done.evidence == "probe answer"
    # Refused, stepped (a completion of "0"), refused, stepped, succeeded: then the check goes on.
    assert server.paths[:5] == ["/reset_prefix_cache", "/v1/completions"] * 2 + ["/reset_prefix_cache"]


@pytest.mark.parametrize("success", [False, None])
def test_a_reset_never_said_to_succeed_is_not_verified_and_no_probe_is_sent(success: object) -> None:
    server = Server(success=success)
    with pytest.raises(ResetNotVerifiedError) as caught:
        client_of(server).reset_prefix_cache_verified("probe", deadline=0)
    assert not isinstance(caught.value, TierNotClearedError | ResetNotVerifiableError)
    assert caught.value.tier is None and server.paths == ["/reset_prefix_cache"]


def test_a_reset_refused_until_the_deadline_says_so() -> None:
    with pytest.raises(ResetNotVerifiedError, match="kept answering success=false") as caught:
        client_of(Server(success=False)).reset_prefix_cache_verified("probe", deadline=0.2)
    assert caught.value.reset is not None and caught.value.reset.success is False


def test_a_connector_that_looked_nothing_up_is_not_called_empty() -> None:
    server = Server(external=False, details=False)  # no connector, no cached_tokens: only the counters
    with pytest.raises(ResetNotVerifiableError) as caught:
        client_of(server).reset_prefix_cache_verified("probe", reset_external=True)
    assert caught.value.tier == "external" and caught.value.reason == "no counters"


def test_bad_input_is_refused_before_anything_is_sent() -> None:
    server = Server()
    with pytest.raises(InvalidParameterError):
        client_of(server).reset_prefix_cache_verified("probe", deadline=-1)
    assert server.paths == []
