"""One error hierarchy for everything the client raises.

Status errors are keyed by HTTP status (see `error_from_response`), and carry the raw body and the
frontend that answered, so a caller can always see what the server really said.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .constants import ERROR_TEXT_LIMIT
from .redaction import NO_SECRETS, Secrets

if TYPE_CHECKING:
    from .responses import ResponseLike

Frontend = Literal["python", "rust", "unknown"]

__all__ = [
    "BODY_HINT",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "BarrierTimeoutError",
    "BarrierUnreachableError",
    "BarrierUnsupportedError",
    "BodyCutOffError",
    "BodyLimitExceededError",
    "BodyTooLargeError",
    "CheckpointFailedError",
    "ClientClosedError",
    "ConflictError",
    "DevClientError",
    "DevModeDisabledError",
    "EngineCallError",
    "EngineDeadError",
    "InternalServerError",
    "InvalidParameterError",
    "MethodNotAllowedError",
    "MissingExtraError",
    "NotFoundError",
    "PermissionDeniedError",
    "ReleaseTooOldError",
    "ResponseValidationError",
    "RouteNotServedError",
    "ServerUnhealthyError",
    "ServiceUnavailableError",
    "TLSError",
    "UnsuccessfulResultError",
    "WaitTimeoutError",
    "WaitUnreachableError",
    "WorldSizeMismatchError",
    "error_from_response",
]


class DevClientError(Exception):
    """Base class of every error raised by vllm_devclient."""


class InvalidParameterError(DevClientError, ValueError):
    """An argument was rejected before anything was sent."""


class MissingExtraError(DevClientError, ImportError):
    """A part of the SDK that needs a package which is not installed (an HTTP stack asked for by
    `transport=`, a proxy, ...): `extra` is the install extra that brings it, `name` the missing module.
    Raised when the client (or fleet) is made, before anything is sent."""

    def __init__(self, message: str, *, extra: str, name: str) -> None:
        super().__init__(message, name=name)
        self.extra = extra


class ReleaseTooOldError(InvalidParameterError):
    """An argument the server's vLLM release does not take (it would ignore it): refused before sending.
    `argument` is its name, `added_in` the first release that takes it, `server_release` the server's."""

    def __init__(self, message: str, *, argument: str, added_in: str, server_release: str) -> None:
        super().__init__(message)
        self.argument = argument
        self.added_in = added_in
        self.server_release = server_release


class UnsuccessfulResultError(DevClientError):
    """The server answered, but said the operation did not happen (`success=false`, still asleep after a
    full wake_up, a check that failed). The command line reports such answers under this name; the client
    returns them as results (a barrier raises BarrierTimeoutError instead)."""


class CheckpointFailedError(UnsuccessfulResultError):
    """The server's process-checkpoint cycle failed (state `failed`); `status` is its last answer."""

    def __init__(self, message: str, *, status: Any) -> None:
        super().__init__(message)
        self.status = status


class ClientClosedError(DevClientError, RuntimeError):
    """A call on a client (or fleet) after `close()`: make a new one, or use it inside its `with` block."""


def add_note(error: BaseException, note: str) -> None:
    """PEP 678's ``add_note`` (Python 3.11+), also on 3.10: what else failed while handling ``error``."""
    if sys.version_info >= (3, 11):
        error.add_note(note)
    else:
        setattr(error, "__notes__", [*getattr(error, "__notes__", []), note])  # noqa: B010 (3.10 has no such attribute)


def clip(text: str, limit: int = ERROR_TEXT_LIMIT) -> str:
    """`text` cut to `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


class APIConnectionError(DevClientError):
    """The server could not be reached, or the connection broke before an answer came.

    `.sent` is False when the request provably never left (no connection could be made).
    """

    def __init__(self, message: str, *, method: str, url: str, path: str = "", sent: bool = True) -> None:
        super().__init__(message)
        self.http_method = method
        self.url = url
        self.path = path
        self.sent = sent


class APITimeoutError(APIConnectionError):
    """No answer within the timeout. Neither frontend times out a hung engine call: this is what ends it."""


class TLSError(APIConnectionError):
    """The TLS handshake failed over a certificate: the server's is not trusted, out of date or for another
    host, or the server wants (or refused) this client's, or it does not speak TLS. The message names the
    host, the reason and the setting that fixes it (`verify=`, `cert=`, `SSL_CERT_FILE`; the CLI's
    `--cacert`, `--cert`, `--insecure`). Never retried, and it ends a wait at once: another try would meet
    the same certificate."""


# What to do about a body over a server's limit (vllm-rs reads at most 32 MiB).
BODY_HINT = (
    "send weights as IPC handles (update_weights with CUDA IPC: only handles travel), split the update into "
    "chunks under the limit (several update_weights calls between start_weight_update and "
    "finish_weight_update), or serve through the Python frontend (no limit found up to 100 MiB)"
)


class BodyCutOffError(APIConnectionError):
    """The server closed the connection while the request body was being sent: likely a body over its
    limit (vllm-rs reads at most 32 MiB and cuts larger bodies off). The message says what to do."""


class BodyTooLargeError(DevClientError):
    """A request body over the body limit of the server's frontend and release, refused before it was
    sent: `.size` and `.limit` (bytes), `.frontend`, `.release`, `.path`. The message says what to do."""

    def __init__(
        self, message: str, *, size: int, limit: int, frontend: str, release: str | None, path: str
    ) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit
        self.frontend = frontend
        self.release = release
        self.path = path


class ResponseValidationError(DevClientError):
    """A 2xx answer whose body does not have the shape this route answers with."""

    def __init__(self, message: str, *, method: str, path: str, status_code: int, body: str) -> None:
        super().__init__(f"{method} {path}: {message} (status {status_code}, body {clip(body, 200)!r})")
        self.http_method = method
        self.path = path
        self.status_code = status_code
        self.body = body


class APIStatusError(DevClientError):
    """The server answered with a non-2xx status."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        method: str,
        path: str,
        body: str,
        frontend: Frontend,
        param: str | None = None,
    ) -> None:
        super().__init__(clip(message))
        self.message = message
        self.status_code = status_code
        self.http_method = method
        self.path = path
        self.body = body
        self.frontend = frontend
        self.param = param

    def __str__(self) -> str:
        return (
            f"{self.http_method} {self.path} -> {self.status_code} ({self.frontend} frontend): "
            f"{clip(self.message)}"
        )


class BadRequestError(APIStatusError):
    """400 or 422: a parameter was rejected; `.param` names it when the server does."""


class BodyLimitExceededError(BadRequestError):
    """400: the server refused the request body as over its limit (vllm-rs: "Failed to buffer the request
    body: length limit exceeded"); the message says what to do."""


class AuthenticationError(APIStatusError):
    """401: the API key is missing or wrong (only /v1 paths are guarded by --api-key)."""


class PermissionDeniedError(APIStatusError):
    """403."""


class NotFoundError(APIStatusError):
    """404 on a route that is not a dev route.

    `.served_from` is, for a route that came in a later vLLM release, the first release that serves it on
    this frontend (from the recorded support matrix, `vllm_devclient.support`; `str()` names it), else
    None."""

    served_from: str | None = None
    # The words naming it, shown by str() but kept out of `.message` (which stays the server's account).
    served_words: str = ""

    def __str__(self) -> str:
        return super().__str__() + self.served_words


class DevModeDisabledError(NotFoundError):
    """404 on a dev route, and the server serves none: it was started without VLLM_SERVER_DEV_MODE=1.
    (When the client could not ask, the message names the other cause too: a release without the route.)"""


class RouteNotServedError(NotFoundError):
    """404 on a dev route while the server serves other dev routes: dev mode is on, and this release of
    vLLM (or this frontend) does not have the route; `.served_from` names the first release that serves it
    on this frontend."""


class MethodNotAllowedError(APIStatusError):
    """405: the route exists but not for this HTTP method (older or newer server?)."""


class ConflictError(APIStatusError):
    """409."""


class InternalServerError(APIStatusError):
    """5xx that is not an engine call failure."""


class EngineCallError(InternalServerError):
    """500 because an engine utility method raised.

    `.engine_method` is the engine method (e.g. "reset_prefix_cache"), `.engine_message` the engine's own
    message; the HTTP method is in `.http_method`.
    """

    def __init__(self, message: str, *, engine_method: str, engine_message: str, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.engine_method = engine_method
        self.engine_message = engine_message


class ServiceUnavailableError(InternalServerError):
    """503 (for example a completion while the server is paused)."""


class EngineDeadError(ServiceUnavailableError):
    """503 from /health: the engine core reported itself dead; restart the server."""


class WaitTimeoutError(DevClientError, TimeoutError):
    """A wait_until_* deadline passed before the server reached the wanted state."""

    def __init__(self, message: str, *, waited_s: float, last: object = None) -> None:
        super().__init__(message)
        self.waited_s = waited_s
        self.last = last


class BarrierTimeoutError(WaitTimeoutError):
    """reset_prefix_cache never answered success before the deadline.

    `attempts`: the tries; `reached`: those the server got (an answer came, or the request left);
    `refused`: resets the engine answered success=false (blocks still held); `engine_steps`, `last`.
    """

    def __init__(
        self,
        message: str,
        *,
        waited_s: float,
        attempts: int,
        engine_steps: int,
        last: object,
        reached: int,
        refused: int,
    ) -> None:
        super().__init__(message, waited_s=waited_s, last=last)
        self.attempts = attempts
        self.engine_steps = engine_steps
        self.reached = reached
        self.refused = refused


class WaitUnreachableError(WaitTimeoutError):
    """A wait ended before its deadline: no connection could be made to the server, more tries in a row than
    the client's `max_retries` (refused, or no such host). Nothing listens at the URL, and waiting cannot
    mend that; `wait_until_ready` alone keeps waiting for a server that is starting."""


class BarrierUnreachableError(BarrierTimeoutError, WaitUnreachableError):
    """No try of the barrier reached the server (`reached == 0`): it is unreachable. Raised at once when
    nothing listens there (as `WaitUnreachableError`), else when the deadline passed."""


class BarrierUnsupportedError(DevClientError):
    """The server answers /reset_prefix_cache with a bare 200: it cannot say whether the reset happened."""


class WorldSizeMismatchError(DevClientError):
    """An NCCL init over a fleet cannot be planned: a server did not give its world size (`unanswered`:
    URL -> error), or the servers' world sizes (`world_sizes`) and the trainer's ranks do not make the
    trainer's `planned` world size. Nothing was initialised."""

    def __init__(
        self,
        message: str,
        *,
        planned: int | None,
        world_sizes: dict[str, int],
        unanswered: dict[str, DevClientError],
    ) -> None:
        super().__init__(message)
        self.planned = planned
        self.world_sizes = world_sizes
        self.unanswered = unanswered


class ServerUnhealthyError(DevClientError):
    """A watchdog saw `url` fail its health check `failures` times in a row; `last` is the last error."""

    def __init__(self, url: str, *, failures: int, last: DevClientError) -> None:
        super().__init__(
            f"{url} failed {failures} health checks in a row; the last: {type(last).__name__}: {last}"
        )
        self.url = url
        self.failures = failures
        self.last = last


# Both frontends embed the engine's own message: Python "Call to m method failed: msg",
# Rust "failed to call /route: utility call `m` failed (call_id=N): Call to m method failed: msg".
_ENGINE_FAILURE = re.compile(r"Call to (?P<method>[\w.]+) method failed: (?P<msg>.*)", re.DOTALL)
_RUST_UTILITY = re.compile(r"utility call `(?P<method>[\w.]+)` failed[^:]*: (?P<msg>.*)", re.DOTALL)
_RUST_QUERY_PARAM = re.compile(r"query string: (?P<param>\w+):")
_LOCATION_PREFIX = re.compile(r"^(query|body|path|header)\.")


# Texts only the Rust frontend (axum, vllm-rs) writes into its error bodies.
_RUST_SIGNS = re.compile(r"Failed to deserialize|failed to call |utility call `|engine-core error")


def detect_frontend(response: ResponseLike, known: Frontend = "unknown") -> Frontend:
    """Which frontend answered, from evidence only: uvicorn names itself in `server`; a body in the Rust
    frontend's own words; else what this client already knows (from /version), else "unknown"."""
    server = response.headers.get("server", "")
    if "uvicorn" in server.lower():
        return "python"
    if server:
        return "unknown"
    if _RUST_SIGNS.search(response.content[:4096].decode("utf-8", "replace")):
        return "rust"
    return known


def _error_fields(body: str) -> tuple[str | None, str | None, str | None]:
    """(message, error type, param) from any of the error bodies the two frontends send."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return (body.strip() or None), None, None
    if not isinstance(data, dict):
        return body.strip() or None, None, None
    err = data.get("error")
    if isinstance(err, dict):
        param = err.get("param")
        return _text(err.get("message")), _text(err.get("type")), _text(param)
    if isinstance(err, str):
        return err, None, None
    detail = data.get("detail")
    if isinstance(detail, str):
        return detail, None, None
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        # FastAPI validation errors: [{"loc": ["query", "level"], "msg": ...}]
        first = detail[0]
        loc = first.get("loc")
        param = ".".join(str(p) for p in loc) if isinstance(loc, list) else None
        return _text(first.get("msg")), None, param
    if "message" in data:
        return _text(data.get("message")), _text(data.get("type")), _text(data.get("param"))
    return None, None, None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _served_from(method: str, path: str, frontend: Frontend) -> tuple[str | None, str]:
    """The first release serving a route that came after the oldest recorded one, on this frontend (both
    when the frontend is unknown), and the message's words for it ("" when none)."""
    from .support import added_in

    frontends = ("python", "rust") if frontend == "unknown" else (frontend,)
    found = {fe: added_in(method, path, fe) for fe in frontends}
    named = {fe: release for fe, release in found.items() if release is not None}
    if not named:
        return None, ""
    words = ", ".join(f"the {fe} frontend from vLLM {release}" for fe, release in named.items())
    # With the frontend unknown, a release is named only when every frontend that lacked the route agrees
    # (a frontend that always served it cannot have answered this 404).
    releases = set(named.values())
    first = named.get(frontend) or (releases.pop() if len(releases) == 1 else None)
    return first, f" (vLLM serves {method} {path} on {words} on)"


@dataclass(frozen=True)
class _ErrorAnswer:
    """A non-2xx answer as the builders of its error read it: the route called, the message the body
    gave, and the fields every error of it carries (`kw`)."""

    response: ResponseLike
    method: str
    path: str
    dev_route: bool
    dev_routes_served: bool | None
    message: str | None
    kw: dict[str, Any]


def _bad_request(a: _ErrorAnswer) -> APIStatusError:
    param, message = a.kw["param"], a.message
    if param is None and message:
        m = _RUST_QUERY_PARAM.search(message)
        param = m.group("param") if m else None
    # Python names it "query.level", Rust "level": report the bare name on both.
    a.kw["param"] = _LOCATION_PREFIX.sub("", param) if param else None
    if a.kw["status_code"] == 400 and message and "length limit exceeded" in message:
        return BodyLimitExceededError(
            f"{message}: the request body is over the server's limit; {BODY_HINT}", **a.kw
        )
    return BadRequestError(message or "bad request", **a.kw)


def _not_found(a: _ErrorAnswer) -> APIStatusError:
    path = a.path
    if a.dev_route and a.dev_routes_served:
        error: NotFoundError = RouteNotServedError(
            f"the route {path} is missing from this server: it runs in dev mode (it serves other dev "
            "routes) but its vLLM release has no such route; upgrade vLLM or do without the route",
            **a.kw,
        )
    elif a.dev_route:
        unsure = " (if it already runs in dev mode, this release has no such route)"
        error = DevModeDisabledError(
            f"{path} is a development route and the server does not serve it: start the server with "
            f"VLLM_SERVER_DEV_MODE=1{unsure if a.dev_routes_served is None else ''}",
            **a.kw,
        )
    else:
        error = NotFoundError(a.message or "not found", **a.kw)
    error.served_from, error.served_words = _served_from(a.method, path, a.kw["frontend"])
    return error


def _not_allowed(a: _ErrorAnswer) -> APIStatusError:
    allow = a.response.headers.get("allow")
    hint = f"; allowed: {allow}" if allow else ""
    return MethodNotAllowedError(f"{a.method} is not allowed on {a.path}{hint}", **a.kw)


def _server_error(a: _ErrorAnswer) -> APIStatusError:
    status, message = a.kw["status_code"], a.message
    if status == 503 and a.path == "/health":
        return EngineDeadError("the engine is dead (/health answered 503): restart the server", **a.kw)
    failed = (_ENGINE_FAILURE.search(message) or _RUST_UTILITY.search(message)) if message else None
    if message and failed:
        return EngineCallError(
            message, engine_method=failed.group("method"), engine_message=failed.group("msg").strip(), **a.kw
        )
    if status == 503:
        return ServiceUnavailableError(message or "service unavailable", **a.kw)
    return InternalServerError(message or f"server error {status}", **a.kw)


def _unexpected(a: _ErrorAnswer) -> APIStatusError:
    return APIStatusError(a.message or f"unexpected status {a.kw['status_code']}", **a.kw)


def _plain(kind: type[APIStatusError], fallback: str) -> Callable[[_ErrorAnswer], APIStatusError]:
    """The error of a status that needs nothing but the server's message (else `fallback`)."""
    return lambda a: kind(a.message or fallback, **a.kw)


# The error of each status the SDK types; any other 5xx is `_server_error`'s, the rest `_unexpected`'s.
_BY_STATUS: dict[int, Callable[[_ErrorAnswer], APIStatusError]] = {
    400: _bad_request,
    422: _bad_request,
    401: _plain(AuthenticationError, "unauthorized: pass api_key= or set VLLM_API_KEY"),
    403: _plain(PermissionDeniedError, "forbidden"),
    404: _not_found,
    405: _not_allowed,
    409: _plain(ConflictError, "conflict"),
}


def error_from_response(
    response: ResponseLike,
    *,
    method: str,
    path: str,
    dev_route: bool,
    secrets: Secrets = NO_SECRETS,
    frontend: Frontend = "unknown",
    dev_routes_served: bool | None = None,
) -> APIStatusError:
    """The typed error for a non-2xx answer. Never fails on odd bodies (HTML, plain text, empty, huge);
    whatever the server echoed of a secret is masked in the message and in `.body`.

    `dev_routes_served` tells a dev route's 404 apart (the clients ask the server, see
    `operations.dev_routes_served`): True, the release lacks the route; False, dev mode is off; None,
    unknown (the message then names both causes)."""
    status = response.status_code
    body = secrets.redact(response.text)
    frontend = detect_frontend(response, frontend)
    message, _type, param = _error_fields(body)
    kw: dict[str, Any] = {
        "status_code": status,
        "method": method,
        "path": path,
        "body": body,
        "frontend": frontend,
        "param": param,
    }
    build = _BY_STATUS.get(status, _server_error if status >= 500 else _unexpected)
    return build(_ErrorAnswer(response, method, path, dev_route, dev_routes_served, message, kw))
