"""The GPU suite's CPU tests: the campaign's planning, measuring (against a fake server), judging, reports and
tables, without a GPU. `python -m pytest gpu_tests/tests` (part of `make test`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_tests.offload_check.report import OffloadCheckReport
from gpu_tests.runner import collect, jobs
from vllm_devclient.gsm8k import SAMPLE_DIR
from vllm_devclient.testing import Frontend, PythonFrontend, RustFrontend, ScriptedEngine

# GSM8K for the tests: the sample in the package (50 test, 10 train items), never a folder outside the repo.
GSM8K_DIR = SAMPLE_DIR


@pytest.fixture(autouse=True)
def _httpx_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same transport as the unit suite (tests/conftest.py): the checks' clients send through httpx.
    monkeypatch.setenv("VLLM_DEVCLIENT_TRANSPORT", "httpx")


def _offload_frontend(kind: type[Frontend]) -> Iterator[Frontend]:
    # GSM8K prompts need a long context; the scripted answer is the label's digits "18".
    with kind(engine=ScriptedEngine(token_ids=(19, 26), max_model_len=2048)) as fe:
        yield fe


@pytest.fixture(scope="session")
def offload_python() -> Iterator[Frontend]:
    """The Python frontend the offload check's server I/O is tested against, started once per session
    (``vllm serve`` imports vLLM: seconds); ``offload_frontend`` resets its engine around each test."""
    yield from _offload_frontend(PythonFrontend)


@pytest.fixture(scope="session")
def offload_rust() -> Iterator[Frontend]:
    """The Rust frontend beside ``offload_python``, on the same kind of engine."""
    yield from _offload_frontend(RustFrontend)


@pytest.fixture(params=["rust", "python"])
def offload_frontend(request: pytest.FixtureRequest) -> Iterator[Frontend]:
    """Each shared offload frontend in turn, its engine reset (scripts, held requests) before and after."""
    fe: Frontend = request.getfixturevalue(f"offload_{request.param}")
    fe.engine.reset()
    yield fe
    fe.engine.reset()


def _stamp(path: Path) -> tuple[Path, tuple[tuple[str, int, int], ...]] | None:
    """``path`` resolved with the name, mtime and size of every file under it, when it lies in the committed
    results (None elsewhere: a test's own reports are read every time)."""
    resolved = path.resolve()
    if not resolved.is_relative_to(jobs.RESULTS):
        return None
    files = [resolved] if resolved.is_file() else sorted(p for p in resolved.rglob("*") if p.is_file())
    return resolved, tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)


def _patch_everywhere(mp: pytest.MonkeyPatch, original: Callable[..., Any], new: Callable[..., Any]) -> None:
    """Bind ``new`` wherever a gpu_tests module bound ``original`` (``from .collect import read_report``)."""
    bound = 0
    for name, module in list(sys.modules.items()):
        if name == "gpu_tests" or name.startswith("gpu_tests."):
            for attr, value in list(vars(module).items()):
                if value is original:
                    mp.setattr(module, attr, new)
                    bound += 1
    assert bound, f"{original.__qualname__} is bound nowhere: the reading moved, update this fixture"


@pytest.fixture(scope="session", autouse=True)
def _committed_reports_decoded_once() -> Iterator[None]:
    """Each committed report (gpu_tests/results, about 340 xz JSON files) is decoded once per session, not on
    each of the hundreds of plans, grades and tables that read them: ``collect.read_report`` (a frozen model)
    and ``jobs.committed_reports`` (raw dicts, which their readers never change) answer from a cache while
    the files are unchanged; reports elsewhere (a test's tmp_path) are read every time."""
    read_report, committed_reports = collect.read_report, jobs.committed_reports
    models: dict[tuple[Path, tuple[tuple[str, int, int], ...]], OffloadCheckReport] = {}
    raws: dict[tuple[Any, ...], list[dict[str, Any]]] = {}

    def cached_report(path: Path) -> OffloadCheckReport:
        key = _stamp(path)
        if key is None:
            return read_report(path)
        if key not in models:
            models[key] = read_report(path)
        return models[key]

    def cached_committed(results: Path = jobs.RESULTS, stem: str = "tiny-*") -> Iterator[dict[str, Any]]:
        key = _stamp(results)
        if key is None:
            yield from committed_reports(results, stem)
            return
        if (key, stem) not in raws:
            raws[key, stem] = list(committed_reports(results, stem))
        yield from raws[key, stem]

    mp = pytest.MonkeyPatch()
    _patch_everywhere(mp, read_report, cached_report)
    _patch_everywhere(mp, committed_reports, cached_committed)
    yield
    mp.undo()
