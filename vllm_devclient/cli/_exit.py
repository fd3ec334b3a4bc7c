"""Exit codes, the one error the command line adds, and the hint for a missing extra. No click here: the
console entry point uses this module before it knows whether click is installed."""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum

from ..errors import (
    APIConnectionError,
    AuthenticationError,
    BodyCutOffError,
    DevModeDisabledError,
    InvalidParameterError,
    PermissionDeniedError,
    UnsuccessfulResultError,
    WaitTimeoutError,
    WaitUnreachableError,
)

__all__ = [
    "EXIT_CODES_SHORT",
    "ExitCode",
    "UnsuccessfulResultError",
    "combine",
    "exit_code_for",
    "missing_extra_message",
]


class ExitCode(IntEnum):
    """What the command line exits with. Scripts may rely on these; docs/cli.md lists them too."""

    OK = 0
    FAILED = 1  # a target failed or answered success=false; failures of different kinds; parity differs
    USAGE = 2  # bad command line or argument: nothing was sent
    CONNECTION = 3  # a target could not be reached or did not answer within --timeout
    DEADLINE = 4  # barrier / wait-* / kv-events deadline passed before the state was reached
    DEV_MODE = 5  # a dev route answered 404: the server runs without VLLM_SERVER_DEV_MODE=1
    AUTH = 6  # 401/403: missing or wrong --api-key
    UNAVAILABLE = 7  # an optional part is not installed (the [cli] extra itself, KV events, metrics, ...)
    INTERRUPTED = 130  # Ctrl-C


EXIT_CODES_SHORT = (
    "Exit codes: 0 ok, 1 failed, 2 usage, 3 unreachable/--timeout, 4 --deadline passed, 5 dev mode off, "
    "6 auth, 7 extra missing, 130 Ctrl-C (docs/cli.md)."
)


# Which errors exit with which code, the first match wins; anything else exits 1.
_CODES: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], ExitCode], ...] = (
    # Nothing listens there (the barrier: no try reached the server): not a deadline matter.
    (WaitUnreachableError, ExitCode.CONNECTION),
    (WaitTimeoutError, ExitCode.DEADLINE),
    (BodyCutOffError, ExitCode.FAILED),  # the server was reached: it refused the body's size
    (APIConnectionError, ExitCode.CONNECTION),
    (DevModeDisabledError, ExitCode.DEV_MODE),
    ((AuthenticationError, PermissionDeniedError), ExitCode.AUTH),
    (InvalidParameterError, ExitCode.USAGE),
    (ImportError, ExitCode.UNAVAILABLE),
    (KeyboardInterrupt, ExitCode.INTERRUPTED),
)


def exit_code_for(error: BaseException) -> ExitCode:
    """The exit code one target's error maps to."""
    return next((code for kinds, code in _CODES if isinstance(error, kinds)), ExitCode.FAILED)


def combine(codes: Sequence[int]) -> int:
    """One exit code for many targets: 0, the one failure kind they share, or 1 when they differ."""
    failing = {c for c in codes if c != ExitCode.OK}
    if not failing:
        return ExitCode.OK
    return failing.pop() if len(failing) == 1 else ExitCode.FAILED


# The extra that brings each optional module (the top-level name an ImportError reports).
_EXTRA_OF = {
    "click": "cli",
    "rich": "cli",
    "zmq": "zmq",
    "msgspec": "zmq",
    "prometheus_client": "metrics",
    "tqdm": "gsm8k",
    "psutil": "testing",
    "tokenizers": "testing",
    "pytest": "testing",
    "httpx": "httpx",
    "httpx2": "httpx2",
    "aiohttp": "aiohttp",
}
_WHAT = {
    "cli": "the command line",
    "zmq": "KV-cache events",
    "metrics": "the /metrics snapshot",
    "gsm8k": "GSM8K",
    "testing": "the test harness",
    "httpx": "this transport",
    "httpx2": "this transport",
    "aiohttp": "this transport",
}


def missing_extra_message(error: ImportError, extra: str | None = None) -> str:
    """One line naming what is missing and the pip command that installs it."""
    module = (error.name or "").partition(".")[0]
    # A MissingExtraError names its extra itself.
    chosen = extra or getattr(error, "extra", None) or _EXTRA_OF.get(module, "all")
    what = _WHAT.get(chosen, "this command")
    why = (str(error).splitlines() or ["not installed"])[0]
    return f"{what} needs the [{chosen}] extra ({why}): pip install 'vllm-devclient[{chosen}]'"
