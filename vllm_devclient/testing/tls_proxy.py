"""https in front of a plain-http server, as an ingress with a private CA does: for TLS tests on loopback.

    from vllm_devclient.testing.tls_proxy import TLSProxy

    with MisbehavingServer() as backend, TLSProxy(backend.base_url, certs.server, certs.server_key) as proxy:
        DevClient(proxy.base_url, verify=certs.ca).health()

`TLSProxy` listens on 127.0.0.1 (a free port), completes the TLS handshake with the certificate it is given,
and pipes the bytes of each connection to the backend and back, one backend connection per client
connection (so keep-alive and closes reach the client as the backend made them). With `client_ca` it asks
for a client certificate and requires one signed by that CA (mTLS); `client_names` lists the common names
of the client certificates it accepted. Like uvicorn (asyncio's TLS), it refuses a client certificate by
closing the connection without an alert. Runs an event loop on a thread of its own; `close()` (or leaving
the `with` block) stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import threading
import urllib.parse

__all__ = ["TLSProxy"]

_CHUNK = 65536


class TLSProxy:
    def __init__(
        self,
        backend_url: str,
        certfile: str | os.PathLike[str],
        keyfile: str | os.PathLike[str],
        *,
        client_ca: str | os.PathLike[str] | None = None,
    ) -> None:
        parts = urllib.parse.urlsplit(backend_url)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"backend_url must be http://host:port, got {backend_url!r}")
        self._backend = (parts.hostname, parts.port)
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(certfile, keyfile)
        if client_ca is not None:
            self._context.load_verify_locations(cafile=os.fspath(client_ca))
            self._context.verify_mode = ssl.CERT_REQUIRED
        self.client_names: list[str] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> TLSProxy:
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self._context)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="tls-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the TLS proxy did not start")
        return self

    def close(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return

        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._loop.stop()

        asyncio.run_coroutine_threadsafe(stop(), self._loop)
        thread.join(10)
        self._loop.close()

    def __enter__(self) -> TLSProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        peer = client_w.get_extra_info("peercert")
        if peer:
            self.client_names += [v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"]
        try:
            backend_r, backend_w = await asyncio.open_connection(*self._backend)
        except OSError:
            client_w.close()
            return
        try:
            await asyncio.gather(_pipe(client_r, backend_w), _pipe(backend_r, client_w))
        except asyncio.CancelledError:
            # Stopping: end quietly (asyncio reports a handler task that ends cancelled as an error).
            backend_w.close()
            client_w.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
    except (OSError, ssl.SSLError):
        pass
    finally:
        with contextlib.suppress(OSError, ssl.SSLError, RuntimeError):
            writer.close()
