"""The `vllm-devclient` command line: every client method as a subcommand, on one server or a fleet.

Every per-server subcommand runs through `AsyncFleet` (one server is a fleet of one), so the output and the
exit codes are the same whatever the number of `--url`s. The subcommands are built from the records of the
client's methods (`vllm_devclient/routes/`, `calls.py`) by `_generate.py`.

This module imports no click: the console entry point must be able to say, in one line and with exit 7,
that the `[cli]` extra is missing.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._exit import ExitCode, UnsuccessfulResultError, combine, exit_code_for, missing_extra_message

if TYPE_CHECKING:
    import click

    cli: click.Group

__all__ = ["ExitCode", "UnsuccessfulResultError", "cli", "combine", "exit_code_for", "main"]


def main(argv: Sequence[str] | None = None) -> None:
    """The console-script entry point."""
    try:
        from ._app import run
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] not in ("click", "rich"):
            raise
        print(f"vllm-devclient: {missing_extra_message(exc, 'cli')}", file=sys.stderr)
        raise SystemExit(ExitCode.UNAVAILABLE) from None
    run(argv)


def __getattr__(name: str) -> Any:
    if name == "cli":
        from ._app import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
