"""`python -m tools.rl_frameworks`: start both real frontends, observe every step, write or check the record.

Exit codes: 0 written (or the record agrees), 1 the record differs from this run (`--check`), 2 a bad command
line or a frontend that did not start.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vllm_devclient.testing.frontends import FrontendStartupError
from vllm_devclient.testing.pool import FRONTENDS, FrontendPool, lora_adapter_dir

from .record import RECORD, comparable, dumps, record
from .runner import observe

__all__ = ["differences", "main", "run"]


def run() -> tuple[dict[str, Any], dict[str, float]]:
    """Start the Python and Rust frontends (the kit's extras setup), observe every step: the record, and the
    seconds the start-up and the steps took."""
    started = time.monotonic()
    with FrontendPool() as pool:
        pool.start([(fe, "extras") for fe in FRONTENDS])
        frontends = {fe: pool.get(fe, "extras") for fe in FRONTENDS}
        up = time.monotonic()
        steps = observe(frontends, str(lora_adapter_dir()))
        done = time.monotonic()
    return record(steps), {"startup_s": up - started, "steps_s": done - up}


def differences(committed: Any, observed: Any, where: str = "") -> list[str]:
    """Where two records differ (paths like `steps[2].sdk.observed`), their provenance aside."""
    if where == "":
        committed, observed = comparable(committed), comparable(observed)
    if isinstance(committed, dict) and isinstance(observed, dict):
        out = []
        for key in dict.fromkeys([*committed, *observed]):
            out += differences(committed.get(key), observed.get(key), f"{where}.{key}" if where else key)
        return out
    if isinstance(committed, list) and isinstance(observed, list) and len(committed) == len(observed):
        return [
            d
            for i, (a, b) in enumerate(zip(committed, observed, strict=True))
            for d in differences(a, b, f"{where}[{i}]")
        ]
    return (
        [] if committed == observed else [f"{where}: {json.dumps(committed)} -> {json.dumps(observed)}"[:300]]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--out", type=Path, help=f"write the record here (the committed one: {RECORD})")
    what.add_argument("--check", type=Path, help="exit 1 when this record differs from what the run observes")
    args = parser.parse_args(argv)
    try:
        data, seconds = run()
    except FrontendStartupError as error:
        print(f"rl_frameworks: {error}", file=sys.stderr)
        return 2
    print(f"start-up {seconds['startup_s']:.1f} s, steps {seconds['steps_s']:.1f} s", file=sys.stderr)
    if args.out is not None:
        args.out.write_text(dumps(data) + "\n")
        print(f"wrote {args.out}", file=sys.stderr)
        return 0
    found = differences(json.loads(args.check.read_text()), data)
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0
