"""Every Python example of README.md and docs/ runs, unchanged but for its URLs, against the test kit on both
real frontends, and fails here when it errors or hangs (issue 37).

An example is a ```python block. Its server URLs (`PLACEHOLDER_URLS`, and the name `url`) become the kit's
frontends: an example naming one server runs once per frontend; one naming two (a fleet) runs once, over the
Python and the Rust frontend together. A block that defines `test_*` functions is a test of the reader's own:
it is called with the `frontend` (and `engine`) it asks for, on each frontend. The names an example leaves to
the reader (their trainer, their workload, their tensors' names) are given by `READER_PARTS`; any other
undefined name fails the example, so a new example cannot use something nobody defines.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vllm_devclient.testing import Frontend, PublishingEngine, PythonFrontend, RustFrontend

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
# The servers the examples talk to, in the order they are handed the kit's frontends.
PLACEHOLDER_URLS = ("http://127.0.0.1:8000", "http://vllm-0.example:8000", "http://vllm-1.example:8000")
# An example must finish within this (the longest one, the KV-events example, takes about 2 s).
HANG_S = 60.0
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Example:
    path: str
    line: int
    code: str

    @property
    def urls(self) -> list[str]:
        return [u for u in PLACEHOLDER_URLS if u in self.code] or (["url"] if _uses_url(self.code) else [])

    @property
    def kv_events(self) -> bool:
        """A subscriber on the reader's server (one that starts its own publishing frontend runs alone)."""
        return "KVEventSubscriber" in self.code and "PublishingEngine" not in self.code

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def _uses_url(code: str) -> bool:
    return re.search(r"\burl\b", code) is not None


def examples() -> list[Example]:
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for m in _BLOCK.finditer(text):
            line = text[: m.start()].count("\n") + 1
            found.append(Example(doc.relative_to(ROOT).as_posix(), line, m.group(1)))
    return found


EXAMPLES = examples()


# ---- what the examples leave to the reader ---------------------------------------------------------------


class _Trainer:
    """The reader's trainer: it sends the weights while the server receives them."""

    def __init__(self) -> None:
        self.broadcasts = 0

    def broadcast_weights(self) -> None:
        self.broadcasts += 1


def _reader_parts(workload: Callable[[], None]) -> dict[str, Any]:
    return {
        "names": ["model.embed_tokens.weight"],
        "dtypes": ["bfloat16"],
        "shapes": [[32, 16]],
        "trainer": _Trainer(),
        "run_workload": workload,
    }


READER_PARTS = frozenset(_reader_parts(lambda: None))


# ---- running one ------------------------------------------------------------------------------------------


def _run(example: Example, urls: list[str], parts: dict[str, Any], frontend: Frontend | None) -> str:
    """Execute the example with its URLs replaced, in a thread bounded by HANG_S; its printed output."""
    code = example.code
    for placeholder, url in zip(example.urls, urls, strict=False):
        if placeholder != "url":
            code = code.replace(placeholder, url)
    namespace: dict[str, Any] = {"__name__": f"doc_example_{example.line}", **parts}
    if "url" in example.urls:
        namespace["url"] = urls[0]
    out = io.StringIO()
    failure: list[BaseException] = []

    def body() -> None:
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, str(example), "exec"), namespace)
                _run_defined_tests(namespace, frontend)
                for plugin in namespace.get("pytest_plugins", ()):
                    importlib.import_module(plugin)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=body, name=f"example {example}", daemon=True)
    start = time.monotonic()
    thread.start()
    thread.join(HANG_S)
    if thread.is_alive():
        pytest.fail(f"{example} hangs: still running after {HANG_S:.0f} s\n{out.getvalue()}", pytrace=False)
    if failure:
        error = failure[0]
        if isinstance(error, NameError):
            pytest.fail(
                f"{example} uses a name nobody defines ({error}): define it in the example, or give it in "
                "READER_PARTS when the reader is meant to bring it",
                pytrace=False,
            )
        raise AssertionError(f"{example} failed after {time.monotonic() - start:.1f} s: {error!r}") from error
    return out.getvalue()


def _run_defined_tests(namespace: dict[str, Any], frontend: Frontend | None) -> None:
    """Call every `test_*` function the example defines, with the fixtures it names."""
    for name, fn in list(namespace.items()):
        if not (name.startswith("test_") and inspect.isfunction(fn)):
            continue
        assert frontend is not None, f"{name} needs a frontend"
        frontend.engine.reset()
        given = {"frontend": frontend, "engine": frontend.engine}
        fn(**{p: given[p] for p in inspect.signature(fn).parameters})


def _single(examples: list[Example]) -> list[Example]:
    return [e for e in examples if len(e.urls) <= 1 and not e.kv_events]


def test_the_examples_are_found_and_each_is_run_somewhere() -> None:
    """A guard: every block is in exactly one of the tests below, and they are the ones the docs have."""
    assert len(EXAMPLES) >= 5, [str(e) for e in EXAMPLES]
    fleets = [e for e in EXAMPLES if len(e.urls) > 1]
    kv = [e for e in EXAMPLES if e.kv_events]
    assert len(_single(EXAMPLES)) + len(fleets) + len(kv) == len(EXAMPLES)
    assert any("Fleet(" in e.code for e in fleets) and kv


@pytest.mark.parametrize("example", _single(EXAMPLES), ids=str)
def test_an_example_runs_on_each_frontend(example: Example, frontend: Frontend) -> None:
    printed = _run(example, [frontend.base_url], _reader_parts(lambda: None), frontend)
    if "vllm.version().frontend" in example.code:
        assert frontend.frontend in printed.split()  # the quickstart prints which frontend served it
    if 'weight_version="step-42"' in example.code:
        assert frontend.engine.state.weight_version == "step-42" and not frontend.engine.state.paused


@pytest.mark.parametrize("example", [e for e in EXAMPLES if len(e.urls) > 1], ids=str)
def test_a_fleet_example_runs_over_both_frontends(
    example: Example, python_frontend: Frontend, rust_frontend: Frontend
) -> None:
    frontends = [python_frontend, rust_frontend]
    for fe in frontends:
        fe.engine.reset()
    try:
        printed = _run(example, [fe.base_url for fe in frontends], _reader_parts(lambda: None), None)
        assert all(fe.base_url in printed for fe in frontends), printed
    finally:
        for fe in frontends:
            fe.engine.reset()


# ---- the KV-events example: frontends whose engine publishes (the kit's PublishingEngine) ------------------


@pytest.fixture(params=["python", "rust"])
def publishing(request: pytest.FixtureRequest) -> Iterator[Frontend]:
    """A frontend whose engine runs vLLM's own publisher and announces it: the one line README gives."""
    launcher = PythonFrontend if request.param == "python" else RustFrontend
    with launcher(engine=PublishingEngine()) as fe:
        yield fe


def test_the_kv_events_example_runs_on_each_frontend(publishing: Frontend) -> None:
    (example,) = [e for e in EXAMPLES if e.kv_events]
    engine = publishing.engine
    assert isinstance(engine, PublishingEngine)

    def workload() -> None:
        """The reader's workload: the engine offloads 64 blocks to the CPU tier."""
        engine.store(64, medium="CPU")

    _run(example, [publishing.base_url], _reader_parts(workload), publishing)
