"""Build the tiny seeded models on the GPU machine (see gpu_tests.offload_check.tiny).

python -m gpu_tests.runner.build_tiny_models --out /tmp/tiny --tokenizer /tmp/models/smollm2 [--families a,b]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Sequence

from gpu_tests.offload_check.tiny import TINY_FAMILIES, build_tiny_model


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpu_tests.runner.build_tiny_models")
    p.add_argument("--out", required=True)
    p.add_argument("--tokenizer", required=True, help="folder with the SmolLM2 tokenizer files")
    p.add_argument("--families", default="all", help="comma list or 'all'")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    names = list(TINY_FAMILIES) if args.families == "all" else [f.strip() for f in args.families.split(",")]
    failed = 0
    for name in names:
        t0 = time.monotonic()
        try:
            manifest = build_tiny_model(
                name, f"{args.out}/{name}", tokenizer_dir=args.tokenizer, seed=args.seed
            )
            print(
                f"{name}: {manifest.get('parameters')} parameters, {time.monotonic() - t0:.1f} s,",
                json.dumps(manifest.get("files")),
                flush=True,
            )
        except Exception:
            failed += 1
            # The config alone still serves with --load-format dummy (the runner's fallback).
            print(f"{name}: weights FAILED\n{traceback.format_exc(limit=3)}", flush=True)
            try:
                build_tiny_model(name, f"{args.out}/{name}", tokenizer_dir=args.tokenizer, weights=False)
            except Exception:
                print(f"{name}: config FAILED\n{traceback.format_exc(limit=3)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
