"""The units `make pytest` shares among pytest-xdist workers (tests/xdist_units.py): every user of a costly
session fixture is in that fixture's group, every group's file exists, and the scheduler hands out whole
units, the groups first."""

from __future__ import annotations

import re
from fnmatch import fnmatch
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.xdist_units import GROUPS, make_scheduler, rank, unit

ROOT = Path(__file__).resolve().parents[1]
TEST_FILES = sorted(
    p.relative_to(ROOT).as_posix()
    for folder in ("tests", "contract_tests", "gpu_tests")
    for p in (ROOT / folder).rglob("test_*.py")
    if p != Path(__file__).resolve()
)
# Which session fixture (named in a test file) puts the file in which group.
USERS = {
    "frontend_pool": re.compile(r"\bfrontend_pool\b|\bharness_runs\b"),
    "offload_frontends": re.compile(r"\boffload_(python|rust|frontend)\b"),
}


def _checkout(folder: str) -> None:
    if not (ROOT / folder).is_dir():  # an unpacked sdist carries tests/ only
        pytest.skip(f"{folder}/ stays in the repository")


def test_every_group_names_files_that_exist() -> None:
    _checkout("contract_tests")
    _checkout("gpu_tests")
    for name, patterns in GROUPS.items():
        for pattern in patterns:
            assert any(fnmatch(f, pattern) for f in TEST_FILES), f"{name}: {pattern} matches no test file"


@pytest.mark.parametrize(
    ("group", "folder"), [("frontend_pool", "contract_tests"), ("offload_frontends", "gpu_tests")]
)
def test_every_user_of_a_shared_session_fixture_is_in_its_group(group: str, folder: str) -> None:
    _checkout(folder)
    users = [f for f in TEST_FILES if USERS[group].search((ROOT / f).read_text())]
    assert users, f"no test file uses {group}'s fixture: the group is stale"
    assert {f: unit(f"{f}::test") for f in users} == dict.fromkeys(users, group)


def test_the_fault_suite_is_timed_one_test_at_a_time() -> None:
    _checkout("contract_tests")
    faults = [f for f in TEST_FILES if f.startswith("contract_tests/test_faults_")]
    assert len(faults) >= 8 and {unit(f"{f}::t") for f in faults} == {"timing"}


def test_a_file_outside_the_groups_is_its_own_unit_and_the_groups_start_first() -> None:
    assert unit("tests/test_fleet.py::test_x[a::b]") == "tests/test_fleet.py"
    order = ["gpu_tests/tests/test_x.py", "tests/test_fleet.py", "contract_tests/test_tls.py", "timing"]
    assert sorted(order, key=rank) == order[::-1]


class _Node:
    """What the scheduler drives of a worker: it records the test indices it is sent."""

    def __init__(self, name: str, sent: list[tuple[str, list[int]]]) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self._sent = sent

    def send_runtest_some(self, indices: list[int]) -> None:
        self._sent.append((self.gateway.id, indices))

    def shutdown(self) -> None:
        self.shutting_down = True


def test_the_scheduler_hands_out_whole_units_the_groups_first() -> None:
    option = SimpleNamespace(loadscopereorder=True, tx=["2*popen"])
    config = SimpleNamespace(option=option, getvalue=lambda name: getattr(option, name))
    scheduler = make_scheduler(config, None)
    assert option.loadscopereorder is False  # the units by rank, not by size
    ids = [
        "gpu_tests/tests/test_x.py::a",
        "tests/test_fleet.py::b",
        "contract_tests/test_faults_errors.py::c",
        "tests/test_fleet.py::d",
        "contract_tests/test_tls.py::e",
        "contract_tests/test_faults_secrets.py::f",
    ]
    sent: list[tuple[str, list[int]]] = []
    nodes = [_Node(name, sent) for name in ("gw0", "gw1")]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, ids)
    scheduler.schedule()
    batches = [(name, [ids[i] for i in indices]) for name, indices in sent]
    assert batches[0] == (
        "gw0",
        ["contract_tests/test_faults_errors.py::c", "contract_tests/test_faults_secrets.py::f"],
    )
    assert batches[1] == ("gw1", ["contract_tests/test_tls.py::e"])
    assert [unit(b[1][0]) for b in batches] == [
        "timing",
        "contract_tests/test_tls.py",
        "tests/test_fleet.py",
        "gpu_tests/tests/test_x.py",
    ]
    assert sorted(i for _, indices in sent for i in indices) == list(range(len(ids)))  # each test once
