"""The cache routes: the prefix, multimodal and encoder caches, and the KV cache's memory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import arguments as check
from ..answers import model_reader, nothing, read_reset
from ..models import KVCacheReleaseResult, ResetPrefixCacheResult
from ..records import Cli, Param, Route
from .sleep import RESET_CONNECTOR

__all__ = ["ROUTES"]


def _reset(value: ResetPrefixCacheResult) -> str:
    if value.success is None:
        return "done (this server cannot say whether the cache was reset)"
    return f"success={str(value.success).lower()}"


def _reset_refused(value: ResetPrefixCacheResult, given: Mapping[str, Any]) -> str | None:
    if value.success is False:
        return (
            "success=false: the engine still holds blocks (running requests or in-flight offload stores); "
            "retry with `barrier`"
        )
    return None


def _released(value: KVCacheReleaseResult) -> str:
    return value.status or "done (this server answered a bare 200: it cannot say more)"


ROUTES: tuple[Route, ...] = (
    Route(
        name="reset_prefix_cache",
        method="POST",
        path="/reset_prefix_cache",
        reader=read_reset,
        idempotent=True,
        ok_statuses=frozenset({409}),
        doc="POST /reset_prefix_cache once; `.success` False while blocks are held (see the barrier).",
        answer=ResetPrefixCacheResult,
        params=(
            Param(
                name="reset_running_requests",
                send="query",
                check=check.flag,
                type=bool,
                default=False,
                help="Preempt running requests first, so their blocks can be freed.",
            ),
            Param(
                name="reset_external",
                send="query",
                check=check.flag,
                type=bool,
                default=False,
                help="Also reset the connector's tier (e.g. the CPU offload cache).",
            ),
        ),
        cli=Cli(topic="cache", render=_reset, verdict=_reset_refused),
    ),
    Route(
        name="reset_mm_cache",
        method="POST",
        path="/reset_mm_cache",
        reader=nothing,
        idempotent=True,
        doc="POST /reset_mm_cache: drop the multimodal cache.",
        answer=None,
        cli=Cli(topic="cache"),
    ),
    Route(
        name="reset_encoder_cache",
        method="POST",
        path="/reset_encoder_cache",
        reader=nothing,
        idempotent=True,
        doc="POST /reset_encoder_cache: drop the encoder cache.",
        answer=None,
        cli=Cli(topic="cache"),
    ),
    Route(
        name="release_kv_cache_memory",
        method="POST",
        path="/release_kv_cache_memory",
        # vLLM 0.31.0 answers a bare 200 once the memory is released: that is a success that says nothing.
        reader=model_reader(KVCacheReleaseResult, empty_ok=True),
        doc="POST /release_kv_cache_memory: free the KV cache's GPU memory (never resent).",
        answer=KVCacheReleaseResult,
        params=(RESET_CONNECTOR,),
        cli=Cli(topic="cache", render=_released),
    ),
)
