"""Request bodies over 32 MiB against both real frontends: vllm-rs reads at most 32 MiB (measured:
rust_fixtures/body_limits.json), so the SDK refuses a larger body before sending it to vllm-rs, and says so
when a server it could not check cuts the body off; the Python frontend reads it."""

from __future__ import annotations

import importlib.metadata

import pytest

from vllm_devclient import (
    AsyncDevClient,
    BodyCutOffError,
    BodyLimitExceededError,
    BodyTooLargeError,
    DevClient,
    EngineCallError,
    body_limits,
)
from vllm_devclient.testing.engine import ScriptedEngine
from vllm_devclient.testing.frontends import Frontend

pytestmark = pytest.mark.frontend

MiB = 1 << 20
LIMIT = 32 * MiB


def update(size: int) -> dict[str, str]:
    """An update_weights payload whose JSON body is about `size` bytes."""
    return {"names": "w", "pad": "a" * (size - 64)}


@pytest.fixture
def unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    """As for a release whose limit was never measured: nothing is refused before sending."""
    monkeypatch.setattr(body_limits, "limits", lambda: {})


def _engine_calls(fe: Frontend) -> list[str]:
    engine = fe.engine
    assert isinstance(engine, ScriptedEngine)
    return [call.method for call in engine.calls if call.method == "collective_rpc"]


def test_vllm_rs_is_spared_a_body_over_its_limit(rust_frontend: Frontend) -> None:
    before = len(_engine_calls(rust_frontend))
    with DevClient(rust_frontend.base_url) as client, pytest.raises(BodyTooLargeError) as caught:
        client.update_weights(update(LIMIT + MiB))  # the client learns the frontend on this first large body
    err = caught.value
    release = importlib.metadata.version("vllm")
    assert (err.limit, err.frontend, err.release, err.path) == (LIMIT, "rust", release, "/update_weights")
    assert err.size > LIMIT and "IPC handles" in str(err) and "Python frontend" in str(err)
    assert len(_engine_calls(rust_frontend)) == before  # nothing reached the engine


async def test_the_async_client_refuses_it_too(rust_frontend: Frontend) -> None:
    async with AsyncDevClient(rust_frontend.base_url) as client:
        assert (await client.version()).frontend == "rust"
        with pytest.raises(BodyTooLargeError):
            await client.update_weights(update(LIMIT + MiB))


def test_a_body_under_the_limit_reaches_vllm_rs(rust_frontend: Frontend) -> None:
    with DevClient(rust_frontend.base_url) as client, pytest.raises(EngineCallError) as caught:
        client.update_weights(update(LIMIT - MiB))
    assert "start_weight_update must be called" in str(caught.value)  # the engine read it


@pytest.mark.usefixtures("unchecked")
def test_just_over_the_limit_unchecked_vllm_rs_answers_400(rust_frontend: Frontend) -> None:
    with DevClient(rust_frontend.base_url) as client, pytest.raises(BodyLimitExceededError) as caught:
        client.update_weights(update(LIMIT + 64 * 1024))
    assert caught.value.status_code == 400 and "length limit exceeded" in str(caught.value)
    assert "IPC handles" in str(caught.value)


@pytest.mark.usefixtures("unchecked")
def test_far_over_the_limit_unchecked_the_cut_off_is_named(rust_frontend: Frontend) -> None:
    """The sync pool's send usually breaks first (the cut-off named); on a loaded machine vllm-rs's 400 can
    arrive before the pool writes on, and then that answer is what the error names."""
    with DevClient(rust_frontend.base_url) as client:
        with pytest.raises((BodyCutOffError, BodyLimitExceededError)) as caught:
            client.update_weights(update(2 * LIMIT))
    said = str(caught.value)
    if isinstance(caught.value, BodyCutOffError):
        assert "closed the connection while the" in said and "body limit" in said
    else:
        assert caught.value.status_code == 400 and "length limit exceeded" in said
    assert "IPC handles" in said


@pytest.mark.usefixtures("unchecked")
async def test_far_over_the_limit_unchecked_the_async_client_says_why(rust_frontend: Frontend) -> None:
    """aiohttp reads the 400 vllm-rs answers before it closes, where the sync pool's send breaks first."""
    async with AsyncDevClient(rust_frontend.base_url) as client:
        with pytest.raises((BodyLimitExceededError, BodyCutOffError)) as caught:
            await client.update_weights(update(2 * LIMIT))
    assert "IPC handles" in str(caught.value)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_python_frontend_reads_a_body_over_32_mib(python_frontend: Frontend, mode: str) -> None:
    if mode == "sync":
        with DevClient(python_frontend.base_url) as client, pytest.raises(EngineCallError) as caught:
            client.update_weights(update(LIMIT + MiB))
    else:
        async with AsyncDevClient(python_frontend.base_url) as aclient:
            with pytest.raises(EngineCallError) as caught:
                await aclient.update_weights(update(LIMIT + MiB))
    assert "start_weight_update must be called" in str(caught.value)  # the engine read it
