"""Masking: what varies between runs of an unchanged server (timestamps, random ids, call ids, ports, the
model path, machine details in /server_info, metric values) replaced, so that recording twice gives the
same bytes; and the timing-independent view of a deadline-bound run."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .scenario import ScenarioRun

__all__ = [
    "KEEP_METRIC_SAMPLES",
    "MASK",
    "dedupe",
    "mask_exchange",
    "mask_text",
    "mask_value",
    "masked_run",
    "timing_independent",
]

MASK = "<masked>"
# A scenario tag: the SDK parses the /metrics answer, so its fixture keeps the samples it reads (values
# zeroed), not only the TYPE lines (see `mask_exchange`).
KEEP_METRIC_SAMPLES = "keep_metric_samples"
_CALL_ID = re.compile(r"call_id=\d+")
_PORT = re.compile(r"(127\.0\.0\.1|localhost|0\.0\.0\.0):\d+")
_FINGERPRINT_HASH = re.compile(r"-[0-9a-f]{6,}$")
_VOLATILE_ID = re.compile(r"^(cmpl|chatcmpl|modelperm|req)-[0-9a-zA-Z-]+$")
# Where the release is installed, as a traceback in an error message shows it (a machine detail).
_SITE_PACKAGES = re.compile(r"/[^\s'\"]*/site-packages/")
# Keys whose values change from run to run (timestamps, random ids, timings).
_VOLATILE_KEYS = frozenset({"created", "instance_id", "elapsed_s", "waited_s", "arrival_time", "timestamp"})


def mask_text(text: str, model: str | None = None) -> str:
    """Replace run-specific parts of a string: the model directory, call ids, ports, install paths."""
    if model:
        text = text.replace(model, "<model>")
    text = _SITE_PACKAGES.sub("<site-packages>/", text)
    text = _CALL_ID.sub("call_id=<n>", text)
    return _PORT.sub(r"\1:<port>", text)


def mask_value(value: Any, model: str | None = None) -> Any:
    """Mask volatile fields anywhere in JSON data (see `mask_text` and the volatile keys)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k in _VOLATILE_KEYS and v is not None:
                out[k] = MASK
            elif k == "id" and isinstance(v, str) and _VOLATILE_ID.match(v):
                out[k] = MASK
            elif k == "system_fingerprint" and isinstance(v, str):
                # "vllm-0.33.0-f0d9092f": the release stays, the config hash (paths, ports) goes
                out[k] = _FINGERPRINT_HASH.sub("-<hash>", v)
            else:
                out[k] = mask_value(v, model)
        return out
    if isinstance(value, list):
        return [mask_value(v, model) for v in value]
    if isinstance(value, str):
        return mask_text(value, model)
    return value


def _mask_server_info(body: Any) -> Any:
    # Machine, environment and full config: keep only the shape (top-level config keys), which is what
    # the SDK reads and what changes between releases.
    if not isinstance(body, dict):
        return body
    out = dict(body)
    for name in ("vllm_config", "rust_frontend_config"):  # the latter: vllm-rs from 0.34.0
        config = out.get(name)
        if isinstance(config, dict):
            out[name] = {k: MASK for k in config}
        elif isinstance(config, str):
            out[name] = MASK
    for key in ("vllm_env", "system_env"):
        if isinstance(out.get(key), dict):
            out[key] = {}
    return out


def _mask_metrics(text: str) -> str:
    # Sample values change with every request; the TYPE lines say which families are exported. Only the
    # families a MetricsSnapshot reads: others (HTTP instrumentation, sleep-mode timings) appear once some
    # route was hit, which would make the recording depend on what ran before.
    from ...metrics import SNAPSHOT_FAMILIES

    wanted = tuple(f"# TYPE {name}" for name in SNAPSHOT_FAMILIES)
    types = sorted({line for line in text.splitlines() if line.startswith(wanted)})
    return "\n".join(types) + ("\n" if types else "")


# The counters a MetricsSnapshot reads without labels that vary with what ran before (by-source families
# grow label values as requests come).
_SAMPLED = (
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:external_prefix_cache_queries",
    "vllm:external_prefix_cache_hits",
)


def _mask_metric_samples(text: str) -> str:
    # The prefix-cache families whole (TYPE line, then samples with their values zeroed, in a fixed order),
    # and the OpenMetrics terminator: enough for a replay to parse what the SDK read, in either format.
    families: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name = line.split()[2]
            current = line if name.removesuffix("_total") in _SAMPLED else None
            if current is not None:
                families[current] = []
        elif current is not None and line and not line.startswith("#"):
            head = line[: line.rindex("}") + 1] if "}" in line else line.split()[0]
            families[current].append(f"{head} 0")
    lines = [line for type_line in sorted(families) for line in (type_line, *sorted(families[type_line]))]
    if text.rstrip().endswith("# EOF"):
        lines.append("# EOF")
    return "\n".join(lines) + ("\n" if lines else "")


def mask_exchange(
    exchange: Mapping[str, Any], model: str | None = None, *, metric_samples: bool = False
) -> dict[str, Any]:
    """An exchange (see `Exchange.as_json`) with everything that varies between runs masked.

    A /metrics answer keeps the TYPE lines of the families a MetricsSnapshot reads; with `metric_samples`
    (the SDK parsed it), the prefix-cache counters' samples too, values zeroed.
    """
    out: dict[str, Any] = mask_value(json.loads(json.dumps(exchange)), model)
    request, response = out["request"], out.get("response")
    if response is not None:
        if request["path"] == "/server_info" and "json" in response:
            response["json"] = _mask_server_info(response["json"])
        elif request["path"] == "/metrics" and "text" in response:
            masking = _mask_metric_samples if metric_samples else _mask_metrics
            response["text"] = masking(response["text"])
    return out


def masked_run(
    run: ScenarioRun, model: str | None = None
) -> tuple[list[dict[str, Any]], list[list[Any]] | None]:
    """A run's exchanges (masked) and engine calls as reports and fixtures keep them: for a
    timing-dependent scenario, only what the timing did not decide (see `timing_independent`)."""
    samples = KEEP_METRIC_SAMPLES in run.scenario.tags
    exchanges = [mask_exchange(e.as_json(), model, metric_samples=samples) for e in run.exchanges]
    if run.scenario.timing_dependent:
        return timing_independent(exchanges, run.engine_calls)
    return exchanges, run.engine_calls


def timing_independent(
    exchanges: Sequence[dict[str, Any]], calls: Sequence[list[Any]] | None
) -> tuple[list[dict[str, Any]], list[list[Any]] | None]:
    """What a deadline-bound run (polls until a deadline) did, without what the timing decided: each
    distinct exchange and engine call once, and no try that the deadline cut short (timed out)."""
    kept = dedupe([ex for ex in exchanges if "error" not in ex])
    return kept, None if calls is None else dedupe(calls)


def dedupe(items: Sequence[Any]) -> list[Any]:
    """Keep the first of equal items (JSON-equal), in order: a timing-dependent run's distinct steps."""
    seen: set[str] = set()
    out: list[Any] = []
    for item in items:
        key = json.dumps(item, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out
