# Generated from vllm_devclient/_async/client.py by scripts/unasync.py; do not edit.
"""DevClient: every route, wait, flow and option, on one class.

The class is assembled from one module per concern: `core` (configuration, lifecycle, running operations),
`routes` (one method per route), `waits` (completions, stepping, barrier, waits), `flows` (context managers).
Behaviour lives in `operations/` and `endpoints.py`. `_sync/` is generated from `_async/` (`make
generate`), but for the route methods, derived from the async ones (`_sync/routes.py`): edit `_async/`.
"""

from __future__ import annotations

from .._base_client import name_methods_after
from .flows import WeightUpdate, _SyncFlows
from .raw_responses import RawResponses

__all__ = ["DevClient", "WeightUpdate"]


@name_methods_after  # Python's own TypeErrors then say DevClient.health(), not a private base's name
class DevClient(_SyncFlows):
    """The client for a vLLM server's development-mode surface (either frontend).

    Args:
        base_url: the server, e.g. "http://127.0.0.1:8000" (a trailing "/v1" is accepted and dropped).
        api_key: sent as a bearer token; default $VLLM_API_KEY (surrounding whitespace dropped).
        timeout: HTTP timeout of one try of every call, as a whole: seconds, a Timeout (vllm_devclient's,
            httpx's or httpx2's), or None (no bound); default $VLLM_DEVCLIENT_TIMEOUT, else 30 s with no bound
            on the answer of long routes (weight transfer, collective_rpc, sleep level 2, completions). A
            timeout you set bounds them too.
        total_timeout: seconds for every call as a whole, its retries and their pauses included (a wait or
            the barrier: its deadline, when that is shorter); None (the default): no such bound, tries and
            max_retries alone bound a call. Default $VLLM_DEVCLIENT_TOTAL_TIMEOUT. Per call: total_timeout=.
        max_retries: retries of idempotent calls after connection failures and 502/503/504.
        http_client: an httpx.Client or an httpx2.Client to send with (your own proxies, TLS or
            mocks: respx, MockTransport); raw responses are then that package's Response objects.
        model: the served model name for completions and stepping (default: the first on /v1/models).
        default_headers: headers sent on every call.
        transport: "auto" (the SDK's h11 pool; for async clients aiohttp's when it is installed; an httpx
            client when a proxy applies), "h11", "aiohttp", "httpx" or "httpx2"; default
            $VLLM_DEVCLIENT_TRANSPORT or "auto". One whose package is missing: MissingExtraError naming the
            extra to install.
        verify: how https servers are checked: True (the CA bundle in $SSL_CERT_FILE or $SSL_CERT_DIR, else
            certifi's), the path of a CA bundle file or folder, an ssl.SSLContext, or False (no check; logs
            a warning).
        cert: a client certificate for servers that ask for one (mTLS), as httpx takes it: a PEM file with
            the certificate and its key, (certificate, key), or (certificate, key, password).

    Sharing: the blocking client may be shared by many threads (its connection pool is locked); the asyncio
    one is used from one event loop at a time (from another loop it opens new connections).
    Clients pickle by their configuration (for Ray actors and worker processes).
    """

    @property
    def with_raw_response(self) -> RawResponses:
        """The same route methods, answering `RawResponse(parsed=..., http_response=...)`: the response
        object of the stack that answered (see `HTTPResponse`)."""
        return RawResponses(self)
