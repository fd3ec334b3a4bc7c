"""What the sync and the async client share: configuration, its checks, and turning effects into requests.

Nothing here does I/O. `_async/client.py` holds the async client; `_sync/client.py` is generated from it
(`scripts/unasync.py`), so the two cannot drift.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import inspect
import logging
import os
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from typing_extensions import TypedDict

from . import arguments as check
from ._version import __version__
from .arguments import BaseURL, Timeouts
from .constants import DEFAULT_TIMEOUT, LONG_ROUTE_TIMEOUT
from .endpoints import PauseMode, encode_body
from .errors import ClientClosedError, Frontend, InvalidParameterError
from .models import VersionInfo
from .operations import CallContext, ModelCache, RetryPolicy, Transmit
from .polling import Backoff, Plan
from .redaction import Secrets
from .release_gate import ServerRelease
from .responses import HTTPResponse
from .timeouts import TimeoutLike
from .transports import Origin, TLSConfig, TransportKind, WireRequest, WireResponse, transport_kind

__all__ = [
    "NOT_GIVEN",
    "BaseClient",
    "NotGiven",
    "RawResponse",
    "RequestOptions",
    "WaitOptions",
    "WeightUpdateOptions",
    "name_methods_after",
]

T = TypeVar("T")
_C = TypeVar("_C", bound="BaseClient")
log = logging.getLogger("vllm_devclient")


class NotGiven:
    """The default of an option that was not passed (None is a value: "no timeout")."""

    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN = NotGiven()
# Seconds, a `Timeout` (this package's, httpx's or httpx2's), or None.
TimeoutArg = float | TimeoutLike | None


class RequestOptions(TypedDict, total=False):
    """Per-call options every route method takes (keyword-only).

    timeout: the HTTP timeout of one try of this call, as a whole (connect, send, headers and body): seconds,
        a `Timeout` (vllm_devclient's, httpx's or httpx2's), or None for no bound. Default: the client's;
        when the client has the default one, long routes have no bound on their answer.
    total_timeout: seconds for this call as a whole, every try, retry and pause included (a flow of several
        requests: all of them), or None for no such bound. Default: the client's (none unless set).
    extra_headers: headers added to (or replacing) the client's for this call.
    extra_query: query parameters added to this call's.
    extra_body: JSON fields merged into this call's body (or the body, when the route sends none).
    """

    timeout: TimeoutArg
    total_timeout: float | None
    extra_headers: Mapping[str, str]
    extra_query: Mapping[str, str]
    extra_body: Mapping[str, Any]


class WaitOptions(TypedDict, total=False):
    """What every `wait_until_*` takes (keyword-only).

    deadline: seconds for the whole wait (default 60; wait_until_ready 120); the client's `total_timeout`
        ends it sooner when it is shorter.
    request_timeout: seconds for each try; None (the default): the client's `timeout` when one was set,
        else 5 (wait_until_ready 1).
    interval: the first pause between tries (default 0.05 s), doubling up to 1 s.
    """

    deadline: float
    request_timeout: float | None
    interval: float


class WeightUpdateOptions(TypedDict, total=False):
    """What `weight_update()` takes (keyword-only), on a client and on a fleet.

    weight_version: the version the new weights carry, set by the finish (default: none set).
    pause_mode: what happens to requests in flight while paused: abort, wait or keep (default keep).
    clear_cache: also clear the caches when pausing (default: the server's).
    draft: update the draft (speculative) model instead (default False).
    """

    weight_version: str | None
    pause_mode: PauseMode
    clear_cache: bool | None
    draft: bool


def weight_update_options(update: WeightUpdateOptions) -> tuple[str | None, PauseMode, bool | None, bool]:
    """(weight_version, pause_mode, clear_cache, draft), defaults filled in; unknown keys refused."""
    unknown = set(update) - set(WeightUpdateOptions.__annotations__)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    draft = check.flag(update.get("draft", False), "draft")
    return update.get("weight_version"), update.get("pause_mode", "keep"), update.get("clear_cache"), draft


# The call's own option that asks for a RawResponse instead of the answer: `with_raw_response` (and
# `request()`) pass it, as openai-python's wrappers pass theirs; never ambient state.
RAW_RESPONSE = "_raw_response"
_OPTION_NAMES = frozenset(RequestOptions.__annotations__) | {RAW_RESPONSE}
_LONG = check.timeout(LONG_ROUTE_TIMEOUT)
_NO_OPTIONS: Mapping[str, Any] = {}
_JSON = ("Content-Type", "application/json")


@functools.lru_cache(maxsize=4096)
def _query(params: tuple[tuple[str, str], ...]) -> str:
    """The encoded query string (memoised: a route's parameters repeat from call to call)."""
    return "?" + urllib.parse.urlencode(params) if params else ""


@dataclass(frozen=True)
class RawResponse(Generic[T]):
    """`client.with_raw_response.<method>(...)`: the typed answer and the HTTP response it was read from.

    `http_response` is the response object of the stack that answered (see `HTTPResponse`): an
    `httpx.Response` or `httpx2.Response` when your `http_client=` (or `transport="httpx"`/`"httpx2"`) sent
    the request, else the SDK's own `WireResponse` (its `request` the request sent)."""

    parsed: T
    http_response: HTTPResponse

    @property
    def status_code(self) -> int:
        return self.http_response.status_code

    @property
    def headers(self) -> Mapping[str, str]:
        """The answer's headers (case-insensitive in every stack)."""
        return self.http_response.headers


_LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO}
_log_lock = threading.Lock()
_log_configured = False


def configure_logging_from_env() -> None:
    """`VLLM_DEVCLIENT_LOG=debug|info` sends the SDK's log to stderr (read once, at the first client)."""
    global _log_configured
    with _log_lock:
        if _log_configured:
            return
        _log_configured = True
        value = os.environ.get("VLLM_DEVCLIENT_LOG", "").strip().lower()
        if not value:
            return
        if value not in _LOG_LEVELS:
            raise InvalidParameterError(f"VLLM_DEVCLIENT_LOG must be 'debug' or 'info', got {value!r}")
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(_LOG_LEVELS[value])


@dataclass(frozen=True)
class ClientConfig:
    """Everything a client is made of, checked; what a pickled client carries."""

    url: BaseURL
    api_key: str | None
    timeout: Timeouts
    timeout_arg: TimeoutArg
    # Set by the user (argument or $VLLM_DEVCLIENT_TIMEOUT): it then bounds long routes too.
    timeout_given: bool
    max_retries: int
    model: str | None
    default_headers: Mapping[str, str]
    transport: TransportKind
    tls: TLSConfig
    # Seconds for each call as a whole, retries included (argument or $VLLM_DEVCLIENT_TOTAL_TIMEOUT).
    total_timeout: float | None = None

    @classmethod
    def of(
        cls,
        base_url: object,
        *,
        api_key: object,
        timeout: object,
        max_retries: object,
        model: object,
        default_headers: object,
        transport: object,
        verify: object = True,
        cert: object = None,
        total_timeout: object = NOT_GIVEN,
    ) -> ClientConfig:
        key = check.api_key(api_key if api_key is not None else os.environ.get("VLLM_API_KEY"))
        url = check.base_url(base_url)
        if key is not None and url.password is not None:
            raise InvalidParameterError(
                "base_url carries a password and api_key is set: pass the credential one way only"
            )
        kind = transport_kind(
            transport if transport is not None else os.environ.get("VLLM_DEVCLIENT_TRANSPORT") or "auto"
        )
        given, timeout = _timeout_setting(timeout)
        return cls(
            url=url,
            api_key=key,
            timeout=check.timeout(timeout),
            timeout_arg=timeout,  # type: ignore[arg-type]  # checked just above
            timeout_given=given,
            max_retries=check.non_negative_int(max_retries, "max_retries"),
            model=None if model is None else check.text(model, "model"),
            default_headers=check.header_map(default_headers, "default_headers"),
            transport=kind,
            tls=TLSConfig.of(verify, cert),
            total_timeout=_total_timeout_setting(total_timeout),
        )

    @property
    def origin(self) -> Origin:
        url = self.url
        return Origin(url.scheme, url.host, url.port, url.prefix)  # type: ignore[arg-type]


TIMEOUT_ENV = "VLLM_DEVCLIENT_TIMEOUT"
TOTAL_TIMEOUT_ENV = "VLLM_DEVCLIENT_TOTAL_TIMEOUT"


def _seconds_from_env(name: str) -> float | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return check.seconds(float(text), name)
    except ValueError:
        raise InvalidParameterError(f"{name} must be seconds (a number), got {text!r}") from None


def _timeout_setting(timeout: object) -> tuple[bool, object]:
    """(whether the user set it, the timeout): the argument, else $VLLM_DEVCLIENT_TIMEOUT, else the
    default."""
    if not isinstance(timeout, NotGiven):
        return True, timeout
    seconds = _seconds_from_env(TIMEOUT_ENV)
    return (False, DEFAULT_TIMEOUT) if seconds is None else (True, seconds)


def _total_timeout_setting(total_timeout: object) -> float | None:
    """The argument (None: no bound), else $VLLM_DEVCLIENT_TOTAL_TIMEOUT, else no bound."""
    if isinstance(total_timeout, NotGiven):
        return _seconds_from_env(TOTAL_TIMEOUT_ENV)
    return check.optional_seconds(total_timeout, "total_timeout")


def check_own_tls(http_client: object, verify: object, cert: object) -> None:
    """`verify=` and `cert=` set up the SDK's own transports; an http_client passed in has its own."""
    if http_client is not None and (verify is not True or cert is not None):
        raise InvalidParameterError(
            "verify= and cert= do not reach an http_client you pass in: give them to it "
            "(httpx.Client(verify=...), httpx2.Client(verify=...)), or leave http_client out"
        )


class BaseClient:
    """Configuration and request building, shared by both clients."""

    _closed_message: ClassVar[str] = "this client is closed; make a new one (or use it inside its with-block)"

    def __init__(self, config: ClientConfig) -> None:
        configure_logging_from_env()
        self._config = config
        self.base_url = config.url.url
        self.max_retries = config.max_retries
        self._retry = RetryPolicy(max_retries=config.max_retries)
        self._models = ModelCache(config.model)
        self._release = ServerRelease()
        self._origin = config.origin
        key_password = config.tls.cert[2] if config.tls.cert else None
        self._secrets = Secrets.of(config.api_key, config.url.password, key_password)
        self._headers = self._build_headers()
        self._json_headers = (*self._headers, _JSON)
        self._frontend: Frontend = "unknown"
        self._ctx = CallContext(
            base_url=self.base_url, secrets=self._secrets, frontend=self._frontend, prefix=self._origin.prefix
        )
        self._closed = False

    # ---- configuration -----------------------------------------------------------------------------------

    @property
    def timeout(self) -> TimeoutArg:
        return self._config.timeout_arg

    @property
    def has_api_key(self) -> bool:
        return self._config.api_key is not None

    def __repr__(self) -> str:
        key = ", api_key=<set>" if self.has_api_key else ""
        return f"{type(self).__name__}(base_url={self.base_url!r}{key})"

    def _build_headers(self) -> tuple[tuple[str, str], ...]:
        headers = {"User-Agent": f"vllm-devclient/{__version__}", "Accept": "application/json"}
        url = self._config.url
        if self._config.api_key:
            headers["Authorization"] = f"Bearer {self._config.api_key}"
        elif url.username is not None:
            pair = f"{url.username}:{url.password or ''}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        headers.update(self._config.default_headers)
        return tuple(headers.items())

    def _replaced(self: _C, **changes: Any) -> ClientConfig:
        from dataclasses import replace

        return replace(self._config, **changes)

    def _context(self) -> CallContext:
        return self._ctx

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError(self._closed_message)

    # ---- per call ----------------------------------------------------------------------------------------

    @staticmethod
    def _options(options: Mapping[str, Any]) -> Mapping[str, Any]:
        if not options:
            return _NO_OPTIONS
        unknown = set(options) - _OPTION_NAMES
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
        out = dict(options)
        if RAW_RESPONSE in out:
            out[RAW_RESPONSE] = out[RAW_RESPONSE] is True
        if "timeout" in out:
            out["timeouts"] = check.timeout(out.pop("timeout"))
        if "total_timeout" in out:
            out["total_timeout"] = check.optional_seconds(out["total_timeout"], "total_timeout")
        if "extra_headers" in out:
            out["extra_headers"] = check.header_map(out["extra_headers"], "extra_headers")
        if "extra_query" in out:
            query = out["extra_query"]
            if not isinstance(query, Mapping):
                raise InvalidParameterError(f"extra_query must be a dict, got {type(query).__name__}")
            out["extra_query"] = tuple((str(k), str(v)) for k, v in query.items())
        if "extra_body" in out:
            out["extra_body"] = check.json_mapping(out["extra_body"], "extra_body")
        return out

    def _timeouts(self, options: Mapping[str, Any], *, long_running: bool) -> Timeouts:
        """This call's `timeout=`, else the client's when the user set one, else the default: no bound on
        the answer for long routes, the default timeout for the others."""
        if "timeouts" in options:
            return options["timeouts"]  # type: ignore[no-any-return]
        return _LONG if long_running and not self._config.timeout_given else self._config.timeout

    def _retry_for(self, options: Mapping[str, Any]) -> RetryPolicy:
        """The retry policy of one call starting now: bounded as a whole by this call's `total_timeout=`,
        else the client's (none unless set)."""
        total = options["total_timeout"] if "total_timeout" in options else self._config.total_timeout
        return self._retry.within(total)

    def _plan(
        self, deadline: object, request_timeout: object, default_request_timeout: float, poll: Backoff
    ) -> Plan:
        """A wait's or the barrier's plan: each try gets `request_timeout`, else the client's timeout when the
        user set one, else this wait's default; the client's `total_timeout` caps the deadline; a try that
        cannot connect ends it after the client's retries (see `polling.py`)."""
        if request_timeout is None:
            config = self._config
            request_timeout = config.timeout.total if config.timeout_given else default_request_timeout
        return Plan(
            deadline=check.seconds(deadline, "deadline"),
            request_timeout=check.optional_seconds(request_timeout, "request_timeout"),
            poll=poll,
            total_timeout=self._config.total_timeout,
            connect_retries=self._config.max_retries,
        )

    def _wire_request(self, effect: Transmit, options: Mapping[str, Any]) -> WireRequest:
        ep = effect.endpoint
        extra_query = options.get("extra_query")
        target = ep.path + _query(ep.params + extra_query if extra_query else ep.params)
        headers = self._headers
        body: Any = ep.body if ep.has_body else None
        extra_body = options.get("extra_body")
        if extra_body:
            body = {**body, **extra_body} if isinstance(body, dict) else dict(extra_body)
        content = None if body is None and not ep.has_body else encode_body(body)
        if content is not None:
            headers = self._json_headers
        extra_headers = options.get("extra_headers")
        if extra_headers:
            lowered = {k.lower() for k in extra_headers}
            headers = (*(h for h in headers if h[0].lower() not in lowered), *extra_headers.items())
        return WireRequest(
            ep.method,
            self._origin,
            self._origin.prefix + target,
            headers,
            content,
            fresh_connection=not ep.idempotent,
        )

    def _learn(self, value: object) -> None:
        """What the answers tell about the server (its frontend and release, from /version)."""
        self._release.learn(value)
        if isinstance(value, VersionInfo) and value.frontend != self._frontend:
            self._frontend = value.frontend
            self._ctx = dataclasses.replace(self._ctx, frontend=value.frontend)

    def _speak_cli(self) -> None:
        """Fix hints in errors name the command line's flags (`--deadline`), not keywords (the CLI's)."""
        self._ctx = dataclasses.replace(self._ctx, speaks="cli")


def http_response(response: HTTPResponse, request: WireRequest) -> HTTPResponse:
    """The raw response of an exchange: the stack's own response object; one of the SDK's pools' learns
    the request it answers."""
    if isinstance(response, WireResponse):
        response.request = request
    return response


_K = TypeVar("_K", bound=type)


def name_methods_after(cls: _K) -> _K:
    """Name every function ``cls`` inherits from a private base (``_Name``) ``Cls.method``.

    Python's own TypeErrors (a missing or extra argument) name a method by its ``__qualname__``: for one
    written in a private base that is a name the reader never met (``_SyncRoutes.health()``). Each private
    base of the client and fleet classes serves one public class only, so the new name is true.
    """
    for base in cls.__mro__[1:]:
        if not base.__name__.startswith("_") or not base.__module__.startswith("vllm_devclient."):
            continue
        for name, value in vars(base).items():
            fn = getattr(value, "fget", value)  # a property's getter
            fn = getattr(fn, "__func__", fn)  # a classmethod's or staticmethod's function
            while inspect.isfunction(fn) and fn.__qualname__ == f"{base.__qualname__}.{name}":
                fn.__qualname__ = f"{cls.__qualname__}.{name}"
                fn = getattr(fn, "__wrapped__", None)  # a context manager's own function too
    return cls
