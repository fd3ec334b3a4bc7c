"""scripts/setup.sh, run with a stand-in interpreter that notes every pip call (the real install takes
minutes): a new user sees one line, not pip's list of the vLLM requirements left out on purpose."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Prints what pip prints after an install into an environment holding vLLM without its CUDA stack, unless
# it is told not to warn about conflicts (pip's --no-warn-conflicts).
STAND_IN = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/../calls"
if [ "$1" = "-" ]; then cat > /dev/null; echo "setup ok: stand-in"; exit 0; fi
case "$*" in
  *"pip install"*"--no-warn-conflicts"*) ;;
  *"pip install"*)
    echo "ERROR: pip's dependency resolver does not currently take into account all the packages..."
    echo "vllm 0.33.0 requires torch==2.14.0, but you have torch 2.13.0+cpu which is incompatible."
    echo "vllm 0.33.0 requires torchaudio==2.11.0, which is not installed.";;
esac
"""


def _run_setup(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """setup.sh over the stand-in interpreter: its output and every call the stand-in saw."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(STAND_IN)
    python.chmod(0o755)
    env = {**os.environ, "VENV": str(venv)}
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup.sh")], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out, (venv / "calls").read_text().splitlines()


def test_setup_asks_pip_not_to_list_the_requirements_left_out(tmp_path: Path) -> None:
    out, calls = _run_setup(tmp_path)
    installs = [line for line in calls if "pip install" in line]
    assert len(installs) >= 2 and all("--no-warn-conflicts" in line for line in installs), installs
    assert (out.stdout + out.stderr).splitlines() == ["setup ok: stand-in"]


def test_setup_installs_the_sdk_where_mypy_finds_it(tmp_path: Path) -> None:
    # setuptools' default editable install is an import hook mypy cannot follow; compat mode is a plain path.
    _, calls = _run_setup(tmp_path)
    (editable,) = [line for line in calls if " -e " in line]
    assert "--config-settings editable_mode=compat" in editable, editable


def test_setup_byte_compiles_what_it_installed_once_on_every_core(tmp_path: Path) -> None:
    # pip compiles one file at a time; the venv is compiled after the last install instead (each process of
    # the suite would otherwise compile vLLM's imports again where bytecode is not written).
    _, calls = _run_setup(tmp_path)
    installs = [
        i for i, line in enumerate(calls) if "pip install" in line and ("-r " in line or " -e " in line)
    ]
    compiles = [i for i, line in enumerate(calls) if line.startswith("-m compileall") and "-j 0" in line]
    assert installs and all("--no-compile" in calls[i] for i in installs), calls
    assert len(compiles) == 1 and compiles[0] > max(installs), calls
