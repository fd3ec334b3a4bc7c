#!/usr/bin/env python3
"""Re-record rust_fixtures/ for every vLLM release installed here, or check them for drift.

    .venv/bin/python scripts/record_fixtures.py          # record: .venv's vllm, then every .venv-vllm-*/
    .venv/bin/python scripts/record_fixtures.py --drift  # re-record into a temp dir, diff, exit 1 on drift

Older releases are installed per docs/releases.md into .venv-vllm-<version>/; the recorder itself runs here
(it needs only the SDK and the test harness) and starts each release's own `vllm serve` and `vllm-rs`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vllm_devclient.testing.fixtures import main as recording_main

ROOT = Path(__file__).resolve().parent.parent


def releases() -> list[str | None]:
    """None (this interpreter's vllm) first, then each older install's interpreter."""
    found: list[str | None] = [None]
    found += [str(p) for p in sorted(ROOT.glob(".venv-vllm-*/bin/python"))]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drift", action="store_true", help="check instead of recording")
    parser.add_argument("--out", default=str(ROOT / "rust_fixtures"))
    args = parser.parse_args()
    status = 0
    for python in releases():
        extra = ["--python", python] if python else []
        if args.drift:
            print(f"== drift check: {python or sys.executable}", flush=True)
            status |= recording_main(["drift", "--fixtures", args.out, *extra])
        else:
            status |= recording_main(["record", "--out", args.out, *extra])
    return status


if __name__ == "__main__":
    raise SystemExit(main())
