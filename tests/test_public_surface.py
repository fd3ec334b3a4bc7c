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
        [sys.executable, str(ROOT / "scripts" / "unasync.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout[-2000:]
