"""gpu_tests/rl/run_rl.py on the CPU: the runner's logic against both real frontends over the scripted engine.

The GPU parts (CUDA IPC, the trainer's model on a GPU, nvidia-smi) fail here, which is the point of the first
test: every step of a whole frontend run is recorded (the failing ones with their error), every point's
report is written, and the run goes on. The others drive what does not need a GPU for real: pause under
load per mode (requests held by the engine, so they are in flight at the pause), per-rank RPC answers, a
sleep level.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_tests.rl import run_rl
from gpu_tests.rl.pause_load import pause_under_load
from gpu_tests.rl.sleep_wake import sleep_level
from gpu_tests.rl.steps import Deadline, Steps
from vllm_devclient import AsyncDevClient, DevClient
from vllm_devclient.testing.engine_actions import Return
from vllm_devclient.testing.engine_protocol import FinishReason
from vllm_devclient.testing.frontends import Frontend

pytestmark = pytest.mark.frontend

RANKS = [{"rank": 0, "local_rank": 0, "device": "cuda:0", "pid": 4242}]


class Served:
    """What frontend_run reads of a VllmServer, over a shared scripted-engine frontend."""

    def __init__(self, fe: Frontend) -> None:
        self.base_url = fe.base_url
        self.pid = fe.pid
        self.command = ["(scripted engine)", fe.frontend]
        self.process = None
        self.log_path = None
        self.ready_after_s: float | None = None

    def wait_ready(self) -> float:
        self.ready_after_s = 0.0
        return 0.0

    def log_tail(self, lines: int = 60) -> str:
        return ""


@pytest.fixture
def served(frontend: Frontend) -> Iterator[Frontend]:
    try:
        yield frontend
    finally:
        frontend.engine.hold_requests = False
        frontend.engine.release_requests()


def _run(tmp_path: Path, model: Path) -> run_rl.Run:
    args = argparse.Namespace(out=str(tmp_path / "out"), deadline_s=300.0, model=str(model), server_args="",
                              requests=4, max_tokens=8, work=str(tmp_path / "work"))  # fmt: skip
    run = run_rl.Run(args)
    run.pause_options.update(start_s=0.2, hold_s=0.2, timeout=30.0)
    return run


def test_a_whole_frontend_run_records_every_point_and_goes_on(
    served: Frontend, tmp_path: Path, tiny_model_dir: Path
) -> None:
    served.engine.script("collective_rpc", Return(RANKS))
    run = _run(tmp_path, tiny_model_dir)
    report = run_rl.frontend_run(run, served.frontend, Served(served))  # type: ignore[arg-type]

    folder = run.out / served.frontend
    points = {p.stem for p in folder.glob("*.json")}
    expected = {"steps", "point4_rpc", "point1_sync", "point3_pause", "point2_sleep"}
    assert expected | ({"point1_failed_send"} if served.frontend == "python" else set()) == points
    steps = {r["step"]: r for r in report["steps"]}
    assert report["answered_by"] == served.frontend
    # No GPU here: the trainer's model cannot reach CUDA, so the sync fails, recorded with its error.
    assert steps["point1.sync"]["ok"] is False and steps["point1.sync"]["error"]
    # ...and the run went on to the other points.
    rpc = json.loads((folder / "point4_rpc.json").read_text())["rank_info"]
    assert rpc["results"] == RANKS
    assert rpc["types"] == [{"device": "str", "local_rank": "int", "pid": "int", "rank": "int"}]
    modes = json.loads((folder / "point3_pause.json").read_text())["modes"]
    assert sorted(modes) == ["abort", "keep", "wait"]
    assert all(m["row"]["new_request_after_resume"] for m in modes.values())
    levels = json.loads((folder / "point2_sleep.json").read_text())["levels"]
    assert sorted(levels) == ["1", "2"]
    for level in levels.values():
        assert level["answers_equal"] is True
        assert level["memory_awake"] is None  # nvidia-smi: recorded as a failed step, not raised
    assert steps["sleep2.reload_weights"]["ok"] is True
    assert not served.engine.errors
    with DevClient(served.base_url) as client:
        assert client.is_paused() is False and client.is_sleeping() is False


def _release_on_resume(frontend: Frontend) -> threading.Thread:
    """Once the engine is asked to resume: stop holding requests and finish the held ones (twice: a request
    that arrived just before the hold ended is finished too)."""

    def release() -> None:
        frontend.engine.wait_for_call("resume_scheduler", deadline=30)
        frontend.engine.hold_requests = False
        for _ in range(2):
            frontend.engine.release_requests(FinishReason.LENGTH)
            time.sleep(0.5)

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("mode", ["abort", "keep"])
def test_pause_under_load_tells_each_request_s_outcome(served: Frontend, mode: Any) -> None:
    served.engine.hold_requests = True
    releaser = _release_on_resume(served)

    async def go() -> dict[str, Any]:
        async with AsyncDevClient(served.base_url) as client:
            return await pause_under_load(client, mode, requests=3, max_tokens=8, start_s=0.3, hold_s=0.3)

    run = asyncio.run(go())
    releaser.join(30)
    row = run["row"]
    assert run["errors"] == {}
    assert row["in_flight"] == 3
    expected = {"abort": (0, 3, 0), "keep": (0, 0, 3)}[mode]
    assert (row["finished"], row["aborted"], row["kept"]) == expected
    assert row["matches_docs"] is True
    if mode == "keep":
        assert row["finished_during_hold"] == 0 and row["full_length"] == 3


def test_a_held_request_finished_before_the_resume_is_no_kept_one(served: Frontend) -> None:
    """`wait` on an engine that does not drain: the requests go on after the resume, which the row shows as a
    mismatch with the SDK's documentation (a wait-mode pause returns once they have finished)."""
    served.engine.hold_requests = True
    releaser = _release_on_resume(served)

    async def go() -> dict[str, Any]:
        async with AsyncDevClient(served.base_url) as client:
            return await pause_under_load(client, "wait", requests=2, max_tokens=8, start_s=0.3)

    row = asyncio.run(go())["row"]
    releaser.join(30)
    assert (row["finished"], row["kept"], row["matches_docs"]) == (0, 2, False)


def test_a_sleep_level_with_its_memory_readings(served: Frontend) -> None:
    mib = [(5000.0, 6000.0), (1000.0, 2000.0), (3000.0, 4000.0), (5000.0, 6000.0)]
    readings = iter({"tree_mib": tree, "device_mib": device} for tree, device in mib)
    steps = Steps(Deadline(60))
    with DevClient(served.base_url) as client:
        out = sleep_level(
            client, steps, 2, answers=lambda: [client.completion("x", max_tokens=2).text],
            memory=lambda: next(readings), reload=lambda: client.collective_rpc("reload_weights"),
        )  # fmt: skip
        assert client.is_sleeping() is False
    assert steps.failed() == []
    assert out["freed"] == {"freed_mib": 4000.0, "source": "process tree", "device_freed_mib": 4000.0}
    assert out["retaken_by_weights"]["freed_mib"] == 2000.0 and out["retaken_by_wake"]["freed_mib"] == 4000.0
    assert out["answers_equal"] is True
    sleeps = served.engine.calls_for("sleep")
    wakes = [list(c.args) for c in served.engine.calls_for("wake_up")]
    assert sleeps[0].args[0] == 2 and wakes == [[["weights"]], [["kv_cache"]]]


# `vllm serve` as it ends on a machine without a GPU: it prints its arguments and exits while starting. The
# real one does the same after importing vLLM (about 7 s of CPU, six times over: the run's tries); what this
# test checks is the run's handling of it, which the stand-in drives the same way.
NO_GPU_SERVE = (
    "import sys; print('vllm', *sys.argv[1:], flush=True); "
    "sys.exit('RuntimeError: Failed to infer device type (no GPU on this machine)')"
)


def test_the_whole_run_records_servers_that_cannot_start_and_leaves_nothing(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_rl's main with a `vllm serve` that exits while starting, as the real one does without a GPU.
    The run still writes run.json and each frontend's steps, stops what it started and leaves no process.
    """
    config = run_rl.server_config

    def no_gpu(*args: Any, **kwargs: Any) -> Any:
        return dataclasses.replace(config(*args, **kwargs), launcher=(sys.executable, "-c", NO_GPU_SERVE))

    monkeypatch.setattr(run_rl, "server_config", no_gpu)
    out = tmp_path / "out"
    code = run_rl.main(["--out", str(out), "--deadline-s", "60", "--model", str(tiny_model_dir)])
    meta = json.loads((out / "rl" / "run.json").read_text())
    assert code == 0 and meta["stop"]["leftover_pids"] == {}
    # Each frontend's server is tried again with less (without sleep mode, then without the IPC transfer too),
    # which cannot help here either.
    for f in ("python", "rust"):
        assert meta["failed_steps"][f] == [
            "server_ready", f"server_ready_{f}-no-sleep", f"server_ready_{f}-no-transfer-no-sleep"
        ]  # fmt: skip
    assert sorted(meta["servers"]) == sorted(
        f"{f}{suffix}" for f in ("python", "rust") for suffix in ("", "-no-sleep", "-no-transfer-no-sleep")
    )
    commands = {name: " ".join(server["command"]) for name, server in meta["servers"].items()}
    assert "--enable-sleep-mode" in commands["rust"] and "--weight-transfer-config" in commands["rust"]
    assert "--enable-sleep-mode" not in commands["rust-no-sleep"]
    assert "--weight-transfer-config" in commands["rust-no-sleep"]
    assert "--weight-transfer-config" not in commands["rust-no-transfer-no-sleep"]
    assert meta["threads_still_running"] == []
    for frontend in ("python", "rust"):
        steps = json.loads((out / "rl" / frontend / "steps.json").read_text())
        assert "ServerStartError" in steps["steps"][0]["error"] and len(steps["server_log_tails"]) == 3
        assert all("no GPU on this machine" in str(tail) for tail in steps["server_log_tails"]), steps
