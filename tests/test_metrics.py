"""vllm_devclient.metrics: both exposition formats, the typed snapshot, deltas; read by both clients."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from vllm_devclient import AsyncDevClient, DevClient
from vllm_devclient.errors import APIConnectionError, NotFoundError
from vllm_devclient.metrics import MetricsDelta, MetricsParseError, parse_metrics
from vllm_devclient.testing.frontends import RustFrontend

LABELS = ["model_name", "engine"]
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def python_frontend_body(
    *,
    ext_hits: float = 0.0,
    load: float = 0.0,
    store: float = 0.0,
    deprecated: dict[str, float] | None = None,
) -> str:
    """A body as the Python frontend writes it: prometheus_client's own text exposition, vLLM's names."""
    reg = CollectorRegistry()
    for name, value in (
        ("vllm:prefix_cache_queries", 1000.0),
        ("vllm:prefix_cache_hits", 600.0),
        ("vllm:external_prefix_cache_queries", 400.0),
        ("vllm:external_prefix_cache_hits", ext_hits),
        ("vllm:kv_offload_load_bytes", load),
        ("vllm:kv_offload_store_bytes", store),
    ):
        c = Counter(name, "doc", LABELS, registry=reg)
        c.labels("smol", "0").inc(value)
    by_source = Counter("vllm:prompt_tokens_by_source", "doc", [*LABELS, "source"], registry=reg)
    by_source.labels("smol", "0", "local_cache_hit").inc(600)
    by_source.labels("smol", "0", "external_kv_transfer").inc(ext_hits)
    if deprecated is not None:
        total = Counter("vllm:kv_offload_total_bytes", "doc", [*LABELS, "transfer_type"], registry=reg)
        for kind, value in deprecated.items():
            total.labels("smol", "0", kind).inc(value)
    Gauge("vllm:kv_cache_usage_perc", "doc", LABELS, registry=reg).labels("smol", "0").set(0.25)
    return generate_latest(reg).decode()


# What the Rust frontend's prometheus_client crate writes (see vllm's rust/src/metrics tests): OpenMetrics,
# colons kept, counters declared without the suffix and sampled with "_total", two engines.
RUST_BODY = """\
# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{model_name="smol",engine="0"} 100
vllm:prefix_cache_queries_total{model_name="smol",engine="1"} 50
# HELP vllm:external_prefix_cache_hits External prefix cache hits.
# TYPE vllm:external_prefix_cache_hits counter
vllm:external_prefix_cache_hits_total{model_name="smol",engine="0"} 1536
# HELP vllm:external_prefix_cache_queries External prefix cache queries.
# TYPE vllm:external_prefix_cache_queries counter
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="smol",engine="0"} 0.5
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_sum{model_name="smol",engine="0"} 1.5
vllm:time_to_first_token_seconds_count{model_name="smol",engine="0"} 3
vllm:time_to_first_token_seconds_bucket{le="0.5",model_name="smol",engine="0"} 2
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="smol",engine="0"} 3
# EOF
"""


def test_python_text_body_parses_into_typed_fields() -> None:
    snap = parse_metrics(
        python_frontend_body(ext_hits=1536, load=4096, store=8192), "text/plain; version=1.0.0; charset=utf-8"
    )
    assert snap.prefix_cache_queries == 1000
    assert snap.prefix_cache_hits == 600
    assert snap.external_prefix_cache_queries == 400
    assert snap.external_prefix_cache_hits == 1536
    assert snap.offload_load_bytes == 4096 and snap.cpu_to_gpu_bytes == 4096
    assert snap.offload_store_bytes == 8192 and snap.gpu_to_cpu_bytes == 8192
    assert snap.prompt_tokens_by_source == {"external_kv_transfer": 1536, "local_cache_hit": 600}
    # not exported at all: None, never 0
    assert snap.simple_load_blocks is None
    assert snap.offload_total_bytes is None
    assert snap.prompt_tokens_cached_by_source is None
    assert snap.value("vllm:kv_cache_usage_perc") == 0.25
    assert snap.value("vllm:prefix_cache_hits_total") == 600  # "_total" or not, same counter
    assert "vllm:prefix_cache_hits_created" not in snap.values


def test_deprecated_total_bytes_stand_in_for_the_flat_metrics() -> None:
    reg = CollectorRegistry()
    total = Counter("vllm:kv_offload_total_bytes", "doc", [*LABELS, "transfer_type"], registry=reg)
    total.labels("smol", "0", "CPU_to_GPU").inc(10)
    total.labels("smol", "0", "GPU_to_CPU").inc(30)
    total.labels("smol", "1", "GPU_to_CPU").inc(5)
    snap = parse_metrics(generate_latest(reg).decode(), "text/plain")
    assert snap.offload_load_bytes is None
    assert snap.offload_total_bytes == {"CPU_to_GPU": 10, "GPU_to_CPU": 35}
    assert snap.cpu_to_gpu_bytes == 10
    assert snap.gpu_to_cpu_bytes == 35


def test_openmetrics_needs_its_own_parser() -> None:
    # Prometheus' text parser splits an OpenMetrics counter into an empty counter + an untyped family:
    # that is why the content type picks the parser.
    families = {f.name: f for f in text_string_to_metric_families(RUST_BODY)}
    assert families["vllm:prefix_cache_queries"].type == "counter"
    assert families["vllm:prefix_cache_queries"].samples == []
    snap = parse_metrics(RUST_BODY, OPENMETRICS)
    assert snap.prefix_cache_queries == 150  # summed over both engines
    assert snap.external_prefix_cache_hits == 1536
    assert snap.external_prefix_cache_queries == 0  # declared, nothing counted yet: exported, so 0
    assert "vllm:prefix_cache_queries" in snap.counter_names
    assert "vllm:kv_cache_usage_perc" not in snap.counter_names
    assert snap.offload_load_bytes is None and snap.cpu_to_gpu_bytes is None
    assert "vllm:time_to_first_token_seconds" not in snap.values


def test_openmetrics_is_recognised_without_a_content_type() -> None:
    assert parse_metrics(RUST_BODY).external_prefix_cache_hits == 1536


def test_truncated_openmetrics_body_is_an_error() -> None:
    with pytest.raises(MetricsParseError, match="OpenMetrics"):
        parse_metrics(RUST_BODY.replace("# EOF\n", ""), OPENMETRICS)


def test_delta_between_snapshots() -> None:
    before = parse_metrics(python_frontend_body(store=100, deprecated={"GPU_to_CPU": 100}), taken_at=10.0)
    after = parse_metrics(
        python_frontend_body(
            ext_hits=1536, load=4096, store=100, deprecated={"GPU_to_CPU": 100, "CPU_to_GPU": 7}
        ),
        taken_at=12.5,
    )
    d = after.delta(before)
    assert isinstance(d, MetricsDelta)
    assert d.seconds == 2.5
    assert d.external_prefix_cache_hits == 1536
    assert d.cpu_to_gpu_bytes == 4096
    assert d.gpu_to_cpu_bytes == 0
    assert d.prefix_cache_hits == 0
    assert d.offload_total_bytes == {"CPU_to_GPU": 7, "GPU_to_CPU": 0}
    assert d.prompt_tokens_by_source == {"external_kv_transfer": 1536, "local_cache_hit": 0}
    assert d.simple_load_blocks is None  # neither side exports it
    assert not d.counter_went_back


def test_delta_flags_a_restart() -> None:
    before = parse_metrics(python_frontend_body(ext_hits=50), taken_at=1.0)
    after = parse_metrics(python_frontend_body(ext_hits=10), taken_at=2.0)
    assert after.delta(before).counter_went_back
    assert after.delta(before).external_prefix_cache_hits == -40


def test_delta_is_none_where_one_side_lacks_the_metric() -> None:
    rust = parse_metrics(RUST_BODY, OPENMETRICS, taken_at=1.0)
    python = parse_metrics(python_frontend_body(load=5), taken_at=2.0)
    d = python.delta(rust)
    assert d.cpu_to_gpu_bytes is None
    assert d.external_prefix_cache_hits == 0 - 1536


def test_snapshot_round_trips_through_json() -> None:
    snap = parse_metrics(python_frontend_body(ext_hits=3), taken_at=5.0)
    again = type(snap).model_validate_json(snap.model_dump_json())
    assert again.external_prefix_cache_hits == 3
    assert again.values == snap.values


@pytest.fixture(scope="module")
def rust_frontend() -> Iterator[RustFrontend]:
    with RustFrontend() as fe:
        yield fe


def test_the_client_reads_the_real_rust_frontends_metrics(rust_frontend: RustFrontend) -> None:
    with DevClient(rust_frontend.base_url) as client:
        snap = client.metrics()
    assert snap.content_type.startswith("application/openmetrics-text")
    # The frontend declares these families before any engine stats arrive.
    assert snap.prefix_cache_queries == 0
    assert snap.external_prefix_cache_hits == 0
    assert snap.offload_load_bytes is None  # vllm-rs exports no kv_offload_* metrics
    assert "vllm:num_requests_running" in snap.values


async def test_sync_and_async_clients_read_the_same_snapshot(rust_frontend: RustFrontend) -> None:
    with DevClient(rust_frontend.base_url) as client:
        sync = client.metrics()
    async with AsyncDevClient(rust_frontend.base_url) as aclient:
        other = await aclient.metrics()
    assert other.model_dump(exclude={"taken_at"}) == sync.model_dump(exclude={"taken_at"})


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_metrics_errors_are_typed() -> None:
    with (
        DevClient(f"http://127.0.0.1:{_closed_port()}", timeout=2, max_retries=0) as client,
        pytest.raises(APIConnectionError, match="/metrics"),
    ):
        client.metrics()
    transport = httpx.MockTransport(lambda request: httpx.Response(404, text="nope"))
    with (
        DevClient("http://vllm.test", http_client=httpx.Client(transport=transport)) as client,
        pytest.raises(NotFoundError),
    ):
        client.metrics()
