"""The fixtures' command line; the fixture library itself moved to `vllm_devclient.testing.fixtures`.

    python -m vllm_devclient.testing.recording record --out rust_fixtures/
    python -m vllm_devclient.testing.recording drift          # exit 1: the installed vllm answers otherwise
    python -m vllm_devclient.testing.recording diff OLD NEW   # compare two fixture trees, no server
    python -m vllm_devclient.testing.recording summary        # a Markdown matrix of the recorded answers

Importing the library's names from here (`record`, `drift`, `replay`, ...) still works for one release, with
a DeprecationWarning: import them from `vllm_devclient.testing.fixtures`.
"""

from __future__ import annotations

from typing import Any

from . import fixtures
from ._moved import moved
from .fixtures.cli import main

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    return moved(__name__, name, fixtures)


if __name__ == "__main__":
    raise SystemExit(main())
