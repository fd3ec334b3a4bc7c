"""`kv-events tail`, with the subscriber replaced (the real publisher is in contract_tests)."""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx
import jsonschema
import pytest
import respx

from vllm_devclient.cli import ExitCode

from .cli_support import (
    SCHEMA,
    A,
    B,
    check_schema,
    cli_mock,  # noqa: F401  (the `mock` fixture: respx without a base URL)
    doc,
    invoke,
)


class FakeSubscriber:
    """Hands out real KVEventBatch objects, then nothing (like a quiet stream)."""

    made: list[FakeSubscriber] = []

    def __init__(self, endpoint: str | None = None, **kw: Any) -> None:
        from vllm_devclient.kv_events import (
            AllBlocksCleared,
            BlockStored,
            EventsLost,
            KVEventBatch,
            KVEventTally,
        )

        self.endpoint, self.kw = endpoint, kw
        lost = (EventsLost(rank=0, first_seq=2, last_seq=4, reason="not_in_replay_buffer"),)
        self.batches = [
            KVEventBatch(
                rank=0, seq=0, ts=1.0, events=[BlockStored([1, 2], medium="GPU")], data_parallel_rank=0
            ),
            KVEventBatch(
                rank=0, seq=1, ts=2.0, events=[AllBlocksCleared()], data_parallel_rank=0, replayed=True
            ),
            KVEventBatch(
                rank=0, seq=5, ts=3.0, events=[BlockStored([b"\xab" * 4], medium="CPU")], data_parallel_rank=0
            ),
        ]
        if kw.get("lossy"):
            self.batches[2] = KVEventBatch(
                rank=0, seq=5, ts=3.0, events=[], data_parallel_rank=0, losses=lost
            )
        self.tally = KVEventTally()
        self.closed = False
        FakeSubscriber.made.append(self)

    @classmethod
    def from_client(cls, client: Any, **kw: Any) -> FakeSubscriber:
        sources = client.kv_event_sources()
        return cls(None, sources=sources, **kw)

    def poll(self, timeout: float = 0.0) -> Any:
        if not self.batches:
            return None
        batch = self.batches.pop(0)
        self.tally.add(batch)
        if batch.losses:
            self.tally.lost_batches += 3
        return batch

    def __enter__(self) -> FakeSubscriber:
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed = True


@pytest.fixture
def fake_subscriber(monkeypatch: pytest.MonkeyPatch) -> type[FakeSubscriber]:
    import vllm_devclient.kv_events as kv

    FakeSubscriber.made = []
    monkeypatch.setattr(kv, "KVEventSubscriber", FakeSubscriber)
    return FakeSubscriber


def test_kv_events_tail_human_json_lines_and_tsv(fake_subscriber: type[FakeSubscriber]) -> None:
    human = invoke("kv-events", "tail", "--endpoint", "tcp://127.0.0.1:5557", "--count", "3", "--topic", "kv")
    assert human.exit_code == 0, human.output
    assert human.stdout.splitlines() == [
        "rank 0 seq 0: stored GPU 2 blocks [1, 2]",
        "rank 0 seq 1 (replayed): all blocks cleared",
        "rank 0 seq 5: stored CPU 1 block [abababab]",
    ]
    assert "3 batches; blocks stored: GPU 2, CPU 1; removed: 0; cleared: 1; lost batches: 0" in human.stderr
    sub = fake_subscriber.made[-1]
    assert sub.endpoint == "tcp://127.0.0.1:5557" and sub.kw["topic"] == "kv" and sub.closed
    as_json = invoke("kv-events", "tail", "--endpoint", "tcp://127.0.0.1:5557", "--count", "2", "--json")
    *lines, last = [json.loads(line) for line in as_json.stdout.splitlines()]
    for line in lines:
        jsonschema.validate(line, {**SCHEMA["$defs"]["kv_batch"], "$defs": SCHEMA["$defs"]})
    assert [b["seq"] for b in lines] == [0, 1]
    assert lines[0]["events"][0]["type"] == "BlockStored" and lines[0]["events"][0]["block_hashes"] == [1, 2]
    check_schema(last)
    assert last["command"] == "kv-events tail" and last["result"]["batches"] == 2
    assert last["result"]["stored_blocks"] == {"GPU": 2}
    tsv = invoke("kv-events", "tail", "--endpoint", "tcp://h:1", "--count", "1", "-o", "tsv")
    assert tsv.stdout.splitlines() == ["0\t0\tfalse\tstored GPU 2 blocks [1, 2]"]


def test_kv_events_tail_deadline_and_losses(
    fake_subscriber: type[FakeSubscriber], monkeypatch: pytest.MonkeyPatch
) -> None:
    short = invoke("kv-events", "tail", "--endpoint", "tcp://h:1", "--count", "5", "--deadline", "0.3")
    assert short.exit_code == ExitCode.DEADLINE
    assert len(short.stdout.splitlines()) == 3
    as_json = invoke(
        "kv-events", "tail", "--endpoint", "tcp://h:1", "--count", "5", "--deadline", "0.3", "--json"
    )
    assert as_json.exit_code == ExitCode.DEADLINE
    assert check_schema(json.loads(as_json.stdout.splitlines()[-1]))["error"]["type"] == "WaitTimeoutError"
    assert invoke("kv-events", "tail", "--endpoint", "tcp://h:1", "--duration", "0.3").exit_code == 2

    class Lossy(FakeSubscriber):
        def __init__(self, endpoint: str | None = None, **kw: Any) -> None:
            super().__init__(endpoint, lossy=True, **kw)

    monkeypatch.setattr("vllm_devclient.kv_events.KVEventSubscriber", Lossy)
    lossy = invoke("kv-events", "tail", "--endpoint", "tcp://h:1", "--deadline", "0.3")
    assert lossy.exit_code == ExitCode.FAILED
    assert "lost: rank 0 batches 2..4 (not_in_replay_buffer)" in lossy.stderr


def test_kv_events_tail_discovers_sources_from_the_server(
    fake_subscriber: type[FakeSubscriber], mock: respx.MockRouter
) -> None:
    sources = {"0": {"endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558", "topic": "kv"}}
    mock.get(f"{A}/kv_event_sources").respond(200, json=sources)
    result = invoke("--url", A, "kv-events", "tail", "--count", "1", "--no-backlog")
    assert result.exit_code == 0
    kw = fake_subscriber.made[-1].kw
    assert kw["backlog"] is False and kw["sources"][0].endpoint == "tcp://*:5557"
    mock.get(f"{B}/kv_event_sources").mock(side_effect=httpx.ConnectError("refused"))
    unreachable = invoke("--url", B, "--retries", "0", "kv-events", "tail")
    assert unreachable.exit_code == ExitCode.CONNECTION
    as_json = invoke("--url", B, "--retries", "0", "--json", "kv-events", "tail")
    assert doc(as_json)["error"]["type"] == "APIConnectionError"
    assert invoke("--url", A, "--url", B, "kv-events", "tail").exit_code == ExitCode.USAGE


def test_kv_events_tail_without_zmq_exits_seven(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm_devclient.kv_events", None)
    result = invoke("kv-events", "tail", "--endpoint", "tcp://h:1")
    assert result.exit_code == ExitCode.UNAVAILABLE
    assert "pip install 'vllm-devclient[zmq]'" in result.stderr
    assert (
        doc(invoke("--json", "kv-events", "tail", "--endpoint", "tcp://h:1"))["error"]["type"]
        == "ImportError"
    )
