"""Outcome data: a typed SDK result or exception as plain JSON data, and attribute paths into it.

`resolve` walks the paths an expectation names ("a.b.0", "len(a)"), `jsonable` turns any outcome value into
JSON data (models dumped, responses reduced to status and body), `summarize_outcome` gives the readable
account the parity report shows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from ...transports.base import WireResponse
from ...transports.stacks import is_http_response

__all__ = ["body_data", "jsonable", "resolve", "short", "summarize_outcome"]


def body_data(content: bytes, content_type: str) -> dict[str, Any]:
    """A body as {"json": data} when it is JSON, else {"text": text}."""
    text = content.decode("utf-8", errors="replace")
    if text.strip() and "json" in content_type:
        try:
            return {"json": json.loads(text)}
        except ValueError:
            pass
    return {"text": text}


def resolve(obj: Any, path: str) -> Any:
    """Walk `path` ("a.b.0", "len(a.b)", "" for obj itself) through attributes, keys and indexes."""
    if path.startswith("len(") and path.endswith(")"):
        return len(resolve(obj, path[4:-1]))
    cur = obj
    for part in path.split(".") if path else ():
        if isinstance(cur, Mapping):
            cur = cur[int(part)] if part not in cur and part.lstrip("-").isdigit() else cur[part]
        elif isinstance(cur, list | tuple) and part.lstrip("-").isdigit():
            cur = cur[int(part)]
        else:
            cur = getattr(cur, part)
    return cur


def jsonable(value: Any) -> Any:
    """Plain JSON data for any outcome value (models dumped, responses reduced to status and body)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if is_http_response(value):
        return {
            "status_code": value.status_code,
            **body_data(value.content, value.headers.get("content-type", "")),
        }
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


_ERROR_ATTRS = (
    "status_code",
    "http_method",
    "engine_method",
    "engine_message",
    "param",
    "attempts",
    "engine_steps",
)


def summarize_outcome(outcome: Any) -> dict[str, Any]:
    """A readable, JSON-ready account of a result or exception (for reports; not compared)."""
    if isinstance(outcome, BaseException):
        attrs = {
            a: jsonable(getattr(outcome, a)) for a in _ERROR_ATTRS if getattr(outcome, a, None) is not None
        }
        return {"raised": type(outcome).__name__, **attrs}
    return {"returned": type_name(outcome), "value": jsonable(outcome)}


def short(outcome: Any, limit: int = 300) -> str:
    """A one-line account of a result or exception, cut at `limit` characters (for messages)."""
    if isinstance(outcome, BaseException):
        text = f"{type(outcome).__name__}({outcome})"
    else:
        text = f"{type(outcome).__name__} {json.dumps(jsonable(outcome), sort_keys=True)}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def type_name(outcome: Any) -> str:
    """The outcome's type as scenarios name it: a raw HTTP response is a `Response`, whichever stack carried
    it (httpx, httpx2 or the SDK's own `WireResponse`: the scenario asks for the answer, not the stack)."""
    return "Response" if isinstance(outcome, WireResponse) else type(outcome).__name__
