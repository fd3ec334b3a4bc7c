"""The SDK against every recorded exchange in rust_fixtures/ (no server, no vllm): sync and async clients.

Each fixture was recorded from a real frontend by `python -m tools.fixtures record` (`make record`). The
replayed call must give the typed result or error the live run gave (the recorded outcome), and that outcome
must meet a contract written down beforehand, never the recording itself: the scenario's expectation where the
release meets the current contract, else the expectation of the release change that explains it
(`tools.fixtures.history`). A fake clock makes the deadline scenarios instant.
"""

from __future__ import annotations

import asyncio
import json
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tools.fixtures import (
    REPLAY_URL,
    ReplayError,
    diff_fixture_trees,
    load_fixtures,
    replay,
    replay_async,
    replay_transport,
)
from tools.fixtures.history import CHANGES, change_for
from tools.fixtures.releases import RELEASES
from vllm_devclient import operations, polling
from vllm_devclient._sync import _support as sync_support
from vllm_devclient.testing.contract import ScenarioRun
from vllm_devclient.testing.scenarios import SCENARIOS, get_scenario
from vllm_devclient.transports import httpx_adapter

ROOT = Path(__file__).resolve().parent.parent / "rust_fixtures"
FIXTURES = load_fixtures(ROOT)
IDS = [str(path.relative_to(ROOT).with_suffix("")) for path, _ in FIXTURES]
DOCS = [doc for _, doc in FIXTURES]
NEWEST = max({d["vllm_version"] for d in DOCS}, key=lambda v: tuple(int(p) for p in v.split(".")))


def fixture(scenario: str, frontend: str, version: str = NEWEST) -> dict[str, Any]:
    for doc in DOCS:
        if (doc["scenario"], doc["frontend"], doc["vllm_version"]) == (scenario, frontend, version):
            return doc
    raise LookupError(f"no fixture {version}/{frontend}/{scenario}")


class FakeClock:
    """time.monotonic / time.sleep / asyncio.sleep as the SDK sees them: sleeping only moves the clock."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._real_async_sleep = asyncio.sleep

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)

    async def async_sleep(self, seconds: float, result: Any = None) -> Any:
        self.now += max(0.0, seconds)
        await self._real_async_sleep(0)  # still a scheduling point
        return result


@pytest.fixture(autouse=True)
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    clock = FakeClock()
    fake_time = types.SimpleNamespace(**{**vars(time), "monotonic": clock.monotonic, "sleep": clock.sleep})
    # The SDK modules' view of time only (the operations' clock, the sync client's sleep, the transport's
    # deadline check); asyncio.sleep is looked up at call time by the async driver.
    for module in (operations, polling, sync_support, httpx_adapter):
        if hasattr(module, "time"):
            monkeypatch.setattr(module, "time", fake_time)
    monkeypatch.setattr(asyncio, "sleep", clock.async_sleep)
    monkeypatch.setattr(operations.RetryPolicy, "delay", lambda self, retry: 0.001)
    yield clock


def test_every_release_has_every_scenario_on_both_frontends() -> None:
    """Every published release with vllm-rs (`RELEASES`) is recorded, each with every scenario."""
    wanted = {sc.name for sc in SCENARIOS}
    for row in RELEASES:
        for frontend in ("python", "rust"):
            names = {
                doc["scenario"]
                for doc in DOCS
                if doc["vllm_version"] == row.version and doc["frontend"] == frontend
            }
            assert names == wanted, f"{row.version}/{frontend}: missing {sorted(wanted - names)}"


def _check(run: ScenarioRun, doc: dict[str, Any]) -> None:
    sc = run.scenario
    current = sc.expect_for(doc["frontend"])
    got = current.project(run.outcome, sc.compared_paths())
    where = f"{doc['vllm_version']}/{doc['frontend']}/{doc['scenario']} ({run.mode})"
    assert got == doc["outcome"], f"{where}: replay gave {got}, the live run gave {doc['outcome']}"
    # The oracle: everything the live contract test asserts about the SDK outcome (timings aside: nothing
    # waits here), or what the release change that explains this fixture says the SDK must give.
    change = change_for(doc)
    expect = current if change is None else change.expect[doc["scenario"]]
    assert expect.problems(run.outcome) == [], f"{where} ({change.why if change else 'current contract'})"
    if change is not None:
        assert current.problems(run.outcome), f"{where}: meets the current contract; drop it from {change}"
    assert len(run.exchanges) >= 1, where


@pytest.mark.parametrize("doc", DOCS, ids=IDS)
def test_replay_sync(doc: dict[str, Any]) -> None:
    _check(replay(doc), doc)


@pytest.mark.parametrize("doc", DOCS, ids=IDS)
async def test_replay_async(doc: dict[str, Any]) -> None:
    _check(await replay_async(doc), doc)


def test_every_fixture_names_a_known_scenario() -> None:
    for doc in DOCS:
        get_scenario(doc["scenario"])


def test_a_fixture_misses_the_current_contract_only_through_a_release_change() -> None:
    """Each fixture that misses the current contract is explained by exactly one release change (its
    expectation is the oracle); a fixture that meets it by none."""
    for doc in DOCS:
        where = f"{doc['vllm_version']}/{doc['frontend']}/{doc['scenario']}"
        change = change_for(doc)
        if doc["meets_current_contract"]:
            assert change is None, f"{where} meets the current contract, yet {change} claims it"
        else:
            assert change is not None, f"{where} misses the current contract and no release change says why"


def test_every_release_change_covers_a_recorded_fixture() -> None:
    """No entry in the history that no recording needs (a stale or mistyped one)."""
    recorded = {(doc["scenario"], doc["frontend"], doc["vllm_version"]) for doc in DOCS}
    names = {sc.name for sc in SCENARIOS}
    for change in CHANGES:
        for scenario in change.expect:
            assert scenario in names, f"{change.why}: no scenario {scenario!r}"
            for frontend in change.frontends:
                covered = [key for key in recorded if change.covers(*key) and key[:2] == (scenario, frontend)]
                assert covered, f"{change.why}: no fixture of {scenario} on {frontend} up to {change.through}"


def test_replay_refuses_a_request_that_was_not_recorded() -> None:
    doc = fixture("reset_prefix_cache", "rust")
    changed = json.loads(json.dumps(doc))
    changed["exchanges"][0]["request"]["query"][1][1] = "true"  # the SDK sends reset_external=false
    with pytest.raises(ReplayError, match="no recorded answer"):
        replay(changed)


def test_a_changed_answer_changes_the_outcome() -> None:
    """The replay really serves the recorded body: flip it and the SDK result flips."""
    doc = fixture("reset_prefix_cache", "python")
    changed = json.loads(json.dumps(doc))
    changed["exchanges"][0]["response"]["json"]["success"] = False
    assert replay(changed).outcome.success is False
    assert replay(doc).outcome.success is True


def test_replayed_timeout_is_an_api_timeout() -> None:
    import httpx

    doc = fixture("hung_is_sleeping", "rust")
    transport = replay_transport(doc["exchanges"])
    with httpx.Client(transport=transport, base_url=REPLAY_URL) as http, pytest.raises(httpx.ReadTimeout):
        http.get("/is_sleeping", headers={"accept": "application/json"})


def test_drift_names_the_scenario_and_the_field(tmp_path: Path) -> None:
    """A deliberately changed fixture: the diff names the fixture and the field that changed."""
    import shutil

    version = NEWEST
    committed = tmp_path / "committed"
    shutil.copytree(ROOT / version, committed / version)
    fresh = tmp_path / "fresh"
    shutil.copytree(ROOT / version, fresh / version)
    assert diff_fixture_trees(committed, fresh) == []

    target = fresh / version / "rust" / "wake_up_partial.json"
    doc = json.loads(target.read_text())
    doc["exchanges"][0]["response"]["json"]["status"] = "awake"
    target.write_text(json.dumps(doc, indent=2, sort_keys=True))
    (fresh / version / "python" / "health.json").unlink()

    drifts = [str(d) for d in diff_fixture_trees(committed, fresh)]
    assert drifts == [
        f"{version}/python/health: recorded -> no longer recorded",
        f"{version}/rust/wake_up_partial: exchanges[0].response.json.status: "
        'committed "sleeping", now "awake"',
    ]


def test_the_releases_answer_as_the_readme_says() -> None:
    """rust_fixtures/README.md's account of the changes, checked against the recordings."""
    from vllm_devclient import BarrierUnsupportedError

    for frontend in ("python", "rust"):
        bare = replay(fixture("reset_prefix_cache_refused", frontend, "0.25.1"))
        assert bare.outcome.success is None  # a bare 200: the engine's false is lost
        assert bare.exchanges[0].response == {
            "headers": bare.exchanges[0].response["headers"],
            "status": 200,
            "text": "",
        }
        assert isinstance(
            replay(fixture("barrier_timeout", frontend, "0.25.1")).outcome, BarrierUnsupportedError
        )
        assert replay(fixture("reset_prefix_cache_refused", frontend, "0.28.0")).outcome.success is False
        assert replay(fixture("wake_up_partial", frontend)).outcome.awake is False
    # Before 0.31 a wake-up could not say whether it was partial; 0.28.0's Rust router refused tags outright.
    assert replay(fixture("wake_up_partial", "python", "0.28.0")).outcome.awake is None
    assert type(replay(fixture("wake_up_partial", "rust", "0.28.0")).outcome).__name__ == "BadRequestError"
    # The pause utility was renamed in 0.33.0.
    assert fixture("pause", "rust", "0.28.0")["engine_calls"] == [["pause_scheduler", ["abort", True]]]
    assert fixture("pause", "rust")["engine_calls"] == [["pause_generation", ["abort", True]]]


def test_replay_needs_no_vllm() -> None:
    """Replaying imports the SDK and the scenario definitions only: no vllm, no torch."""
    import subprocess
    import sys

    code = (
        "import sys, tools.fixtures; "
        "bad = sorted(m for m in ('vllm', 'torch') if m in sys.modules); assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
