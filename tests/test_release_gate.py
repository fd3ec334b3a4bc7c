"""Arguments a server's release does not take (`Param.added_in`): refused before sending, naming the
release that added them; the server's release is looked up once per client."""

from __future__ import annotations

import httpx
import pytest
import respx

from vllm_devclient import AsyncDevClient, DevClient, ReleaseTooOldError
from vllm_devclient.endpoints import release_key
from vllm_devclient.routes import ROUTES

from .conftest import BASE, Either


def _version(mock: respx.MockRouter, body: dict[str, str] | None) -> respx.Route:
    answer = httpx.Response(404) if body is None else httpx.Response(200, json=body)
    return mock.get("/version").mock(return_value=answer)


@pytest.mark.parametrize(
    "body",
    [{"version": "0.33.0"}, {"version": "0.33.0", "rust_frontend_version": "0.33.0"}, None],
    ids=["python-0.33", "rust-0.33", "rust-0.22-no-version-route"],
)
async def test_reset_connector_on_an_older_release_is_refused_before_sending(
    dc: Either, mock: respx.MockRouter, body: dict[str, str] | None
) -> None:
    version = _version(mock, body)
    sleep = mock.post("/sleep").mock(
        return_value=httpx.Response(200, json={"status": "sleeping", "level": 1})
    )
    with pytest.raises(ReleaseTooOldError) as caught:
        await dc.sleep(1, reset_connector=False)
    err = caught.value
    assert (err.argument, err.added_in) == ("reset_connector", "0.34.0")
    assert err.server_release == ("0.33.0" if body else "0.22.0")
    assert "reset_connector=" in str(err) and "0.34.0" in str(err) and BASE in str(err)
    assert not sleep.called, "the argument would have been dropped by the server"
    # The release is remembered: a second gated call asks /version no more.
    with pytest.raises(ReleaseTooOldError):
        await dc.release_kv_cache_memory(reset_connector=True)
    assert version.call_count == 1


async def test_reset_connector_on_0_34_is_sent(dc: Either, mock: respx.MockRouter) -> None:
    _version(mock, {"version": "0.34.0"})
    sleep = mock.post("/sleep").mock(
        return_value=httpx.Response(200, json={"status": "sleeping", "level": 1})
    )
    await dc.sleep(1, reset_connector=False)
    assert dict(sleep.calls.last.request.url.params) == {
        "level": "1",
        "mode": "abort",
        "reset_connector": "false",
    }


async def test_an_argument_left_out_needs_no_lookup(dc: Either, mock: respx.MockRouter) -> None:
    version = _version(mock, {"version": "0.22.0"})
    mock.post("/sleep").mock(return_value=httpx.Response(200, json={"status": "sleeping", "level": 1}))
    await dc.sleep(1)
    assert not version.called


def test_a_version_answer_already_seen_tells_the_release() -> None:
    with respx.mock(base_url=BASE) as mock:
        version = _version(mock, {"version": "0.33.0"})
        with DevClient(BASE, transport="httpx") as client:
            client.version()
            with pytest.raises(ReleaseTooOldError):
                client.sleep(1, reset_connector=False)
        assert version.call_count == 1


async def test_the_async_client_learns_the_release_once() -> None:
    with respx.mock(base_url=BASE) as mock:
        version = _version(mock, {"version": "0.34.1"})
        release = mock.post("/release_kv_cache_memory").mock(
            return_value=httpx.Response(200, json={"status": "kv_cache_released"})
        )
        async with AsyncDevClient(BASE, transport="httpx") as client:
            for _ in range(3):
                await client.release_kv_cache_memory(reset_connector=False)
        assert (version.call_count, release.call_count) == (1, 3)


def test_every_gated_parameter_names_a_release_and_goes_on_the_wire() -> None:
    """An `added_in` that is no version, or on a parameter that is never sent, would gate nothing."""
    gated = [(r.name, p) for r in ROUTES for p in r.params if p.added_in]
    assert gated, "no parameter is gated: the 0.34.0 ones are gone"
    for name, param in gated:
        assert param.added_in is not None and len(release_key(param.added_in)) == 3, (name, param.name)
        assert param.send is not None and param.default is None, (name, param.name)
