"""What each route sends and how its answer is read: the one request/response layer both clients share.

Every function returns an `Endpoint`: a description of one HTTP exchange plus the parser that turns the
answer into a typed result. Nothing here does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from .errors import InvalidParameterError, ResponseValidationError, error_from_response
from .models import (
    AbortRequestsResult,
    Completion,
    KVEventSource,
    MessageResult,
    ModelList,
    ResetPrefixCacheResult,
    ServerInfo,
    SleepResult,
    StatusResult,
    VersionInfo,
    WakeUpResult,
    WeightInfo,
    WeightVersionResult,
)

if TYPE_CHECKING:
    from .metrics import MetricsSnapshot

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

PauseMode = Literal["abort", "wait", "keep"]
_PAUSE_MODES = ("abort", "wait", "keep")
NO_BODY = object()


@dataclass(frozen=True)
class Endpoint(Generic[T]):
    method: str
    path: str
    parse: Callable[[httpx.Response, Endpoint[Any]], T]
    params: tuple[tuple[str, str], ...] = ()
    body: Any = field(default=NO_BODY)
    # Safe to send again after it may have reached the server.
    idempotent: bool = False
    dev_route: bool = True
    # Statuses worth retrying for this route (the gateway family, unless the route gives 503 a meaning).
    retry_statuses: frozenset[int] = frozenset({502, 503, 504})

    @property
    def has_body(self) -> bool:
        return self.body is not NO_BODY

    def check(self, response: httpx.Response) -> None:
        if not response.is_success:
            raise error_from_response(response, path=self.path, dev_route=self.dev_route)


def qbool(value: bool) -> str:
    """The Rust frontend accepts only lowercase true/false; Python accepts those too."""
    if not isinstance(value, bool):
        raise InvalidParameterError(f"expected a bool, got {value!r}")
    return "true" if value else "false"


# ---- answer readers ---------------------------------------------------------------------------------


def _invalid(message: str, response: httpx.Response, ep: Endpoint[Any]) -> ResponseValidationError:
    return ResponseValidationError(
        message, method=ep.method, path=ep.path, status_code=response.status_code, body=response.text
    )


def _json(response: httpx.Response, ep: Endpoint[Any]) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise _invalid(f"expected JSON ({exc})", response, ep) from exc


def _empty_or_json(response: httpx.Response, ep: Endpoint[Any]) -> Any:
    """Some routes answer an empty 200 (Python returns a bare Response); treat that as no data."""
    return None if not response.content.strip() else _json(response, ep)


def _validated(model: type[M], data: Any, response: httpx.Response, ep: Endpoint[Any]) -> M:
    try:
        return model.model_validate(data if data is not None else {})
    except ValidationError as exc:
        raise _invalid(f"unexpected answer shape: {exc.errors()[0]['msg']}", response, ep) from exc


def _model_reader(model: type[M]) -> Callable[[httpx.Response, Endpoint[Any]], M]:
    def read(response: httpx.Response, ep: Endpoint[Any]) -> M:
        ep.check(response)
        return _validated(model, _empty_or_json(response, ep), response, ep)

    return read


def _field_reader(name: str, kind: type[T]) -> Callable[[httpx.Response, Endpoint[Any]], T]:
    def read(response: httpx.Response, ep: Endpoint[Any]) -> T:
        ep.check(response)
        data = _json(response, ep)
        value = data.get(name) if isinstance(data, dict) else None
        # bool is an int subclass: never let an int through where a bool is meant, and vice versa
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _invalid(f"expected {name!r} to be {kind.__name__}", response, ep)
        return value

    return read


def _none(response: httpx.Response, ep: Endpoint[Any]) -> None:
    ep.check(response)


def _health(response: httpx.Response, ep: Endpoint[Any]) -> bool:
    ep.check(response)
    return True


def _read_reset(response: httpx.Response, ep: Endpoint[Any]) -> ResetPrefixCacheResult:
    # Some Rust builds reported a refused reset as 409 Conflict rather than {"success": false}.
    if response.status_code == 409:
        return ResetPrefixCacheResult(success=False, status_code=409)
    ep.check(response)
    data = _empty_or_json(response, ep)
    if data is None:
        return ResetPrefixCacheResult(success=None, status_code=response.status_code)
    success = data.get("success") if isinstance(data, dict) else None
    if not isinstance(success, bool):
        raise _invalid("expected {'success': bool}", response, ep)
    return ResetPrefixCacheResult(success=success, status_code=response.status_code)


def _read_collective_rpc(response: httpx.Response, ep: Endpoint[Any]) -> list[Any]:
    # Python answers an empty 200 when the engine returned None; Rust wraps it as [null]. Both become [None].
    ep.check(response)
    data = _empty_or_json(response, ep)
    if data is None:
        return [None]
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise _invalid("expected {'results': [...]}", response, ep)
    return results


def _read_kv_event_sources(response: httpx.Response, ep: Endpoint[Any]) -> dict[int, KVEventSource]:
    ep.check(response)
    data = _empty_or_json(response, ep)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise _invalid("expected a map of rank -> source", response, ep)
    # Some builds nest the map under "sources"; the ranks are JSON object keys, so strings.
    raw = data.get("sources", data) if isinstance(data.get("sources"), dict) else data
    out: dict[int, KVEventSource] = {}
    for rank, source in raw.items():
        try:
            key = int(rank)
        except ValueError:
            continue
        out[key] = _validated(KVEventSource, source, response, ep)
    return dict(sorted(out.items()))


def _read_metrics(response: httpx.Response, ep: Endpoint[Any]) -> MetricsSnapshot:
    ep.check(response)
    from .metrics import parse_metrics  # prometheus_client is the optional "metrics" extra

    return parse_metrics(response.text, response.headers.get("content-type", ""))


def _read_abort(response: httpx.Response, ep: Endpoint[Any]) -> AbortRequestsResult:
    # Rust answers an empty 200; Python {"status": "aborted", "aborted": <ids given, or in flight>}.
    # For given ids both mean the same, so the empty answer gets Python's count; for "all" it stays unknown.
    ep.check(response)
    data = _empty_or_json(response, ep)
    if data is None:
        ids = ep.body.get("request_ids") if isinstance(ep.body, dict) else None
        return AbortRequestsResult(status="aborted", aborted=len(ids) if ids else None)
    return _validated(AbortRequestsResult, data, response, ep)


def _raw(response: httpx.Response, ep: Endpoint[Any]) -> httpx.Response:
    ep.check(response)
    return response


# ---- routes -------------------------------------------------------------------------------------------


def health() -> Endpoint[bool]:
    # 503 here means the engine is dead: not something a retry fixes.
    return Endpoint(
        "GET", "/health", _health, idempotent=True, dev_route=False, retry_statuses=frozenset({502, 504})
    )


def version() -> Endpoint[VersionInfo]:
    return Endpoint("GET", "/version", _model_reader(VersionInfo), idempotent=True, dev_route=False)


def models() -> Endpoint[ModelList]:
    return Endpoint("GET", "/v1/models", _model_reader(ModelList), idempotent=True, dev_route=False)


def metrics_text() -> Endpoint[httpx.Response]:
    return Endpoint("GET", "/metrics", _raw, idempotent=True, dev_route=False)


def metrics() -> Endpoint[MetricsSnapshot]:
    return Endpoint("GET", "/metrics", _read_metrics, idempotent=True, dev_route=False)


def reset_prefix_cache(
    reset_running_requests: bool, reset_external: bool
) -> Endpoint[ResetPrefixCacheResult]:
    return Endpoint(
        "POST",
        "/reset_prefix_cache",
        _read_reset,
        params=(
            ("reset_running_requests", qbool(reset_running_requests)),
            ("reset_external", qbool(reset_external)),
        ),
        idempotent=True,
    )


def reset_mm_cache() -> Endpoint[None]:
    return Endpoint("POST", "/reset_mm_cache", _none, idempotent=True)


def reset_encoder_cache() -> Endpoint[None]:
    return Endpoint("POST", "/reset_encoder_cache", _none, idempotent=True)


def sleep(level: int, mode: PauseMode) -> Endpoint[SleepResult]:
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 2:
        raise InvalidParameterError(f"sleep level must be 0, 1 or 2, got {level!r}")
    _check_mode(mode)
    return Endpoint(
        "POST",
        "/sleep",
        _model_reader(SleepResult),
        params=(("level", str(level)), ("mode", mode)),
        idempotent=True,
    )


def wake_up(tags: Sequence[str] | None) -> Endpoint[WakeUpResult]:
    if isinstance(tags, str):
        raise InvalidParameterError(f"tags must be a list of strings, not the string {tags!r}")
    params = tuple(("tags", _str_item(t, "tags")) for t in tags or ())
    return Endpoint("POST", "/wake_up", _model_reader(WakeUpResult), params=params, idempotent=True)


def is_sleeping() -> Endpoint[bool]:
    return Endpoint("GET", "/is_sleeping", _field_reader("is_sleeping", bool), idempotent=True)


def release_kv_cache_memory() -> Endpoint[StatusResult]:
    return Endpoint("POST", "/release_kv_cache_memory", _model_reader(StatusResult))


def pause(mode: PauseMode, clear_cache: bool | None) -> Endpoint[StatusResult]:
    _check_mode(mode)
    params: tuple[tuple[str, str], ...] = (("mode", mode),)
    if clear_cache is not None:
        params += (("clear_cache", qbool(clear_cache)),)
    return Endpoint("POST", "/pause", _model_reader(StatusResult), params=params, idempotent=True)


def resume() -> Endpoint[StatusResult]:
    return Endpoint("POST", "/resume", _model_reader(StatusResult), idempotent=True)


def is_paused() -> Endpoint[bool]:
    return Endpoint("GET", "/is_paused", _field_reader("is_paused", bool), idempotent=True)


def abort_requests(request_ids: Iterable[str] | None) -> Endpoint[AbortRequestsResult]:
    if isinstance(request_ids, str):
        raise InvalidParameterError("request_ids must be a list of ids, not a single string")
    ids = [_str_item(r, "request_ids") for r in request_ids or ()]
    # Aborting "all" twice could hit requests that arrived in between: never resent.
    return Endpoint(
        "POST",
        "/abort_requests",
        _read_abort,
        body={"request_ids": ids},
        idempotent=bool(ids),
    )


def collective_rpc(
    method: str, args: Sequence[Any], kwargs: Mapping[str, Any] | None, timeout: float | None
) -> Endpoint[list[Any]]:
    if not isinstance(method, str) or not method:
        raise InvalidParameterError("collective_rpc needs the worker method name as a non-empty string")
    body: dict[str, Any] = {"method": method, "args": list(args), "kwargs": dict(kwargs or {})}
    if timeout is not None:
        body["timeout"] = timeout
    _check_json(body, "collective_rpc arguments")
    return Endpoint("POST", "/collective_rpc", _read_collective_rpc, body=body)


def server_info(config_format: Literal["text", "json"]) -> Endpoint[ServerInfo]:
    if config_format not in ("text", "json"):
        raise InvalidParameterError(f"config_format must be 'text' or 'json', got {config_format!r}")
    return Endpoint(
        "GET",
        "/server_info",
        _model_reader(ServerInfo),
        params=(("config_format", config_format),),
        idempotent=True,
    )


def kv_event_sources() -> Endpoint[dict[int, KVEventSource]]:
    return Endpoint("GET", "/kv_event_sources", _read_kv_event_sources, idempotent=True, dev_route=False)


def get_world_size(include_dp: bool) -> Endpoint[int]:
    return Endpoint(
        "GET",
        "/get_world_size",
        _field_reader("world_size", int),
        params=(("include_dp", qbool(include_dp)),),
        idempotent=True,
    )


def init_weight_transfer_engine(init_info: Mapping[str, Any]) -> Endpoint[MessageResult]:
    body = {"init_info": dict(init_info)}
    _check_json(body, "init_info")
    return Endpoint("POST", "/init_weight_transfer_engine", _model_reader(MessageResult), body=body)


def start_weight_update() -> Endpoint[MessageResult]:
    return Endpoint("POST", "/start_weight_update", _model_reader(MessageResult))


def update_weights(update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> Endpoint[MessageResult]:
    info: Any = dict(update_info) if isinstance(update_info, Mapping) else [dict(i) for i in update_info]
    body = {"update_info": info}
    _check_json(body, "update_info")
    return Endpoint("POST", "/update_weights", _model_reader(MessageResult), body=body)


def finish_weight_update(weight_version: str | None) -> Endpoint[MessageResult]:
    body = {} if weight_version is None else {"weight_version": weight_version}
    return Endpoint("POST", "/finish_weight_update", _model_reader(MessageResult), body=body)


def update_weight_version(new_version: str) -> Endpoint[WeightVersionResult]:
    return Endpoint(
        "POST",
        "/update_weight_version",
        _model_reader(WeightVersionResult),
        body={"new_version": _str_item(new_version, "new_version")},
        idempotent=True,
    )


def weight_info() -> Endpoint[WeightInfo]:
    return Endpoint("GET", "/weight_info", _model_reader(WeightInfo), idempotent=True)


def completion(
    model: str,
    prompt: str,
    max_tokens: int,
    *,
    temperature: float = 0,
    seed: int | None = None,
    stop: Sequence[str] | None = None,
) -> Endpoint[Completion]:
    if isinstance(stop, str):
        raise InvalidParameterError("stop must be a list of strings, not a single string")
    body: dict[str, Any] = {
        "model": _str_item(model, "model"),
        "prompt": _str_item(prompt, "prompt"),
        "max_tokens": max_tokens,
        "temperature": temperature,
    }
    if seed is not None:
        body["seed"] = seed
    if stop:
        body["stop"] = [_str_item(s, "stop") for s in stop]
    _check_json(body, "completion arguments")
    return Endpoint("POST", "/v1/completions", _model_reader(Completion), body=body, dev_route=False)


def raw(
    method: str, path: str, params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None, body: Any
) -> Endpoint[httpx.Response]:
    """The escape hatch: any request, answered with the httpx.Response (non-2xx still raises)."""
    if not path.startswith("/"):
        raise InvalidParameterError(f"path must start with '/', got {path!r}")
    items = params.items() if isinstance(params, Mapping) else (params or ())
    # Booleans go out lowercase here too; any other value is sent exactly as given.
    encoded = tuple((str(k), qbool(v) if isinstance(v, bool) else str(v)) for k, v in items)
    method = method.upper()
    return Endpoint(method, path, _raw, params=encoded, body=body, idempotent=method in ("GET", "HEAD"))


def _check_mode(mode: str) -> None:
    if mode not in _PAUSE_MODES:
        raise InvalidParameterError(f"mode must be one of {', '.join(_PAUSE_MODES)}; got {mode!r}")


def _str_item(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidParameterError(f"{what} must hold strings, got {value!r}")
    return value


def _check_json(body: object, what: str) -> None:
    try:
        json.dumps(body)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"{what} must be JSON-serialisable ({exc}); serialise tensors or objects yourself"
        ) from exc
