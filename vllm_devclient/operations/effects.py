"""The effects an operation yields (`Transmit` an HTTP exchange, `Sleep`), and the log line of an exchange."""

from __future__ import annotations

import logging
import time
from collections.abc import Generator
from typing import Any, NamedTuple, TypeVar

from ..endpoints import Endpoint
from .context import CallContext

T = TypeVar("T")
log = logging.getLogger("vllm_devclient")


class Transmit(NamedTuple):
    """Send one request; hand back the response (body read), or throw the `TransportError` in.

    `deadline` (absolute, `time.monotonic()`) bounds the whole exchange; `connect_timeout` the connecting.
    """

    endpoint: Endpoint[Any]
    connect_timeout: float | None
    deadline: float | None


class Sleep(NamedTuple):
    seconds: float


Effect = Transmit | Sleep
Operation = Generator[Effect, Any, T]


def log_exchange(ep: Endpoint[Any], ctx: CallContext, start: float, outcome: str) -> None:
    """One DEBUG line per exchange (as httpx and openai-python log theirs): method, path, status, time."""
    if log.isEnabledFor(logging.DEBUG):
        took = (time.monotonic() - start) * 1000
        line = f"{ep.method} {ep.path} -> {outcome} in {took:.1f} ms"
        log.debug("%s", ctx.secrets.redact(line))
