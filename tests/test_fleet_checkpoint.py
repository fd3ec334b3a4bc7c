"""The fleet's checkpoint flow (vLLM 0.34): all targets or none, restored however the block ends."""

from __future__ import annotations

from collections import Counter

import httpx
import pytest

from vllm_devclient.fleet import AsyncFleet, Fleet, FleetError

URLS = [f"http://node{i}.test" for i in range(3)]


def _server(refuse: str | None = None) -> tuple[Counter[tuple[str, str]], httpx.MockTransport]:
    """Three checkpointable servers (prepared at once); `refuse` answers prepare with vLLM's 400."""
    seen: Counter[tuple[str, str]] = Counter()

    def handle(request: httpx.Request) -> httpx.Response:
        host, path = request.url.host, request.url.path
        seen[(host, path)] += 1
        if path == "/checkpoint/prepare" and host == refuse:
            return httpx.Response(400, json={"state": "running", "error": "requires --enable-sleep-mode"})
        if path in ("/checkpoint/prepare", "/checkpoint/status"):
            return httpx.Response(200, json={"state": "prepared"})
        return httpx.Response(200, json={"state": "running"})

    return seen, httpx.MockTransport(handle)


async def test_every_target_is_prepared_in_the_block_and_restored_after() -> None:
    seen, transport = _server()
    async with AsyncFleet(URLS, http_client=httpx.AsyncClient(transport=transport), max_retries=0) as fleet:
        with pytest.raises(RuntimeError, match="capture"):
            async with fleet.checkpointed(deadline=5) as prepared:
                assert sorted(prepared.ok) == URLS and all(s.prepared for s in prepared.ok.values())
                raise RuntimeError("capture failed")
    assert all(seen[(f"node{i}.test", "/checkpoint/restore")] == 1 for i in range(3))


async def test_a_target_that_cannot_prepare_undoes_the_others() -> None:
    seen, transport = _server(refuse="node1.test")
    async with AsyncFleet(URLS, http_client=httpx.AsyncClient(transport=transport), max_retries=0) as fleet:
        with pytest.raises(FleetError) as caught:
            async with fleet.checkpointed(deadline=5):
                pytest.fail("the block ran though a target could not prepare")
    failed = caught.value.result.failed
    assert list(failed) == ["http://node1.test"] and "enable-sleep-mode" in str(failed["http://node1.test"])
    restored = {host for (host, path), n in seen.items() if path == "/checkpoint/restore" and n}
    assert restored == {"node0.test", "node2.test"}


def test_the_sync_fleet_has_the_same_flow() -> None:
    import inspect

    assert inspect.signature(Fleet.checkpointed).parameters.keys() == (
        inspect.signature(AsyncFleet.checkpointed).parameters.keys()
    )
