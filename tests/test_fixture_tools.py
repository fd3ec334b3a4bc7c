"""The fixture tools (`python -m tools.fixtures`, repository tooling): summary, drift of two trees, record's
call of the recorder once per release, the exchange store under the indexes (shared exchanges, a broken
store's errors) and the one-file-per-fixture layout before it (`pack`, `unpack`)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import tools.fixtures.store as store
from tools.fixtures import ExchangeStore, FixtureStoreError, ReleaseIndex
from tools.fixtures.cli import cli

ROOT = Path(__file__).resolve().parents[1]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_summary_and_drift_against_a_tree(tmp_path: Path) -> None:
    fixtures = ROOT / "rust_fixtures"
    summary = invoke("summary", "--fixtures", str(fixtures))
    assert summary.exit_code == 0 and summary.stdout.startswith("| scenario |")
    same = invoke("drift", "--json", "--fixtures", str(fixtures), "--against", str(fixtures))
    assert same.exit_code == 0 and json.loads(same.stdout) == {"drifts": []}
    changed = tmp_path / "fresh"
    shutil.copytree(fixtures, changed)
    victim = json.loads(json.dumps(store.load_fixtures(changed, ["0.22.0"])[-1].doc))
    victim["description"] = "said otherwise"
    store.write_documents(changed, [victim])
    drifted = invoke("drift", "--fixtures", str(fixtures), "--against", str(changed))
    assert drifted.exit_code == 1 and "DRIFT in 1 fixture(s), 1 field(s)" in drifted.stdout
    assert "re-record with: python -m tools.fixtures record" in drifted.stdout
    data = json.loads(
        invoke("drift", "--json", "--fixtures", str(fixtures), "--against", str(changed)).stdout
    )
    assert data["drifts"][0]["field"] == "description"
    missing = invoke("summary", "--fixtures", str(tmp_path / "none"))
    assert missing.exit_code == 2 and "no fixture tree" in missing.stderr


def _doc(scenario: str, version: str = "0.33.0", **changes: Any) -> dict[str, Any]:
    doc = {
        "format": 1, "scenario": scenario, "description": f"{scenario}, said", "vllm_version": version,
        "frontend": "rust", "setup": "default", "timing_dependent": False,
        "client": {"api_key_sent": False, "max_retries": 0}, "engine_script": {}, "engine_calls": [],
        "exchanges": [{"request": {"method": "GET", "path": "/health"}, "response": {"status": 200}}],
        "outcome": {"kind": "result", "type": "bool", "fields": {"": True}}, "meets_current_contract": True,
    }  # fmt: skip
    return {**doc, **changes}


def test_releases_that_answered_alike_share_one_stored_exchange(tmp_path: Path) -> None:
    """Two releases, one answer: one stored exchange, two index entries; a new answer replaces the old
    exchange, which goes once no index names it."""
    root = tmp_path / "tree"
    store.write_documents(root, [_doc("health", "0.32.0"), _doc("health", "0.33.0")])
    (shared,) = ExchangeStore(root).names()
    assert [f.exchange for f in store.load_fixtures(root)] == [shared, shared]
    assert [f.doc for f in store.load_fixtures(root)] == [_doc("health", "0.32.0"), _doc("health", "0.33.0")]
    # Only the description and the verdict differ: still one exchange, the entry keeps them.
    store.write_documents(
        root, [_doc("health", "0.33.0", description="new words", meets_current_contract=False)]
    )
    assert ExchangeStore(root).names() == [shared]
    assert ReleaseIndex.load(root / "0.33.0").fixtures["rust"]["health"]["description"] == "new words"
    answered = _doc("health", "0.32.0", outcome={"kind": "result", "type": "bool", "fields": {"": False}})
    store.write_documents(root, [answered, {**answered, "vllm_version": "0.33.0"}])
    (now,) = ExchangeStore(root).names()
    assert now != shared and not (root / "exchanges" / f"{shared}.json").exists()


def test_a_broken_store_is_a_typed_error_naming_what_is_wrong(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    store.write_documents(root, [_doc("health"), _doc("version")])
    index = ReleaseIndex.load(root / "0.33.0")
    index.fixtures["rust"]["health"]["exchange"] = index.fixtures["rust"]["version"]["exchange"]
    index.save(root / "0.33.0")
    with pytest.raises(
        FixtureStoreError, match=r"0\.33\.0/rust/health names exchange \w+, which is rust/version"
    ):
        store.load_fixtures(root)
    index.fixtures["rust"]["health"]["exchange"] = "0" * 16
    index.save(root / "0.33.0")
    with pytest.raises(FixtureStoreError, match="no stored exchange 0000000000000000"):
        store.load_fixtures(root)
    with pytest.raises(FixtureStoreError, match="without its vllm_version"):
        store.write_documents(root, [{k: v for k, v in _doc("health").items() if k != "vllm_version"}])
    (root / "0.33.0" / "index.json").write_text(json.dumps({"format": 99, "vllm_version": "0.33.0"}))
    with pytest.raises(FixtureStoreError, match="index format 99"):
        store.load_fixtures(root)


def test_a_tree_of_one_file_per_fixture_is_packed_not_misread(tmp_path: Path) -> None:
    """The layout before the store is refused by the readers with the command that converts it; `pack`
    converts it, and refuses a file whose path says another fixture than its content."""
    old = tmp_path / "old"
    (old / "0.33.0" / "rust").mkdir(parents=True)
    (old / "0.33.0" / "rust" / "health.json").write_text(json.dumps(_doc("health")))
    with pytest.raises(FileNotFoundError, match=r"tools\.fixtures pack"):
        store.load_fixtures(old)
    drift = invoke("drift", "--fixtures", str(old), "--against", str(old))
    assert drift.exit_code == 2 and "pack" in drift.stderr
    packed = invoke("pack", str(old), "--out", str(tmp_path / "new"))
    assert packed.exit_code == 0, packed.output
    assert [f.doc for f in store.load_fixtures(tmp_path / "new")] == [_doc("health")]
    unpacked = invoke("unpack", "--fixtures", str(tmp_path / "new"), "--out", str(tmp_path / "back"))
    assert unpacked.exit_code == 0 and "1 files written" in unpacked.stdout
    assert json.loads((tmp_path / "back" / "0.33.0" / "rust" / "health.json").read_text()) == _doc("health")
    (old / "0.33.0" / "rust" / "version.json").write_text(json.dumps(_doc("health")))
    wrong = invoke("pack", str(old), "--out", str(tmp_path / "other"))
    assert wrong.exit_code == 2 and "is 0.33.0/rust/health by its content" in wrong.stderr


def test_record_calls_the_recorder_once_per_release(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    def record(out: str, **kw: Any) -> Path:
        calls.append({"out": out, **kw})
        version = "0.33.0" if kw["python"] is None else "0.28.0"
        store.write_documents(out, [_doc("health", version)])
        return Path(out) / version

    monkeypatch.setattr(store, "record", record)
    result = invoke(
        "record", "--json", "--out", str(tmp_path), "--frontends", "rust", "--scenarios", "health"
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "out": str(tmp_path), "frontends": ["rust"],
        "releases": [{"version": "0.33.0", "python": sys.executable, "fixtures": 1}],
    }  # fmt: skip
    assert calls[0]["frontends"] == ["rust"] and [s.name for s in calls[0]["scenarios"]] == ["health"]
    # Every --python is one release; naming this interpreter is the installed vLLM.
    older = tmp_path / "old" / "bin" / "python"
    calls.clear()
    both = invoke(
        "record", "--json", "--out", str(tmp_path), "--python", sys.executable, "--python", str(older)
    )
    assert both.exit_code == 0, both.output
    assert [c["python"] for c in calls] == [None, str(older)]
    assert [r["version"] for r in json.loads(both.stdout)["releases"]] == ["0.33.0", "0.28.0"]
    bad = invoke("record", "--scenarios", "no_such_scenario")
    assert bad.exit_code == 2
    two = invoke("record", "--python", "a", "--python", "b", "--vllm-rs", "x")
    assert two.exit_code == 2 and "one --python" in two.stderr


def test_provenance_goes_into_the_release_index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`provenance` and every recording write the release's facts into its index, its fixtures kept."""
    import tools.fixtures.cli as fixtures_cli
    from tools.fixtures import provenance

    root = tmp_path / "tree"
    store.write_documents(root, [_doc("health")])
    monkeypatch.setattr(fixtures_cli, "installed_vllm_version", lambda python: "0.33.0")
    monkeypatch.setattr(fixtures_cli, "vllm_rs_of", lambda python: "vllm-rs")
    monkeypatch.setattr(provenance, "wheel_facts", lambda version: {"file": "w.whl", "sha256": "a" * 64})
    monkeypatch.setattr(provenance, "binary_facts", lambda path: {"sha256": "b" * 64})
    monkeypatch.setattr(provenance, "history_entry", lambda base: None)
    done = invoke("provenance", "--out", str(root), "--python", sys.executable)
    assert done.exit_code == 0 and "index.json: wheel aaaaaaaaaaaa, vllm-rs bbbbbbbbbbbb" in done.stdout
    provenance.update(
        root / "0.33.0", version="0.33.0", vllm_rs=None, scenarios=["health"], frontends=["rust"]
    )
    index = ReleaseIndex.load(root / "0.33.0")
    assert index.provenance["wheel"]["file"] == "w.whl" and index.provenance["vllm_rs"]["sha256"] == "b" * 64
    assert [r["scenarios"] for r in index.provenance["recordings"]] == [["health"]]
    assert [f.doc for f in store.load_fixtures(root)] == [_doc("health")]
    absent = invoke("provenance", "--out", str(tmp_path / "none"), "--python", sys.executable)
    assert absent.exit_code == 2 and "no recordings of vLLM 0.33.0" in absent.stderr
