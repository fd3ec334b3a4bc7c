"""The verified reset against both real frontends, on an engine with a two-tier prefix cache
(`vllm_devclient.testing.cache_engine`) that reports its lookups as vLLM's engine does and keys its blocks by
`cache_salt` as vLLM does: it passes on an honest engine, also while another client sends requests, names
the tier a lying one keeps serving, says "not verifiable" for a probe the cache never held, and retries a
reset refused while offload stores are in flight."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from vllm_devclient import (
    AsyncDevClient,
    DevClient,
    Fleet,
    FleetError,
    ResetNotVerifiableError,
    ResetNotVerifiedError,
    TierNotClearedError,
)
from vllm_devclient.testing.cache_engine import TIER_EXTERNAL, TIER_GPU, CachingEngine
from vllm_devclient.testing.frontends import Frontend, PythonFrontend, RustFrontend

pytestmark = pytest.mark.frontend

PROBE = "The quick brown fox jumps over the lazy dog. " * 4  # several full blocks of 16 tokens
OTHER = "Pack my box with five dozen liquor jugs. " * 4


# Started with --enable-prompt-tokens-details: the probe's answer says how many tokens were cached.
DETAILS = {"enable_prompt_tokens_details": True}


@pytest.fixture(scope="module")
def python_served(tiny_model_dir: Path) -> Iterator[Frontend]:
    extra = ["--enable-prompt-tokens-details"]
    with PythonFrontend(model_dir=tiny_model_dir, engine=CachingEngine(), extra_args=extra) as fe:
        yield fe


@pytest.fixture(scope="module")
def rust_served(tiny_model_dir: Path) -> Iterator[Frontend]:
    with RustFrontend(model_dir=tiny_model_dir, engine=CachingEngine(), args=DETAILS) as fe:
        yield fe


def _honest(fe: Frontend) -> CachingEngine:
    """``fe``'s engine, honest again and empty (its settings of the test before undone)."""
    engine = fe.engine
    assert isinstance(engine, CachingEngine)
    engine.keeps = frozenset()
    engine.store_delay = 0.0
    engine.forget()
    return engine


@pytest.fixture(params=["python", "rust"])
def served(request: pytest.FixtureRequest) -> Frontend:
    fe: Frontend = request.getfixturevalue(f"{request.param}_served")
    return fe


@pytest.fixture
def engine(served: Frontend) -> Iterator[CachingEngine]:
    yield _honest(served)
    _honest(served)


@contextmanager
def other_traffic(base_url: str, *, limit: int = 5000) -> Iterator[list[int]]:
    """Another client sending completions back to back (the check's probe text among them, unsalted)
    until the block ends (at most `limit`); yields the count sent so far."""
    sent = [0]
    stop = threading.Event()

    def send() -> None:
        with DevClient(base_url) as client:
            while not stop.is_set() and sent[0] < limit:
                client.completion(PROBE if sent[0] % 2 else OTHER, max_tokens=1)
                sent[0] += 1

    thread = threading.Thread(target=send, name="other-traffic", daemon=True)
    thread.start()
    try:
        yield sent
    finally:
        stop.set()
        thread.join(timeout=30)
        assert not thread.is_alive()


def test_an_honest_engine_passes_both_tiers(served: Frontend, engine: CachingEngine) -> None:
    with DevClient(served.base_url) as client:
        done = client.reset_prefix_cache_verified(PROBE, reset_external=True)
    assert done.tiers == (TIER_GPU, TIER_EXTERNAL) and done.reset.success is True
    # The check cached the probe itself first, then its answer after the reset said nothing was cached.
    assert done.cached_before > 0 and done.cache_salt.startswith("vllm-devclient-verify-")
    assert (done.evidence, done.cached_tokens, done.delta, done.refusals) == ("probe answer", 0, None, 0)


def test_a_probe_the_cache_never_holds_is_not_verifiable(served: Frontend, engine: CachingEngine) -> None:
    """Shorter than one block: no reset could be told from one that clears nothing."""
    with DevClient(served.base_url) as client:
        client.completion("hi", max_tokens=1)  # even sent before, unsalted
        with pytest.raises(ResetNotVerifiableError) as caught:
            client.reset_prefix_cache_verified("hi", reset_external=True)
    assert caught.value.reason == "probe not cached" and "not verifiable" in str(caught.value)
    assert not isinstance(caught.value, TierNotClearedError)
    assert caught.value.reset is not None and caught.value.reset.success is True  # the reset was done


def test_an_honest_busy_engine_passes_ten_of_ten(served: Frontend, engine: CachingEngine) -> None:
    """Another client keeps sending (the probe's text among its prompts): the check's own salt keeps its
    blocks apart, and the probe's answer is the proof."""
    verdicts = []
    with other_traffic(served.base_url) as sent, DevClient(served.base_url) as client:
        # The stream flows before the first check (a loaded machine may start the thread late).
        flowing = time.monotonic() + 30
        while sent[0] < 10 and time.monotonic() < flowing:
            time.sleep(0.05)
        before = sent[0]
        for _ in range(10):
            done = client.reset_prefix_cache_verified(PROBE, reset_external=True)
            verdicts.append((done.evidence, done.cached_tokens))
        during = sent[0] - before
    assert before >= 10, f"the other client sent only {before} requests in 30 s"
    assert verdicts == [("probe answer", 0)] * 10
    assert during >= 1, "the other client sent nothing during the checks"


def test_a_lying_busy_engine_is_still_caught(served: Frontend, engine: CachingEngine) -> None:
    engine.keeps = frozenset({TIER_GPU})
    with other_traffic(served.base_url), DevClient(served.base_url) as client:
        with pytest.raises(TierNotClearedError) as caught:
            client.reset_prefix_cache_verified(PROBE, reset_external=True, deadline=3)
    # The GPU tier, when a quiet /metrics window came; None when the other client filled every window.
    assert caught.value.tier in (TIER_GPU, None) and caught.value.hits > 0


def test_a_busy_engine_is_never_blamed_for_other_clients_hits(
    served: Frontend, engine: CachingEngine
) -> None:
    """Only the GPU tier asked to clear, the kept external tier serves the probe: the GPU tier is read off
    /metrics, which count the other client too; the check passes on a quiet window or says so."""
    with other_traffic(served.base_url), DevClient(served.base_url) as client:
        try:
            done = client.reset_prefix_cache_verified(PROBE, deadline=2)
        except ResetNotVerifiableError as exc:
            assert exc.reason == "other traffic", exc
        else:
            assert done.evidence == "metrics" and done.delta is not None and done.delta.prefix_cache_hits == 0


def test_a_kept_external_tier_is_not_blamed_when_only_the_gpu_was_asked(
    served: Frontend, engine: CachingEngine
) -> None:
    with DevClient(served.base_url) as client:
        done = client.reset_prefix_cache_verified(PROBE)
    assert done.tiers == (TIER_GPU,) and done.evidence == "metrics" and done.cached_tokens
    # The connector's tier was not asked to clear: it served the probe, as it should.
    assert done.delta is not None and done.delta.external_prefix_cache_hits
    assert done.delta.prefix_cache_hits == 0


def test_an_engine_that_keeps_its_gpu_blocks_is_named(served: Frontend, engine: CachingEngine) -> None:
    engine.keeps = frozenset({TIER_GPU})
    with DevClient(served.base_url) as client, pytest.raises(TierNotClearedError) as caught:
        client.reset_prefix_cache_verified(PROBE, reset_external=True)
    err = caught.value
    assert err.tier == TIER_GPU and err.hits > 0 and err.reset is not None and err.reset.success is True
    assert "the GPU tier still serves blocks" in str(err)


async def test_an_engine_that_keeps_its_external_tier_is_named(
    served: Frontend, engine: CachingEngine
) -> None:
    """vLLM 0.20.2's reset_external=True cleared nothing in the OffloadingConnector and said success."""
    engine.keeps = frozenset({TIER_EXTERNAL})
    async with AsyncDevClient(served.base_url) as client:
        with pytest.raises(TierNotClearedError) as caught:
            await client.reset_prefix_cache_verified(PROBE, reset_external=True)
    assert caught.value.tier == TIER_EXTERNAL and caught.value.hits > 0


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_reset_refused_while_stores_are_in_flight_is_retried(
    served: Frontend, engine: CachingEngine, mode: str
) -> None:
    """The probe's CPU stores take 0.3 s: the reset after it is refused (success=false), the engine is
    stepped, and the reset retried until it succeeds."""
    engine.store_delay = 0.3
    if mode == "sync":
        with DevClient(served.base_url) as client:
            done = client.reset_prefix_cache_verified(PROBE, reset_external=True)
    else:
        async with AsyncDevClient(served.base_url) as aclient:
            done = await aclient.reset_prefix_cache_verified(PROBE, reset_external=True)
    assert engine.refusals >= 1 and done.refusals == engine.refusals
    assert (done.evidence, done.cached_tokens, done.reset.success) == ("probe answer", 0, True)


def test_a_reset_refused_until_the_deadline_is_not_verified(served: Frontend, engine: CachingEngine) -> None:
    engine.store_delay = 60
    with DevClient(served.base_url) as client, pytest.raises(ResetNotVerifiedError) as caught:
        client.reset_prefix_cache_verified(PROBE, reset_external=True, deadline=0.5)
    assert "kept answering success=false" in str(caught.value)
    assert caught.value.reset is not None and caught.value.reset.success is False
    assert not isinstance(caught.value, ResetNotVerifiableError) and engine.refusals >= 2


def test_without_an_external_tier_on_metrics_the_check_says_so(tiny_model_dir: Path) -> None:
    """No connector, no cached tokens in the answers: the GPU tier is read off the counters, the external
    one cannot be, and the check does not guess."""
    with PythonFrontend(model_dir=tiny_model_dir, engine=CachingEngine(external_tier=False)) as fe:
        with DevClient(fe.base_url) as client:
            done = client.reset_prefix_cache_verified(PROBE)
            assert (done.tiers, done.evidence, done.cached_tokens) == ((TIER_GPU,), "metrics", None)
            assert done.cached_before > 0  # shown by the counters
            with pytest.raises(ResetNotVerifiableError) as caught:
                client.reset_prefix_cache_verified(PROBE, reset_external=True)
            with pytest.raises(ResetNotVerifiableError) as short:
                client.reset_prefix_cache_verified("hi")
    assert caught.value.tier == TIER_EXTERNAL and caught.value.reason == "no counters"
    assert short.value.reason == "probe not cached"


def test_the_kits_engine_keys_blocks_by_cache_salt(served: Frontend, engine: CachingEngine) -> None:
    """What the check's isolation rests on, through each frontend: a salted request shares no block with an
    unsalted or otherwise salted one, and one of the same salt does."""
    with DevClient(served.base_url) as client:
        client.completion(PROBE, max_tokens=1)
        assert _cached(client, PROBE, None) > 0
        assert _cached(client, PROBE, "a") == 0
        assert _cached(client, PROBE, "b") == 0
        assert _cached(client, PROBE, "a") > 0


def _cached(client: DevClient, prompt: str, salt: str | None) -> int:
    body: dict[str, object] = {"model": client.models().data[0].id, "prompt": prompt, "max_tokens": 1}
    if salt is not None:
        body["cache_salt"] = salt
    answer = client.request("POST", "/v1/completions", json=body).json()
    return int(answer["usage"]["prompt_tokens_details"]["cached_tokens"])


def test_over_a_fleet_of_three_the_lying_server_is_named(
    python_served: Frontend, rust_served: Frontend, tiny_model_dir: Path
) -> None:
    """Two honest servers (one per frontend, one with slow CPU stores) and a lying one, checked at once: the
    fleet names the liar, and the others pass (a reset undoes nothing, so nothing is rolled back)."""
    # The module's two servers (the Python one's stores slow) and a third, lying one.
    _honest(python_served).store_delay = 0.2
    _honest(rust_served)
    liar = RustFrontend(model_dir=tiny_model_dir, engine=CachingEngine(keeps={TIER_GPU}), args=DETAILS)
    try:
        with liar:
            urls = [python_served.base_url, rust_served.base_url, liar.base_url]
            with Fleet(urls) as fleet, pytest.raises(FleetError, match="TierNotClearedError") as raised:
                fleet.reset_prefix_cache_verified(PROBE, reset_external=True)
    finally:
        _honest(python_served)
        _honest(rust_served)
    result = raised.value.result  # every target's outcome rides on the error
    assert set(result.ok) == set(urls[:2]) and set(result.failed) == {urls[2]}
    err = result.failed[urls[2]]
    assert isinstance(err, TierNotClearedError) and err.tier == TIER_GPU
    assert result.ok[urls[0]].refusals >= 1 and result.ok[urls[1]].evidence == "probe answer"
