#!/usr/bin/env python3
"""Name PyPI's newest vLLM release when the support matrix lacks it (CI runs this; it never fails a run).

    python scripts/newest_release.py

Asks the package index through pip (`pip index versions vllm`, the index pip is set up for) and compares
the newest release with `vllm_devclient/route_support.json`. A release the matrix lacks is named, with the
command that takes it to supported (`make release V=...`); an index that cannot be reached is said plainly.
Exit 0 either way.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "vllm_devclient" / "route_support.json"


def newest_of(index_output: str) -> str | None:
    """The newest version in `pip index versions` output ("vllm (0.34.0)" on its first line)."""
    match = re.search(r"^vllm \(([^)]+)\)", index_output, re.M)
    return match.group(1) if match else None


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def message(newest: str, supported: list[str]) -> str:
    if newest in supported or (supported and _key(newest) < _key(supported[-1])):
        return f"newest vLLM on the package index: {newest}; supported (the matrix's newest: {supported[-1]})"
    return (
        f"NEW vLLM RELEASE: {newest} is on the package index and the support matrix ({SUPPORT.name}, newest "
        f"{supported[-1] if supported else 'none'}) lacks it: take it to supported with `make release "
        f"V={newest}` (docs/releases.md)"
    )


def main() -> int:
    pip = shlex.split(os.environ.get("VLLM_DEVCLIENT_PIP", f"{sys.executable} -m pip"))
    supported = list(json.loads(SUPPORT.read_text())["releases"])
    try:
        done = subprocess.run([*pip, "index", "versions", "vllm"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"newest vLLM release: not checked, the package index could not be asked ({exc})")
        return 0
    newest = newest_of(done.stdout) if done.returncode == 0 else None
    if newest is None:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        print(f"newest vLLM release: not checked, the package index did not answer ({why})")
        return 0
    print(message(newest, supported))
    return 0


if __name__ == "__main__":
    sys.exit(main())
