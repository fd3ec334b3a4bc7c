"""What `scripts/generate.py` writes, one module per surface: `source` (a type back to the source text that
names it), `methods` (the async route methods and the tables of the methods derived from them: the
raw-response ones, the blocking client's), `schema` (the command line's result schemas), `docs` (the route
table of docs/frontends.md). The sync code is written by `scripts/unasync.py`.

The records are imported from the package without its `__init__` (which imports the clients): the records
never need the generated code, so a generated file that is broken or out of date cannot stop its own
regeneration.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "vllm_devclient"
_bare = types.ModuleType("vllm_devclient")
_bare.__path__ = [str(PKG)]
sys.modules.setdefault("vllm_devclient", _bare)


class GenerateError(SystemExit):
    def __init__(self, message: str) -> None:
        super().__init__(f"generate: {message}")
