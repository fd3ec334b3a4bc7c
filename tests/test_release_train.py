"""The release train's judging half (no server, no I/O), the CI's newest-release check, and the
provenance every release's recordings carry."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tools.fixtures import provenance
from tools.fixtures.releases import RELEASES
from tools.train.compare import compare, shape, shape_changes
from tools.train.report import markdown
from tools.train.survey import FrontendSurvey, Survey

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "rust_fixtures"


def _fixture(
    frontend: str, scenario: str, body: Any, *, calls: Any = (), meets: bool = True
) -> dict[str, Any]:
    return {
        "frontend": frontend,
        "scenario": scenario,
        "exchanges": [{"request": {}, "response": {"status": 200, "json": body}}],
        "engine_calls": [list(c) for c in calls],
        "meets_current_contract": meets,
    }


def _survey(version: str, **routes: list[str]) -> Survey:
    fronts = {
        fe: FrontendSurvey(fe, started=True, routes={p: [] for p in paths}) for fe, paths in routes.items()
    }
    return Survey(version, fronts)


def test_compare_finds_new_routes_unknown_utilities_changed_shapes_and_contract_misses() -> None:
    old = _survey("0.33.0", python=["/sleep"], rust=["/sleep"])
    new = _survey("0.34.0", python=["/sleep"], rust=["/sleep", "/checkpoint/status", "/brand_new"])
    new.frontends["rust"].startup_utilities = ["is_inference_ready"]
    found = compare(
        new,
        old,
        [
            _fixture("rust", "sleep", {"status": "sleeping", "level": 1}, calls=[("sleep", [1])]),
            _fixture("rust", "info", {"vllm_config": None}, meets=False),
        ],
        [
            _fixture("rust", "sleep", {"status": "sleeping", "level": 1}, calls=[("sleep", [1])]),
            _fixture("rust", "info", {"vllm_config": {"a": 1}}),
        ],
        sdk_paths=["/sleep", "/checkpoint/status"],
        known_utilities=["sleep"],
    )
    assert found.routes_added == {"python": [], "rust": ["/brand_new", "/checkpoint/status"]}
    assert found.untyped_routes == {"rust": ["/brand_new"]}
    assert found.unknown_utilities == ["is_inference_ready"]
    assert found.changed_shapes == ["rust `info`: exchange 1: HTTP 200; vllm_config: object -> NoneType"]
    assert found.contract_misses == ["rust `info`"]
    assert found.needs_a_person
    report = markdown(found, timings={"install": 20.0, "record": 100.0}, facts={"wheel": "w"})
    assert "took 120 s" in report and "`/brand_new`" in report and "`is_inference_ready`" in report


def test_a_frontend_that_does_not_start_is_what_the_report_leads_with() -> None:
    new = Survey(
        "0.34.0",
        {"python": FrontendSurvey("python", started=False, error="boom\nRuntimeError: needs Triton")},
    )
    found = compare(new, None, [], [], sdk_paths=[], known_utilities=[])
    assert found.not_started == {"python": "boom\nRuntimeError: needs Triton"}
    assert found.needs_a_person
    assert "python: RuntimeError: needs Triton" in markdown(found, timings={}, facts={})


def test_nothing_changed_needs_no_person() -> None:
    same = _survey("0.34.0", python=["/sleep"])
    doc = _fixture("python", "sleep", {"status": "sleeping"})
    found = compare(
        same, _survey("0.33.0", python=["/sleep"]), [doc], [doc], sdk_paths=["/sleep"], known_utilities=[]
    )
    assert not found.needs_a_person


def test_shape_keeps_keys_and_leaf_types_only() -> None:
    assert shape({"b": [{"x": 1}, {"y": 2}], "a": None}) == {"a": "NoneType", "b": [{"x": "int"}]}


def test_shape_changes_name_each_key_added_gone_or_retyped() -> None:
    was = shape({"a": 1, "c": {"x": 1}, "items": [{"q": 1}]})
    now = shape({"b": 1, "c": None, "items": [{"q": "1", "r": 2}]})
    assert shape_changes(was, now) == [
        "+b",
        "-a",
        "c: object -> NoneType",
        "+items[].r",
        "items[].q: int -> str",
    ]


def _newest_release() -> Any:
    spec = importlib.util.spec_from_file_location("newest_release", ROOT / "scripts" / "newest_release.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_ci_check_names_a_release_the_matrix_lacks() -> None:
    check = _newest_release()
    assert check.newest_of("vllm (0.35.0)\nAvailable versions: 0.35.0, 0.34.0\n") == "0.35.0"
    assert "NEW vLLM RELEASE: 0.35.0" in check.message("0.35.0", ["0.33.0", "0.34.0"])
    assert "make release V=0.35.0" in check.message("0.35.0", ["0.34.0"])
    assert "NEW" not in check.message("0.34.0", ["0.33.0", "0.34.0"])


@pytest.mark.parametrize("pip", ["false", "/nonexistent/pip"])
def test_the_ci_check_never_fails_the_run(pip: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "newest_release.py")],
        capture_output=True,
        text=True,
        env={"VLLM_DEVCLIENT_PIP": pip, "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert done.returncode == 0
    assert "not checked" in done.stdout


@pytest.mark.parametrize("release", [r.version for r in RELEASES])
def test_every_release_s_recordings_carry_their_provenance(release: str) -> None:
    doc = provenance.load(FIXTURES / release)
    assert doc.get("vllm_version") == release
    assert re.fullmatch(r"vllm-[\d.]+-.*\.whl", doc["wheel"]["file"]) and release in doc["wheel"]["file"]
    assert re.fullmatch(r"[0-9a-f]{64}", doc["wheel"]["sha256"])
    assert re.fullmatch(r"[0-9a-f]{64}", doc["vllm_rs"]["sha256"])
    reported = doc["vllm_rs"].get("version_reported")
    assert reported == f"vllm-rs {release}" or (reported is None and doc["vllm_rs"]["version_error"])
    assert doc["recordings"], "no recording session is named"
    for entry in doc["recordings"]:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", entry["date"]) and entry["recorder_commit"]


def test_the_installed_release_s_binary_is_the_recorded_one() -> None:
    """The provenance of the release this venv has installed names this very vllm-rs (a re-built or
    swapped binary would differ)."""
    try:
        from vllm_devclient.testing.frontends import find_vllm_rs

        binary = find_vllm_rs()
        import importlib.metadata as md

        version = md.version("vllm")
    except Exception as exc:
        pytest.skip(f"no vLLM installed ({exc})")
    doc = provenance.load(FIXTURES / version)
    assert doc["vllm_rs"]["sha256"] == provenance.sha256_of(Path(binary)), json.dumps(doc["vllm_rs"])
