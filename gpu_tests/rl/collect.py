"""Commit an RL device call: its JSON reports, the way the offload check's are committed.

    python -m gpu_tests.rl.collect --name rl-2026-12-01 OUT/rl      # OUT: results-rl.tgz unpacked

Copies ``run.json``, ``call.json`` and every ``<frontend>/*.json`` of the run into
``gpu_tests/results/NAME/`` (the servers' logs stay out: ``run.json`` names them, and each report holds the
errors it met), then the figures of gpu_tests/rl/README.md are made again from it
(``python -m gpu_tests.rl.tables``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from .tables import FRONTENDS, RESULTS


def collect(name: str, folder: Path, results: Path = RESULTS) -> list[Path]:
    """The run folder ``folder`` (``rl/`` of a call) copied to ``results/NAME``; the files written."""
    if not name.startswith("rl-"):
        raise ValueError(f"the run's name must start with 'rl-' (the figures read rl-*), not {name!r}")
    if not (folder / "run.json").is_file():
        raise FileNotFoundError(f"{folder} holds no run.json: pass the rl/ folder of results-rl.tgz")
    out = results / name
    written = []
    sources = [folder / "run.json", folder / "call.json"]
    sources += [p for f in FRONTENDS for p in sorted((folder / f).glob("*.json"))]
    for src in sources:
        if not src.is_file():
            continue
        json.loads(src.read_text())  # only well-formed JSON is committed
        dest = out / src.relative_to(folder)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        written.append(dest)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpu_tests.rl.collect", description=__doc__.split("\n")[0])
    p.add_argument("--name", required=True, help="the folder under gpu_tests/results/ (rl-DATE)")
    p.add_argument("folder", type=Path, help="the rl/ folder of the call's results-rl.tgz")
    args = p.parse_args(argv)
    written = collect(args.name, args.folder)
    print(f"{len(written)} files -> {RESULTS / args.name}")
    from .tables import main as tables_main

    return tables_main([])


if __name__ == "__main__":
    sys.exit(main())
