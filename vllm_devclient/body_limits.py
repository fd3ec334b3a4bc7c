"""Request-body limits: what each frontend's release reads at most, and the refusal of a body over it before
it is sent (sans-IO: the clients ask, these functions decide).

The limits are measured, not written down: `python -m tools.fixtures.body_limit` sends bodies of growing size
through the kit to each frontend of a release (rust_fixtures/body_limits.json), and `make figures` copies them
into the shipped support data (`route_support.json`, key `body_limits`: frontend -> release -> bytes, null
for no limit up to the largest body tried). vllm-rs 0.33.0 and 0.34.0 read at most 33554432 bytes (32 MiB)
and answer 400 "length limit exceeded" just over it, and close the connection mid-body further over; the
Python frontend read 100 MiB.

When it is checked: only for a body larger than the smallest limit known (so an ordinary call costs
nothing), against the server's frontend and release as the client knows them from a `version()` answer;
a client that has none yet asks /version once, on its first such body. A release newer than every measured
one is taken to keep the newest measured limit; an older one not measured is not checked before sending
(its own refusal, a 400 or the connection cut mid-body, still comes back as a typed error).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import BODY_HINT, BodyTooLargeError
from .support import load_support

__all__ = ["body_limit", "check_body", "checked_above", "limits"]

MiB = 1 << 20


def limits() -> Mapping[str, Mapping[str, int | None]]:
    """frontend -> release -> limit in bytes (None: none found), from the shipped support data."""
    try:
        raw: Any = load_support().raw.get("body_limits", {})
    except (OSError, ValueError, KeyError):  # a broken install must not stop a call
        return {}
    return raw if isinstance(raw, Mapping) else {}


def _version(release: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in release.split("+")[0].split(".")[:3])
    except ValueError:
        return ()


def body_limit(frontend: str, release: str | None) -> int | None:
    """The body limit of `frontend` at `release`: its measurement, or the newest measured release's for a
    release newer than all of them; None when unknown or unlimited."""
    measured = limits().get(frontend, {})
    if release is None or not measured:
        return None
    if release in measured:
        return measured[release]
    newest = max(measured, key=_version)
    return measured[newest] if _version(release) > _version(newest) else None


def checked_above() -> int | None:
    """Bodies larger than this are checked (the smallest limit any frontend's release has); None: none."""
    known = [limit for per in limits().values() for limit in per.values() if limit is not None]
    return min(known) if known else None


def check_body(size: int, *, frontend: str, release: str | None, method: str, path: str) -> None:
    """Raises BodyTooLargeError when a body of `size` bytes is over the server's known limit."""
    limit = body_limit(frontend, release)
    if limit is None or size <= limit:
        return
    name = "vllm-rs" if frontend == "rust" else "the Python frontend"
    raise BodyTooLargeError(
        f"{method} {path}: the request body is {size} bytes ({size / MiB:.1f} MiB), over the {limit} bytes "
        f"({limit / MiB:g} MiB) {name} {release} reads at most, so it was not sent: {BODY_HINT}",
        size=size, limit=limit, frontend=frontend, release=release, path=path,
    )  # fmt: skip
