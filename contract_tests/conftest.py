"""Shared fixtures of the contract suite: one pool of extra frontends (API key, dev mode off, dead engine)
next to the plugin's shared `python_frontend` / `rust_frontend`, the parity report's output, and a
misbehaving raw server for the fault suite (test_faults_*.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vllm_devclient.testing.contract import SETUPS, Scenario, ScenarioRun, Setup
from vllm_devclient.testing.frontends import Frontend, RustFrontend
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.parity import collect_runs
from vllm_devclient.testing.pool import FrontendPool
from vllm_devclient.testing.processes import spawn, stop_group

_REPORT_KEY = pytest.StashKey[tuple[str, Path]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--parity-report",
        default=None,
        metavar="PATH",
        help="write the Python-vs-Rust parity report (Markdown) here (default: $PARITY_REPORT)",
    )


@pytest.fixture
def parity_report_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """Where the parity report goes: --parity-report, else $PARITY_REPORT, else a temporary file."""
    chosen = request.config.getoption("--parity-report") or os.environ.get("PARITY_REPORT")
    return Path(chosen) if chosen else tmp_path / "parity.md"


@pytest.fixture
def show_in_summary(request: pytest.FixtureRequest, parity_report_path: Path) -> Callable[[str], None]:
    """Keep a Markdown text for the terminal summary: its path and size at the end of the run, the text
    itself with -v (about 150 lines: `make test` stays readable)."""

    def keep(markdown: str) -> None:
        request.config.stash[_REPORT_KEY] = (markdown, parity_report_path)
        # On a pytest-xdist worker: the summary is the controller's, the worker's output takes it there.
        output = getattr(request.config, "workeroutput", None)
        if output is not None:
            output["parity_report"] = [markdown, str(parity_report_path)]

    return keep


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller: a worker that kept the parity report hands it to the terminal summary."""
    kept = getattr(node, "workeroutput", {}).get("parity_report")
    if kept is not None:
        node.config.stash[_REPORT_KEY] = (kept[0], Path(kept[1]))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    kept = config.stash.get(_REPORT_KEY, None)
    if kept is None:
        return
    markdown, path = kept
    terminalreporter.section("parity report (Python vs Rust frontend)")
    if config.get_verbosity() > 0:
        terminalreporter.write_line(markdown)
    else:
        lines = len(markdown.splitlines())
        terminalreporter.write_line(
            f"{lines} lines in {path} (-v prints them; --parity-report PATH keeps them)"
        )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "frontend_pool: uses the pool of extra frontends (started early)")


def _needed(items: list[pytest.Item]) -> list[tuple[str, Setup]]:
    """One (frontend, setup) per test that needs an extra frontend; dead-engine ones are single use. With a
    harness test in the session, the tests that reuse its runs (`harness_run`) need none of their own."""
    needed: list[tuple[str, Setup]] = []
    users = [(item, m) for item in items if (m := item.get_closest_marker("frontend_pool")) is not None]
    harness = any(m.kwargs.get("harness") for _, m in users)
    for item, marker in users:
        if marker.kwargs.get("harness") or (harness and marker.kwargs.get("harness_run")):
            continue  # the one pass over every scenario (harness_runs) is counted once, below
        # A test that names its setups (`frontend_pool(setups=("extras",))`) gets them on both frontends.
        needed += [(fe, setup) for setup in marker.kwargs.get("setups", ()) for fe in ("python", "rust")]
        params = getattr(item, "callspec", None)
        scenario = params.params.get("scenario") if params else None
        kind = params.params.get("frontend") if params else None
        if isinstance(scenario, Scenario) and scenario.setup != "default" and kind in ("python", "rust"):
            needed.append((kind, scenario.setup))
    if harness:
        needed += [(fe, setup) for setup in SETUPS if setup != "default" for fe in ("python", "rust")]
    # Reusable setups need one frontend each; a dead-engine frontend serves one run.
    dead = [k for k in needed if k[1] == "dead_engine"]
    return dead + list(dict.fromkeys(k for k in needed if k[1] != "dead_engine"))


@pytest.fixture(scope="session")
def frontend_pool(request: pytest.FixtureRequest) -> Iterator[FrontendPool]:
    """The non-default setups (API key, dev mode off, dead engine) on both frontends, started in the
    background as soon as the session begins (what the selected tests need, no more)."""
    with FrontendPool() as pool:
        pool.start(_needed(request.session.items), wait=False)
        yield pool


_HARNESS_KEY = pytest.StashKey[dict[tuple[str, str], ScenarioRun]]()


@pytest.fixture(scope="session")
def harness_runs(
    request: pytest.FixtureRequest, python_frontend: Any, rust_frontend: Any, frontend_pool: FrontendPool
) -> list[ScenarioRun]:
    """Every scenario once on each real frontend (sync client): what the parity report and the drift check
    are built from, so the suite runs them once."""
    frontend_pool.adopt("python", "default", python_frontend)
    frontend_pool.adopt("rust", "default", rust_frontend)
    runs = collect_runs(frontend_pool)
    for fe in (python_frontend, rust_frontend):
        fe.engine.reset()
    request.config.stash[_HARNESS_KEY] = {(run.scenario.name, run.frontend): run for run in runs}
    return runs


@pytest.fixture
def harness_run(request: pytest.FixtureRequest) -> Callable[[Scenario, str], ScenarioRun | None]:
    """The sync client's run of a scenario on a frontend from `harness_runs`, when the session made them
    already (test_drift.py and test_parity.py come first): the very run a test of its own would make
    (run_scenario on the same frontend), so test_scenarios.py's sync tests check that one."""
    made = request.config.stash.get(_HARNESS_KEY, {})
    return lambda scenario, frontend: made.get((scenario.name, frontend))


@pytest.fixture(scope="session", autouse=True)
def _early_pool(request: pytest.FixtureRequest) -> None:
    # Autouse fixtures come first: starting the pool here lets its Python startups (about 10 s each,
    # mostly waiting) overlap with the shared frontends' instead of following them. A pytest-xdist worker
    # cannot know whether it will run the pool's tests: there the pool starts when its first test runs.
    if "PYTEST_XDIST_WORKER" in os.environ:
        return
    if any(item.get_closest_marker("frontend_pool") for item in request.session.items):
        request.getfixturevalue("frontend_pool")
    if any("leftover_children" in getattr(item, "fixturenames", ()) for item in request.session.items):
        request.getfixturevalue("leftover_children")


@pytest.fixture(scope="session")
def third_frontend(tiny_model_dir: Path) -> Iterator[Frontend]:
    """One more Rust frontend (it starts in about a second), for fleets of three real servers."""
    with RustFrontend(model_dir=tiny_model_dir) as fe:
        yield fe


@pytest.fixture
def three_frontends(
    python_frontend: Frontend, rust_frontend: Frontend, third_frontend: Frontend, reset_engines: None
) -> Iterator[list[Frontend]]:
    """Python, Rust and another Rust frontend, every engine reset before and after."""
    third_frontend.engine.reset()
    yield [python_frontend, rust_frontend, third_frontend]
    third_frontend.engine.reset()


@pytest.fixture
def server() -> Iterator[MisbehavingServer]:
    """A fresh `MisbehavingServer` (vllm_devclient/testing/misbehaving.py), closed after the test."""
    with MisbehavingServer() as srv:
        yield srv


# ---- the no-leftover check (contract_tests/test_no_leftovers.py): child pytest runs started early, so their
# frontends come up while the rest of the suite runs

# The children start with the session and wait for test_no_leftovers.py, which may come many minutes later on
# a loaded machine: they hold their frontends up to WINDOW seconds (they are stopped long before).
CHILD_TESTS = """
import json, os, time
WINDOW = 1200
from vllm_devclient.testing.processes import descendants


def _record(*frontends):
    trees = {fe.frontend: [fe.pid, *(p.pid for p in descendants(fe.pid))] for fe in frontends}
    path = os.environ["LEFTOVER_PIDS"]
    with open(path + ".tmp", "w") as f:
        json.dump(trees, f)
    os.replace(path + ".tmp", path)


def test_fails_with_both_frontends_up(rust_frontend, python_frontend):
    _record(rust_frontend, python_frontend)
    # Fail only once the parent has seen the frontends running.
    deadline = time.monotonic() + WINDOW
    while not os.path.exists(os.environ["LEFTOVER_PIDS"] + ".go") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert False, "deliberate failure"


def test_waits_to_be_interrupted(rust_frontend, python_frontend):
    _record(rust_frontend, python_frontend)
    time.sleep(WINDOW)


def test_waits_to_be_interrupted_rust_only(rust_frontend):
    _record(rust_frontend)
    time.sleep(WINDOW)
"""


_WITH_CTRL_C = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "import pytest; sys.exit(pytest.main(sys.argv[1:]))"
)


@dataclass
class Child:
    case: str
    proc: subprocess.Popen[bytes]
    pids_file: Path

    def output(self, timeout: float = 120.0) -> str:
        """Everything the child printed, once it has exited."""
        out, _ = self.proc.communicate(timeout=timeout)
        return out.decode(errors="replace")

    def wait_for_pids(self, timeout: float = 120.0) -> dict[str, list[int]]:
        deadline = time.monotonic() + timeout
        while not self.pids_file.exists():
            if self.proc.poll() is not None:
                out = self.output()
                pytest.fail(f"child pytest ({self.case}) ended before its frontends were up:\n{out[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"child pytest ({self.case}) did not start its frontends within {timeout:.0f} s")
            time.sleep(0.1)
        trees: dict[str, list[int]] = json.loads(self.pids_file.read_text())
        return trees


@pytest.fixture(scope="session")
def leftover_children(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Child]]:
    """Three child pytest runs at once, each using the plugin's fixtures (see test_no_leftovers.py)."""
    tmp_path = tmp_path_factory.mktemp("leftovers")
    (tmp_path / "test_child.py").write_text(CHILD_TESTS)
    cases = {
        "failed test": "test_fails_with_both_frontends_up",
        # Ctrl-C tears down like a failure does; the Rust frontend alone keeps this case cheap.
        "ctrl-c": "test_waits_to_be_interrupted_rust_only",
        "sigkill": "test_waits_to_be_interrupted",
    }
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST")}
    started: dict[str, Child] = {}
    try:
        for i, (case, test) in enumerate(cases.items()):
            pids_file = tmp_path / f"pids-{i}.json"
            # The plugin is opt-in: loaded the way a user's project loads it.
            plugin = ["-p", "vllm_devclient.testing.pytest_plugin"]
            args = [f"test_child.py::{test}", "-q", "-p", "no:cacheprovider", *plugin]
            # Ctrl-C as at a terminal: a shell starts background jobs with SIGINT ignored, and Python then
            # installs no KeyboardInterrupt handler, so a suite run in the background would hang here.
            cmd = [sys.executable, "-c", _WITH_CTRL_C, *args]
            proc = spawn(
                cmd,
                cwd=tmp_path,
                # TMPDIR: the killed child cannot delete its frontends' logs; keep them in pytest's tmp dir.
                env={**env, "LEFTOVER_PIDS": str(pids_file), "TMPDIR": str(tmp_path)},
                stdout=subprocess.PIPE,
            )
            started[case] = Child(case, proc, pids_file)
        yield started
    finally:
        for child in started.values():
            stop_group(child.proc, grace=10.0)
            if child.proc.stdout:
                child.proc.stdout.close()


@pytest.fixture
def source() -> Any:
    """A small seeded torch model as vLLM's trainer engines read it (a `ModuleSource`): the weight-sync
    tests' trainer side."""
    import torch
    from vllm.distributed.weight_transfer import ModuleSource

    torch.manual_seed(0)
    return ModuleSource(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2)))
