"""The RL loop on a local Ray cluster against both real frontends (issue 26): examples/ray_fleet.py as a user
runs it, with a trainer actor and one rollout actor per server, each holding a client that Ray pickled and
the actor rebuilt.

Three steps of rollout + fleet weight update; the second update fails on one server (its engine raises in
`update_weights`). The engine call logs show that every server finished that update without its version and
was resumed, and that no generation ran while a server was paused; the example's whole process tree (the
Ray cluster included) is gone once it exits.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from vllm_devclient.testing import Raise, Return
from vllm_devclient.testing.frontends import Frontend
from vllm_devclient.testing.processes import descendants, spawn, stop_group

pytestmark = pytest.mark.frontend

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "ray_fleet.py"
# The local cluster on the loopback interface only (Ray's switch for single-machine clusters), no usage
# report, its session files in a folder of the test's own.
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
FAILING_STEP = 2
# Per successful update a target's engine gets three collective_rpc calls (start, update, finish); the
# failing update's start is one more before its update_weights.
RPCS_BEFORE_FAILURE = 3 * (FAILING_STEP - 1) + 1


@pytest.fixture
def fleet(python_frontend: Frontend, rust_frontend: Frontend) -> Iterator[tuple[Frontend, Frontend]]:
    """Both shared frontends, their engines answering /is_paused from the pauses and resumes they saw."""
    engines = [fe.engine for fe in (python_frontend, rust_frontend)]
    for engine in engines:
        engine.reset()
    try:
        yield python_frontend, rust_frontend
    finally:
        for engine in engines:
            engine.reset()


def _run_example(urls: list[str], tmp_path: Path) -> tuple[int, str, set[tuple[int, float]]]:
    """The example in its own process group; its exit code, output, and every process it ever had."""
    ray_tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    env = {**os.environ, **RAY_ENV, "RAY_TMPDIR": ray_tmp}
    cmd = [sys.executable, str(EXAMPLE), "--steps", "3"] + [arg for url in urls for arg in ("--url", url)]
    seen: set[tuple[int, float]] = set()
    out = tmp_path / "example.log"
    try:
        with open(out, "wb") as log:
            proc = spawn(cmd, env=env, stdout=log, thread_bound=True)
            deadline = time.monotonic() + 240
            try:
                while proc.poll() is None and time.monotonic() < deadline:
                    for p in descendants(proc.pid):
                        try:
                            seen.add((p.pid, p.create_time()))
                        except psutil.Error:
                            pass
                    time.sleep(0.1)
            finally:
                code = stop_group(proc, grace=10.0) if proc.poll() is None else proc.returncode
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert seen, "the example started no process: was there a Ray cluster at all?"
    return code if code is not None else -1, out.read_text(errors="replace"), seen


def _alive(processes: set[tuple[int, float]]) -> list[str]:
    left = []
    for pid, created in processes:
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{pid} {' '.join(p.cmdline())[:120]}")
        except psutil.Error:
            continue
    return left


def _steps(frontend: Frontend) -> list[str]:
    """What reached one engine, in order: utility calls (worker methods for collective_rpc), "generate" for
    a completion; the /is_paused polls left out."""
    names = []
    for call in frontend.engine.calls:
        if call.kind == "add":
            names.append("generate")
        elif call.method == "collective_rpc":
            names.append(f"rpc:{call.args[0]}")
        elif call.method == "set_weight_version":
            names.append(f"version:{call.args[0]}")
        elif call.method != "is_scheduler_paused":
            names.append(call.method)
    return names


def _update(*, finished: str | None) -> list[str]:
    """A fleet update's engine calls; a failed one is finished without a version (no set_weight_version)."""
    end = ["rpc:finish_weight_update", *([f"version:{finished}"] if finished else [])]
    return ["pause_generation", "rpc:start_weight_update", "rpc:update_weights", *end, "resume_scheduler"]


def test_trainer_and_rollout_actors_update_a_fleet_and_roll_back_a_failed_update(
    fleet: tuple[Frontend, Frontend], tmp_path: Path
) -> None:
    failing, healthy = fleet
    failing.engine.script(
        "collective_rpc",
        [Return([None])] * RPCS_BEFORE_FAILURE + [Raise("update exploded"), Return([None])],
    )
    urls = [failing.base_url, healthy.base_url]

    code, output, processes = _run_example(urls, tmp_path)

    assert code == 0, output[-4000:]
    events = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    done = events[-1]
    assert done["event"] == "done", output[-4000:]
    assert (done["updated"], done["failed"], done["served_after"]) == (["step-1", "step-3"], ["step-2"], True)

    # Every actor runs in a process of its own, with a client rebuilt there from the pickled one.
    actors = [e for e in events if e["event"] == "actor"]
    rollouts = [a for a in actors if a["role"] == "rollout"]
    (trainer,) = [a for a in actors if a["role"] == "trainer"]
    assert sorted(a["url"] for a in rollouts) == sorted(urls)
    assert {a["client"] for a in rollouts} == {"DevClient"} and trainer["fleet"] == "AsyncFleet"
    assert trainer["urls"] == urls
    pids = [a["pid"] for a in actors]
    assert len(set(pids)) == 3 and done["driver_pid"] not in pids
    assert {pid for pid in pids} <= {pid for pid, _ in processes}, "the actors ran outside the example"

    updates = {e["step"]: e for e in events if e["event"] == "update"}
    assert [updates[s]["ok"] for s in (1, 2, 3)] == [True, False, True]
    assert updates[FAILING_STEP]["operation"] == "update_weights"
    assert list(updates[FAILING_STEP]["failed"]) == [failing.base_url]
    assert "EngineCallError" in updates[FAILING_STEP]["failed"][failing.base_url]
    assert "update exploded" in updates[FAILING_STEP]["failed"][failing.base_url]
    rollout_steps = sorted((e["step"], e["url"]) for e in events if e["event"] == "rollout")
    assert rollout_steps == sorted((s, url) for s in (1, 2, 3) for url in urls)

    # The engines: the failed update was finished without its version everywhere and every server resumed;
    # two prompts were generated per rollout (three steps and a last one), never while paused.
    for fe in fleet:
        rollout = ["generate", "generate"]
        expected = [
            *rollout, *_update(finished="step-1"),
            *rollout, *_update(finished=None),
            *rollout, *_update(finished="step-3"),
            *rollout,
        ]  # fmt: skip
        assert _steps(fe) == expected, fe.frontend

    # Nothing the example started outlives it: the Ray cluster (GCS, raylet, workers, agents) went with it.
    deadline = time.monotonic() + 15
    while _alive(processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _alive(processes) == [], "left running after the example exited"


def test_the_example_says_how_to_run_it() -> None:
    """The example is a script a user runs: its help names the options the docstring promises."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    for option in ("--url", "--steps", "--ray-address", "--max-tokens"):
        assert option in done.stdout
