"""GPU memory held by one server: the sum over its process tree, so that other servers on the GPU (the runner
starts the two frontends side by side) do not disturb the figure.

`nvidia-smi --query-compute-apps=pid,used_memory` lists each process holding GPU memory; the server's tree is
its launcher and every descendant (the engine core and its workers). The device's total is kept beside it:
it is the fallback figure where the compute-apps list shows none of the tree's pids (a container whose pids
the driver does not see), and then only meaningful when nothing else ran meanwhile.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable
from typing import Any

APPS_QUERY = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
DEVICE_QUERY = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"]


def parse_apps(text: str) -> dict[int, float]:
    """pid -> MiB from the compute-apps CSV (lines "PID, MiB"; a process listed twice is summed)."""
    used: dict[int, float] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2 or not parts[0].isdigit():
            continue
        try:
            mib = float(parts[1])
        except ValueError:
            continue
        used[int(parts[0])] = used.get(int(parts[0]), 0.0) + mib
    return used


def parse_device(text: str) -> float | None:
    """MiB in use on the first GPU, from the memory.used CSV."""
    for line in text.splitlines():
        try:
            return float(line.strip())
        except ValueError:
            continue
    return None


def _query(cmd: list[str]) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout


def tree_pids(pid: int) -> set[int]:
    """`pid` and every live descendant of it."""
    from vllm_devclient.testing import descendants

    return {pid, *(p.pid for p in descendants(pid))}


def reading(pids: Iterable[int], apps: dict[int, float], device_mib: float | None) -> dict[str, Any]:
    """One measurement: the tree's MiB (None when no pid of it is listed), per pid, and the device's MiB."""
    mine = {pid: apps[pid] for pid in sorted(set(pids)) if pid in apps}
    return {
        "tree_mib": sum(mine.values()) if mine else None,
        "per_pid_mib": {str(pid): mib for pid, mib in mine.items()},
        "device_mib": device_mib,
        "other_apps_mib": sum(m for p, m in apps.items() if p not in mine),
    }


def measure(pid: int, query: Callable[[list[str]], str] = _query) -> dict[str, Any]:
    """The GPU memory of `pid`'s process tree now (see the module docstring)."""
    return reading(tree_pids(pid), parse_apps(query(APPS_QUERY)), parse_device(query(DEVICE_QUERY)))


def freed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """MiB freed from `before` to `after`: by the tree where both have it, and by the device."""

    def sub(key: str) -> float | None:
        a, b = before.get(key), after.get(key)
        return None if a is None or b is None else a - b

    tree, device = sub("tree_mib"), sub("device_mib")
    return {
        "freed_mib": tree if tree is not None else device,
        "source": "process tree" if tree is not None else "device",
        "device_freed_mib": device,
    }
