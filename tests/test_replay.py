"""The SDK against every recorded exchange in rust_fixtures/ (no server, no vllm): sync and async clients.

Each fixture was recorded from a real frontend by `python -m tools.fixtures record` (`make record`) into the
store (each distinct exchange once, `rust_fixtures/exchanges/`) and its release's index
(`rust_fixtures/<version>/index.json`). A replay depends on the exchange alone, and what it must give on the
release: so each distinct pair of a stored exchange and an expectation is replayed once, for every release
whose index names that exchange. The replayed call must give the typed result or error the live run gave
(the recorded outcome), and that outcome must meet a contract written down beforehand, never the recording
itself: the scenario's expectation where the release meets the current contract, else the expectation of the
release change that explains it (`tools.fixtures.history`). Each release's index is checked on its own: every
entry names a stored exchange of its scenario, every scenario is recorded on both frontends, and the
provenance is there. A fake clock makes the deadline scenarios instant.
"""

from __future__ import annotations

import asyncio
import json
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tools.fixtures import (
    REPLAY_URL,
    ExchangeStore,
    Fixture,
    ReleaseIndex,
    ReplayError,
    diff_fixture_trees,
    load_fixtures,
    replay,
    replay_async,
    replay_transport,
    write_documents,
)
from tools.fixtures import provenance as provenance_of
from tools.fixtures.exchanges import exchange_hash
from tools.fixtures.files import pack, unpack
from tools.fixtures.history import CHANGES, change_for
from tools.fixtures.index import FORMAT as INDEX_FORMAT
from tools.fixtures.releases import RELEASES, version_tuple
from tools.fixtures.store import FORMAT
from vllm_devclient import operations, polling
from vllm_devclient._sync import _support as sync_support
from vllm_devclient.operations import bounds, effects, failures, route_call
from vllm_devclient.testing.contract import ScenarioRun
from vllm_devclient.testing.scenarios import SCENARIOS, get_scenario
from vllm_devclient.transports import httpx_adapter

ROOT = Path(__file__).resolve().parent.parent / "rust_fixtures"
FIXTURES = load_fixtures(ROOT)  # every entry of every release's index, resolved
NEWEST = max({f.release for f in FIXTURES}, key=version_tuple)


def fixture(scenario: str, frontend: str, version: str = NEWEST) -> dict[str, Any]:
    for f in FIXTURES:
        if (f.scenario, f.frontend, f.release) == (scenario, frontend, version):
            return f.doc
    raise LookupError(f"no fixture {version}/{frontend}/{scenario}")


def _expectation(f: Fixture) -> tuple[int, ...]:
    """The release changes that cover a fixture (none: the current contract); `change_for` says which
    one holds, and fails on several, in the test."""
    return tuple(i for i, change in enumerate(CHANGES) if change.covers(f.scenario, f.frontend, f.release))


@dataclass(frozen=True)
class Case:
    """One stored exchange under one expectation: the fixtures (releases) that share both."""

    fixtures: tuple[Fixture, ...]
    split: bool  # the exchange is held to another expectation on other releases too

    @property
    def doc(self) -> dict[str, Any]:
        return self.fixtures[0].doc

    @property
    def id(self) -> str:
        first = self.fixtures[0]
        label = f"{first.frontend}/{first.scenario}/{first.exchange}"
        expect = _expectation(first)
        named = "+".join(f"change{i}" for i in expect) or "current"
        return f"{label}/{named}" if self.split else label

    def where(self, mode: str) -> str:
        first = self.fixtures[0]
        releases = ", ".join(f.release for f in self.fixtures)
        return f"{first.frontend}/{first.scenario} on {releases} (exchange {first.exchange}, {mode})"


def _cases() -> list[Case]:
    groups: dict[tuple[str, tuple[int, ...]], list[Fixture]] = {}
    for f in FIXTURES:
        groups.setdefault((f.exchange, _expectation(f)), []).append(f)
    per_exchange: dict[str, int] = {}
    for name, _ in groups:
        per_exchange[name] = per_exchange.get(name, 0) + 1
    return [Case(tuple(fs), per_exchange[name] > 1) for (name, _), fs in groups.items()]


CASES = _cases()


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
    # Every module named must read the clock (setattr raises otherwise): a module that moves is found here,
    # not by a replay that waits out a real deadline.
    for module in (bounds, effects, failures, route_call, polling, sync_support, httpx_adapter):
        monkeypatch.setattr(module, "time", fake_time)
    monkeypatch.setattr(asyncio, "sleep", clock.async_sleep)
    monkeypatch.setattr(operations.RetryPolicy, "delay", lambda self, retry: 0.001)
    yield clock


@pytest.mark.parametrize("release", [row.version for row in RELEASES])
def test_each_release_index_names_every_scenario_stored_with_its_provenance(release: str) -> None:
    """Every published release with vllm-rs (`RELEASES`) has an index naming every scenario on both
    frontends, each entry a stored exchange of that frontend and scenario, and its provenance."""
    base = ROOT / release
    assert ReleaseIndex.exists(base), f"{release} is not recorded"
    index, store = ReleaseIndex.load(base), ExchangeStore(ROOT)
    assert index.version == release
    wanted = {sc.name for sc in SCENARIOS}
    for frontend in ("python", "rust"):
        names = set(index.fixtures.get(frontend, {}))
        assert names == wanted, (
            f"{release}/{frontend}: missing {sorted(wanted - names)}, extra {sorted(names - wanted)}"
        )
    for frontend, scenario, entry in index.entries():
        exchange = store.get(entry["exchange"])
        assert (exchange["frontend"], exchange["scenario"]) == (frontend, scenario), entry["exchange"]
        assert entry["format"] == FORMAT and isinstance(entry["meets_current_contract"], bool)
        assert isinstance(entry["description"], str) and entry["description"]
    doc = provenance_of.load(base)
    assert doc["vllm_version"] == release and doc["recordings"] and doc["vllm_rs"]["sha256"]


def test_the_store_holds_each_named_exchange_once_under_its_hash() -> None:
    """A stored file's name is its content's hash, every stored exchange is named by some release, and the
    replay cases cover every index entry exactly once."""
    store = ExchangeStore(ROOT)
    names = store.names()
    for name in names:
        assert exchange_hash(store.get(name)) == name, f"{name}: the content is not what the name says"
    named = {f.exchange for f in FIXTURES}
    assert set(names) == named, f"stored but named by no index: {sorted(set(names) - named)}"
    assert len(names) < len(FIXTURES) / 4  # shared: most answers did not change between releases
    covered = sorted(f.key for case in CASES for f in case.fixtures)
    assert covered == sorted(f.key for f in FIXTURES)
    assert json.loads((ROOT / NEWEST / "index.json").read_text())["format"] == INDEX_FORMAT


def test_every_fixture_file_comes_back_from_the_store(tmp_path: Path) -> None:
    """`unpack` writes a release's fixtures one file each, as committed before the store (the same JSON:
    each its entry's exchange, description, format and verdict, and the release), with its provenance.json;
    `pack` stores them again, giving the same index and exchanges."""
    releases = [RELEASES[0].version, NEWEST]
    files = tmp_path / "files"
    written = unpack(ROOT, files, releases)
    assert len(written) == sum(1 for f in FIXTURES if f.release in releases) + len(releases)
    for f in FIXTURES:
        if f.release in releases:
            path = files / f.release / f.frontend / f"{f.scenario}.json"
            assert json.loads(path.read_text()) == f.doc
    for release in releases:
        assert json.loads((files / release / "provenance.json").read_text()) == provenance_of.load(
            ROOT / release
        )
    again = tmp_path / "again"
    assert pack(files, again) == releases
    for release in releases:
        assert (again / release / "index.json").read_text() == (ROOT / release / "index.json").read_text()
    for name in ExchangeStore(again).names():
        assert (again / "exchanges" / f"{name}.json").read_text() == (
            ROOT / "exchanges" / f"{name}.json"
        ).read_text()


def _check(run: ScenarioRun, case: Case) -> None:
    doc = case.doc
    sc = run.scenario
    current = sc.expect_for(doc["frontend"])
    got = current.project(run.outcome, sc.compared_paths())
    where = case.where(run.mode)
    assert got == doc["outcome"], f"{where}: replay gave {got}, the live run gave {doc['outcome']}"
    # The oracle: everything the live contract test asserts about the SDK outcome (timings aside: nothing
    # waits here), or what the release change that explains these fixtures says the SDK must give.
    change = change_for(doc)
    expect = current if change is None else change.expect[doc["scenario"]]
    assert expect.problems(run.outcome) == [], f"{where} ({change.why if change else 'current contract'})"
    if change is not None:
        assert current.problems(run.outcome), f"{where}: meets the current contract; drop it from {change}"
    assert len(run.exchanges) >= 1, where


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_replay_sync(case: Case) -> None:
    _check(replay(case.doc), case)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_replay_async(case: Case) -> None:
    _check(await replay_async(case.doc), case)


def test_every_fixture_names_a_known_scenario() -> None:
    store = ExchangeStore(ROOT)
    for name in store.names():
        get_scenario(store.get(name)["scenario"])


def test_a_fixture_misses_the_current_contract_only_through_a_release_change() -> None:
    """Each fixture that misses the current contract is explained by exactly one release change (its
    expectation is the oracle); a fixture that meets it by none."""
    for f in FIXTURES:
        change = change_for(f.doc)
        if f.doc["meets_current_contract"]:
            assert change is None, f"{f.key} meets the current contract, yet {change} claims it"
        else:
            assert change is not None, f"{f.key} misses the current contract and no release change says why"


def test_every_release_change_covers_a_recorded_fixture() -> None:
    """No entry in the history that no recording needs (a stale or mistyped one)."""
    recorded = {(f.scenario, f.frontend, f.release) for f in FIXTURES}
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
    version = NEWEST
    docs = [json.loads(json.dumps(f.doc)) for f in FIXTURES if f.release == version]
    committed, fresh = tmp_path / "committed", tmp_path / "fresh"
    write_documents(committed, docs)
    write_documents(fresh, docs)
    assert diff_fixture_trees(committed, fresh) == []

    changed = next(d for d in docs if (d["frontend"], d["scenario"]) == ("rust", "wake_up_partial"))
    changed["exchanges"][0]["response"]["json"]["status"] = "awake"
    write_documents(fresh, [changed])
    index = ReleaseIndex.load(fresh / version)
    del index.fixtures["python"]["health"]
    index.save(fresh / version)

    drifts = [str(d) for d in diff_fixture_trees(committed, fresh)]
    assert drifts == [
        f"{version}/python/health: recorded -> no longer recorded",
        f"{version}/rust/wake_up_partial: exchanges[0].response.json.status: "
        'committed "sleeping", now "awake"',
    ]
    with pytest.raises(FileNotFoundError, match="no fixture tree"):
        diff_fixture_trees(committed, tmp_path / "none")


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
