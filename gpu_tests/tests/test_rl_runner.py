"""gpu_tests/rl on the CPU: the runner's report building (outcomes, memory readings, steps under a deadline),
the collection of a call's reports and the README's figures, from synthetic runs built here.

The runner against real frontends (the scripted engine behind them) is contract_tests/test_rl_runner.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_tests.offload_check.server import build_command, build_env
from gpu_tests.rl import collect, gpu_memory, run_rl, tables
from gpu_tests.rl.pause_load import EXPECTED, MODES, mode_row, outcome
from gpu_tests.rl.steps import Deadline, Steps
from vllm_devclient import DevClient


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_step_is_timed_a_failure_recorded_and_a_late_one_skipped() -> None:
    clock = Clock()
    steps = Steps(Deadline(10, clock), log=lambda line: None)

    def slow() -> int:
        clock.now += 4
        return 7

    def broken() -> None:
        clock.now += 1
        raise RuntimeError("engine gone")

    assert steps.run("a", slow) == 7
    assert steps.run("b", broken) is None
    assert steps.run("c", slow, need_s=6) is None  # 5 s left
    assert steps.run("d", lambda: sys.exit(2)) is None  # an argparse error of the example
    a, b, c, d = steps.records
    assert (a["ok"], a["s"]) == (True, 4)
    assert (b["ok"], b["s"], b["error"]) == (False, 1, "RuntimeError: engine gone") and "broken" in b[
        "traceback"
    ]
    assert c == {"step": "c", "ok": False, "skipped": "needs ~6 s, 5 s left"}
    assert d["error"] == "SystemExit: 2"
    assert steps.failed() == ["b", "c", "d"]


def test_memory_is_the_process_tree_s_and_the_device_s_beside_it() -> None:
    apps = gpu_memory.parse_apps("1234, 5000\n999, 700\n1234, 24\nNo running processes found\n")
    assert apps == {1234: 5024.0, 999: 700.0}
    assert gpu_memory.parse_device("81000\n") == 81000.0 and gpu_memory.parse_device("[N/A]\n") is None
    mine = gpu_memory.reading({1234, 77}, apps, 81000.0)
    assert mine == {"tree_mib": 5024.0, "per_pid_mib": {"1234": 5024.0}, "device_mib": 81000.0,
                    "other_apps_mib": 700.0}  # fmt: skip
    unseen = gpu_memory.reading({5}, apps, 80000.0)
    assert unseen["tree_mib"] is None
    assert gpu_memory.freed(mine, {**mine, "tree_mib": 1000.0, "device_mib": 76000.0}) == {
        "freed_mib": 4024.0, "source": "process tree", "device_freed_mib": 5000.0}  # fmt: skip
    assert gpu_memory.freed(unseen, {**unseen, "device_mib": 79000.0}) == {
        "freed_mib": 1000.0, "source": "device", "device_freed_mib": 1000.0}  # fmt: skip


def test_measure_sums_the_tree_of_a_real_process() -> None:
    answers = {
        tuple(gpu_memory.APPS_QUERY): f"{os.getpid()}, 300\n1, 9\n",
        tuple(gpu_memory.DEVICE_QUERY): "1000\n",
    }
    got = gpu_memory.measure(os.getpid(), query=lambda cmd: answers[tuple(cmd)])
    assert got["tree_mib"] == 300.0 and got["other_apps_mib"] == 9.0


def _req(i: int, done: float, reason: str | None = "length", error: str | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {"i": i, "done_s": done, "finish_reason": reason, "tokens": 512 if reason else 0}
    if error:
        r = {"i": i, "done_s": done, "error": error}
    return r


@pytest.mark.parametrize(
    ("mode", "requests", "counts", "matches"),
    [
        ("abort", [_req(0, 1.1, "abort"), _req(1, 1.2, error="APIError: 500")], (0, 2, 0), True),
        ("wait", [_req(0, 1.5), _req(1, 1.6)], (2, 0, 0), True),
        ("keep", [_req(0, 3.5), _req(1, 3.6)], (0, 0, 2), True),
        ("keep", [_req(0, 1.5), _req(1, 3.6)], (1, 0, 1), False),  # one drained instead of kept
        ("wait", [_req(0, 1.1, "abort"), _req(1, 1.6)], (1, 1, 0), False),
    ],
)
def test_each_request_s_outcome_and_the_mode_s_row(
    mode: Any, requests: list[dict[str, Any]], counts: tuple[int, int, int], matches: bool
) -> None:
    early = _req(9, 0.5)  # done before the pause was sent: not in flight, not counted
    run = {"pause_sent_s": 1.0, "pause_returned_s": 1.7, "paused_s": 1.8, "resume_sent_s": 3.0,
           "max_tokens": 512, "requests": [early, *requests], "running_after_paused": 0.0}  # fmt: skip
    row = mode_row(mode, run)
    assert (row["finished"], row["aborted"], row["kept"]) == counts
    assert row["in_flight"] == 2 and row["matches_docs"] is matches and row["expected"] == EXPECTED[mode]
    assert row["pause_call_s"] == pytest.approx(0.7) and row["until_paused_s"] == pytest.approx(0.8)
    assert outcome(early, 3.0) == "finished"


def test_no_request_in_flight_matches_nothing() -> None:
    assert (
        mode_row("abort", {"pause_sent_s": 1.0, "resume_sent_s": 2.0, "requests": []})["matches_docs"]
        is False
    )


def test_the_expected_outcomes_are_what_the_sdk_documents() -> None:
    """The pause table is checked against `pause`'s docstring: each mode is documented with its outcome."""
    doc = " ".join((DevClient.pause.__doc__ or "").split())
    words = {"aborted": "abort (they end now", "finished": "wait (the call returns once they have finished",
             "kept": "keep (they are frozen, and go on at resume"}  # fmt: skip
    assert set(EXPECTED) == set(MODES)
    for mode in MODES:
        assert words[EXPECTED[mode]] in doc, (mode, doc)


def test_the_servers_run_tiny_llama_with_the_rl_flags(tmp_path: Path) -> None:
    for frontend in run_rl.FRONTENDS:
        config = run_rl.server_config(
            "/m", frontend, server_args=run_rl.SERVER_ARGS.split(), log_path=tmp_path / "s.log"
        )
        cmd = build_command(config, 8000)
        env = build_env(config, base={})
        assert cmd[cmd.index("--weight-transfer-config") + 1] == '{"backend": "ipc"}'
        assert cmd[cmd.index("--worker-extension-cls") + 1] == run_rl.EXTENSION
        assert "--enable-sleep-mode" in cmd and cmd.count("--enforce-eager") == 1
        assert cmd[cmd.index("--kv-cache-memory-bytes") + 1] == "1073741824"
        assert env["VLLM_ALLOW_INSECURE_SERIALIZATION"] == "1" and env["VLLM_SERVER_DEV_MODE"] == "1"
        assert env.get("VLLM_USE_RUST_FRONTEND") == ("1" if frontend == "rust" else None)
    compare = build_command(
        run_rl.server_config(
            "/new", "python", server_args=[], log_path=tmp_path / "c", transfer=False, sleep=False
        ),
        1,
    )
    assert "--weight-transfer-config" not in compare and run_rl.EXTENSION in compare


def test_a_server_that_did_not_start_is_tried_again_with_less() -> None:
    plain = run_rl.fallbacks("non-default args: {'weight_transfer_config': ...}\nRuntimeError: cuMemCreate")
    assert plain == [{"transfer": True, "sleep": False}, {"transfer": False, "sleep": False}]
    ray = 'File "/tmp/site/vllm/distributed/weight_transfer/ipc_engine.py", line 11\nImportError: x'
    assert run_rl.fallbacks(ray)[0] == {"transfer": False, "sleep": True}
    assert run_rl.fallbacks("ModuleNotFoundError: No module named 'ray'")[0]["transfer"] is False


def test_an_answer_s_type_is_its_shape() -> None:
    assert run_rl.answer_types([{"rank": 0, "device": "cuda:0"}, {"rank": 1, "device": "cuda:1"}]) == [
        {"device": "str", "rank": "int"}, {"device": "str", "rank": "int"}]  # fmt: skip
    assert run_rl.answer_types(["0"]) == ["str"]


def _sync(failed: str | None = None) -> dict[str, Any]:
    report: dict[str, Any] = {
        "tensors": 39, "bytes": 12_345_678, "batches": 1, "send_s": 0.1234, "post_s": 0.1, "flow_s": 0.4,
        "answers_before": ["a", "b", "c", "d"], "answers_changed": 4,
        "weights_before": {"checksums": [{"w": "1"}]}, "weights_after": {"checksums": [{"w": "2"}]},
    }  # fmt: skip
    if failed:
        report = {"failed": failed, "answers_changed": 0, "answers_before": ["a"]}
    return {"exit_code": 1 if failed else 0, "report": report}


def _level(freed: float) -> dict[str, Any]:
    return {"freed": {"freed_mib": freed, "source": "process tree"}, "answers_equal": True,
            "retaken_by_weights": {"freed_mib": 30.0, "source": "device"}, "retaken_by_wake": None,
            "is_sleeping_after_partial_wake": True}  # fmt: skip


def _mode(mode: Any) -> dict[str, Any]:
    counts = {outcome: 16 if EXPECTED[mode] == outcome else 0 for outcome in ("finished", "aborted", "kept")}
    row = {"in_flight": 16, **counts, "expected": EXPECTED[mode], "matches_docs": True,
           "running_after_paused": 0.0, "until_paused_s": 0.25, "finished_during_hold": None,
           "new_request_after_resume": True}  # fmt: skip
    return {"row": row}


def synthetic_run(folder: Path) -> Path:
    """An rl/ folder as h200_rl.sh leaves it (values made up here, shapes as run_rl.py writes them)."""
    ranks = [{"rank": 0, "local_rank": 0, "device": "cuda:0", "pid": 11}]
    files: dict[str, Any] = {
        "run.json": {"device": "NVIDIA H200", "wall_s": 200.0},
        "call.json": {"setup_s": 90, "call_s": 300, "status": 0},
        "python/point1_sync.json": {"sync": _sync()},
        "python/point1_compare.json": {"compare": {"report": {"answers_equal": True, "weights_equal": True}}},
        "python/point1_failed_send.json": {
            "then_finish": {"failed": "RuntimeError: x", "paused_after": False, "answers_equal": True},
            "example": {
                "report": {
                    "failed": "RuntimeError: x",
                    "paused_after": False,
                    "answers_before": ["a"],
                    "answers_after": {"error": "APIConnectionError: gone"},
                }
            },
            "server_after": {"process_running": False, "health": "APIConnectionError: refused"},
        },
        "rust/point1_sync.json": {"sync": _sync("RouteNotServedError: POST /start_weight_update -> 404")},
    }
    for f in tables.FRONTENDS:
        files[f"{f}/point2_sleep.json"] = {"levels": {"1": _level(1100.0), "2": _level(1150.5)}}
        files[f"{f}/point3_pause.json"] = {"modes": {m: _mode(m) for m in MODES}}
        files[f"{f}/point4_rpc.json"] = {"rank_info": {"results": ranks, "types": run_rl.answer_types(ranks)}}
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(data))
    (folder / "logs").mkdir()
    (folder / "logs" / "python.log").write_text("a server's log\n")
    return folder


def test_a_call_is_collected_and_its_figures_made(tmp_path: Path) -> None:
    rl = synthetic_run(tmp_path / "rl")
    results = tmp_path / "results"
    written = collect.collect("rl-2026-12-01", rl, results)
    names = sorted(str(p.relative_to(results / "rl-2026-12-01")) for p in written)
    assert "run.json" in names and "python/point1_sync.json" in names and "rust/point4_rpc.json" in names
    assert not any("logs" in n for n in names)
    assert tables.latest_run(results) == results / "rl-2026-12-01"
    run = tables.load(results / "rl-2026-12-01")

    transfer = tables.transfer_table(run).splitlines()
    assert (
        transfer[2] == "| python | ok | 39 | 12,345,678 | 1 | 0.123 | 0.100 | 0.400 | 4/4 | yes | yes | yes |"
    )
    assert transfer[3].startswith("| rust | RouteNotServedError | - | - |")
    failed = tables.failed_send_table(run)
    assert "| python | send fails, then finish_weight_update | RuntimeError | no | yes |" in failed
    assert "| python | send fails (the example's --fail-send) | RuntimeError | no | error |" in failed
    sleep = tables.sleep_table(run).splitlines()
    assert sleep[2] == "| python | 1 | 1100 | 30 (device) | - | yes | yes |" and len(sleep) == 6
    pause = tables.pause_table(run)
    assert "| rust | keep | 16 | 0 | 0 | 16 | kept | yes | 0 | 0.25 | - | yes |" in pause
    rpc = tables.rpc_table(run).splitlines()
    assert rpc[2].startswith("| python | 1 | 0 | `[{") and rpc[2].endswith("| yes |")

    text = "x\n<!-- figure:rl-pause -->\nold\n<!-- /figure -->\n"
    source = "From `gpu_tests/results/rl-2026-12-01`."
    assert tables.render(text, run) == f"x\n<!-- figure:rl-pause -->\n{source}\n\n{pause}\n<!-- /figure -->\n"
    assert tables.render(text, None) == f"x\n<!-- figure:rl-pause -->\n{tables.NO_RUN}\n<!-- /figure -->\n"
    with pytest.raises(KeyError):
        tables.render("<!-- figure:rl-nothing -->\nx\n<!-- /figure -->", run)


def test_collect_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="rl-"):
        collect.collect("kv-2026", tmp_path, tmp_path / "results")
    with pytest.raises(FileNotFoundError, match=r"run\.json"):
        collect.collect("rl-2026", tmp_path, tmp_path / "results")


def test_the_readme_figures_are_the_committed_run() -> None:
    text = tables.README.read_text()
    folder = tables.latest_run()
    assert tables.render(text, tables.load(folder) if folder else None) == text, (
        "run python -m gpu_tests.rl.tables"
    )
    for name in tables.TABLES:
        assert f"<!-- figure:{name} -->" in text


def test_a_step_that_failed_shows_its_error_in_the_figures() -> None:
    failed_sync = {
        "step": "point1.sync",
        "ok": False,
        "error": "AssertionError: Torch not compiled with CUDA",
    }
    skipped = {"step": "point1.failed_send_example", "ok": False, "skipped": "needs ~30 s, 4 s left"}
    failure = {"then_finish": None, "example": None, "server_after": {}}
    run = {"python": {"steps": {"steps": [failed_sync, skipped]}, "point1_sync": {"sync": None},
                      "point1_failed_send": failure}}  # fmt: skip
    assert "| python | step failed: AssertionError | - |" in tables.transfer_table(run)
    failed = tables.failed_send_table(run)
    assert "| python | send fails, then finish_weight_update | step failed: not run | - | - |" in failed
    assert "| python | send fails (the example's --fail-send) | step failed: skipped | - | - |" in failed
    run = {"rust": {"point2_sleep": {"levels": {}, "skipped": "the server started only without sleep mode"}}}
    assert "| rust | - | skipped: the server started only without sleep mode | - |" in tables.sleep_table(run)
