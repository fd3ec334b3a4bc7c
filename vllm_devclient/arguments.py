"""Every argument the SDK takes is checked here, before anything is sent.

Each checker returns the value in the form the request needs, or raises `InvalidParameterError` naming the
argument, what was given and what to pass instead. The route builders (`endpoints.py`), the clients and the
fleets call these and nothing else, so one kind of argument is refused the same way everywhere.
"""

from __future__ import annotations

import json
import math
import os
import re
import ssl
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import InvalidParameterError

__all__ = [
    "BaseURL",
    "ClientCert",
    "Timeouts",
    "api_key",
    "base_url",
    "client_cert",
    "flag",
    "header_map",
    "json_body",
    "json_mapping",
    "json_sequence",
    "non_negative_int",
    "number",
    "optional_seconds",
    "positive_int",
    "seconds",
    "text",
    "texts",
    "timeout",
    "verify",
]


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidParameterError(f"{name} must be True or False, got {_shown(value)}")
    return value


def number(value: object, name: str, *, minimum: float = 0.0) -> float:
    """A finite number >= `minimum` (bools refused)."""
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value < minimum
    ):
        raise InvalidParameterError(f"{name} must be a finite number >= {minimum:g}, got {_shown(value)}")
    return value


def seconds(value: object, name: str, *, allow_zero: bool = False) -> float:
    """A finite number of seconds, > 0 (or >= 0 with allow_zero)."""
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not allow_zero)
    ):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidParameterError(f"{name} must be a finite number of seconds {bound}, got {_shown(value)}")
    return float(value)


def optional_seconds(value: object, name: str) -> float | None:
    return None if value is None else seconds(value, name)


def positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidParameterError(f"{name} must be an int >= 1, got {_shown(value)}")
    return value


def non_negative_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidParameterError(f"{name} must be an int >= 0, got {_shown(value)}")
    return value


def text(value: object, name: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not allow_empty):
        what = "a string" if allow_empty else "a non-empty string"
        raise InvalidParameterError(f"{name} must be {what}, got {_shown(value)}")
    return value


def texts(value: object, name: str) -> list[str]:
    """A list of strings (not one string, which would be read as its characters)."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidParameterError(f"{name} must be a list of strings, got {_shown(value)}")
    items = list(value)
    for item in items:
        if not isinstance(item, str):
            raise InvalidParameterError(f"{name} must hold strings only, got {_shown(item)} in it")
    return items


def prompt(value: object, name: str) -> str | list[int]:
    """A completion prompt: a string, or token ids (a list of ints >= 0, not empty)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes) or not isinstance(value, Iterable):
        raise InvalidParameterError(f"{name} must be a string or a list of token ids, got {_shown(value)}")
    items = list(value)
    if not items:
        raise InvalidParameterError(f"{name} as token ids must hold at least one id")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int) or item < 0:
            raise InvalidParameterError(f"{name} token ids must be ints >= 0, got {_shown(item)} in it")
    return items


def _check_json(value: object, name: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidParameterError(
            f"{name} must be JSON (strings, finite numbers, bools, None, lists, dicts with string keys): "
            f"{exc}; serialise tensors or objects yourself"
        ) from None


def json_sequence(value: object, name: str) -> list[Any]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise InvalidParameterError(f"{name} must be a list or tuple, got {_shown(value)}")
    items = list(value)
    _check_json(items, name)
    return items


def json_mapping(value: object, name: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidParameterError(f"{name} must be a dict with string keys, got {_shown(value)}")
    out = dict(value)
    for key in out:
        if not isinstance(key, str):
            raise InvalidParameterError(f"{name} must have string keys, got {_shown(key)}")
    _check_json(out, name)
    return out


def json_body(value: object, name: str) -> Any:
    _check_json(value, name)
    return value


_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


def header_value(value: object, name: str) -> str:
    """A header value: printable ASCII without line breaks (the message never quotes it)."""
    if not isinstance(value, str) or not value.isascii() or any(c in value for c in "\r\n\0"):
        raise InvalidParameterError(
            f"header {name} must be printable ASCII without line breaks (its value is not shown here)"
        )
    return value


def header_map(value: object, name: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidParameterError(f"{name} must be a dict of header names to values, got {_shown(value)}")
    out: dict[str, str] = {}
    for key, val in value.items():
        if not isinstance(key, str) or not _TOKEN.match(key):
            raise InvalidParameterError(f"{name}: {_shown(key)} is not a valid header name")
        out[key] = header_value(val, key)
    return out


def api_key(value: object) -> str | None:
    """The key as sent: surrounding whitespace dropped (a key read from a file or a Kubernetes secret ends
    with a newline); None when empty."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidParameterError(f"api_key must be a string, got a {type(value).__name__}")
    key = value.strip()
    if key and (not key.isascii() or not key.isprintable()):
        raise InvalidParameterError(
            "api_key holds characters that cannot go into an HTTP header (non-ASCII or control "
            "characters); check how it was read (the key itself is not shown)"
        )
    return key or None


@dataclass(frozen=True)
class Timeouts:
    """One HTTP try's limits: `total` bounds the whole exchange, `connect` the connecting. None: no bound."""

    connect: float | None
    total: float | None


_PHASES = ("connect", "read", "write", "pool")


def timeout(value: object, name: str = "timeout") -> Timeouts:
    """Seconds (for the whole try), a `Timeout` (this package's, httpx's or httpx2's: anything with their
    four phase limits), or None (no bound)."""
    if value is None:
        return Timeouts(None, None)
    if all(hasattr(value, part) for part in _PHASES) and not isinstance(value, int | float):
        parts: dict[str, Any] = {part: getattr(value, part) for part in _PHASES}
        for part, v in parts.items():
            if v is not None:
                seconds(v, f"{name}.{part}")
        # The whole try is bounded by the longest phase limit; no read limit means no bound.
        bounded = [v for v in parts.values() if v is not None]
        total = None if parts["read"] is None else max(bounded)
        return Timeouts(parts["connect"], total)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise InvalidParameterError(
            f"{name} must be seconds, a Timeout (vllm_devclient's, httpx's or httpx2's) or None, "
            f"got {_shown(value)}"
        )
    total = seconds(value, name)
    return Timeouts(total, total)


@dataclass(frozen=True)
class BaseURL:
    """A server's base URL, split. `url` is what the client shows: as given, with a password masked, no
    trailing slash and no `/v1`."""

    url: str
    scheme: str
    host: str
    port: int
    prefix: str
    username: str | None
    password: str | None


# `user:password@` in a URL's authority (with or without a scheme): the password is never shown.
_PASSWORD = re.compile(r"^((?:[^:/?#]*:)?//)?([^/?#@:]*):[^/?#@]*@")


def _masked_url(raw: str) -> str:
    """A URL as an error may show it: the password masked, a query (which may carry a key) left out."""
    return _PASSWORD.sub(r"\1\2:***@", raw).split("?", 1)[0]


def base_url(value: object) -> BaseURL:
    """An http(s) URL with a host and no query or fragment; a trailing `/v1` is dropped (dev routes live at
    the server's root, OpenAI clients are configured with `.../v1`)."""
    if not isinstance(value, str):
        raise InvalidParameterError(
            f"base_url must be a string like 'http://127.0.0.1:8000', got {_shown(value)}"
        )
    raw = value.strip()
    shown = _masked_url(raw)
    try:
        parts = urllib.parse.urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise InvalidParameterError(f"base_url {shown!r} is not a valid URL: {exc}") from None
    problem = None
    if parts.scheme not in ("http", "https"):
        problem = "it must start with http:// or https://"
        if "//" not in raw:
            problem += f" ({'http://' + shown!r}?)"
    elif not parts.hostname:
        problem = "it names no host"
    elif parts.query or "?" in raw:
        problem = "it has a query string (?...); pass the key as api_key= and parameters per call"
    elif parts.fragment or "#" in raw:
        problem = "it has a fragment (#...)"
    if problem is not None:
        raise InvalidParameterError(f"base_url {shown!r} cannot be used: {problem}")
    assert parts.hostname is not None
    prefix = parts.path.rstrip("/")
    if prefix.endswith("/v1"):
        prefix = prefix[: -len("/v1")]
    host_port = parts.netloc.rpartition("@")[2]
    user = ""
    if parts.username is not None:
        user = parts.username + (":***" if parts.password is not None else "") + "@"
    return BaseURL(
        url=f"{parts.scheme}://{user}{host_port}{prefix}",
        scheme=parts.scheme,
        host=parts.hostname,
        port=port or (443 if parts.scheme == "https" else 80),
        prefix=prefix,
        username=urllib.parse.unquote(parts.username) if parts.username else None,
        password=urllib.parse.unquote(parts.password) if parts.password is not None else None,
    )


# ---- TLS ---------------------------------------------------------------------------------------------------

# `cert=` as loaded: (certificate file, key file or None, key password or None).
ClientCert = tuple[str, str | None, str | None]


def _existing_path(value: object, name: str, what: str) -> str:
    if not isinstance(value, str | os.PathLike) or not isinstance(os.fspath(value), str):
        raise InvalidParameterError(f"{name} must be a path to {what}, got {_shown(value)}")
    path = os.fspath(value)
    if not os.path.exists(path):
        raise InvalidParameterError(f"{name}: {path} does not exist (it must be {what})")
    return path


def verify(value: object) -> bool | str | ssl.SSLContext:
    """`verify=`: True (the CA bundle of the environment or certifi's), False (no check), the path of a CA
    bundle file or of a folder of hashed CA certificates, or an `ssl.SSLContext`."""
    if isinstance(value, bool | ssl.SSLContext):
        return value
    if not isinstance(value, str | os.PathLike):
        raise InvalidParameterError(
            "verify must be True, False, the path of a CA bundle (a file or a folder) or an ssl.SSLContext, "
            f"got {_shown(value)}"
        )
    return _existing_path(value, "verify", "a CA bundle file or a folder of CA certificates")


def client_cert(value: object) -> ClientCert | None:
    """`cert=`, in httpx's shapes: a PEM file holding the certificate and its key, (certificate, key), or
    (certificate, key, password). The password is never shown."""
    if value is None:
        return None
    if isinstance(value, str | os.PathLike):
        return (_existing_path(value, "cert", "a PEM file"), None, None)
    if isinstance(value, tuple | list) and len(value) in (2, 3):
        certfile = _existing_path(value[0], "cert[0] (the certificate)", "a PEM file")
        keyfile = None if value[1] is None else _existing_path(value[1], "cert[1] (the key)", "a PEM file")
        password = value[2] if len(value) == 3 else None
        if password is not None and not isinstance(password, str):
            raise InvalidParameterError(
                f"cert[2] (the key's password) must be a string, got a {type(password).__name__}"
            )
        return (certfile, keyfile, password or None)
    raise InvalidParameterError(
        "cert must be a path to a PEM file (certificate and key), (certificate, key) or (certificate, key, "
        f"password), got a {type(value).__name__}"
    )
