"""A route is one record: its request is built from the record (where each parameter goes, its check, the
facts that depend on the arguments), the dev-route list comes from the records, raw responses ride in the
call's own options, the sync code is written by whole-word rules that must all be used, the generator
leaves no generated module behind that it no longer writes (the fleets' methods, once a module per topic),
and the package's generated code stays within its budget."""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import httpx
import pytest
import respx

from vllm_devclient import AsyncDevClient, InvalidParameterError, RawResponse, _base_client
from vllm_devclient.endpoints import NO_BODY
from vllm_devclient.routes import DEV_PATHS, ROUTES, endpoint

ROOT = Path(__file__).resolve().parents[1]
BASE = "http://vllm.test"

# The hand-kept list this replaced (endpoints.DEV_PATHS before the records said it).
OLD_DEV_PATHS = {
    "/reset_prefix_cache", "/reset_mm_cache", "/reset_encoder_cache", "/sleep", "/wake_up",
    "/is_sleeping", "/release_kv_cache_memory", "/pause", "/resume", "/is_paused", "/abort_requests",
    "/collective_rpc", "/server_info", "/get_world_size", "/init_weight_transfer_engine",
    "/shutdown_weight_transfer_engine", "/start_weight_update", "/start_draft_weight_update",
    "/update_weights", "/finish_weight_update", "/update_weight_version", "/weight_info",
    "/weight_checker",
}  # fmt: skip


def _unasync() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unasync_script", ROOT / "scripts" / "unasync.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_route_parameter_says_where_it_goes_and_the_dev_paths_come_from_the_records() -> None:
    for route in ROUTES:
        for p in route.params:
            assert p.send in ("query", "body"), (route.name, p.name)
            assert p.check is not None, (route.name, p.name)
    # The hand-kept list the records replaced: none of its paths was lost, and a new dev route joins by its
    # record alone (no list to edit).
    assert OLD_DEV_PATHS <= DEV_PATHS
    assert {r.path for r in ROUTES if r.dev_route} == DEV_PATHS
    assert not DEV_PATHS & {r.path for r in ROUTES if not r.dev_route}


def test_the_request_follows_the_record() -> None:
    sleep = endpoint("sleep", level=2, mode="wait", reset_connector=None)
    assert (sleep.method, sleep.path, sleep.params) == ("POST", "/sleep", (("level", "2"), ("mode", "wait")))
    assert sleep.requires is None
    assert (
        sleep.long_running and not endpoint("sleep", level=1, mode="abort", reset_connector=None).long_running
    )
    kept = endpoint("sleep", level=1, mode="abort", reset_connector=False)
    assert kept.params[-1] == ("reset_connector", "false") and kept.requires == ("0.34.0", "reset_connector")
    assert endpoint("wake_up", tags=["weights", "kv_cache"]).params == (
        ("tags", "weights"),
        ("tags", "kv_cache"),
    )
    assert endpoint("reset_prefix_cache", reset_running_requests=True, reset_external=False).params == (
        ("reset_running_requests", "true"),
        ("reset_external", "false"),
    )
    every = endpoint("abort_requests", request_ids=None)
    assert every.body == {"request_ids": []} and not every.idempotent
    assert endpoint("abort_requests", request_ids=["a"]).idempotent
    rpc = endpoint("collective_rpc", method="m", args=(), kwargs=None, rpc_timeout=3)
    assert rpc.body == {"method": "m", "args": [], "kwargs": {}, "timeout": 3.0} and rpc.long_running
    no_override = endpoint("start_profile", profile_prefix=None, delay_iterations=None, max_iterations=None)
    assert no_override.body is NO_BODY
    assert endpoint("finish_weight_update", weight_version=None).body == {}
    assert not endpoint("weight_checker", action="reset", baseline=None).idempotent
    assert endpoint("weight_checker", action="checksum", baseline=None).idempotent
    # A bodiless request of the same arguments is made once (the barrier sends it every try).
    assert endpoint("health") is endpoint("health")


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        (
            "sleep",
            {"level": 5, "mode": "abort", "reset_connector": None},
            "sleep level must be 0, 1 or 2, got 5",
        ),
        (
            "sleep",
            {"level": 1, "mode": None, "reset_connector": None},
            "mode must be one of abort, wait, keep; got None",
        ),
        (
            "sleep",
            {"level": 1, "mode": "abort", "reset_connector": 0},
            "reset_connector must be True or False",
        ),
        ("pause", {"mode": "abort", "clear_cache": 1}, "clear_cache must be True or False, got 1"),
        ("server_info", {"config_format": "yaml"}, "config_format must be 'text' or 'json', got 'yaml'"),
        ("weight_checker", {"action": "compare", "baseline": None}, "action='compare' needs baseline="),
        (
            "weight_checker",
            {"action": "x", "baseline": None},
            "action must be 'checksum', 'reset' or 'compare'",
        ),
        ("update_weights", {"update_info": 3}, "update_info must be a dict, or a list of per-worker dicts"),
        (
            "start_profile",
            {"profile_prefix": None, "delay_iterations": -1, "max_iterations": None},
            "delay_iter",
        ),
    ],
)
def test_a_bad_argument_is_refused_with_its_message(
    name: str, arguments: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidParameterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        endpoint(name, **arguments)


def test_a_raw_response_is_asked_for_in_the_calls_own_options() -> None:
    assert not hasattr(_base_client, "RAW_MODE")
    assert "ContextVar" not in (ROOT / "vllm_devclient" / "_base_client.py").read_text()

    async def both() -> tuple[object, object]:
        async with AsyncDevClient(BASE, http_client=httpx.AsyncClient()) as client:
            return await asyncio.gather(client.with_raw_response.health(), client.health())

    with respx.mock(base_url=BASE) as router:
        router.get("/health").mock(return_value=httpx.Response(200))
        raw, plain = asyncio.run(both())
    assert isinstance(raw, RawResponse) and raw.parsed is True and plain is True


def test_the_unasync_rules_are_whole_words_and_leave_prose_alone() -> None:
    unasync = _unasync()
    used: set[int] = set()
    line = "class _AsyncRoutes(AsyncDevClient): the async client, awaited; MyAsyncDevClientX\n"
    assert unasync.unasync_line(line, used) == (
        "class _SyncRoutes(DevClient): the async client, awaited; MyAsyncDevClientX\n"
    )
    assert unasync.unasync_line("    x = await self.aclose()\n", used) == "    x = self.close()\n"
    assert unasync.unasync_line("    y = self.aclosed\n", used) == "    y = self.aclosed\n"


def test_a_rule_that_matches_nothing_stops_the_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    unasync = _unasync()
    monkeypatch.setattr(unasync, "SUBS", [*unasync.SUBS, ("NoSuchName", "Other")])
    monkeypatch.setattr(
        unasync, "COMPILED_SUBS", [*unasync.COMPILED_SUBS, (unasync._whole_word("NoSuchName"), "")]
    )
    monkeypatch.setattr(unasync, "ruff", lambda text, path: text)
    with pytest.raises(SystemExit, match="NoSuchName"):
        unasync.wanted()


def _generate(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    script = root / "scripts" / "generate.py"
    return subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True, cwd=root)


def test_a_generated_module_left_behind_or_stale_fails_the_check_and_a_run_deletes_or_rewrites_it(
    tmp_path: Path,
) -> None:
    for part in ("scripts", "vllm_devclient"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "frontends.md", tmp_path / "docs")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    pkg = tmp_path / "vllm_devclient"
    left = pkg / "fleet" / "_async_methods" / "cache.py"  # the fleets' methods, generated once
    left.parent.mkdir()
    left.write_text("# Generated from vllm_devclient/routes/cache.py by scripts/generate.py; do not edit.\n")
    twin = pkg / "_sync" / "core.py"
    fresh_twin = twin.read_text()
    twin.write_text(fresh_twin.replace("def _send(", "def _send_it("))
    table = pkg / "_sync" / "routes.py"  # written by hand, but for its table
    fresh_table = table.read_text()
    table.write_text(fresh_table.replace("    health = _SyncRoute(_AsyncRoutes.health)\n", ""))
    hand_written = pkg / "fleet" / "notes.py"
    hand_written.write_text('"""Not generated: the generator leaves it alone."""\n')

    check = _generate(tmp_path, "--check")
    assert check.returncode == 1
    for path in ("fleet/_async_methods/cache.py", "_sync/core.py", "_sync/routes.py"):
        assert f"vllm_devclient/{path}" in check.stdout, path
    assert "notes.py" not in check.stdout
    assert _generate(tmp_path).returncode == 0
    assert not left.exists() and hand_written.exists()
    assert twin.read_text() == fresh_twin and table.read_text() == fresh_table
    assert _generate(tmp_path, "--check").returncode == 0


def test_the_generated_code_of_the_package_stays_within_its_budget() -> None:
    """Generated code is read by nobody and reviewed by nobody: 1,500 lines at most (issue 52), what the
    async route methods and the sync twins of the hand-written async code take. A surface derived from
    typed methods at run time (the blocking route methods, the fleets') costs a line per method."""
    generated = {
        path.relative_to(ROOT).as_posix(): len(text.splitlines())
        for path in sorted((ROOT / "vllm_devclient").rglob("*.py"))
        if (text := path.read_text()).startswith("# Generated from ")
    }
    assert "vllm_devclient/_async/routes.py" in generated
    assert "vllm_devclient/_sync/routes.py" not in generated
    assert not any(path.startswith("vllm_devclient/fleet/") for path in generated)
    assert sum(generated.values()) <= 1500, generated
