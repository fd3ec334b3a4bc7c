"""The ZMQ side of the scripted engine: registering with a frontend, the background thread and its loop.

:class:`EngineTransport` connects (through the headless handshake, or straight to a frontend's listeners),
sends the ready response, then polls the frontend's messages from one background thread and hands each to
:meth:`EngineTransport._handle`. Other threads reach that thread through a command queue and a wake-up pipe;
answers due later wait in a heap until their time. What a message means is the subclass's business
(``ScriptedEngine``).
"""

from __future__ import annotations

import heapq
import itertools
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import msgspec
import zmq

from .engine_protocol import ENGINE_CORE_DEAD

__all__ = ["EngineStartupError", "EngineTransport"]

# What a connect step yields: input addresses, output addresses, the handshake socket (if any).
_Addresses: TypeAlias = "tuple[list[str], list[str], zmq.Socket[bytes] | None]"


class EngineStartupError(RuntimeError):
    """The scripted engine could not register with its frontend."""


@dataclass(order=True)
class _Pending:
    due: float
    seq: int
    client_index: int = field(compare=False)
    payload: bytes = field(compare=False)


class EngineTransport:
    """A fake engine core's connection to one frontend, run from a background thread (see the module)."""

    def __init__(self, *, rank: int, ready: dict[str, Any]) -> None:
        self.rank = rank
        self._ready = ready
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder()
        self._lock = threading.Lock()
        # Messages the engine could not handle (it keeps running); empty when all is well.
        self.errors: list[str] = []
        self._dead = False
        self._commands: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        # Closes the wake-up pipe even for an engine that is dropped without close().
        self._close_fds = weakref.finalize(self, _close_fds, self._wake_r, self._wake_w)
        self._stop = threading.Event()
        self._registered = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._outputs: list[zmq.Socket[bytes]] = []
        self._pending: list[_Pending] = []
        self._seq = itertools.count()
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    def start_handshake(self, address: str) -> None:
        """Register through the headless handshake at ``address`` (``tcp://HOST:RPC_PORT``)."""
        self._start(lambda ctx: self._handshake(ctx, address))

    def start_direct(self, input_address: str, output_address: str) -> None:
        """Connect straight to a frontend's input (ROUTER) and output (PULL) listeners."""
        self._start(lambda ctx: ([input_address], [output_address], None))

    def wait_registered(self, deadline: float = 60.0) -> None:
        """Block until the frontend has the ready response (within `deadline` seconds); raise if it failed."""
        end = time.monotonic() + deadline
        while not self._registered.wait(0.05):
            if self._error is not None:
                raise EngineStartupError(f"scripted engine failed to register: {self._error}")
            if self._thread is None or not self._thread.is_alive():
                raise EngineStartupError("scripted engine thread is not running")
            if time.monotonic() > end:
                raise EngineStartupError(f"scripted engine not registered after {deadline:.0f} s")
        if self._error is not None:
            raise EngineStartupError(f"scripted engine failed: {self._error}")

    @property
    def registered(self) -> bool:
        """Whether the ready response went out to the frontend."""
        return self._registered.is_set()

    @property
    def running(self) -> bool:
        """Whether the background thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def close(self, grace: float = 5.0) -> None:
        """Stop the background thread (waiting `grace` seconds for it) and close every socket. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(grace)
        if self._thread is None or not self._thread.is_alive():
            self._close_fds()

    # ------------------------------------------------------------------ what a subclass builds on

    def _handle(self, frames: list[bytes]) -> None:
        """One message from the frontend, on the background thread."""
        raise NotImplementedError

    def _command(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the background thread (soon)."""
        self._commands.put(fn)
        self._wake()

    def _send_at(self, due: float, client_index: int, payload: bytes) -> None:
        """Send `payload` at `due` (``time.monotonic()``), from the background thread."""
        heapq.heappush(self._pending, _Pending(due, next(self._seq), client_index, payload))

    def _send(self, client_index: int, payload: bytes) -> None:
        if self._dead or not self._outputs:
            return
        out = self._outputs[client_index if client_index < len(self._outputs) else 0]
        out.send(payload)

    def _send_dead(self) -> None:
        for out in self._outputs:
            out.send(ENGINE_CORE_DEAD)
        self._dead = True

    # ------------------------------------------------------------------ thread side

    def _start(self, connect: Callable[[zmq.Context[zmq.Socket[bytes]]], _Addresses]) -> None:
        if self._thread is not None:
            raise RuntimeError("ScriptedEngine was already started; create a new one")
        if self._closed:
            raise RuntimeError("ScriptedEngine is closed")
        self._thread = threading.Thread(target=self._run, args=(connect,), name="ScriptedEngine", daemon=True)
        self._thread.start()

    def _wake(self) -> None:
        if not self._close_fds.alive:
            return  # the fd numbers may belong to someone else by now
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass  # pipe full (loop already woken) or closed

    def _handshake(self, ctx: zmq.Context[zmq.Socket[bytes]], address: str) -> _Addresses:
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.IDENTITY, self._identity)
        sock.setsockopt(zmq.LINGER, 5000)
        sock.connect(address)
        sock.send(self._encoder.encode({"status": "HELLO", "local": False, "headless": True}))
        # The frontend may bind its handshake socket seconds later; ZMQ reconnects meanwhile.
        while not sock.poll(100):
            if self._stop.is_set():
                sock.close(0)
                raise _Stopped
        init = self._decoder.decode(sock.recv())
        addresses = init["addresses"]
        if addresses.get("coordinator_input") is not None:
            sock.close(0)
            raise EngineStartupError(
                "the frontend expects a data-parallel coordinator (data-parallel size > 1); "
                "ScriptedEngine serves data-parallel size 1 only"
            )
        return list(addresses["inputs"]), list(addresses["outputs"]), sock

    @property
    def _identity(self) -> bytes:
        return self.rank.to_bytes(2, "little")

    def _run(self, connect: Callable[[zmq.Context[zmq.Socket[bytes]]], _Addresses]) -> None:
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        inputs: list[zmq.Socket[bytes]] = []
        handshake: zmq.Socket[bytes] | None = None
        try:
            input_addrs, output_addrs, handshake = connect(ctx)
            for addr in output_addrs:
                out = ctx.socket(zmq.PUSH)
                out.setsockopt(zmq.LINGER, 0)
                out.connect(addr)
                self._outputs.append(out)
            ready = self._encoder.encode(self._ready)
            for addr in input_addrs:
                sock = ctx.socket(zmq.DEALER)
                sock.setsockopt(zmq.IDENTITY, self._identity)
                sock.setsockopt(zmq.LINGER, 0)
                sock.connect(addr)
                sock.send(ready)
                inputs.append(sock)
            if handshake is not None:
                handshake.send(self._encoder.encode({"status": "READY", "local": False, "headless": True}))
            self._registered.set()
            self._loop(inputs)
        except _Stopped:
            pass
        except BaseException as exc:  # surfaced by wait_registered
            self._error = exc
        finally:
            if handshake is not None:
                handshake.close(0)
            for sock in inputs + self._outputs:
                sock.close(0)
            ctx.term()

    def _loop(self, inputs: list[zmq.Socket[bytes]]) -> None:
        poller = zmq.Poller()
        for sock in inputs:
            poller.register(sock, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        while not self._stop.is_set():
            timeout_ms: int | None = None
            if self._pending:
                timeout_ms = max(0, int((self._pending[0].due - time.monotonic()) * 1000) + 1)
            for sock, _ in poller.poll(timeout_ms):
                if sock == self._wake_r:
                    try:
                        os.read(self._wake_r, 4096)
                    except BlockingIOError:
                        pass
                    continue
                assert isinstance(sock, zmq.Socket)
                while True:
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    # What the caller asked before this message was sent comes first (a reset() releases
                    # the calls hung before it, never the one that follows it).
                    self._run_commands()
                    try:
                        self._handle(frames)
                    except Exception as exc:  # one bad message must not kill the engine
                        with self._lock:
                            self.errors.append(f"{type(exc).__name__}: {exc} (frames: {frames!r:.200})")
            self._run_commands()
            now = time.monotonic()
            while self._pending and self._pending[0].due <= now:
                item = heapq.heappop(self._pending)
                self._send(item.client_index, item.payload)

    def _run_commands(self) -> None:
        while True:
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                return
            cmd()


def _close_fds(*fds: int) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class _Stopped(Exception):
    """The engine was closed before it registered."""
