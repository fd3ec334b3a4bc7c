"""What each route sends and how its answer is read: the one request/response layer both clients share.

Every function returns an `Endpoint`: a description of one HTTP exchange plus the reader (`answers.py`)
that turns a successful answer into a typed result. Arguments are checked here (through `arguments`), so
a bad one is refused before anything is sent. Nothing here does I/O.
"""

from __future__ import annotations

import base64
import functools
import json
import pickle
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from . import arguments as check
from .answers import (
    Reader,
    field_reader,
    healthy,
    model_reader,
    nothing,
    raw_answer,
    read_abort,
    read_collective_rpc,
    read_kv_event_sources,
    read_metrics,
    read_reset,
    read_wake_up,
    text_answer,
    text_message,
)
from .errors import InvalidParameterError
from .models import (
    AbortRequestsResult,
    Completion,
    KVEventSource,
    LoadInfo,
    MessageResult,
    ModelList,
    ResetPrefixCacheResult,
    ServerInfo,
    SleepResult,
    StatusResult,
    TokenizerInfo,
    VersionInfo,
    WakeUpResult,
    WeightCheckResult,
    WeightInfo,
    WeightVersionResult,
)
from .transports.base import ResponseLike

if TYPE_CHECKING:
    from .metrics import MetricsSnapshot

T = TypeVar("T")

PauseMode = Literal["abort", "wait", "keep"]
WeightCheckAction = Literal["checksum", "reset", "compare"]
_PAUSE_MODES = ("abort", "wait", "keep")
NO_BODY = object()
GATEWAY_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class Endpoint(Generic[T]):
    method: str
    path: str
    parse: Reader[T]
    params: tuple[tuple[str, str], ...] = ()
    body: Any = field(default=NO_BODY)
    # Safe to send again after it may have reached the server.
    idempotent: bool = False
    dev_route: bool = True
    # Statuses worth retrying for this route (the gateway family, unless the route gives 503 a meaning).
    retry_statuses: frozenset[int] = GATEWAY_STATUSES
    # Non-2xx statuses this route's reader reads itself (Rust's 409 for a refused reset).
    ok_statuses: frozenset[int] = frozenset()
    # Blocks through a rendezvous or a large transfer: no bound on the answer unless timeout= is given.
    long_running: bool = False

    @property
    def has_body(self) -> bool:
        return self.body is not NO_BODY


def qbool(value: object, name: str = "flag") -> str:
    """The Rust frontend accepts only lowercase true/false; Python accepts those too."""
    return "true" if check.flag(value, name) else "false"


# ---- routes -------------------------------------------------------------------------------------------


@functools.cache  # no arguments: one Endpoint serves every call
def health() -> Endpoint[bool]:
    # 503 here means the engine is dead: not something a retry fixes.
    return Endpoint(
        "GET", "/health", healthy, idempotent=True, dev_route=False, retry_statuses=frozenset({502, 504})
    )


@functools.cache  # no arguments: one Endpoint serves every call
def version() -> Endpoint[VersionInfo]:
    return Endpoint("GET", "/version", model_reader(VersionInfo), idempotent=True, dev_route=False)


@functools.cache  # no arguments: one Endpoint serves every call
def models() -> Endpoint[ModelList]:
    return Endpoint("GET", "/v1/models", model_reader(ModelList), idempotent=True, dev_route=False)


@functools.cache  # no arguments: one Endpoint serves every call
def metrics_text() -> Endpoint[str]:
    return Endpoint("GET", "/metrics", text_answer, idempotent=True, dev_route=False)


@functools.cache  # no arguments: one Endpoint serves every call
def metrics() -> Endpoint[MetricsSnapshot]:
    return Endpoint("GET", "/metrics", read_metrics, idempotent=True, dev_route=False)


@functools.cache  # no arguments: one Endpoint serves every call
def load() -> Endpoint[LoadInfo]:
    return Endpoint("GET", "/load", model_reader(LoadInfo), idempotent=True, dev_route=False)


@functools.cache  # no arguments: one Endpoint serves every call
def tokenizer_info() -> Endpoint[TokenizerInfo]:
    return Endpoint("GET", "/tokenizer_info", model_reader(TokenizerInfo), idempotent=True, dev_route=False)


def reset_prefix_cache(
    *, reset_running_requests: bool, reset_external: bool
) -> Endpoint[ResetPrefixCacheResult]:
    return _reset_prefix_cache(
        qbool(reset_running_requests, "reset_running_requests"), qbool(reset_external, "reset_external")
    )


@functools.cache  # four combinations: the barrier sends the same one every try
def _reset_prefix_cache(running: str, external: str) -> Endpoint[ResetPrefixCacheResult]:
    return Endpoint(
        "POST",
        "/reset_prefix_cache",
        read_reset,
        params=(("reset_running_requests", running), ("reset_external", external)),
        idempotent=True,
        ok_statuses=frozenset({409}),
    )


@functools.cache  # no arguments: one Endpoint serves every call
def reset_mm_cache() -> Endpoint[None]:
    return Endpoint("POST", "/reset_mm_cache", nothing, idempotent=True)


@functools.cache  # no arguments: one Endpoint serves every call
def reset_encoder_cache() -> Endpoint[None]:
    return Endpoint("POST", "/reset_encoder_cache", nothing, idempotent=True)


def sleep(*, level: int, mode: PauseMode) -> Endpoint[SleepResult]:
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 2:
        raise InvalidParameterError(f"sleep level must be 0, 1 or 2, got {level!r}")
    return Endpoint(
        "POST",
        "/sleep",
        model_reader(SleepResult, empty_ok=True),
        params=(("level", str(level)), ("mode", _mode(mode))),
        idempotent=True,
        # Level 2 drops the weights and may move a lot of memory: no bound on the answer by default.
        long_running=level == 2,
    )


def wake_up(tags: Sequence[str] | None) -> Endpoint[WakeUpResult]:
    params = tuple(("tags", t) for t in check.texts(tags, "tags")) if tags is not None else ()
    return Endpoint("POST", "/wake_up", read_wake_up, params=params, idempotent=True, long_running=True)


@functools.cache  # no arguments: one Endpoint serves every call
def is_sleeping() -> Endpoint[bool]:
    return Endpoint("GET", "/is_sleeping", field_reader("is_sleeping", bool), idempotent=True)


@functools.cache  # no arguments: one Endpoint serves every call
def release_kv_cache_memory() -> Endpoint[StatusResult]:
    return Endpoint("POST", "/release_kv_cache_memory", model_reader(StatusResult))


def pause(*, mode: PauseMode, clear_cache: bool | None) -> Endpoint[StatusResult]:
    params: tuple[tuple[str, str], ...] = (("mode", _mode(mode)),)
    if clear_cache is not None:
        params += (("clear_cache", qbool(clear_cache, "clear_cache")),)
    return Endpoint("POST", "/pause", model_reader(StatusResult), params=params, idempotent=True)


@functools.cache  # no arguments: one Endpoint serves every call
def resume() -> Endpoint[StatusResult]:
    return Endpoint("POST", "/resume", model_reader(StatusResult), idempotent=True)


@functools.cache  # no arguments: one Endpoint serves every call
def is_paused() -> Endpoint[bool]:
    return Endpoint("GET", "/is_paused", field_reader("is_paused", bool), idempotent=True)


def abort_requests(request_ids: Iterable[str] | None) -> Endpoint[AbortRequestsResult]:
    ids = check.texts(request_ids, "request_ids") if request_ids is not None else []
    # Aborting "all" twice could hit requests that arrived in between: never resent.
    return Endpoint("POST", "/abort_requests", read_abort, body={"request_ids": ids}, idempotent=bool(ids))


def collective_rpc(
    method: str, *, args: Sequence[Any], kwargs: Mapping[str, Any] | None, rpc_timeout: float | None
) -> Endpoint[list[Any]]:
    body: dict[str, Any] = {
        "method": check.text(method, "method"),
        "args": check.json_sequence(args, "args"),
        "kwargs": check.json_mapping(kwargs, "kwargs") if kwargs is not None else {},
    }
    if rpc_timeout is not None:
        body["timeout"] = check.seconds(rpc_timeout, "rpc_timeout")
    return Endpoint("POST", "/collective_rpc", read_collective_rpc, body=body, long_running=True)


def server_info(config_format: Literal["text", "json"]) -> Endpoint[ServerInfo]:
    if config_format not in ("text", "json"):
        raise InvalidParameterError(f"config_format must be 'text' or 'json', got {config_format!r}")
    return Endpoint(
        "GET",
        "/server_info",
        model_reader(ServerInfo),
        params=(("config_format", config_format),),
        idempotent=True,
    )


@functools.cache  # no arguments: one Endpoint serves every call
def kv_event_sources() -> Endpoint[dict[int, KVEventSource]]:
    return Endpoint("GET", "/kv_event_sources", read_kv_event_sources, idempotent=True, dev_route=False)


def get_world_size(*, include_dp: bool) -> Endpoint[int]:
    return Endpoint(
        "GET",
        "/get_world_size",
        field_reader("world_size", int),
        params=(("include_dp", qbool(include_dp, "include_dp")),),
        idempotent=True,
    )


def init_weight_transfer_engine(init_info: Mapping[str, Any]) -> Endpoint[MessageResult]:
    body = {"init_info": check.json_mapping(init_info, "init_info")}
    return Endpoint(
        "POST", "/init_weight_transfer_engine", model_reader(MessageResult), body=body, long_running=True
    )


@functools.cache  # no arguments: one Endpoint serves every call
def shutdown_weight_transfer_engine() -> Endpoint[MessageResult]:
    return Endpoint(
        "POST", "/shutdown_weight_transfer_engine", model_reader(MessageResult), long_running=True
    )


@functools.cache  # no arguments: one Endpoint serves every call
def start_weight_update() -> Endpoint[MessageResult]:
    return Endpoint("POST", "/start_weight_update", model_reader(MessageResult), long_running=True)


@functools.cache  # no arguments: one Endpoint serves every call
def start_draft_weight_update() -> Endpoint[MessageResult]:
    return Endpoint("POST", "/start_draft_weight_update", model_reader(MessageResult), long_running=True)


def _ipc_pickled(info: object, name: str) -> object:
    """CUDA IPC handles (`reduce_tensor`'s rebuild arguments: types, devices, bytes) cannot travel as JSON:
    sent as vLLM's own HTTP client sends them (`HTTPVLLMWeightSyncClient`), pickled and base64-encoded
    under `ipc_handles_pickled`, which the server reads with VLLM_ALLOW_INSECURE_SERIALIZATION=1."""
    if not isinstance(info, Mapping) or info.get("ipc_handles") is None:
        return info
    if info.get("ipc_handles_pickled") is not None:
        raise InvalidParameterError(
            f"{name} has both ipc_handles and ipc_handles_pickled: give the handles once, under ipc_handles "
            "(the client pickles them)"
        )
    try:
        pickled = pickle.dumps(info["ipc_handles"])
    except Exception as exc:
        raise InvalidParameterError(f"{name}.ipc_handles cannot be pickled for HTTP: {exc}") from None
    out = {k: v for k, v in info.items() if k != "ipc_handles"}
    out["ipc_handles_pickled"] = base64.b64encode(pickled).decode("ascii")
    return out


def update_weights(update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> Endpoint[MessageResult]:
    if isinstance(update_info, Mapping):
        info: Any = check.json_mapping(_ipc_pickled(update_info, "update_info"), "update_info")
    elif isinstance(update_info, Sequence) and not isinstance(update_info, str | bytes):
        info = [
            check.json_mapping(_ipc_pickled(item, "update_info[]"), "update_info[]") for item in update_info
        ]
    else:
        raise InvalidParameterError(
            f"update_info must be a dict, or a list of per-worker dicts, got {type(update_info).__name__}"
        )
    return Endpoint(
        "POST", "/update_weights", model_reader(MessageResult), body={"update_info": info}, long_running=True
    )


def finish_weight_update(*, weight_version: str | None) -> Endpoint[MessageResult]:
    body = {} if weight_version is None else {"weight_version": check.text(weight_version, "weight_version")}
    return Endpoint(
        "POST", "/finish_weight_update", model_reader(MessageResult), body=body, long_running=True
    )


def update_weight_version(new_version: str) -> Endpoint[WeightVersionResult]:
    return Endpoint(
        "POST",
        "/update_weight_version",
        model_reader(WeightVersionResult),
        body={"new_version": check.text(new_version, "new_version")},
        idempotent=True,
    )


@functools.cache  # no arguments: one Endpoint serves every call
def weight_info() -> Endpoint[WeightInfo]:
    return Endpoint("GET", "/weight_info", model_reader(WeightInfo), idempotent=True)


def weight_checker(
    action: WeightCheckAction, *, baseline: Mapping[str, str] | None
) -> Endpoint[WeightCheckResult]:
    if action not in ("checksum", "reset", "compare"):
        raise InvalidParameterError(f"action must be 'checksum', 'reset' or 'compare', got {action!r}")
    body: dict[str, Any] = {"action": action}
    if baseline is not None:
        body["baseline"] = {
            check.text(k, "baseline key"): check.text(v, f"baseline[{k!r}]", allow_empty=True)
            for k, v in check.json_mapping(baseline, "baseline").items()
        }
    elif action == "compare":
        raise InvalidParameterError(
            "action='compare' needs baseline= (the checksums from an earlier action='checksum')"
        )
    # "reset" changes weights; "checksum" and "compare" only read them.
    return Endpoint(
        "POST",
        "/weight_checker",
        model_reader(WeightCheckResult),
        body=body,
        idempotent=action != "reset",
        long_running=True,
    )


def load_lora_adapter(
    lora_name: str, lora_path: str, *, load_inplace: bool, is_3d_lora_weight: bool
) -> Endpoint[MessageResult]:
    body = {
        "lora_name": check.text(lora_name, "lora_name"),
        "lora_path": check.text(lora_path, "lora_path"),
        "load_inplace": check.flag(load_inplace, "load_inplace"),
        "is_3d_lora_weight": check.flag(is_3d_lora_weight, "is_3d_lora_weight"),
    }
    return Endpoint(
        "POST", "/v1/load_lora_adapter", text_message, body=body, dev_route=False, long_running=True
    )


def unload_lora_adapter(lora_name: str, *, lora_int_id: int | None) -> Endpoint[MessageResult]:
    body: dict[str, Any] = {"lora_name": check.text(lora_name, "lora_name")}
    if lora_int_id is not None:
        body["lora_int_id"] = check.non_negative_int(lora_int_id, "lora_int_id")
    return Endpoint("POST", "/v1/unload_lora_adapter", text_message, body=body, dev_route=False)


def start_profile(
    *, profile_prefix: str | None, delay_iterations: int | None, max_iterations: int | None
) -> Endpoint[None]:
    overrides: dict[str, Any] = {}
    if profile_prefix is not None:
        overrides["profile_prefix"] = check.text(profile_prefix, "profile_prefix")
    if delay_iterations is not None:
        overrides["delay_iterations"] = check.non_negative_int(delay_iterations, "delay_iterations")
    if max_iterations is not None:
        overrides["max_iterations"] = check.positive_int(max_iterations, "max_iterations")
    return Endpoint(
        "POST", "/start_profile", nothing, body=overrides if overrides else NO_BODY, dev_route=False
    )


@functools.cache  # no arguments: one Endpoint serves every call
def stop_profile() -> Endpoint[None]:
    # Writing the trace can take a while.
    return Endpoint("POST", "/stop_profile", nothing, dev_route=False, long_running=True)


def completion(
    model: str,
    prompt: str | Sequence[int],
    *,
    max_tokens: int,
    temperature: float,
    seed: int | None,
    stop: Sequence[str] | None,
) -> Endpoint[Completion]:
    body: dict[str, Any] = {
        "model": check.text(model, "model"),
        "prompt": check.prompt(prompt, "prompt"),
        "max_tokens": check.positive_int(max_tokens, "max_tokens"),
        "temperature": check.number(temperature, "temperature", minimum=0),
    }
    if seed is not None:
        body["seed"] = check.non_negative_int(seed, "seed")
    if stop:
        body["stop"] = check.texts(stop, "stop")
    return Endpoint(
        "POST", "/v1/completions", model_reader(Completion), body=body, dev_route=False, long_running=True
    )


@functools.cache  # no arguments: one Endpoint serves every call
def dev_routes_probe() -> Endpoint[ResponseLike]:
    """Whether the server serves dev routes at all, asked after a dev route answered 404: every release
    (0.22.0 on, both frontends) serves POST /reset_prefix_cache in dev mode, so a GET there is 405 when dev
    mode is on and 404 when it is off. Nothing reaches the engine."""
    return Endpoint("GET", "/reset_prefix_cache", raw_answer, idempotent=True)


# The dev routes by path: a 404 there means dev mode is off or that the release lacks the route (a
# `dev_routes_probe` tells which); anywhere else it is a plain NotFoundError.
DEV_PATHS = frozenset(
    {
        "/reset_prefix_cache", "/reset_mm_cache", "/reset_encoder_cache", "/sleep", "/wake_up",
        "/is_sleeping", "/release_kv_cache_memory", "/pause", "/resume", "/is_paused", "/abort_requests",
        "/collective_rpc", "/server_info", "/get_world_size", "/init_weight_transfer_engine",
        "/shutdown_weight_transfer_engine", "/start_weight_update", "/start_draft_weight_update",
        "/update_weights", "/finish_weight_update", "/update_weight_version", "/weight_info",
        "/weight_checker",
    }
)  # fmt: skip


def raw(
    method: str, path: str, params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None, body: Any
) -> Endpoint[ResponseLike]:
    """The escape hatch: any request, answered with the raw response (non-2xx still raises)."""
    method = check.text(method, "method").upper()
    # One plain path: no query, fragment, space or control character (NUL, CR, LF, tab, DEL).
    if not check.text(path, "path").startswith("/") or any(c in "?# \x7f" or c < " " for c in path):
        raise InvalidParameterError(
            f"path must start with '/' and hold no query, spaces or control characters, got {path!r}"
        )
    items = params.items() if isinstance(params, Mapping) else (params or ())
    # Booleans go out lowercase here too; any other value is sent exactly as given.
    encoded = tuple((str(k), qbool(v) if isinstance(v, bool) else str(v)) for k, v in items)
    if body is not NO_BODY:
        check.json_body(body, "json")
    return Endpoint(
        method,
        path,
        raw_answer,
        params=encoded,
        body=body,
        idempotent=method in ("GET", "HEAD", "OPTIONS"),
        dev_route=path in DEV_PATHS,
    )


def _mode(mode: object) -> str:
    if mode not in _PAUSE_MODES:
        raise InvalidParameterError(f"mode must be one of {', '.join(_PAUSE_MODES)}; got {mode!r}")
    return str(mode)


def encode_body(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
