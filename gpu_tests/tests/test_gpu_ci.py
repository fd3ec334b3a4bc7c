"""Each step of gpu_tests/ci/kv_offload.yaml runs what its header says: a dry run collects the step's tests.

Real-model steps: `pytest --collect-only` with the step's env and `-k` must list every case of the step's
profiles (connector x frontend) and a mutation case per profile whose OffloadingConnector uses vLLM's CPU
spec, and nothing else. The tiny step: the runner's dry runs of its two parts must plan every tiny family's
four cases and its mutation case, each once.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_tests.offload_check import PROFILES, matrix
from gpu_tests.offload_check.tiny import TINY_FAMILIES

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[2]
STEPS: list[dict[str, Any]] = yaml.safe_load((REPO / "gpu_tests" / "ci" / "kv_offload.yaml").read_text())[
    "steps"
]


def _collect(k: str, env: dict[str, str]) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "gpu_tests/test_offload_gsm8k.py", "--collect-only", "-q", "-k", k],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **env},
        timeout=120,
        check=False,
    ).stdout
    return {m.group(1) for m in re.finditer(r"::\w+\[(.+)\]", out)}


@pytest.mark.parametrize(
    "step", [s for s in STEPS if "pytest" in " ".join(s["commands"])], ids=lambda s: s["key"]
)
def test_a_real_model_step_collects_its_cases_and_their_mutations(step: dict[str, Any]) -> None:
    (command,) = [c for c in step["commands"] if c.startswith("pytest")]
    argv = shlex.split(command)
    k = argv[argv.index("-k") + 1]
    collected = _collect(k, {key: str(v) for key, v in step.get("env", {}).items()})
    words = [w.strip() for w in k.split(" or ")]
    profiles = {
        n for n, p in PROFILES.items() if not p.tiny and p.real_size_of is None and any(w in n for w in words)
    }
    assert profiles, f"{step['key']} selects no profile"
    cases = {c.id for c in matrix(sorted(profiles))}
    mutations = {
        f"{n}-offloading-python-mutations"
        for n in profiles
        if "OffloadingConnector" in PROFILES[n].connectors
        and PROFILES[n].settings("OffloadingConnector").spec_name is None
    }
    assert collected == cases | mutations
    assert mutations, f"{step['key']} runs no mutation"
    assert step["env"]["VLLM_DEVCLIENT_ITERATIONS"] == "1"  # what the file's header says


def test_the_tiny_step_plans_every_family_with_its_mutations() -> None:
    (step,) = [s for s in STEPS if s["key"] == "devclient-kv-offload-tiny"]
    planned: list[str] = []
    for command in [c for c in step["commands"] if "run_matrix" in c]:
        argv = shlex.split(command)[1:]
        out = subprocess.run(
            [sys.executable, *argv, "--dry-run"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
            check=True,
        ).stdout
        planned += [line.split()[0] for line in out.splitlines() if line.startswith("tiny-")]
    families = [f for f in TINY_FAMILIES if f != "deepseek-v4"]  # DeepGEMM is not in the payload
    expected = [
        f"tiny-{f}-{c}-{fe}" for f in families for c in ("offloading", "simple") for fe in ("python", "rust")
    ] + [f"tiny-{f}-{c}-python-mutations" for f in families for c in ("offloading", "simple")]
    assert sorted(planned) == sorted(expected)
