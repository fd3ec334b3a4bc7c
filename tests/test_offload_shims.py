"""The old module names keep working for one release, with a DeprecationWarning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        ("vllm_devclient.gsm8k", "vllm_devclient.offload_check.gsm8k", "evaluate_gsm8k_async"),
        ("vllm_devclient.server", "vllm_devclient.offload_check.server", "VllmServer"),
    ],
)
def test_old_module_warns_and_reexports(old: str, new: str, name: str) -> None:
    code = (
        "import warnings, importlib\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module('{old}')\n"
        f"new = importlib.import_module('{new}')\n"
        f"assert getattr(old, '{name}') is getattr(new, '{name}')\n"
        "assert set(old.__all__) <= set(new.__all__)\n"
        "print([str(w.message) for w in seen if w.category is DeprecationWarning])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert f"{old} moved to {new}" in out.stdout


def test_the_old_offload_check_names_are_still_there() -> None:
    import vllm_devclient.offload_check as oc

    for name in ("PROFILES", "CheckCase", "ServerIO", "run_case", "run_check", "settle", "main", "judge"):
        assert hasattr(oc, name)
    assert oc.open_store_watcher is oc.open_event_watcher
