"""How `make pytest` shares the suite among pytest-xdist workers (`-n 3 --dist loadgroup`; the root
conftest.py hands xdist `make_scheduler`'s scheduler for `--dist loadgroup`).

A unit of work runs whole on one worker. Each test file is one (its module-scoped fixtures, a fleet of
frontends for instance, start once), except the files of a group in `GROUPS`, which are one unit together:
the users of a costly session fixture (each worker has its own session: in one unit, it starts once), and the
timed tests, one at a time (no two of them measure each other's load). tests/test_xdist_units.py checks that
every user of those fixtures is in its group.

Groups are named by file because the scheduler sees test ids only: xdist's own `xdist_group` mark renames
each test's id, which pytest 9 no longer lets a plugin do.

The units start in `rank` order, in file order within a rank: the groups, then the frontends' suite (its
units start real servers and take longest), the unit tests, the GPU suite's CPU tests.
"""

from __future__ import annotations

from fnmatch import fnmatch
from typing import Any

GROUPS: dict[str, tuple[str, ...]] = {
    # The fault suite's timed tests, and the CPU burner that would load the machine under them.
    "timing": ("contract_tests/test_faults_*.py", "tests/test_kv_events_load.py"),
    # The pool of extra frontends (the frontend_pool mark) and the one pass over every scenario. In one unit
    # the files run in collection order: test_drift re-records before test_rl_frameworks_run loads a LoRA
    # adapter on the shared extras frontends (their LoRA id counter is part of the recordings).
    "frontend_pool": (
        "contract_tests/test_drift.py",
        "contract_tests/test_parity.py",
        "contract_tests/test_raw_responses.py",
        "contract_tests/test_rl_frameworks_run.py",
        "contract_tests/test_scenarios.py",
    ),
    # The offload frontends (offload_python, offload_rust: gpu_tests/tests/conftest.py).
    "offload_frontends": (
        "gpu_tests/tests/test_offload_failures.py",
        "gpu_tests/tests/test_offload_load.py",
        "gpu_tests/tests/test_offload_resets.py",
    ),
    # The committed reports, decoded once per session (gpu_tests/tests/conftest.py): the plans, grades and
    # tables that read them.
    "committed_reports": (
        "gpu_tests/tests/test_device_calls.py",
        "gpu_tests/tests/test_gpu_runner.py",
        "gpu_tests/tests/test_history_grade.py",
        "gpu_tests/tests/test_history_standing.py",
        "gpu_tests/tests/test_proof_tables.py",
        "gpu_tests/tests/test_real_budget.py",
        "gpu_tests/tests/test_real_size.py",
        "gpu_tests/tests/test_releases.py",
        "gpu_tests/tests/test_volume.py",
    ),
}
FOLDERS = ("contract_tests/", "tests/", "gpu_tests/")


def unit(nodeid: str) -> str:
    """The unit of work of the test `nodeid`: its group's name, or its file."""
    path = nodeid.split("::", 1)[0]
    return next((name for name, files in GROUPS.items() if any(fnmatch(path, f) for f in files)), path)


def rank(name: str) -> int:
    """When the unit `name` starts: the groups first, then by folder (`FOLDERS`), the rest last."""
    if name in GROUPS:
        return 0
    return 1 + next((i for i, folder in enumerate(FOLDERS) if name.startswith(folder)), len(FOLDERS))


def make_scheduler(config: Any, log: Any) -> Any:
    """xdist's scope scheduling over these units, handed out by `rank`."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            first = min(self.workqueue, key=rank)  # ties: the first in collection order
            self.workqueue.move_to_end(first, last=False)
            super()._assign_work_unit(node)

    config.option.loadscopereorder = False
    return UnitScheduling(config, log)
