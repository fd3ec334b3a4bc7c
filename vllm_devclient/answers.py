"""How each route's answer is read: the readers `endpoints.py` attaches to its routes (no I/O).

A reader gets only answers with a 2xx status (or one of its endpoint's `ok_statuses`). One that meets an
answer it cannot read raises `ShapeError`, which `operations.call` turns into `ResponseValidationError`:
an unknown shape is never read as empty.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from .models import (
    AbortRequestsResult,
    CheckpointStatus,
    KVEventSource,
    MessageResult,
    ResetPrefixCacheResult,
    WakeUpResult,
)
from .responses import ResponseLike

if TYPE_CHECKING:
    from .metrics import MetricsSnapshot

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
# (the answer, the JSON body the request carried) -> the typed answer.
Reader = Callable[[ResponseLike, object], T]


class ShapeError(Exception):
    """A 2xx answer this route never gives; `operations.call` reports it as ResponseValidationError."""


def json_of(response: ResponseLike) -> Any:
    try:
        return response.json()
    except RecursionError:
        raise ShapeError("the JSON answer is nested too deeply to read") from None
    except ValueError as exc:
        raise ShapeError(f"expected JSON ({exc})") from None


def empty_or_json(response: ResponseLike) -> Any:
    """Some routes answer an empty 200 (Python returns a bare Response); that is no data, not `{}`."""
    return None if not response.content.strip() else json_of(response)


def _shape_error(exc: ValidationError) -> ShapeError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "answer"
    return ShapeError(f"unexpected answer shape at {where}: {first['msg']}")


def validated(model: type[M], data: Any) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _shape_error(exc) from None
    except RecursionError:
        raise ShapeError("the JSON answer is nested too deeply to read") from None


@functools.cache
def field_names(model: type[BaseModel]) -> frozenset[str]:
    return frozenset(model.model_fields)


def model_reader(model: type[M], *, empty_ok: bool = False) -> Reader[M]:
    """JSON into `model`. `empty_ok`: an empty body (older servers) gives the model with every field None.
    A JSON object that has none of the model's fields is an unknown shape, not an empty answer."""
    known = field_names(model)

    def read(response: ResponseLike, sent: object) -> M:
        content = response.content
        if not content.strip():
            if not empty_ok:
                raise ShapeError("expected a JSON answer, got an empty body")
            return model()
        try:
            # pydantic parses the JSON itself (in Rust): no json.loads, no intermediate dict.
            result = model.model_validate_json(content)
        except ValidationError as exc:
            raise _shape_error(exc) from None
        if known and not result.model_fields_set & known:
            keys = sorted(result.model_extra or {})[:10]
            raise ShapeError(f"expected any of {sorted(known)}, got keys {keys}")
        return result

    return read


def field_reader(name: str, kind: type[T]) -> Reader[T]:
    def read(response: ResponseLike, sent: object) -> T:
        data = json_of(response)
        value = data.get(name) if isinstance(data, dict) else None
        # bool is an int subclass: never let an int through where a bool is meant, and vice versa
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ShapeError(f"expected {{{name!r}: {kind.__name__}}}")
        return value

    return read


def nothing(response: ResponseLike, sent: object) -> None:
    return None


def healthy(response: ResponseLike, sent: object) -> bool:
    return True


_message_json = model_reader(MessageResult)


def text_message(response: ResponseLike, sent: object) -> MessageResult:
    # The LoRA routes answer a plain-text sentence (Python) or JSON {"message": ...}.
    if not response.content.strip():
        return MessageResult(message=None)
    if "json" in response.headers.get("content-type", ""):
        return _message_json(response, sent)
    return MessageResult(message=response.text.strip())


def read_reset(response: ResponseLike, sent: object) -> ResetPrefixCacheResult:
    # Some Rust builds reported a refused reset as 409 Conflict rather than {"success": false}.
    if response.status_code == 409:
        return ResetPrefixCacheResult(success=False, status_code=409)
    data = empty_or_json(response)
    if data is None:
        return ResetPrefixCacheResult(success=None, status_code=response.status_code)
    success = data.get("success") if isinstance(data, dict) else None
    if not isinstance(success, bool):
        raise ShapeError("expected {'success': bool}")
    return ResetPrefixCacheResult(success=success, status_code=response.status_code)


def read_checkpoint(response: ResponseLike, sent: object) -> CheckpointStatus:
    # A 503 ("not yet prepared") and a 500 ("failed") of /checkpoint/status carry the state too; a body
    # without it (a proxy's 503) is an unknown shape, never a state.
    data = json_of(response)
    if not isinstance(data, dict) or not isinstance(data.get("state"), str):
        raise ShapeError(f"expected {{'state': str}} with HTTP {response.status_code}")
    return validated(CheckpointStatus, {**data, "status_code": response.status_code})


def read_wake_up(response: ResponseLike, sent: object) -> WakeUpResult:
    data = empty_or_json(response)
    if data is None:
        return WakeUpResult()
    if isinstance(data, dict) and "tags" not in data and "tags_woken" in data:
        # A newer server names the field after what it did.
        data = {**data, "tags": data["tags_woken"]}
    return validated(WakeUpResult, data)


def read_collective_rpc(response: ResponseLike, sent: object) -> list[Any]:
    # Python answers an empty 200 when the engine returned None; Rust wraps it as [null]. Both become [None].
    data = empty_or_json(response)
    if data is None:
        return [None]
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise ShapeError("expected {'results': [...]}")
    return results


def read_kv_event_sources(response: ResponseLike, sent: object) -> dict[int, KVEventSource]:
    data = json_of(response)
    # Known shapes: {"<rank>": source, ...}; newer builds {"sources": {"<rank>": source}} or
    # {"sources": [source, ...]} (the list index is the rank, unless a source names its "rank").
    if isinstance(data, dict) and set(data) == {"sources"}:
        data = data["sources"]
    if isinstance(data, list):
        pairs: Iterable[tuple[Any, Any]] = (
            (s.get("rank", i) if isinstance(s, dict) else i, s) for i, s in enumerate(data)
        )
    elif isinstance(data, dict):
        pairs = data.items()
    else:
        raise ShapeError("expected a map of data-parallel rank -> event source")
    out: dict[int, KVEventSource] = {}
    for rank, source in pairs:
        try:
            key = int(rank)
        except (TypeError, ValueError):
            raise ShapeError(f"expected ranks as keys, got {rank!r}") from None
        if not isinstance(source, dict):
            raise ShapeError(f"rank {key}: expected an event-source object, got {source!r}")
        out[key] = validated(KVEventSource, source)
    return dict(sorted(out.items()))


def read_abort(response: ResponseLike, sent: object) -> AbortRequestsResult:
    # Rust answers an empty 200; Python {"status": "aborted", "aborted": <ids given, or in flight>}.
    # For given ids both mean the same, so the empty answer gets Python's count; for "all" it stays unknown.
    data = empty_or_json(response)
    if data is None:
        ids = sent.get("request_ids") if isinstance(sent, dict) else None
        return AbortRequestsResult(status="aborted", aborted=len(ids) if ids else None)
    return validated(AbortRequestsResult, data)


def read_metrics(response: ResponseLike, sent: object) -> MetricsSnapshot:
    from .metrics import MetricsParseError, parse_metrics  # prometheus_client: the "metrics" extra

    try:
        return parse_metrics(response.text, response.headers.get("content-type", ""))
    except MetricsParseError as exc:
        raise ShapeError(str(exc)) from None


def text_answer(response: ResponseLike, sent: object) -> str:
    return response.text


def raw_answer(response: ResponseLike, sent: object) -> ResponseLike:
    return response
