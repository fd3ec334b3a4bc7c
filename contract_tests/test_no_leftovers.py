"""No frontend process survives a pytest run that uses the fixtures: not after a failed test, not after an
interrupt (Ctrl-C), not even after the pytest process is killed outright.

Each case runs a small test file in a child pytest (the fixtures come from the plugin, loaded with `-p` as a
user's project does), which writes the process trees of its frontends to a file; once the child is gone,
none of them may be alive.
The children are started at the beginning of the session (conftest `leftover_children`), so their frontends
come up while other tests run.
"""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from typing import Any

import psutil
import pytest

from vllm_devclient.testing.processes import is_running, wait_for

pytestmark = pytest.mark.frontend


def _alive(pid: int) -> bool:
    """Running (not a zombie) and still a vllm process (not a reused pid)."""
    try:
        return is_running(pid) and any("vllm" in part for part in psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


def _survivors(trees: dict[str, list[int]], deadline: float = 20.0) -> dict[str, list[int]]:
    def alive() -> dict[str, list[int]]:
        found = {name: [p for p in pids if _alive(p)] for name, pids in trees.items()}
        return {name: pids for name, pids in found.items() if pids}

    with contextlib.suppress(TimeoutError):
        wait_for(lambda: not alive(), deadline=deadline, interval=0.1, what="every frontend process gone")
    return alive()


def test_no_frontend_survives_failure_interrupt_or_kill(leftover_children: dict[str, Any]) -> None:
    trees = {case: child.wait_for_pids() for case, child in leftover_children.items()}
    for case, tree in trees.items():
        assert set(tree) == ({"rust"} if case == "ctrl-c" else {"python", "rust"}), case
        assert all(_alive(pids[0]) for pids in tree.values()), f"{case}: frontends not running"

    failed = leftover_children["failed test"]
    Path(str(failed.pids_file) + ".go").touch()
    out = failed.output()
    assert failed.proc.returncode == 1, out[-3000:]
    assert "1 failed" in out and "deliberate failure" in out

    leftover_children["ctrl-c"].proc.send_signal(signal.SIGINT)
    out = leftover_children["ctrl-c"].output()
    assert "KeyboardInterrupt" in out, out[-3000:]

    # No teardown at all: the frontends must go on their own (they get SIGTERM when their parent dies).
    leftover_children["sigkill"].proc.kill()
    leftover_children["sigkill"].proc.wait(30)

    left = {case: _survivors(tree) for case, tree in trees.items()}
    assert not any(left.values()), f"processes left running: {left}"
