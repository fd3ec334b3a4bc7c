"""The process-checkpoint cycle (vLLM 0.34) on the real vllm-rs: prepare with a request in flight (the
status's 503 is read as "not yet"), wait until prepared, a wake refused mid-cycle, restore; a failed cycle;
`checkpointed()` restores however its block ends. (The Python frontend registers these routes only with
sleep mode, which vLLM refuses on a CPU: the scenarios show its 404.)"""

from __future__ import annotations

import importlib.metadata
import threading
import time
from collections.abc import Iterator

import pytest

from vllm_devclient import AsyncDevClient, CheckpointFailedError, DevClient, EngineCallError
from vllm_devclient.testing import Return
from vllm_devclient.testing.frontends import RustFrontend

pytestmark = pytest.mark.skipif(
    tuple(int(p) for p in importlib.metadata.version("vllm").split(".")[:2]) < (0, 34),
    reason="the checkpoint routes arrived in vLLM 0.34.0",
)


@pytest.fixture
def rust(rust_frontend: RustFrontend) -> Iterator[RustFrontend]:
    rust_frontend.engine.reset()
    yield rust_frontend
    rust_frontend.engine.reset()


def _held_completion(fe: RustFrontend) -> threading.Thread:
    """A completion the engine holds open (a request in flight for the drain to wait on)."""
    fe.engine.hold_requests = True

    def run() -> None:
        with DevClient(fe.base_url, model=fe.model) as client:
            client.completion("held", max_tokens=2)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    end = time.monotonic() + 10
    while not fe.engine.held_request_ids:
        assert time.monotonic() < end, "the completion never reached the engine"
        time.sleep(0.01)
    return thread


def test_a_checkpoint_waits_for_the_request_in_flight_then_restores(rust: RustFrontend) -> None:
    in_flight = _held_completion(rust)
    with DevClient(rust.base_url) as client:
        started = client.checkpoint_prepare()
        assert (started.state, started.prepared) == ("preparing", False)
        now = client.checkpoint_status()
        assert (now.state, now.prepared, now.status_code) == ("preparing", False, 503)
        threading.Timer(0.5, rust.engine.release_requests).start()
        prepared = client.wait_until_checkpoint_prepared(deadline=20, interval=0.05)
        assert (prepared.state, prepared.status_code) == ("prepared", 200)
        assert rust.engine.state.asleep == {"kv_cache"}, "preparing releases the KV cache"
        with pytest.raises(EngineCallError, match="checkpoint state is prepared"):
            client.wake_up()
        restored = client.checkpoint_restore()
        assert restored.state == "running"
    in_flight.join(10)
    assert not in_flight.is_alive()
    assert rust.engine.state.checkpoint == "running" and not rust.engine.state.sleeping


def test_a_failed_cycle_raises_with_the_engine_s_reason(rust: RustFrontend) -> None:
    failed = ["failed", "worker 0 could not release its communicator"]
    rust.engine.script("checkpoint_state", [Return(["preparing", None]), Return(failed)])
    with DevClient(rust.base_url) as client, pytest.raises(CheckpointFailedError) as caught:
        client.wait_until_checkpoint_prepared(deadline=10, interval=0.01)
    assert "could not release its communicator" in str(caught.value)
    assert caught.value.status.status_code == 500


async def test_checkpointed_restores_however_the_block_ends(rust: RustFrontend) -> None:
    async with AsyncDevClient(rust.base_url) as client:
        with pytest.raises(RuntimeError, match="the capture failed"):
            async with client.checkpointed(deadline=10) as status:
                assert status.prepared
                raise RuntimeError("the capture failed")
    methods = [c.method for c in rust.engine.calls]
    assert methods[-2:] == ["checkpoint_restore", "checkpoint_state"]
    assert rust.engine.state.checkpoint == "running"
