"""Every default of the SDK in one place: timeouts, retries, poll intervals, pool sizes."""

from __future__ import annotations

from .timeouts import Timeout

__all__ = [
    "DEFAULT_BARRIER_DEADLINE",
    "DEFAULT_BARRIER_REQUEST_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_POLL_INTERVAL",
    "DEFAULT_POLL_MAX_INTERVAL",
    "DEFAULT_READY_DEADLINE",
    "DEFAULT_READY_REQUEST_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "DEFAULT_URL",
    "DEFAULT_VERIFY_DEADLINE",
    "DEFAULT_WAIT_DEADLINE",
    "DEFAULT_WAIT_REQUEST_TIMEOUT",
    "DEFAULT_WATCHDOG_FAILURES",
    "DEFAULT_WATCHDOG_INTERVAL",
    "DEV_ROUTES_PROBE_TIMEOUT",
    "ERROR_TEXT_LIMIT",
    "KEEPALIVE_EXPIRY",
    "LONG_ROUTE_TIMEOUT",
    "MIN_TRY_SECONDS",
    "RETRY_INITIAL_DELAY",
    "RETRY_MAX_DELAY",
]

DEFAULT_URL = "http://127.0.0.1:8000"

# One HTTP try as a whole (connect, send, headers and body) may take 30 s, 5 s of it to connect.
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_TIMEOUT = Timeout(30.0, connect=DEFAULT_CONNECT_TIMEOUT)
# Routes that block through an NCCL rendezvous or a large offload (weight transfer, sleep level 2,
# collective_rpc): no bound on the answer, only on connecting. A per-call timeout= still applies.
LONG_ROUTE_TIMEOUT = Timeout(None, connect=DEFAULT_CONNECT_TIMEOUT)

DEFAULT_MAX_RETRIES = 2
RETRY_INITIAL_DELAY = 0.25
RETRY_MAX_DELAY = 4.0

# Waits and the barrier: a whole deadline, and a bound on each of their tries.
DEFAULT_BARRIER_DEADLINE = 60.0
DEFAULT_BARRIER_REQUEST_TIMEOUT = 10.0
DEFAULT_READY_DEADLINE = 120.0
# A Rust frontend accepts TCP before its engine registers and then answers nothing: short tries.
DEFAULT_READY_REQUEST_TIMEOUT = 1.0
DEFAULT_WAIT_DEADLINE = 60.0
DEFAULT_WAIT_REQUEST_TIMEOUT = 5.0
DEFAULT_POLL_INTERVAL = 0.05
# A watchdog's health checks: prime-rl's (every 10 s, abort after 6 failures in a row, about a minute).
DEFAULT_WATCHDOG_INTERVAL = 10.0
DEFAULT_WATCHDOG_FAILURES = 6
DEFAULT_BARRIER_POLL_INTERVAL = 0.02
DEFAULT_POLL_MAX_INTERVAL = 1.0
# The verified reset: its waits (refused resets retried, /metrics counting the probe) together.
DEFAULT_VERIFY_DEADLINE = 30.0
# The one request that tells a missing route from dev mode off after a dev route's 404 (it never
# reaches the engine): bounded also where the call itself is not (a long-running route).
DEV_ROUTES_PROBE_TIMEOUT = 5.0
# A try started just before a deadline still gets this long, so that it can be answered at all; a try
# that would get less is not started.
MIN_TRY_SECONDS = 0.2

# Connections: servers close idle keep-alive connections after 5 s (uvicorn and vllm-rs both); ours are
# dropped sooner, so a request never races the server's close.
KEEPALIVE_EXPIRY = 4.0
DEFAULT_MAX_CONNECTIONS = 100

DEFAULT_MAX_CONCURRENCY = 64

# How much of a server's text an error message quotes (the whole body stays on `.body`).
ERROR_TEXT_LIMIT = 1000
