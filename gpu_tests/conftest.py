"""GPU suite setup: knobs for the machine it runs on, read when the tests run (never at import).

Environment:
  VLLM_DEVCLIENT_GPU_PROFILES     comma-separated profiles (default: the real ones; `tiny`: the tiny families)
  VLLM_DEVCLIENT_SMALL_MODEL      model id or folder for the `small` profile
  VLLM_DEVCLIENT_TINY_DIR         folder of the tiny models (gpu_tests/runner/build_tiny_models.py)
  VLLM_DEVCLIENT_SERVER_ARGS      extra `vllm serve` arguments for every case (shell syntax)
  VLLM_DEVCLIENT_GSM8K_QUESTIONS  questions per run (default: the profile's)
  VLLM_DEVCLIENT_CONCURRENCY      requests in flight per run (default 1: greedy numerics the same each run)
  VLLM_DEVCLIENT_ITERATIONS       clean passes per case (default 3)
  VLLM_DEVCLIENT_REPORT_DIR       where the JSON reports, probe folders and server logs go
                                  (default: <repo>/out/gpu_reports)
  VLLM_DEVCLIENT_GSM8K_DIR        GSM8K folder (train.jsonl, test.jsonl) on an offline machine

The cases collect on any machine (a CI step's selection can be listed with `--collect-only`); without vllm or
an NVIDIA GPU each one is skipped with the reason when it would run.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import signal
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def environment_skip_reason() -> str | None:
    """Why the GPU suite cannot run on this machine at all (None: it can)."""
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed: the GPU suite starts real `vllm serve` processes"
    from gpu_tests.offload_check import gpu_count

    if gpu_count() == 0:
        return "no NVIDIA GPU visible (nvidia-smi is missing or lists none)"
    return None


def report_dir() -> Path:
    return Path(os.environ.get("VLLM_DEVCLIENT_REPORT_DIR") or REPO_ROOT / "out" / "gpu_reports")


def server_args() -> list[str]:
    return shlex.split(os.environ.get("VLLM_DEVCLIENT_SERVER_ARGS", ""))


def server_env() -> dict[str, str]:
    # The engine processes import the instruments (gpu_tests.kv_proof) from the repository root.
    path = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), path) if p)}


def num_questions() -> int | None:
    value = os.environ.get("VLLM_DEVCLIENT_GSM8K_QUESTIONS")
    return int(value) if value else None


def concurrency() -> int:
    return int(os.environ.get("VLLM_DEVCLIENT_CONCURRENCY", "1"))


def iterations() -> int:
    return int(os.environ.get("VLLM_DEVCLIENT_ITERATIONS", "3"))


def _interrupt(signum: int, frame: object) -> None:
    # A SIGTERM (`timeout`, a CI runner) unwinds like Ctrl-C, so every VllmServer stops its process group.
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)
    config.addinivalue_line("markers", "timeout(seconds): per-test limit (pytest-timeout)")
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU and vllm")
