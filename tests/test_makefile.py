"""`make help` lists every target of the Makefile with its one line."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_make_help_lists_every_target_with_one_line() -> None:
    makefile = (ROOT / "Makefile").read_text()
    (phony,) = re.findall(r"^\.PHONY:(.*)$", makefile, re.M)
    targets = phony.split()
    out = subprocess.run(
        ["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    rows = dict(line.split(None, 1) for line in out.stdout.splitlines())
    assert sorted(rows) == sorted(targets), out.stdout
    assert all(len(text.strip()) > 10 for text in rows.values()), rows
    # `make` alone prints the same list (help is the first target): it installs nothing.
    plain = subprocess.run(["make", "-s"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert plain.stdout == out.stdout
