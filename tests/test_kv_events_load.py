"""KV events under CPU load: vLLM's own publisher, busy loops holding the cores, a consumer that stalls.

A consumer that falls behind (a busy host deschedules it) lets the publisher run ahead of the live socket
by more than its replay buffer; replays then answer with batches far ahead of what the live socket has
delivered so far. Each run must deliver every batch at most once, in order, never both delivered and
reported lost, and must not take the publisher for a restarted one. The big streams are measured by hand
with `python -m tests.kv_load` (see there).
"""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from tests import kv_load

RUNS = 10  # the acceptance: every one of them clean
# Small enough for the suite. After its first batch the consumer stalls until the publisher has sent the
# whole stream (50 times its replay buffer, more than two read chunks of the live socket ahead), then
# reads at 100 us a batch; the idle probe and every gap repair are answered from the stream's end.
SHAPE = kv_load.Shape(
    2500, hwm=5000, rcvhwm=5000, buffer_steps=50, work=100e-6, lead=True, stall_every=10**9, stall=0.2,
    probe_interval=0.1, replay_timeout=1.0, deadline=20.0, trailing=0.2,
)  # fmt: skip


@pytest.fixture(scope="module")
def vkv() -> ModuleType:
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed")
    return kv_load.vllm_kv_events()  # type: ignore[no-any-return]


@pytest.mark.timeout(120)
def test_streams_under_a_cpu_burner_are_delivered_once_in_order_or_lost(vkv: ModuleType) -> None:
    outcomes = []
    with kv_load.cpu_burner(3, seconds=90):
        for run in range(RUNS):
            outcomes.append(kv_load.run_once(vkv, SHAPE, use_asyncio=run % 2 == 1))
    clean = {
        name: 0 for name in ("duplicates", "out_of_order", "delivered_and_lost", "restarts", "unaccounted")
    }
    assert [out.faults() for out in outcomes] == [clean] * RUNS, "\n".join(out.line() for out in outcomes)
    # Beside the backlog, every run asked a replay while the live socket lagged (after the stall).
    assert all(out.replay_requests >= 2 for out in outcomes), [out.stats for out in outcomes]
