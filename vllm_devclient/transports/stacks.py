"""The optional HTTP packages (httpx, httpx2, aiohttp): importing one on demand, telling whose a client is.

None of them is needed by the default path (the SDK's own h11 pools); each is an install extra of the same
name. A transport asked for whose package is missing is a `MissingExtraError` naming the extra, raised when
the client is made. httpx and httpx2 (pydantic's fork, which openai 3.x, anthropic 2.x and FastAPI use)
have the same API, so one adapter serves both: it is given the module.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Literal, TypeGuard

from ..errors import InvalidParameterError, MissingExtraError
from ..responses import HTTPResponse
from .base import WireResponse

__all__ = ["HTTPX_STACKS", "HttpxStack", "is_http_response", "load", "stack_of"]

HttpxStack = Literal["httpx", "httpx2"]
HTTPX_STACKS: tuple[HttpxStack, ...] = ("httpx", "httpx2")
_NEEDS = {"httpx2": " (Python 3.11 or newer)"}


def load(module: str, why: str) -> ModuleType:
    """The module `module` (httpx, httpx2 or aiohttp); `MissingExtraError` naming its extra when it is not
    installed. `why`: what needs it, for the message ("transport='httpx'")."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{why} needs {module}, which is not installed: pip install 'vllm-devclient[{module}]'"
            f"{_NEEDS.get(module, '')}",
            extra=module,
            name=module,
        ) from exc


def stack_of(client: object, *, asynchronous: bool) -> ModuleType:
    """The module (httpx or httpx2) whose `Client` (`AsyncClient` when `asynchronous`) `client` is; an
    `InvalidParameterError` naming what to pass otherwise. Imports nothing: a client's package is loaded
    already (and one aliased by `httpx2.alias_httpx()` is found under either name)."""
    want = "AsyncClient" if asynchronous else "Client"
    for name in HTTPX_STACKS:
        module = sys.modules.get(name)
        if module is not None and isinstance(client, getattr(module, want)):
            return module
    kind = type(client)
    shown = f"{kind.__module__.partition('.')[0]}.{kind.__qualname__}"
    other = "Client" if asynchronous else "AsyncClient"
    hint = ""
    for name in HTTPX_STACKS:
        module = sys.modules.get(name)
        if module is not None and isinstance(client, getattr(module, other)):
            owner = "DevClient" if asynchronous else "AsyncDevClient"
            article = "an" if other == "AsyncClient" else "a"
            hint = f" ({article} {other} is for {owner})"
    raise InvalidParameterError(
        f"http_client must be an httpx.{want} or an httpx2.{want}, got {shown}{hint}; or leave it out for "
        "the SDK's own connection pool"
    )


def is_http_response(value: object) -> TypeGuard[HTTPResponse]:
    """Whether `value` is a response object of a stack: the SDK's `WireResponse`, an `httpx.Response` or an
    `httpx2.Response` (imports nothing)."""
    if isinstance(value, WireResponse):
        return True
    return any(
        (module := sys.modules.get(name)) is not None and isinstance(value, module.Response)
        for name in HTTPX_STACKS
    )
