"""What each vLLM release can serve, as data: the check runs one judge on every release issue 35 grades,
and a release that lacks a piece the case needs is listed with the reason, never run.

The facts are ``gpu_tests/history/PORTING.md``'s, read from each release's wheel: 0.20.2 has no Rust
frontend (no ``vllm-rs`` in the wheel, ``VLLM_USE_RUST_FRONTEND`` unknown to it) and its
OffloadingConnector is not ``SupportsHMA`` (with ``--no-disable-hybrid-kv-cache-manager`` the server refuses
to start; without it a Mamba hybrid fails at startup), so there the OffloadingConnector serves attention-only
families, without the flag. :func:`adapt` makes a profile's flags fit a release; :func:`skip_reason` says
why a case cannot run on one. A release not listed takes the capabilities of the newest listed one before
it (capabilities only grow).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from importlib import metadata

from .profiles import CheckCase, ModelProfile
from .server import Connector

__all__ = [
    "HMA_FLAG",
    "RECURRENT_FAMILIES",
    "RELEASES",
    "Release",
    "adapt",
    "installed_version",
    "release",
    "skip_reason",
    "version_key",
]

HMA_FLAG = "--no-disable-hybrid-kv-cache-manager"
# Families with a Mamba (recurrent-state) group: without the hybrid KV-cache manager they cannot start.
RECURRENT_FAMILIES = frozenset({"nemotron-h", "falcon-h1", "mamba", "qwen3-next"})


@dataclass(frozen=True)
class Release:
    """One vLLM release and what the check needs from it."""

    version: str
    rust_frontend: bool  # vllm-rs in the wheel
    offloading_hma: bool  # OffloadingConnector is SupportsHMA
    reset_answer: str  # what POST /reset_prefix_cache answers: "empty" (a bare 200) or "success" (JSON)
    wheel: str  # the platform tag build_payload.sh finds it under
    # /version names the Rust frontend (rust_frontend_version): 0.22.0's vllm-rs has no such key, so there
    # a Rust server reads as Python and the frontend cannot be observed
    version_names_frontend: bool = True


RELEASES: tuple[Release, ...] = (
    Release(
        "0.20.2", rust_frontend=False, offloading_hma=False, reset_answer="empty", wheel="manylinux_2_35"
    ),
    Release(
        "0.22.0",
        rust_frontend=True,
        offloading_hma=True,
        reset_answer="empty",
        wheel="manylinux_2_28",
        version_names_frontend=False,
    ),
    Release("0.23.0", rust_frontend=True, offloading_hma=True, reset_answer="empty", wheel="manylinux_2_28"),
    Release("0.24.0", rust_frontend=True, offloading_hma=True, reset_answer="empty", wheel="manylinux_2_28"),
    Release("0.25.0", rust_frontend=True, offloading_hma=True, reset_answer="empty", wheel="manylinux_2_28"),
    Release("0.25.1", rust_frontend=True, offloading_hma=True, reset_answer="empty", wheel="manylinux_2_28"),
    Release(
        "0.26.0", rust_frontend=True, offloading_hma=True, reset_answer="success", wheel="manylinux_2_28"
    ),
)


def version_key(version: str) -> tuple[int, ...]:
    """``0.25.1`` -> (0, 25, 1); a local or dev suffix (``0.26.0+cu130``, ``0.27.0rc1``) is dropped."""
    m = re.match(r"\d+(?:\.\d+)*", version.strip())
    return tuple(int(p) for p in m.group(0).split(".")) if m else ()


def release(version: str) -> Release:
    """The release's capabilities: its own row, else the newest listed release before it."""
    key = version_key(version)
    known = [r for r in RELEASES if version_key(r.version) <= key]
    if not known:
        raise ValueError(
            f"vLLM {version} is older than every release the check knows ({RELEASES[0].version})"
        )
    base = known[-1]
    return base if base.version == version else replace(base, version=version)


def installed_version() -> str | None:
    """The vLLM installed beside the check (None: none is)."""
    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return None


def _offloading_without_hma(connector: Connector, rel: Release) -> bool:
    return connector == "OffloadingConnector" and not rel.offloading_hma


def adapt(profile: ModelProfile, connector: Connector, version: str | None) -> ModelProfile:
    """``profile`` with the flags ``version`` accepts: without the HMA flag where the OffloadingConnector has
    no HMA (the server would refuse to start). ``None``: the profile as is."""
    if version is None or not _offloading_without_hma(connector, release(version)):
        return profile
    return replace(profile, server_args=tuple(a for a in profile.server_args if a != HMA_FLAG))


def skip_reason(case: CheckCase, version: str) -> str | None:
    """Why ``case`` cannot run on vLLM ``version`` (None: it can)."""
    rel = release(version)
    if case.frontend == "rust" and not rel.rust_frontend:
        return f"vLLM {version} has no Rust frontend (no vllm-rs in its wheel)"
    if _offloading_without_hma(case.connector, rel) and case.profile.family in RECURRENT_FAMILIES:
        return (
            f"vLLM {version}'s OffloadingConnector has no HMA, and a Mamba hybrid ({case.profile.family}) "
            "cannot start without the hybrid KV-cache manager"
        )
    return None
