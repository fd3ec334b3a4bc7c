"""This repository's tests use the harness's pytest plugin. It is opt-in (no pytest11 entry point): a project
that wants the fixtures loads it the same way, or with `pytest -p vllm_devclient.testing.pytest_plugin`.

In an unpacked sdist (PKG-INFO at its root) the tests that need what a checkout's `make setup` provides
(vLLM) are reported as skipped when it is missing; nothing else outside the tree is read (the GSM8K tests
read the sample in the package). In a checkout they
fail instead, with the install instructions: CI must not skip them silently.
"""

from __future__ import annotations

import gc
import importlib.util
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["vllm_devclient.testing.pytest_plugin"]

SDIST = (Path(__file__).resolve().parent / "PKG-INFO").is_file()


def missing_setup(error: BaseException | None) -> str | None:
    """Why a test could not run in an sdist (vLLM missing), or None: a real failure."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        name = type(error).__name__
        if name == "VllmNotInstalledError":
            return "needs vLLM (a checkout's `make setup` installs it)"
        error = error.__cause__ or error.__context__
    return None


if SDIST:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[Any, Any, None]:
        outcome = yield
        report = outcome.get_result()
        reason = missing_setup(call.excinfo.value) if report.failed and call.excinfo else None
        if reason is not None:
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {reason}")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` (`make pytest`): the units of tests/xdist_units.py; other modes are xdist's own."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.xdist_units import make_scheduler

    return make_scheduler(config, log)


@pytest.fixture(scope="module", autouse=True)
def _timed_modules_run_on_a_frozen_heap(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module that asserts time bounds (the timed group of tests/xdist_units.py, or one naming
    `deadline_bound` or `timeout_bound`) runs with what the process held before it frozen (`gc.freeze`): with
    vLLM and torch imported (about 530,000 objects), a full collection took 0.26 s idle and 0.4-0.6 s on
    loaded cores, long enough to push a timed call past its allowance whenever one fell inside it. The
    objects its tests make are collected as ever."""
    from tests.xdist_units import unit

    timed = unit(request.node.nodeid) == "timing" or {"deadline_bound", "timeout_bound"} & set(
        vars(request.module)
    )
    if not timed:
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`pytest.mark.needs("vllm")`: skipped where the module is not installed. Told by `find_spec` of the
    top-level name, which imports nothing: every pytest-xdist worker collects the whole suite, and vLLM with
    torch costs seconds to import, so only the tests that run import them."""
    for item in items:
        missing = [name for mark in item.iter_markers("needs") for name in mark.args if not _installed(name)]
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"{', '.join(missing)} is not installed"))


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None
