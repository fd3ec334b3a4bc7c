"""Guards over the public surface: every public method documented, the sync twins generated and complete."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_devclient import AsyncDevClient, DevClient
from vllm_devclient.fleet import AsyncFleet, Fleet
from vllm_devclient.kv_events import AsyncKVEventSubscriber, KVEventSubscriber

ROOT = Path(__file__).resolve().parents[1]
SURFACES = [DevClient, AsyncDevClient, Fleet, AsyncFleet, KVEventSubscriber, AsyncKVEventSubscriber]


def _public(cls: type) -> dict[str, object]:
    return {name: getattr(cls, name) for name in dir(cls) if not name.startswith("_")}


@pytest.mark.parametrize("cls", SURFACES, ids=lambda c: c.__name__)
def test_every_public_method_has_a_docstring(cls: type) -> None:
    missing = [
        name
        for name, member in _public(cls).items()
        if callable(member) and not inspect.isclass(member) and not (inspect.getdoc(member) or "").strip()
    ]
    assert missing == [], f"{cls.__name__}: no docstring on {missing}"


@pytest.mark.parametrize(("sync", "asynchronous"), [(DevClient, AsyncDevClient), (Fleet, AsyncFleet)])
def test_the_sync_and_async_twins_have_the_same_methods(sync: type, asynchronous: type) -> None:
    def methods(cls: type) -> set[str]:
        return {name for name, member in _public(cls).items() if callable(member)}

    assert methods(sync) == methods(asynchronous)


def test_the_generated_sync_code_is_up_to_date() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout[-2000:]


def test_the_core_has_no_import_circle_and_no_upward_import() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "import_graph.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout


def test_the_kv_event_subscriber_has_one_home() -> None:
    # Its logic and both drivers live in the kv_events package (the sync driver generated beside the async).
    for cls in (KVEventSubscriber, AsyncKVEventSubscriber):
        assert cls.__module__.startswith("vllm_devclient.kv_events."), cls.__module__


# The package was never published: names that moved are not aliased, options have one name.
GONE_MODULES = (
    "vllm_devclient.server",
    "vllm_devclient.offload_check",  # the GPU suite's, gpu_tests/offload_check/
    "vllm_devclient.testing.fixtures",  # the repository's fixture tooling, tools/fixtures/
    "vllm_devclient.testing.recording",
    "vllm_devclient.testing._moved",
)
GONE_NAMES = (
    ("vllm_devclient._base_client", "deadline_option"),
    ("vllm_devclient.metrics", "fetch_metrics"),
    ("vllm_devclient.metrics", "afetch_metrics"),
    ("vllm_devclient.testing.scenarios", "__getattr__"),
)


@pytest.mark.parametrize("module", GONE_MODULES)
def test_no_module_stands_in_for_one_that_moved(module: str) -> None:
    import importlib.util

    assert importlib.util.find_spec(module) is None


@pytest.mark.parametrize(("module", "name"), GONE_NAMES)
def test_no_alias_is_kept_for_an_older_name(module: str, name: str) -> None:
    import importlib

    assert not hasattr(importlib.import_module(module), name)


def test_an_error_names_the_http_method_and_the_engine_method_apart() -> None:
    from vllm_devclient.errors import EngineCallError

    error = EngineCallError(
        "x", engine_method="sleep", engine_message="m", status_code=500, method="POST", path="/sleep",
        body="", frontend="python",
    )  # fmt: skip
    assert (error.http_method, error.engine_method) == ("POST", "sleep")
    assert not hasattr(error, "method")


def test_the_default_url_is_written_once() -> None:
    """Defaults live in constants.py: no other module spells the default server's URL (docstrings aside)."""
    import ast

    from vllm_devclient.constants import DEFAULT_URL

    spelled = []
    for path in sorted((ROOT / "vllm_devclient").rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == DEFAULT_URL and id(node) not in docstrings:
                spelled.append(str(path.relative_to(ROOT)))
    assert spelled == ["vllm_devclient/constants.py"]


PUBLIC_MODULES = (
    "vllm_devclient",
    "vllm_devclient.fleet",
    "vllm_devclient.gsm8k",
    "vllm_devclient.kv_events",
    "vllm_devclient.metrics",
    "vllm_devclient.testing",
)


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_exported_name_resolves(module: str) -> None:
    import importlib

    imported = importlib.import_module(module)
    missing = [name for name in imported.__all__ if not hasattr(imported, name)]
    assert missing == [], f"{module}.__all__ names what it does not hold: {missing}"


@pytest.mark.parametrize("method", ["pause", "paused", "sleeping", "checkpointed"])
def test_the_pause_mode_type_is_the_one_the_pause_methods_take(method: str) -> None:
    import typing

    import vllm_devclient

    takers = [cls for cls in SURFACES[:4] if hasattr(cls, method)]
    assert DevClient in takers and AsyncDevClient in takers
    for cls in takers:
        assert typing.get_type_hints(getattr(cls, method))["mode"] == vllm_devclient.PauseMode, cls


def test_the_pool_bound_exported_is_the_one_the_async_pools_hold() -> None:
    import inspect

    import vllm_devclient
    from vllm_devclient.transports.aiohttp_pool import AiohttpPool

    bound = inspect.signature(AiohttpPool).parameters["max_connections"].default
    assert vllm_devclient.DEFAULT_MAX_CONNECTIONS == bound
