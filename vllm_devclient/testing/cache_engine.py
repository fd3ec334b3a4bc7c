"""A scripted engine with a prefix cache in two tiers, reported the way vLLM's engine reports it.

`CachingEngine` remembers the prompts it served, block by block, in a GPU tier and (with `external_tier`)
a connector's tier, and sends each request's lookups in `scheduler_stats` as vLLM's scheduler does:
`prefix_cache_stats` (prompt tokens looked up, tokens the GPU tier served) and
`connector_prefix_cache_stats` (the rest looked up, tokens the external tier served), and each answer's
`prefill_stats` (its cached tokens per tier). Both frontends turn them into `vllm:prefix_cache_*` and
`vllm:external_prefix_cache_*` on /metrics and, started with --enable-prompt-tokens-details, into the
answer's `usage.prompt_tokens_details.cached_tokens`.

A block's key is its prompt prefix and the request's `cache_salt`, as vLLM hashes it (the salt enters the
first block's hash, which every later block's chains to): requests of other salts never share its blocks.

`reset_prefix_cache` clears the GPU tier, and the external one when asked (`reset_connector`), except the
tiers named in `keeps` ("GPU", "external"): an engine that says success and keeps its blocks (vLLM #57727,
#57970, 0.20.2's `reset_external`).

With `store_delay` (seconds) a request's stores to the external tier (the CPU offload) are in flight that
long, and are seen done only at the engine's next step after it (a request), as vLLM's scheduler collects
finished transfers; meanwhile `reset_prefix_cache` answers false, as vLLM does while offload stores hold
blocks (#39725, #37335). `refusals` counts those answers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from .engine import ScriptedEngine
from .engine_protocol import _ADD, prompt_token_ids

__all__ = ["TIER_EXTERNAL", "TIER_GPU", "CachingEngine"]

TIER_GPU = "GPU"
TIER_EXTERNAL = "external"
_Key = tuple[str | None, tuple[int, ...]]  # a block: the request's cache_salt, the prompt up to its end


def _cache_stats(queries: int, hits: int) -> dict[str, Any]:
    # Every field: the Rust frontend decodes PrefixCacheStats strictly.
    return {
        "reset": False, "requests": 1, "queries": queries, "hits": hits, "preempted_requests": 0,
        "preempted_queries": 0, "preempted_hits": 0, "hits_by_source": {},
    }  # fmt: skip


def _scheduler_stats(local: dict[str, Any], external: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "num_running_reqs": 0, "num_waiting_reqs": 0, "num_skipped_waiting_reqs": 0,
        "num_kv_fetch_reqs_by_stage": {}, "step_counter": 0, "current_wave": 0, "kv_cache_usage": 0.0,
        "iteration_details": None, "prefix_cache_stats": local, "connector_prefix_cache_stats": external,
        "kv_cache_eviction_events": [], "spec_decoding_stats": None, "kv_connector_stats": None,
        "waiting_lora_adapters": {}, "running_lora_adapters": {}, "cudagraph_stats": None, "perf_stats": None,
    }  # fmt: skip


class CachingEngine(ScriptedEngine):
    """A ScriptedEngine whose prefix cache serves repeated prompts and reports it (see the module)."""

    def __init__(
        self,
        *,
        external_tier: bool = True,
        keeps: Iterable[str] = (),
        store_delay: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.external_tier = external_tier
        self.keeps: frozenset[str] = frozenset(keeps)
        self.store_delay = store_delay
        self.refusals = 0
        self._block = int(self.ready_response["block_size"])
        self._tiers: dict[str, set[_Key]] = {TIER_GPU: set(), TIER_EXTERNAL: set()}
        self._in_flight: list[tuple[float, list[_Key]]] = []  # (done at, blocks) stores to the external tier
        self._stats: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        self._cache_lock = threading.Lock()

    def forget(self) -> None:
        """Empty both tiers (between tests)."""
        with self._cache_lock:
            for blocks in self._tiers.values():
                blocks.clear()
            self._in_flight.clear()
            self.refusals = 0

    def cached(self, tier: str) -> int:
        """How many blocks `tier` holds."""
        with self._cache_lock:
            return len(self._tiers[tier])

    def _handle(self, frames: list[bytes]) -> None:
        if not self.dead and len(frames) >= 2 and frames[0] == _ADD:
            payload = self._decoder.decode(frames[1])
            # EngineCoreRequest (array_like): request_id, prompt_token_ids (an ndarray from vLLM 0.34), ...,
            # cache_salt at 7.
            salt = payload[7] if len(payload) > 7 else None
            self._stats[payload[0]] = self._look_up(prompt_token_ids(payload[1], frames), salt)
        super()._handle(frames)

    def _look_up(self, prompt: list[int], salt: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
        """One request's lookups as vLLM reports them (the step's scheduler_stats, the request's
        prefill_stats), then its full blocks stored in every tier."""
        keys = [(salt, tuple(prompt[:end])) for end in range(self._block, len(prompt) + 1, self._block)]
        with self._cache_lock:
            self._collect_stores()
            gpu = sum(1 for _ in _prefix(keys, self._tiers[TIER_GPU])) * self._block
            external, external_stats = 0, None
            if self.external_tier:
                ext = sum(1 for _ in _prefix(keys, self._tiers[TIER_EXTERNAL])) * self._block
                external = max(0, ext - gpu)
                external_stats = _cache_stats(len(prompt) - gpu, external)
            self._tiers[TIER_GPU].update(keys)
            if self.external_tier and self.store_delay > 0 and keys:
                self._in_flight.append((time.monotonic() + self.store_delay, keys))
            elif self.external_tier:
                self._tiers[TIER_EXTERNAL].update(keys)
        prefill = {
            "num_prompt_tokens": len(prompt), "num_computed_tokens": len(prompt) - gpu - external,
            "num_cached_tokens": gpu + external, "num_local_cached_tokens": gpu,
            "num_external_cached_tokens": external, "num_cache_creation_tokens": 0,
        }  # fmt: skip
        return _scheduler_stats(_cache_stats(len(prompt), gpu), external_stats), prefill

    def _collect_stores(self) -> None:
        """A step: the stores done by now land in the external tier (caller holds the cache lock)."""
        now = time.monotonic()
        for _, keys in (item for item in self._in_flight if item[0] <= now):
            self._tiers[TIER_EXTERNAL].update(keys)
        self._in_flight = [item for item in self._in_flight if item[0] > now]

    def _utility(self, client_index: int, call_id: int, method: str, args: list[Any]) -> None:
        if method == "reset_prefix_cache" and not self._scripts.get(method):
            reset_connector = bool(args[1]) if len(args) > 1 else False
            with self._cache_lock:
                refused = bool(self._in_flight)
                self.refusals += refused
            if refused:  # offload stores hold their blocks: nothing is cleared
                self._send(client_index, self._outputs_msg(utility=[call_id, None, [None, False]]))
                return
            with self._cache_lock:
                if TIER_GPU not in self.keeps:
                    self._tiers[TIER_GPU].clear()
                if reset_connector and TIER_EXTERNAL not in self.keeps:
                    self._tiers[TIER_EXTERNAL].clear()
        super()._utility(client_index, call_id, method, args)

    def _token_msg(self, request_id: str, num_tokens: int, reason: int) -> bytes:
        looked_up = self._stats.pop(request_id, None)
        if looked_up is None:
            return super()._token_msg(request_id, num_tokens, reason)
        stats, prefill = looked_up
        tokens = [self.token_ids[i % len(self.token_ids)] for i in range(num_tokens)]
        # EngineCoreOutput up to prefill_stats (what usage.prompt_tokens_details.cached_tokens is read from).
        output = [request_id, tokens, None, None, None, reason, None, None, None, None, None, prefill]
        return self._encoder.encode([self.rank, [output], stats, time.monotonic()])


def _prefix(keys: list[_Key], blocks: set[_Key]) -> Iterable[_Key]:
    """The leading keys the tier holds (a prefix cache serves a prefix, block by block)."""
    for key in keys:
        if key not in blocks:
            return
        yield key
