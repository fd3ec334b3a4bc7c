"""WeightSync: vLLM's `VLLMWeightSyncClient` protocol over a client or a fleet, for vLLM's trainer engines.

vLLM 0.33's trainer-side engines (`vllm.distributed.weight_transfer`: IPC, NCCL, ...) drive the weight-sync
handshake through four synchronous methods that return None and raise on failure. The clients keep their
typed answers (`MessageResult`, `FleetResult`); this view gives the engines the shape they check for:

    engine = IPCTrainerWeightTransferEngine.trainer_init(info, client=WeightSync(DevClient(url)), source=src)

Over a fleet every step is all targets or none: a step that failed on some targets raises `FleetError`
after undoing it where it went through (an init is shut down again, a start finished without a version),
and a failed batch finishes the open update everywhere without a version (vLLM's engines never finish an
update whose send raised; on vLLM 0.26 with IPC the next request then killed the engine, see
`AsyncDevClient.weight_update`). An NCCL init over a fleet gives each server its own rank offset
(`rank_plan`), after checking the servers' world sizes against the trainer's.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from . import arguments as check
from .client import NOT_GIVEN, AsyncDevClient, DevClient, NotGiven, TimeoutArg
from .errors import DevClientError, InvalidParameterError, add_note
from .fleet import AsyncFleet, Fleet, FleetError, FleetResult
from .fleet.sync_fleet import _LoopThread

__all__ = ["WeightSync", "WeightSyncTarget"]

T = TypeVar("T")
WeightSyncTarget = DevClient | AsyncDevClient | Fleet | AsyncFleet


class WeightSync:
    """vLLM's `VLLMWeightSyncClient` (four methods, None or raise) over a DevClient, an AsyncDevClient, a
    Fleet or an AsyncFleet.

    Errors are the SDK's typed errors (`EngineCallError`, `APITimeoutError`, ...); over a fleet one
    `FleetError` names every target that failed, and its `result.rollback` what was undone. Retries are the
    target's own (never a resend of what may have reached the server).

    Args:
        target: the client or fleet to send with.
        timeout: the HTTP timeout of each call, as a whole (seconds, an httpx.Timeout, or None). Not given:
            the target's rule for these routes, no bound on the answer (they block through a rendezvous
            or a transfer), only on connecting.
        loop: for an async target, the running event loop (on another thread) it belongs to; the calls are
            run there. None: a private loop thread of this view runs them (close() ends it).
    """

    def __init__(
        self,
        target: WeightSyncTarget,
        *,
        timeout: TimeoutArg | NotGiven = NOT_GIVEN,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if not isinstance(target, DevClient | AsyncDevClient | Fleet | AsyncFleet):
            raise InvalidParameterError(
                "WeightSync needs a DevClient, AsyncDevClient, Fleet or AsyncFleet, "
                f"got {type(target).__name__}"
            )
        if loop is not None and not isinstance(target, AsyncDevClient | AsyncFleet):
            raise InvalidParameterError("loop= is for an AsyncDevClient or an AsyncFleet target")
        self.target = target
        if not isinstance(timeout, NotGiven):
            check.timeout(timeout)
        self._options: dict[str, Any] = {} if isinstance(timeout, NotGiven) else {"timeout": timeout}
        self._loop = loop
        self._own: _LoopThread | None = None
        self._lock = threading.Lock()
        # The targets whose update was started and not finished yet (a single client: ()); None: none open.
        self._open: tuple[str, ...] | None = None

    def __repr__(self) -> str:
        return f"WeightSync({self.target!r})"

    def close(self) -> None:
        """End this view's private loop thread, if it made one (the target stays open: close it yourself)."""
        if self._own is not None:
            self._own.close()
            self._own = None

    # ---- vLLM's VLLMWeightSyncClient --------------------------------------------------------------------

    def init_weight_transfer_engine(self, init_info: Mapping[str, Any]) -> None:
        """POST /init_weight_transfer_engine; over a fleet, shut down again where it went through when any
        target failed.

        Over a fleet, a payload that places workers by rank (NCCL: `rank_offset`, `world_size`) becomes one
        per server: every server is asked its world size first (`WorldSizeMismatchError`, nothing sent,
        when one does not answer or they do not make the trainer's `world_size`), then server i gets
        `rank_offset` plus the world sizes of the servers before it (see `rank_plan`)."""
        done = self._step("init_weight_transfer_engine", init_info, whole=True)
        if done is not None and done.failed:
            self._undo(done, "shutdown_weight_transfer_engine")

    def start_weight_update(self) -> None:
        """POST /start_weight_update; over a fleet, finish it again (without a version) where it went
        through when any target failed."""
        done = self._step("start_weight_update")
        if done is not None and done.failed:
            self._undo(done, "finish_weight_update", weight_version=None)
        with self._lock:
            self._open = tuple(done.ok) if done is not None else ()

    def update_weights(self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """POST /update_weights (CUDA IPC handles travel pickled, as vLLM's HTTP client sends them). When it
        fails anywhere, the open update is finished without a version everywhere, then the error raised."""
        try:
            done = self._step("update_weights", update_info)
        except InvalidParameterError:
            raise  # refused before anything was sent: the update stays open
        except DevClientError as failure:
            closed = self._close_open()
            if isinstance(closed, DevClientError):
                add_note(failure, f"finishing the failed update (without its version) failed: {closed!r}")
            raise
        if done is not None and done.failed:
            undo = self._close_open()
            assert not isinstance(undo, DevClientError)  # a fleet gives its outcomes back
            raise FleetError(FleetResult(done.values(), operation=done.operation, rollback=undo))

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        """POST /finish_weight_update with the version the new weights carry."""
        with self._lock:
            self._open = None
        done = self._step("finish_weight_update", weight_version=weight_version)
        if done is not None and done.failed:
            raise FleetError(done)

    def shutdown_weight_transfer_engine(self) -> None:
        """POST /shutdown_weight_transfer_engine (HTTPVLLMWeightSyncClient has it too)."""
        done = self._step("shutdown_weight_transfer_engine")
        if done is not None and done.failed:
            raise FleetError(done)

    # ---- running a step on the target -------------------------------------------------------------------

    def _step(
        self,
        method: str,
        *args: Any,
        urls: Sequence[str] | None = None,
        whole: bool = False,
        **kwargs: Any,
    ) -> FleetResult[Any] | None:
        """The client method `method` on the target (with this view's timeout): a single client's error is
        raised as it is (None returned); a fleet's outcomes come back whole (its raise_on_error does not
        hide which targets succeeded). `whole`: over a fleet, the fleet's own method (not the client's on
        each target)."""
        target = self.target
        kwargs.update(self._options)

        def fn(client: Any) -> Any:
            return getattr(client, method)(*args, **kwargs)

        if isinstance(target, DevClient):
            fn(target)
            return None
        if isinstance(target, AsyncDevClient):
            self._run(_awaited(lambda: fn(target)))
            return None
        chosen = None if urls is None else list(urls)
        try:
            if whole and isinstance(target, Fleet):
                result: FleetResult[Any] = fn(target)
            elif whole:
                result = self._run(_awaited(lambda: fn(target)))
            elif isinstance(target, Fleet):
                result = target.map(fn, urls=chosen, operation=method)
            else:
                result = self._run(target.map(fn, urls=chosen, operation=method))
        except FleetError as error:
            result = error.result
        return result

    def _undo(self, done: FleetResult[Any], method: str, **kwargs: Any) -> None:
        undo = self._step(method, urls=list(done.ok), **kwargs) if done.ok else None
        raise FleetError(FleetResult(done.values(), operation=done.operation, rollback=undo))

    def _close_open(self) -> FleetResult[Any] | DevClientError | None:
        """Finish the open update without a version where it was started: a fleet's outcomes, or a single
        client's error (None when it went through or nothing was open)."""
        with self._lock:
            opened, self._open = self._open, None
        if opened is None:
            return None
        urls = list(opened) if isinstance(self.target, Fleet | AsyncFleet) else None
        try:
            return self._step("finish_weight_update", urls=urls, weight_version=None)
        except DevClientError as error:
            return error

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is not None:
            loop = self._loop
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                coro.close()
                raise InvalidParameterError(
                    "WeightSync was called on its target's own event loop, where waiting would block the "
                    "loop: call the trainer engine from a worker thread (await asyncio.to_thread(...))"
                )
            future: Future[T] = asyncio.run_coroutine_threadsafe(coro, loop)
            return future.result()
        if self._own is None:
            self._own = _LoopThread()
            weakref.finalize(self, self._own.close)
        return self._own.run(coro)


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    # The client's coroutine is made on the loop that runs it, so a refused call leaves none unawaited.
    return await make()
