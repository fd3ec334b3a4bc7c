"""pytest fixtures that run the real vLLM frontends against a scripted engine.

Opt-in: load it with ``pytest_plugins = ["vllm_devclient.testing.pytest_plugin"]`` in the root
conftest.py (as this repository does) or ``pytest -p vllm_devclient.testing.pytest_plugin``; installing
vllm-devclient registers nothing. Nothing starts until a test asks for a fixture, and this module
imports nothing heavy at load time.

Fixtures:

- ``tiny_model_dir`` (session): the weightless model directory.
- ``rust_frontend`` / ``python_frontend`` (session): one running frontend each, started on first
  use, shared by all tests.
- ``frontend`` (function, parametrised ``python``/``rust``): the shared frontend, its engine reset
  to defaults (scripts, call log, held requests) before and after the test.
- ``engine`` (function): ``frontend.engine``.
- ``tls_certificates`` (session): a CA and its certificates for TLS tests, in a temporary folder
  (:func:`~vllm_devclient.testing.certificates.make_certificates`; ``RustFrontend(tls=...)`` serves https
  with them).
- ``reset_engines`` (function): resets the engines of every shared frontend already started; use
  it with ``autouse`` in a conftest to reset them around tests that use ``rust_frontend`` or
  ``python_frontend`` directly.

A missing vLLM makes these fixtures error with the install instructions; they never skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .certificates import Certificates
    from .engine import ScriptedEngine
    from .frontends import Frontend

__all__ = [
    "engine",
    "frontend",
    "python_frontend",
    "reset_engines",
    "rust_frontend",
    "tiny_model_dir",
    "tls_certificates",
]

_STARTED_KEY = pytest.StashKey[list["Frontend"]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "frontend: runs against a real vLLM HTTP frontend")
    config.stash[_STARTED_KEY] = []


def _started(config: pytest.Config) -> list[Frontend]:
    return config.stash.setdefault(_STARTED_KEY, [])


def _check_usable(fe: Frontend) -> None:
    if fe.engine.dead or not fe.running:
        what = "its engine was declared dead" if fe.engine.dead else "its process exited"
        pytest.fail(
            f"the shared {fe.frontend} frontend is no longer usable: {what}. Tests that kill the "
            "engine must start their own frontend (RustFrontend()/PythonFrontend()).\n"
            f"--- log tail ---\n{fe.log_tail()}",
            pytrace=False,
        )


def _reset(fe: Frontend) -> None:
    if fe.engine.running and not fe.engine.dead:
        fe.engine.reset()


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """A tiny weightless Llama model directory (built once, cached in the user cache)."""
    from .model_dir import make_model_dir

    return make_model_dir()


@pytest.fixture(scope="session")
def tls_certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """A CA and its certificates for TLS tests (see `vllm_devclient.testing.certificates`)."""
    from .certificates import make_certificates

    return make_certificates(tmp_path_factory.mktemp("tls-certificates"))


@pytest.fixture(scope="session")
def rust_frontend(request: pytest.FixtureRequest, tiny_model_dir: Path) -> Iterator[Frontend]:
    """The ``vllm-rs`` frontend with dev mode on, shared by the whole session."""
    from .frontends import RustFrontend

    with RustFrontend(model_dir=tiny_model_dir) as fe:
        _started(request.config).append(fe)
        yield fe


@pytest.fixture(scope="session")
def python_frontend(request: pytest.FixtureRequest, tiny_model_dir: Path) -> Iterator[Frontend]:
    """The stock Python ``vllm serve`` frontend with dev mode on, shared by the whole session."""
    from .frontends import PythonFrontend

    with PythonFrontend(model_dir=tiny_model_dir) as fe:
        _started(request.config).append(fe)
        yield fe


@pytest.fixture(params=["python", "rust"])
def frontend(request: pytest.FixtureRequest) -> Iterator[Frontend]:
    """Each shared frontend in turn, with a freshly reset engine."""
    fe: Frontend = request.getfixturevalue(f"{request.param}_frontend")
    _check_usable(fe)
    fe.engine.reset()
    yield fe
    _reset(fe)


@pytest.fixture
def engine(frontend: Frontend) -> ScriptedEngine:
    """The scripted engine behind ``frontend`` (already reset)."""
    return frontend.engine


@pytest.fixture
def reset_engines(request: pytest.FixtureRequest) -> Iterator[None]:
    """Reset every already-started shared frontend's engine before and after the test."""
    for fe in _started(request.config):
        _reset(fe)
    yield
    for fe in _started(request.config):
        _reset(fe)
