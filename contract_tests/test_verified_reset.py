"""The verified reset against both real frontends, on an engine with a two-tier prefix cache
(`vllm_devclient.testing.cache_engine`) that reports its lookups as vLLM's engine does: it passes on an
honest engine and names the tier a lying one keeps serving."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from vllm_devclient import (
    AsyncDevClient,
    DevClient,
    ResetNotVerifiedError,
    TierNotClearedError,
)
from vllm_devclient.testing.cache_engine import TIER_EXTERNAL, TIER_GPU, CachingEngine
from vllm_devclient.testing.frontends import Frontend, PythonFrontend, RustFrontend

pytestmark = pytest.mark.frontend

PROBE = "The quick brown fox jumps over the lazy dog. " * 4  # several full blocks of 16 tokens


@pytest.fixture(scope="module", params=["python", "rust"])
def served(request: pytest.FixtureRequest, tiny_model_dir: Path) -> Iterator[Frontend]:
    # Started with --enable-prompt-tokens-details: the probe's answer says how many tokens were cached.
    fe: Frontend
    if request.param == "python":
        fe = PythonFrontend(
            model_dir=tiny_model_dir, engine=CachingEngine(), extra_args=["--enable-prompt-tokens-details"]
        )
    else:
        fe = RustFrontend(
            model_dir=tiny_model_dir, engine=CachingEngine(), args={"enable_prompt_tokens_details": True}
        )
    with fe:
        yield fe


@pytest.fixture
def engine(served: Frontend) -> Iterator[CachingEngine]:
    engine = served.engine
    assert isinstance(engine, CachingEngine)
    engine.keeps = frozenset()
    engine.forget()
    yield engine
    engine.keeps = frozenset()


def _warm(client: DevClient) -> None:
    """The probe served twice: the second time from the cache (the check would otherwise prove nothing)."""
    client.completion(PROBE, max_tokens=1)
    before = client.metrics()
    client.completion(PROBE, max_tokens=1)
    for _ in range(100):
        delta = client.metrics().delta(before)
        if delta.prefix_cache_queries:
            break
    assert delta.prefix_cache_hits, "the warm-up's second run was not served from the GPU tier"


def test_an_honest_engine_passes_both_tiers(served: Frontend, engine: CachingEngine) -> None:
    with DevClient(served.base_url) as client:
        _warm(client)
        done = client.reset_prefix_cache_verified(PROBE, reset_external=True)
    assert done.tiers == (TIER_GPU, TIER_EXTERNAL) and done.reset.success is True
    # The probe's answer said no token was cached: that was the proof, one request after the reset.
    assert (done.evidence, done.cached_tokens, done.delta) == ("probe answer", 0, None)


def test_a_kept_external_tier_is_not_blamed_when_only_the_gpu_was_asked(
    served: Frontend, engine: CachingEngine
) -> None:
    with DevClient(served.base_url) as client:
        _warm(client)
        done = client.reset_prefix_cache_verified(PROBE)
    assert done.tiers == (TIER_GPU,) and done.evidence == "metrics" and done.cached_tokens
    # The connector's tier was not asked to clear: it served the probe, as it should.
    assert done.delta is not None and done.delta.external_prefix_cache_hits
    assert done.delta.prefix_cache_hits == 0


def test_an_engine_that_keeps_its_gpu_blocks_is_named(served: Frontend, engine: CachingEngine) -> None:
    engine.keeps = frozenset({TIER_GPU})
    with DevClient(served.base_url) as client:
        _warm(client)
        with pytest.raises(TierNotClearedError) as caught:
            client.reset_prefix_cache_verified(PROBE, reset_external=True)
    err = caught.value
    assert err.tier == TIER_GPU and err.hits > 0 and err.reset is not None and err.reset.success is True
    assert "the GPU tier still serves blocks" in str(err)


async def test_an_engine_that_keeps_its_external_tier_is_named(
    served: Frontend, engine: CachingEngine
) -> None:
    """vLLM 0.20.2's reset_external=True cleared nothing in the OffloadingConnector and said success."""
    engine.keeps = frozenset({TIER_EXTERNAL})
    with DevClient(served.base_url) as client:
        _warm(client)
    async with AsyncDevClient(served.base_url) as client:
        with pytest.raises(TierNotClearedError) as caught:
            await client.reset_prefix_cache_verified(PROBE, reset_external=True)
    assert caught.value.tier == TIER_EXTERNAL and caught.value.hits > 0


def test_without_an_external_tier_on_metrics_the_check_says_so(tiny_model_dir: Path) -> None:
    """No connector, no cached tokens in the answers: the GPU tier is read off the counters, the external
    one cannot be, and the check does not guess."""
    with PythonFrontend(model_dir=tiny_model_dir, engine=CachingEngine(external_tier=False)) as fe:
        with DevClient(fe.base_url) as client:
            _warm(client)
            done = client.reset_prefix_cache_verified(PROBE)
            assert (done.tiers, done.evidence, done.cached_tokens) == ((TIER_GPU,), "metrics", None)
            with pytest.raises(ResetNotVerifiedError) as caught:
                client.reset_prefix_cache_verified(PROBE, reset_external=True)
    assert caught.value.tier == TIER_EXTERNAL and not isinstance(caught.value, TierNotClearedError)
