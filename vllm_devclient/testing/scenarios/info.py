"""Read-only routes: health, version, models, metrics, load, tokenizer info, server info, KV-event sources,
world size."""

from __future__ import annotations

from ... import errors
from ..contract import KEEP_METRIC_SAMPLES, Check, Expect, Scenario, raises, returns, returns_model
from ._shared import is_a

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("health", "GET /health on a healthy server", lambda c: c.health(), returns(True), safe=True),
    Scenario(
        "version",
        "GET /version names the release, and the frontend by whether rust_frontend_version is there",
        lambda c: c.version(),
        {
            "python": returns_model("VersionInfo", {"frontend": "python", "rust_frontend_version": None}),
            "rust": returns_model("VersionInfo", {"frontend": "rust"}, is_a(str, "rust_frontend_version")),
        },
        sdk_difference="by design: VersionInfo.frontend tells which frontend answered",
        safe=True,
    ),
    Scenario(
        "models",
        "GET /v1/models lists the one served model with its max_model_len",
        lambda c: c.models(),
        returns_model("ModelList", {"len(data)": 1, "data.0.max_model_len": 128}, is_a(str, "data.0.id")),
        safe=True,
    ),
    Scenario(
        "metrics_text",
        "GET /metrics answers Prometheus text (the content type differs)",
        lambda c: c.metrics_text(),
        Expect("str", {}, (Check("has # TYPE lines", lambda o: "# TYPE" in o),)),
        safe=True,
    ),
    Scenario(
        "metrics",
        "GET /metrics read as a MetricsSnapshot: both formats give the prefix-cache counters",
        lambda c: c.metrics(),
        returns_model(
            "MetricsSnapshot", {}, is_a(float, "prefix_cache_queries"), is_a(float, "prefix_cache_hits")
        ),
        safe=True,
        tags=(KEEP_METRIC_SAMPLES,),
    ),
    Scenario(
        "server_info_json",
        "GET /server_info?config_format=json: the config is an object (vllm-rs 0.34: rust_frontend_config)",
        lambda c: c.server_info("json"),
        returns_model(
            "ServerInfo", {}, is_a(dict, "config"), is_a(dict, "vllm_env"), is_a(dict, "system_env")
        ),
        safe=True,
    ),
    Scenario(
        "server_info_text",
        "GET /server_info?config_format=text: the config is a string (vllm-rs 0.34: rust_frontend_config)",
        lambda c: c.server_info("text"),
        returns_model("ServerInfo", {}, is_a(str, "config")),
        safe=True,
    ),
    Scenario(
        "kv_event_sources_none",
        "GET /kv_event_sources with KV events off: no sources",
        lambda c: c.kv_event_sources(),
        returns({}),
        safe=True,
    ),
    Scenario(
        "get_world_size",
        "GET /get_world_size (default include_dp=true)",
        lambda c: c.get_world_size(),
        returns(1),
        safe=True,
    ),
    Scenario(
        "get_world_size_no_dp",
        "GET /get_world_size?include_dp=false",
        lambda c: c.get_world_size(include_dp=False),
        returns(1),
        safe=True,
    ),
    Scenario(
        "load",
        "GET /load: requests in flight on the GPU routes (none here)",
        lambda c: c.load(),
        returns_model("LoadInfo", {"server_load": 0}),
        safe=True,
    ),
    Scenario(
        "tokenizer_info",
        "GET /tokenizer_info: Python serves the tokenizer's configuration, Rust answers 501",
        lambda c: c.tokenizer_info(),
        {
            "python": returns_model("TokenizerInfo", {}, is_a(str, "tokenizer_class")),
            "rust": raises(errors.InternalServerError, {"status_code": 501}),
        },
        setup="extras",
        sdk_difference="the Rust frontend does not serve /tokenizer_info yet (501 Not Implemented)",
    ),
)
