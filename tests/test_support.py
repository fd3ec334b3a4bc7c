"""The support matrix (route x release x frontend) drawn from the recordings: the shipped data file agrees
with the fixture tree, every published release with vllm-rs is recorded on both frontends, a missing
route's error names the first release that serves it, and `vllm-devclient support` prints the matrix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from tools.fixtures import load_fixtures, replay
from tools.fixtures.releases import RELEASES, ReleaseProfile, release, version_tuple
from tools.fixtures.support import release_changes, route_of, routes_of, support_data
from vllm_devclient import NotFoundError, RouteNotServedError
from vllm_devclient.cli import cli
from vllm_devclient.errors import error_from_response
from vllm_devclient.support import FORMAT, load_support, markdown, parse

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "rust_fixtures"
SHIPPED = ROOT / "vllm_devclient" / "route_support.json"


@pytest.fixture(scope="module")
def fresh() -> dict[str, Any]:
    return support_data(FIXTURES)


def test_the_shipped_matrix_is_the_one_the_fixtures_give(fresh: dict[str, Any]) -> None:
    assert json.loads(SHIPPED.read_text()) == fresh, "run `make figures`"
    assert load_support().releases == tuple(fresh["releases"])


def test_every_published_release_is_recorded_on_both_frontends() -> None:
    recorded = {(f.release, f.frontend) for f in load_fixtures(FIXTURES)}
    for row in RELEASES:
        for frontend in ("python", "rust"):
            assert (row.version, frontend) in recorded, f"{row.version}/{frontend} is not recorded"
    assert {v for v, _ in recorded} == {row.version for row in RELEASES}


def test_the_release_table_is_in_order_and_each_row_is_found() -> None:
    versions = [row.version for row in RELEASES]
    assert versions == sorted(versions, key=version_tuple) and len(set(versions)) == len(versions)
    assert versions[0] == "0.22.0"  # the first wheel with vllm-rs in it
    assert release("0.99.0").pause_method == RELEASES[-1].pause_method  # newer: as the newest
    with pytest.raises(ValueError, match="add its row"):
        release("0.21.0")
    # The launcher's flags follow the row: no --engine-start-index before 0.24.0.
    assert ReleaseProfile("0.23.0").rust_flags == ()
    assert ReleaseProfile("0.24.0").rust_flags == ("start-index",)


def _contract_404(route: str, frontend: str, release: str) -> bool:
    """Every fixture that reached `route` there expects its 404 (a route the kit's frontend cannot serve:
    the Python frontend's checkpoint routes need sleep mode, which vLLM refuses on a CPU; the
    fault-tolerance route needs --enable-fault-tolerance)."""
    reached = [
        f.doc
        for f in load_fixtures(FIXTURES, [release])
        if f.frontend == frontend and route in routes_of(f.doc)
    ]
    return bool(reached) and all(
        routes_of(doc)[route] == 404 and doc["meets_current_contract"] and doc["outcome"]["kind"] == "error"
        for doc in reached
    )


def test_every_route_has_a_cell_on_the_newest_release(fresh: dict[str, Any]) -> None:
    newest = fresh["releases"][-1]
    for route, per in fresh["routes"].items():
        for frontend, cells in per.items():
            if cells[newest] is None and _contract_404(route, frontend, newest):
                continue
            assert cells[newest] == {"status": "served"}, f"{route} on {frontend} {newest}: {cells[newest]}"


def test_a_route_is_absent_where_its_fixture_answered_404() -> None:
    """The matrix reads the recordings: an absent cell is a recorded 404/405 that misses the contract."""
    docs = [f.doc for f in load_fixtures(FIXTURES)]
    absent = 0
    data = load_support().raw
    for doc in docs:
        route = route_of(doc)
        if route is None or route not in data["routes"] or doc["setup"] != "default":
            continue
        cell = data["routes"][route][doc["frontend"]][doc["vllm_version"]]
        status = doc["exchanges"][0].get("response", {}).get("status")
        if not doc["meets_current_contract"] and status == 404:
            assert cell["status"] == "absent", (route, doc["vllm_version"], doc["frontend"])
            absent += 1
    assert absent > 0


def test_a_missing_dev_route_names_the_first_release_that_serves_it() -> None:
    """Replayed from a recording: the Rust frontend of a release before the weight-transfer routes."""
    matrix = load_support()
    route = "POST /init_weight_transfer_engine"
    first = matrix.added_in(route, "rust")
    assert first is not None
    before = matrix.releases[matrix.releases.index(first) - 1]
    key = ("init_weight_transfer_engine", "rust", before)
    docs = [f.doc for f in load_fixtures(FIXTURES)]
    doc = next(d for d in docs if (d["scenario"], d["frontend"], d["vllm_version"]) == key)
    error = replay(doc).outcome
    assert isinstance(error, RouteNotServedError)
    assert error.served_from == first
    assert f"from vLLM {first} on" in str(error) and first not in error.message


def test_a_route_every_release_serves_names_no_release() -> None:
    response = httpx.Response(404, json={"detail": "Not Found"})
    error = error_from_response(response, method="GET", path="/v1/models", dev_route=False, frontend="python")
    assert type(error) is NotFoundError and error.served_from is None and "vLLM serves" not in str(error)


def test_an_unknown_frontend_names_both(fresh: dict[str, Any]) -> None:
    response = httpx.Response(404, text="")
    error = error_from_response(
        response, method="GET", path="/weight_info", dev_route=True, dev_routes_served=True
    )
    matrix = parse(fresh)
    for frontend in ("python", "rust"):
        first = matrix.added_in("GET /weight_info", frontend)
        if first:
            assert f"the {frontend} frontend from vLLM {first}" in str(error)


def test_data_of_another_format_is_refused(fresh: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="format"):
        parse({**fresh, "format": FORMAT + 1})


def test_the_markdown_names_every_release_and_explains_each_difference(fresh: dict[str, Any]) -> None:
    text = markdown(parse(fresh), "rust")
    header = text.splitlines()[0]
    assert all(release in header for release in fresh["releases"])
    notes = [line for line in text.splitlines() if line.startswith("- [")]
    assert len(notes) == len({line.split("] ", 1)[1] for line in notes})
    assert all(f"differs [{i}]" in text for i in range(1, len(notes) + 1))


def test_each_consecutive_pair_is_compared(fresh: dict[str, Any]) -> None:
    pairs = release_changes(fresh, FIXTURES)
    assert len(pairs) == 2 * (len(fresh["releases"]) - 1)
    assert any(p["routes"] for p in pairs) and any(p["answers"] for p in pairs)


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, ["support", *args], env={"VLLM_DEVCLIENT_URL": ""}, catch_exceptions=False)


def test_the_command_prints_the_matrix_and_its_json() -> None:
    shown = _invoke()
    assert shown.exit_code == 0
    assert "## python frontend" in shown.output and "## rust frontend" in shown.output
    doc = json.loads(_invoke("--json").output)
    assert doc["command"] == "support" and doc["ok"] is True
    assert doc["result"] == json.loads(SHIPPED.read_text())
    one = json.loads(_invoke("-o", "json", "--frontend", "rust", "--route", "/weight_info").output)
    assert one["result"]["frontends"] == ["rust"]
    assert list(one["result"]["routes"]) == ["GET /weight_info"]
    assert list(one["result"]["routes"]["GET /weight_info"]) == ["rust"]


def test_the_command_refuses_an_unknown_route() -> None:
    result = _invoke("--route", "/no_such_route")
    assert result.exit_code == 2 and "no recorded route" in result.output


def test_a_release_starts_its_vllm_rs_without_the_args_it_refuses() -> None:
    """0.22.0's vllm-rs exits on `api_key`, `enable_lora` and `enable_tokenizer_info_endpoint`: its row
    says so, and the launcher leaves them out (the routes they turn on are then recorded as absent)."""
    from tools.fixtures.releases import release_pool

    args = {"enable_lora": True, "max_lora_rank": 16, "enable_tokenizer_info_endpoint": True}
    old = release_pool("0.22.0", python=None, vllm_rs=None, frontends=["rust"]).rust_class
    new = release_pool("0.33.0", python=None, vllm_rs=None, frontends=["rust"]).rust_class
    assert old is not None and new is not None
    started = old(args=args, api_key="k", engine=None)
    assert started.extra_args == {"max_lora_rank": 16} and started.api_key is None
    assert new(args=args, api_key="k", engine=None).extra_args == args
