"""The plumbing of a client: configuration, lifecycle, running operations, `request()`.

Behaviour lives in `operations/` and `endpoints.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from typing_extensions import Self, Unpack

from .. import arguments as check
from .. import body_limits, endpoints
from .. import operations as ops
from .. import release_gate as gate
from .._base_client import (
    NOT_GIVEN,
    RAW_RESPONSE,
    BaseClient,
    ClientConfig,
    NotGiven,
    RawResponse,
    RequestOptions,
    TimeoutArg,
    check_own_tls,
    http_response,
)
from ..constants import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_URL,
)
from ..endpoints import Endpoint
from ..errors import DevClientError, InvalidParameterError
from ..operations import Operation, Sleep, Transmit
from ..responses import HTTPResponse
from ..routes import DEV_PATHS
from ..routes import endpoint as route
from ..transports import (
    AsyncTransport,
    CertArg,
    TransportError,
    TransportKind,
    VerifyArg,
    WireRequest,
    make_async_transport,
)
from ._support import sleep

if TYPE_CHECKING:
    import httpx
    import httpx2

__all__ = ["_AsyncCore"]

T = TypeVar("T")


class _AsyncCore(BaseClient):
    """Configuration, lifecycle and the effect runner; the route methods live in the classes above it."""

    _transport: AsyncTransport

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: TimeoutArg | NotGiven = NOT_GIVEN,
        total_timeout: float | NotGiven | None = NOT_GIVEN,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: httpx.AsyncClient | httpx2.AsyncClient | None = None,
        model: str | None = None,
        default_headers: Mapping[str, str] | None = None,
        transport: TransportKind | None = None,
        verify: VerifyArg = True,
        cert: CertArg | None = None,
    ) -> None:
        config = ClientConfig.of(
            base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            model=model,
            default_headers=default_headers,
            transport=transport,
            verify=verify,
            cert=cert,
            total_timeout=total_timeout,
        )
        check_own_tls(http_client, verify, cert)
        self._setup(config, _transport_of(config, http_client), owns=True)
        self._custom_http = http_client is not None

    def _setup(self, config: ClientConfig, transport: AsyncTransport, *, owns: bool) -> None:
        BaseClient.__init__(self, config)
        self._transport = transport
        self._owns_transport = owns
        self._custom_http = False
        if owns and self._origin.scheme == "https":
            config.tls.warn_if_unchecked(self.base_url)

    @classmethod
    def _from_config(cls, config: ClientConfig, transport: AsyncTransport | None = None) -> Self:
        client = cls.__new__(cls)
        owns = transport is None
        client._setup(config, transport or _transport_of(config, None), owns=owns)
        return client

    def __reduce__(self) -> tuple[Any, ...]:
        if self._custom_http:
            raise TypeError(
                f"a {type(self).__name__} made with http_client= cannot be pickled (an httpx or httpx2 "
                "client does not travel); pickle one made from configuration only"
            )
        self._config.tls.refuse_pickling(type(self).__name__)
        return (type(self)._from_config, (self._config,))

    def with_options(
        self,
        *,
        timeout: TimeoutArg | NotGiven = NOT_GIVEN,
        total_timeout: float | NotGiven | None = NOT_GIVEN,
        max_retries: int | NotGiven = NOT_GIVEN,
        api_key: str | NotGiven | None = NOT_GIVEN,
        default_headers: Mapping[str, str] | NotGiven = NOT_GIVEN,
    ) -> Self:
        """A client sharing this one's connection pool, with other defaults.

        Args:
            timeout: default HTTP timeout of one try.
            total_timeout: default bound of a call as a whole, retries included (None: none).
            max_retries: retries of idempotent calls.
            api_key: another key (None: none).
            default_headers: replaces the extra headers sent on every call.
        """
        changes: dict[str, Any] = {}
        if not isinstance(timeout, NotGiven):
            changes.update(timeout=check.timeout(timeout), timeout_arg=timeout, timeout_given=True)
        if not isinstance(total_timeout, NotGiven):
            changes["total_timeout"] = check.optional_seconds(total_timeout, "total_timeout")
        if not isinstance(max_retries, NotGiven):
            changes["max_retries"] = check.non_negative_int(max_retries, "max_retries")
        if not isinstance(api_key, NotGiven):
            changes["api_key"] = check.api_key(api_key)
        if not isinstance(default_headers, NotGiven):
            changes["default_headers"] = check.header_map(default_headers, "default_headers")
        self._check_open()
        client = type(self)._from_config(self._replaced(**changes), self._transport)
        client._models = self._models
        return client

    async def close(self) -> None:
        """Close the connections this client opened (not an http_client you passed in). Idempotent."""
        if not self._closed:
            self._closed = True
            if self._owns_transport:
                await self._transport.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- running operations ------------------------------------------------------------------------------

    async def _run(self, op: Operation[T], options: Mapping[str, Any]) -> T:
        self._check_open()
        sent: tuple[WireRequest, Any] | None = None
        try:
            effect = op.send(None)
            while True:
                if isinstance(effect, Sleep):
                    await sleep(effect.seconds)
                    effect = op.send(None)
                    continue
                request = self._wire_request(effect, options)
                if request.body is not None:
                    await self._check_body(len(request.body), effect)
                try:
                    response = await self._transport.send(
                        request, connect_timeout=effect.connect_timeout, deadline=effect.deadline
                    )
                except TransportError as exc:
                    effect = op.throw(exc)
                    continue
                sent = (request, response)
                effect = op.send(response)
        except StopIteration as stop:
            result = cast(T, stop.value)
        self._learn(result)
        if options.get(RAW_RESPONSE):
            if sent is None:
                raise InvalidParameterError("with_raw_response needs a call that sends a request")
            return cast(T, RawResponse(result, http_response(sent[1], sent[0])))
        return result

    async def _check_body(self, size: int, effect: Transmit) -> None:
        """A body over the known limit of the server's frontend and release is refused before it is sent;
        the first body large enough to matter asks /version once when the client does not know them yet
        (`vllm_devclient.body_limits` decides)."""
        above = body_limits.checked_above()
        if above is None or size <= above:
            return
        if self._release.version is None or self._frontend == "unknown":
            lookup = ops.call(
                route("version"), timeouts=self._config.timeout, retry=self._retry, ctx=self._context()
            )
            try:
                await self._run(lookup, {})
            except DevClientError:
                return  # unknown: sent as it is; the server's own refusal still comes back typed
        ep = effect.endpoint
        body_limits.check_body(
            size, frontend=self._frontend, release=self._release.version, method=ep.method, path=ep.path
        )

    async def _send(self, ep: Endpoint[T], options: Mapping[str, Any]) -> T:
        opts = self._options(options)
        timeouts = self._timeouts(opts, long_running=ep.long_running)
        retry = self._retry_for(opts)
        op = ops.call(ep, timeouts=timeouts, retry=retry, ctx=self._context())
        if ep.requires is not None:
            op = gate.requiring(
                ep, op, release=self._release, timeouts=timeouts, retry=retry, ctx=self._context()
            )
        return await self._run(op, opts)

    # ---- routes ------------------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        json: Any = None,
        **options: Unpack[RequestOptions],
    ) -> HTTPResponse:
        """Any request, with this client's auth, timeouts and typed errors (a non-2xx raises).

        The answer is the response object of the stack that sent it (see `HTTPResponse`).

        Args:
            method: the HTTP method.
            path: the path, starting with "/" (no query: pass params).
            params: query parameters; booleans go out as true/false.
            json: a JSON body.
        """
        body = json if json is not None else endpoints.NO_BODY
        opts = {**self._options(options), RAW_RESPONSE: True}
        ep = endpoints.raw(method, path, params, body, dev_paths=DEV_PATHS)
        timeouts = self._timeouts(opts, long_running=False)
        op = ops.call(ep, timeouts=timeouts, retry=self._retry_for(opts), ctx=self._context())
        raw = cast(RawResponse[Any], await self._run(op, opts))
        return raw.http_response


def _transport_of(
    config: ClientConfig, http_client: httpx.AsyncClient | httpx2.AsyncClient | None
) -> AsyncTransport:
    return make_async_transport(config.transport, config.origin, http_client, config.tls)
