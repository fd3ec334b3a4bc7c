"""The fixtures' command line; the fixture library itself moved to `vllm_devclient.testing.fixtures`.

    python -m vllm_devclient.testing.recording record --out rust_fixtures/
    python -m vllm_devclient.testing.recording drift          # exit 1: the installed vllm answers otherwise
    python -m vllm_devclient.testing.recording diff OLD NEW   # compare two fixture trees, no server
    python -m vllm_devclient.testing.recording summary        # a Markdown matrix of the recorded answers

Importing the library's names from here (`record`, `drift`, `replay`, ...) still works for one release, with
a DeprecationWarning: import them from `vllm_devclient.testing.fixtures`.
"""

from __future__ import annotations

import warnings
from typing import Any

from . import fixtures
from .fixtures.cli import main

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    if name not in fixtures.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"vllm_devclient.testing.recording.{name} moved to vllm_devclient.testing.fixtures.{name}; "
        "the old name goes in the next release",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(fixtures, name)


if __name__ == "__main__":
    raise SystemExit(main())
