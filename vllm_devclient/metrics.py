"""Typed snapshots of vLLM's ``/metrics``: prefix-cache and KV-offload counters, and deltas between them.

Both frontends serve ``/metrics``: the Python one as Prometheus text (``text/plain``), the Rust one
(``vllm-rs``) as OpenMetrics (``application/openmetrics-text``). The two need different parsers:
Prometheus' text parser reads an OpenMetrics counter (``# TYPE x counter`` + ``x_total`` sample) as an
empty counter family plus a separate untyped family, so the parser is chosen from the content type.
Values are read by sample name either way, so a mislabelled answer still parses.

Counters are summed over their labels (``model_name``, ``engine``): one number per server, which is what
a before/after delta needs. A field is ``None`` when the server does not export that metric at all
(for example the Rust frontend exports no ``kv_offload_*`` metrics), which is different from 0.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .errors import DevClientError

__all__ = [
    "MetricsDelta",
    "MetricsParseError",
    "MetricsSnapshot",
    "parse_metrics",
]

OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text"

# Counter base names (without "_total") whose value is summed over all label sets.
_PREFIX_QUERIES = "vllm:prefix_cache_queries"
_PREFIX_HITS = "vllm:prefix_cache_hits"
_EXT_QUERIES = "vllm:external_prefix_cache_queries"
_EXT_HITS = "vllm:external_prefix_cache_hits"
_STORE_BYTES = "vllm:kv_offload_store_bytes"
_LOAD_BYTES = "vllm:kv_offload_load_bytes"
_TOTAL_BYTES = "vllm:kv_offload_total_bytes"  # deprecated, labelled transfer_type
_SIMPLE_LOAD_BLOCKS = "vllm:simple_kv_offload_load_blocks"
_BY_SOURCE = "vllm:prompt_tokens_by_source"
_CACHED_BY_SOURCE = "vllm:prompt_tokens_cached_by_source"
# Every family a MetricsSnapshot reads.
SNAPSHOT_FAMILIES = (
    _PREFIX_QUERIES,
    _PREFIX_HITS,
    _EXT_QUERIES,
    _EXT_HITS,
    _STORE_BYTES,
    _LOAD_BYTES,
    _TOTAL_BYTES,
    _SIMPLE_LOAD_BLOCKS,
    _BY_SOURCE,
    _CACHED_BY_SOURCE,
)

# Sample suffixes that are not values of the metric itself.
_SKIP_SUFFIXES = ("_created", "_bucket", "_gcount", "_gsum")


class MetricsParseError(DevClientError, ValueError):
    """The /metrics body could not be parsed as Prometheus text or OpenMetrics."""


class MetricsSnapshot(BaseModel):
    """The counters that show prefix caching and KV offloading at work, at one moment.

    ``None`` means the server does not export the metric; 0 means it does and nothing was counted.
    """

    model_config = ConfigDict(frozen=True)

    taken_at: float = Field(description="time.time() when the body was parsed")
    content_type: str = ""
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    external_prefix_cache_queries: float | None = None
    external_prefix_cache_hits: float | None = None
    offload_store_bytes: float | None = Field(None, description="vllm:kv_offload_store_bytes (GPU to CPU)")
    offload_load_bytes: float | None = Field(None, description="vllm:kv_offload_load_bytes (CPU to GPU)")
    offload_total_bytes: dict[str, float] | None = Field(
        None, description="deprecated vllm:kv_offload_total_bytes by transfer_type (GPU_to_CPU, CPU_to_GPU)"
    )
    simple_load_blocks: float | None = Field(None, description="vllm:simple_kv_offload_load_blocks_total")
    prompt_tokens_by_source: dict[str, float] | None = None
    prompt_tokens_cached_by_source: dict[str, float] | None = None
    values: dict[str, float] = Field(
        default_factory=dict,
        description="every counter and gauge, summed over its labels, by base name (no _total suffix)",
    )
    counter_names: frozenset[str] = Field(
        default_factory=frozenset, exclude=True, description="which of `values` are counters"
    )

    @property
    def cpu_to_gpu_bytes(self) -> float | None:
        """Bytes loaded from the CPU tier: the current metric, else the deprecated one."""
        if self.offload_load_bytes is not None:
            return self.offload_load_bytes
        if self.offload_total_bytes is not None:
            return self.offload_total_bytes.get("CPU_to_GPU", 0.0)
        return None

    @property
    def gpu_to_cpu_bytes(self) -> float | None:
        """Bytes stored to the CPU tier: the current metric, else the deprecated one."""
        if self.offload_store_bytes is not None:
            return self.offload_store_bytes
        if self.offload_total_bytes is not None:
            return self.offload_total_bytes.get("GPU_to_CPU", 0.0)
        return None

    def value(self, name: str) -> float | None:
        """Any counter or gauge by name (with or without ``_total``), summed over labels."""
        return self.values.get(_base_name(name))

    def delta(self, before: MetricsSnapshot) -> MetricsDelta:
        """What changed from ``before`` to this snapshot."""
        return MetricsDelta.between(before, self)


def _sub(after: float | None, before: float | None) -> float | None:
    if after is None or before is None:
        return None
    return after - before


_SCALAR_FIELDS = (
    "prefix_cache_queries",
    "prefix_cache_hits",
    "external_prefix_cache_queries",
    "external_prefix_cache_hits",
    "cpu_to_gpu_bytes",
    "gpu_to_cpu_bytes",
    "offload_load_bytes",
    "offload_store_bytes",
    "simple_load_blocks",
)
_MAP_FIELDS = ("offload_total_bytes", "prompt_tokens_by_source", "prompt_tokens_cached_by_source")


def _sub_map(
    after: Mapping[str, float] | None, before: Mapping[str, float] | None
) -> dict[str, float] | None:
    if after is None or before is None:
        return None
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in sorted(set(after) | set(before))}


class MetricsDelta(BaseModel):
    """Counter growth between two snapshots; ``None`` where either side lacks the metric."""

    model_config = ConfigDict(frozen=True)

    seconds: float
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    external_prefix_cache_queries: float | None = None
    external_prefix_cache_hits: float | None = None
    cpu_to_gpu_bytes: float | None = None
    gpu_to_cpu_bytes: float | None = None
    offload_load_bytes: float | None = None
    offload_store_bytes: float | None = None
    offload_total_bytes: dict[str, float] | None = None
    simple_load_blocks: float | None = None
    prompt_tokens_by_source: dict[str, float] | None = None
    prompt_tokens_cached_by_source: dict[str, float] | None = None
    counter_went_back: bool = Field(
        False, description="a counter decreased: the server (or its engine) restarted in between"
    )

    @classmethod
    def between(cls, before: MetricsSnapshot, after: MetricsSnapshot) -> MetricsDelta:
        fields: dict[str, Any] = {"seconds": after.taken_at - before.taken_at}
        for name in _SCALAR_FIELDS:
            fields[name] = _sub(getattr(after, name), getattr(before, name))
        for name in _MAP_FIELDS:
            fields[name] = _sub_map(getattr(after, name), getattr(before, name))
        # Gauges go down legitimately; a counter that goes down means a restart in between.
        went_back = any(
            after.values[name] < before.values[name]
            for name in before.counter_names & after.counter_names
            if name in before.values and name in after.values
        )
        return cls(**fields, counter_went_back=went_back)


def _base_name(name: str) -> str:
    return name[: -len("_total")] if name.endswith("_total") else name


def _families(text: str, content_type: str) -> Iterable[Any]:
    # Imported here: prometheus_client is the optional "metrics" extra.
    try:
        from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
        from prometheus_client.parser import text_string_to_metric_families as parse_text
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "reading /metrics needs prometheus_client: pip install 'vllm-devclient[metrics]'"
        ) from exc
    openmetrics = OPENMETRICS_CONTENT_TYPE in content_type.lower() or (
        not content_type and text.rstrip().endswith("# EOF")
    )
    if openmetrics:
        # The OpenMetrics parser needs the final "# EOF"; a body cut short would otherwise pass silently.
        return list(parse_om(text))  # type: ignore[no-untyped-call]
    return list(parse_text(text))


def parse_metrics(
    text: str, content_type: str | None = None, *, taken_at: float | None = None
) -> MetricsSnapshot:
    """Parse a /metrics body (Prometheus text or OpenMetrics, chosen by ``content_type``)."""
    ctype = content_type or ""
    try:
        families = _families(text, ctype)
    except ValueError as exc:
        kind = "OpenMetrics" if "openmetrics" in ctype else "Prometheus text"
        raise MetricsParseError(f"/metrics body is not valid {kind}: {exc}") from exc

    values: dict[str, float] = {}
    counters: set[str] = set()
    by_label: dict[tuple[str, str], dict[str, float]] = {}
    for family in families:
        if family.type in ("counter", "gauge") and not family.samples:
            # Declared with no label set yet (the Rust frontend before its first engine stats): the
            # server does export it, and nothing has been counted.
            values.setdefault(_base_name(family.name), 0.0)
            if family.type == "counter":
                counters.add(_base_name(family.name))
        for sample in family.samples:
            name: str = sample.name
            if name.endswith(_SKIP_SUFFIXES) or family.type in ("histogram", "summary", "gaugehistogram"):
                continue
            base = _base_name(name)
            value = float(sample.value)
            values[base] = values.get(base, 0.0) + value
            if family.type == "counter" or name.endswith("_total"):
                counters.add(base)
            for label in ("transfer_type", "source"):
                if label in sample.labels:
                    per = by_label.setdefault((base, label), {})
                    key = sample.labels[label]
                    per[key] = per.get(key, 0.0) + value

    def labelled(base: str, label: str) -> dict[str, float] | None:
        if base not in values:
            return None
        return dict(sorted(by_label.get((base, label), {}).items()))

    return MetricsSnapshot(
        taken_at=time.time() if taken_at is None else taken_at,
        content_type=ctype,
        prefix_cache_queries=values.get(_PREFIX_QUERIES),
        prefix_cache_hits=values.get(_PREFIX_HITS),
        external_prefix_cache_queries=values.get(_EXT_QUERIES),
        external_prefix_cache_hits=values.get(_EXT_HITS),
        offload_store_bytes=values.get(_STORE_BYTES),
        offload_load_bytes=values.get(_LOAD_BYTES),
        offload_total_bytes=labelled(_TOTAL_BYTES, "transfer_type"),
        simple_load_blocks=values.get(_SIMPLE_LOAD_BLOCKS),
        prompt_tokens_by_source=labelled(_BY_SOURCE, "source"),
        prompt_tokens_cached_by_source=labelled(_CACHED_BY_SOURCE, "source"),
        values=dict(sorted(values.items())),
        counter_names=frozenset(counters),
    )
