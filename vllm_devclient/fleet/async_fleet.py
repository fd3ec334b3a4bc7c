"""AsyncFleet: one client call sent to many servers at once (asyncio, bounded, one shared pool)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from typing_extensions import Unpack

from .. import arguments as check
from .. import rank_plan
from .._async.flows import KV_CACHE, WEIGHTS
from .._base_client import (
    NOT_GIVEN,
    ClientConfig,
    NotGiven,
    RequestOptions,
    TimeoutArg,
    WeightUpdateOptions,
    check_own_tls,
    name_methods_after,
    weight_update_options,
)
from ..client import AsyncDevClient
from ..constants import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_RETRIES,
    DEFAULT_WAIT_DEADLINE,
    DEFAULT_WATCHDOG_FAILURES,
    DEFAULT_WATCHDOG_INTERVAL,
)
from ..endpoints import PauseMode
from ..errors import DevClientError, InvalidParameterError, add_note
from ..models import CheckpointStatus, MessageResult, SleepResult, StatusResult
from ..transports import CertArg, VerifyArg, make_async_transport
from ..watchdog import OnTrip, Watch
from ._async_methods import _AsyncFleetMethods
from .fan_out import _client_method, _listed, _normalise, _rebuild, _shared_deadline, _total_bound
from .results import FleetError, FleetResult, OnResult, TargetOutcome
from .watch import watch_fleet

if TYPE_CHECKING:
    import httpx
    import httpx2

__all__ = ["AsyncFleet", "AsyncFleetWeightUpdate"]

T = TypeVar("T")


@name_methods_after  # Python's own TypeErrors then name AsyncFleet, not a private base
class AsyncFleet(_AsyncFleetMethods):
    """Many servers, one call: `await fleet.reset_prefix_cache()` -> FleetResult, every target's answer.

    All targets or none: a call that failed on any target raises FleetError once every target has finished,
    with every target's outcome on it (`.result`, a FleetResult: the values where it went through, the
    error where it did not; `.errors` the failures). An RL loop that pauses, resets or updates a fleet
    cannot go on with part of it, so a partial failure must not pass unnoticed; `raise_on_error=False` gives
    the FleetResult back instead, failures inside (`.failed`, `.raise_for_errors()`). The flows
    (`paused()`, `sleeping()`, `weight_update()`) always raise, after undoing what went through.
    """

    def __init__(
        self,
        urls: Iterable[str],
        *,
        api_key: str | None = None,
        timeout: TimeoutArg | NotGiven = NOT_GIVEN,
        total_timeout: float | NotGiven | None = NOT_GIVEN,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        raise_on_error: bool = True,
        on_result: OnResult | None = None,
        http_client: httpx.AsyncClient | httpx2.AsyncClient | None = None,
        default_headers: Mapping[str, str] | None = None,
        verify: VerifyArg = True,
        cert: CertArg | None = None,
    ) -> None:
        """A fleet over `urls` (base URLs, each once), with one client per target sharing one pool.

        Args:
            urls: the targets' base URLs.
            api_key, timeout, total_timeout, max_retries, default_headers: each target's client's, as
                AsyncDevClient takes them. `total_timeout` is one moment for every target of a call: a
                target that waits for a slot (more targets than max_concurrency) gets what is left of it.
            max_concurrency: how many targets are in flight at once (across concurrent calls on the fleet).
            raise_on_error: True (the default): a call that failed on any target raises FleetError, every
                target's outcome on it; False: the call returns the FleetResult, failures inside.
            on_result: called with each target's outcome as it finishes (for a progress display).
            http_client: an httpx.AsyncClient or httpx2.AsyncClient for every target (your own proxies, TLS
                or mocks).
            verify, cert: the clients' TLS settings, one for every https target (http targets ignore them).

        Arguments invalid everywhere (InvalidParameterError) are raised as they are, since nothing was sent;
        anything that is not a DevClientError is a bug and propagates.
        """
        self.max_concurrency = check.positive_int(max_concurrency, "max_concurrency")
        self.raise_on_error = check.flag(raise_on_error, "raise_on_error")
        self.on_result = on_result
        configs = [
            ClientConfig.of(
                url,
                api_key=api_key,
                timeout=timeout,
                max_retries=max_retries,
                model=None,
                default_headers=default_headers,
                transport=None,
                verify=verify,
                cert=cert,
                total_timeout=total_timeout,
            )
            for url in _listed(urls)
        ]
        self._total_timeout = configs[0].total_timeout if configs else None
        check_own_tls(http_client, verify, cert)
        self.urls = _normalise([c.url.url for c in configs])
        # One connection pool for every target: aiohttp keys its connections by host, and one pool's
        # bookkeeping costs less per request than many (an http_client passed in is shared the same way).
        first = configs[0]
        self._tls = first.tls
        self._transport = make_async_transport(first.transport, first.origin, http_client, first.tls)
        https = [c.url.url for c in configs if c.url.scheme == "https"]
        if https and http_client is None:
            self._tls.warn_if_unchecked(f"{len(https)} https target(s) of a fleet ({https[0]}, ...)")
        self.clients: dict[str, AsyncDevClient] = {
            c.url.url: AsyncDevClient._from_config(c, self._transport) for c in configs
        }
        self._semaphore = asyncio.Semaphore(self.max_concurrency)
        self._closed = False
        # What a pickled fleet is rebuilt from (a Ray actor hand-off): the configuration, not the pool.
        self._settings: dict[str, Any] | None = (
            None
            if http_client is not None
            else {
                "api_key": api_key,
                "timeout": timeout,
                "total_timeout": total_timeout,
                "max_retries": max_retries,
                "max_concurrency": max_concurrency,
                "raise_on_error": raise_on_error,
                "on_result": on_result,
                "default_headers": default_headers,
                "verify": verify,
                "cert": cert,
            }
        )

    def __reduce__(self) -> tuple[Any, ...]:
        if self._settings is None:
            raise TypeError(
                "a fleet made with http_client= cannot be pickled; pickle one made from configuration"
            )
        self._tls.refuse_pickling(type(self).__name__)
        return (_rebuild, (type(self), self.urls, self._settings))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.urls)} targets)"

    async def close(self) -> None:
        """Close the connections this fleet opened (not an `http_client` passed in). Idempotent."""
        if not self._closed:
            self._closed = True
            for client in self.clients.values():
                client._closed = True
            await self._transport.aclose()

    async def __aenter__(self) -> AsyncFleet:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- the fan-out -------------------------------------------------------------------------------------

    async def _gather(
        self, fn: Callable[[AsyncDevClient], Awaitable[T]], urls: Sequence[str], operation: str
    ) -> FleetResult[T]:
        bounded = _total_bound(self._total_timeout)

        async def one(url: str) -> TargetOutcome[T]:
            async with self._semaphore:
                start = time.perf_counter()
                try:
                    value = await fn(bounded(self.clients[url]))
                except DevClientError as exc:
                    outcome = TargetOutcome[T](url, None, exc, time.perf_counter() - start)
                else:
                    outcome = TargetOutcome(url, value, None, time.perf_counter() - start)
            if self.on_result is not None:
                self.on_result(outcome)
            return outcome

        tasks = [asyncio.ensure_future(one(url)) for url in urls]
        try:
            outcomes = await asyncio.gather(*tasks)
        except BaseException:
            # A bug in `fn` or a cancellation: leave no target's request running behind us.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        for outcome in outcomes:
            if isinstance(outcome.error, InvalidParameterError):
                raise outcome.error
        return FleetResult(outcomes, operation=operation)

    def _finish(self, result: FleetResult[T]) -> FleetResult[T]:
        return result.raise_for_errors() if self.raise_on_error else result

    def _targets(self, urls: Iterable[str] | None) -> tuple[str, ...]:
        if urls is None:
            return self.urls
        chosen = _normalise(urls)
        unknown = [u for u in chosen if u not in self.clients]
        if unknown:
            raise InvalidParameterError(f"not in this fleet: {', '.join(unknown)}")
        return chosen

    async def map(
        self,
        fn: Callable[[AsyncDevClient], Awaitable[T]],
        *,
        urls: Iterable[str] | None = None,
        operation: str = "map",
    ) -> FleetResult[T]:
        """`await fn(client)` for every target's AsyncDevClient (or only those in `urls`)."""
        return self._finish(await self._gather(fn, self._targets(urls), operation))

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> FleetResult[Any]:
        """Any client method by name, e.g. `await fleet.call("reset_prefix_cache", reset_external=True)`."""
        fn = _client_method(method)
        return await self.map(lambda client: fn(client, *args, **kwargs), operation=method)

    async def pause(
        self,
        mode: PauseMode = "abort",
        *,
        clear_cache: bool | None = None,
        rollback: bool = False,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[StatusResult]:
        """Pause every target. With `rollback=True`, when some targets fail, resume the ones that paused.

        Only targets whose pause succeeded are resumed: a target whose pause failed (even by a timeout,
        when its state is unknown) is left alone. The resume outcomes are in `result.rollback`.
        """
        result = await self._gather(
            lambda client: client.pause(mode, clear_cache=clear_cache, **options), self.urls, "pause"
        )
        if rollback and result.failed and result.ok:
            undo = await self._gather(lambda client: client.resume(**options), list(result.ok), "resume")
            result = FleetResult(result.values(), operation="pause", rollback=undo)
        return self._finish(result)

    async def init_weight_transfer_engine(
        self, init_info: Mapping[str, Any], **options: Unpack[RequestOptions]
    ) -> FleetResult[MessageResult]:
        """POST /init_weight_transfer_engine (never resent; no HTTP timeout by default).

        On every target at once. A payload that places workers by rank (NCCL: `rank_offset`,
        `world_size`, as vLLM's trainer engines build it) becomes one per target (Fleet's too): every
        target is asked its world size first, then target i gets `rank_offset` plus the world sizes of
        the targets before it (`rank_plan`). `WorldSizeMismatchError`, nothing initialised, when a target
        gives no world size or they do not make the payload's `world_size`.

        Args:
            init_info: the transfer backend's settings (JSON), e.g. NCCL master address and ranks.
        """
        if not rank_plan.plans_ranks(init_info):
            return await super().init_weight_transfer_engine(init_info, **options)
        if len(self.urls) > self.max_concurrency:
            raise InvalidParameterError(
                f"an NCCL init needs all {len(self.urls)} targets in the rendezvous at once, but the fleet "
                f"sends to at most max_concurrency={self.max_concurrency}: raise it"
            )
        sizes = await self._gather(lambda c: c.get_world_size(**options), self.urls, "get_world_size")
        answers = {url: o.value if o.error is None else o.error for url, o in sizes.items()}
        payloads = rank_plan.worker_payloads(init_info, answers)
        result = await self._gather(
            lambda c: c.init_weight_transfer_engine(payloads[c.base_url], **options),
            self.urls,
            "init_weight_transfer_engine",
        )
        return self._finish(result)

    # ---- flows: all targets or none --------------------------------------------------------------------

    @asynccontextmanager
    async def paused(
        self, mode: PauseMode = "keep", *, clear_cache: bool | None = None, wait: bool = True
    ) -> AsyncIterator[AsyncFleet]:
        """Pause every target for the block and resume every one when it ends, however it ends.

        All or none: when some targets fail to pause, the ones that paused are resumed and FleetError is
        raised before the block runs.

        Args:
            mode: what happens to requests in flight: abort, wait or keep.
            clear_cache: also clear the caches when pausing.
            wait: wait until every target says it is paused before entering the block.
        """
        (await self.pause(mode, clear_cache=clear_cache, rollback=True)).raise_for_errors()
        try:
            if wait:
                (
                    await self._gather(lambda c: c.wait_until_paused(), self.urls, "wait_until_paused")
                ).raise_for_errors()
            yield self
        finally:
            resumed = await self._gather(lambda c: c.resume(), self.urls, "resume")
        resumed.raise_for_errors()

    @asynccontextmanager
    async def sleeping(
        self,
        level: int = 1,
        *,
        mode: PauseMode = "abort",
        wait: bool = True,
        reset_connector: bool | None = None,
    ) -> AsyncIterator[AsyncFleet]:
        """Put every target to sleep for the block and wake every one when it ends, however it ends.

        All or none: when some targets fail to sleep, the ones that slept are woken and FleetError is raised.

        Args:
            level: 0, 1 (offload weights) or 2 (discard them).
            mode: what happens to requests in flight: abort, wait or keep.
            wait: wait until every target says it sleeps before entering, and is awake after waking.
            reset_connector: False keeps each KV connector's tier (vLLM 0.34); None: the server's default.
        """
        slept = await self._gather(
            lambda c: c.sleep(level, mode=mode, reset_connector=reset_connector), self.urls, "sleep"
        )
        if slept.failed:
            if slept.ok:
                undo = await self._gather(lambda c: c.wake_up(), list(slept.ok), "wake_up")
                slept = FleetResult(slept.values(), operation="sleep", rollback=undo)
            raise FleetError(slept)
        try:
            if wait:
                (
                    await self._gather(lambda c: c.wait_until_sleeping(), self.urls, "wait_until_sleeping")
                ).raise_for_errors()
            yield self
        finally:
            woke = await self._gather(lambda c: c.wake_up(), self.urls, "wake_up")
            if wait and woke.all_ok:
                awake = await self._gather(lambda c: c.wait_until_awake(), self.urls, "wait_until_awake")
                awake.raise_for_errors()
        woke.raise_for_errors()

    @asynccontextmanager
    async def checkpointed(
        self, mode: PauseMode = "wait", *, deadline: float = DEFAULT_WAIT_DEADLINE
    ) -> AsyncIterator[FleetResult[CheckpointStatus]]:
        """Prepare a process checkpoint on every target, wait until every one is prepared, yield their
        statuses, and restore every one when the block ends, however it ends (vLLM 0.34).

        All or none: when some targets fail to prepare, the ones that did are restored and FleetError is
        raised.

        Args:
            mode: how the drain treats requests in flight: wait (they finish first), abort or keep.
            deadline: seconds the wait for the prepared state may take on each target.
        """
        started = await self._gather(lambda c: c.checkpoint_prepare(mode), self.urls, "checkpoint_prepare")
        if started.failed:
            if started.ok:
                undo = await self._gather(
                    lambda c: c.checkpoint_restore(), list(started.ok), "checkpoint_restore"
                )
                started = FleetResult(started.values(), operation="checkpoint_prepare", rollback=undo)
            raise FleetError(started)
        try:
            prepared = await self._gather(
                lambda c: c.wait_until_checkpoint_prepared(deadline=deadline),
                self.urls,
                "wait_until_checkpoint_prepared",
            )
            prepared.raise_for_errors()
            yield prepared
        finally:
            restored = await self._gather(lambda c: c.checkpoint_restore(), self.urls, "checkpoint_restore")
        restored.raise_for_errors()

    @asynccontextmanager
    async def staged_wake(
        self, *, level: int = 1, wait: bool = True, reset_connector: bool | None = None
    ) -> AsyncIterator[AsyncFleet]:
        """AsyncDevClient.staged_wake() on every target: the weights, the block (the weight update), then
        the KV cache, however the block ends.

        All or none: when some targets fail to wake their weights, the ones whose weights woke are put back
        to sleep at `level` and FleetError is raised before the block runs.

        Args:
            level: the sleep level the targets sleep at (what putting them back to sleep uses).
            wait: after waking the KV cache, wait until every target says it is awake.
            reset_connector: what putting them back to sleep sends (False keeps the offloaded KV tier,
                vLLM 0.34; None: the server's default).
        """
        woke = await self._gather(lambda c: c.wake_up(WEIGHTS), self.urls, "wake_up")
        if woke.failed:
            if woke.ok:
                undo = await self._gather(
                    lambda c: _sleep_again(c, level, reset_connector), list(woke.ok), "sleep"
                )
                woke = FleetResult(woke.values(), operation="wake_up", rollback=undo)
            raise FleetError(woke)
        try:
            yield self
        finally:
            kv = await self._gather(lambda c: c.wake_up(KV_CACHE), self.urls, "wake_up")
            if wait and kv.all_ok:
                awake = await self._gather(lambda c: c.wait_until_awake(), self.urls, "wait_until_awake")
                awake.raise_for_errors()
        kv.raise_for_errors()

    def watchdog(
        self,
        interval: float = DEFAULT_WATCHDOG_INTERVAL,
        failures: int = DEFAULT_WATCHDOG_FAILURES,
        *,
        request_timeout: float | None = None,
        on_trip: OnTrip | None = None,
    ) -> AbstractAsyncContextManager[Watch]:
        """AsyncDevClient.watchdog() over every target: each checked at every interval, the first to fail
        `failures` checks in a row trips it (`ServerUnhealthyError` naming it and its last error); the task
        that entered the block is cancelled and the context raises the error."""
        return watch_fleet(
            self.clients, interval=interval, failures=failures, request_timeout=request_timeout,
            on_trip=on_trip, cancel=True,
        )  # fmt: skip

    @asynccontextmanager
    async def weight_update(
        self, **options: Unpack[WeightUpdateOptions]
    ) -> AsyncIterator[AsyncFleetWeightUpdate]:
        """AsyncDevClient.weight_update() on every target (same WeightUpdateOptions): pause, start, your
        batches, finish, resume. Every step is all-or-nothing (FleetError naming the failed targets); resume
        always runs. When the block fails after the start, every target where the start went through is
        finished without the version (AsyncDevClient.weight_update says why) and the block's error raised,
        what else failed added to it as notes."""
        weight_version, pause_mode, clear_cache, draft = weight_update_options(options)
        async with self.paused(pause_mode, clear_cache=clear_cache):
            start = "start_draft_weight_update" if draft else "start_weight_update"
            started = await self._gather(lambda c: getattr(c, start)(), self.urls, start)
            update = AsyncFleetWeightUpdate(self)
            try:
                started.raise_for_errors()
                yield update
                await update.wait()
            except BaseException as failure:
                for error in await update.settle():
                    add_note(failure, f"a batch sent in the background failed too: {error!r}")
                closed = await self._gather(
                    lambda c: c.finish_weight_update(weight_version=None),
                    list(started.ok),
                    "finish_weight_update",
                )
                if not closed.all_ok:
                    add_note(failure, f"finishing the failed update (without its version) failed: {closed}")
                raise
            finish = await self._gather(
                lambda c: c.finish_weight_update(weight_version=weight_version),
                self.urls,
                "finish_weight_update",
            )
            finish.raise_for_errors()

    # ---- every other client method: generated with its signature (`_async_methods/`) -----------------

    async def _each(
        self,
        method: Callable[..., Awaitable[T]],
        arguments: dict[str, Any],
        *,
        shared_deadline: bool = False,
    ) -> FleetResult[T]:
        """`method(client, **arguments)` on every target; with `shared_deadline`, `arguments["deadline"]`
        is one moment for all targets."""
        per_target = _shared_deadline(arguments["deadline"] if shared_deadline else None, arguments)
        return await self.map(lambda client: method(client, **per_target()), operation=method.__name__)

    # The barrier over a fleet: all_ok only when every target's reset went through before the deadline.
    barrier = _AsyncFleetMethods.reset_prefix_cache_until_success


async def _sleep_again(client: AsyncDevClient, level: int, reset_connector: bool | None) -> SleepResult:
    """Put a target whose weights a staged wake woke back to sleep (its undo); `reset_connector=False`
    keeps the offloaded KV tier across that sleep (vLLM 0.34)."""
    return await client.sleep(level, reset_connector=reset_connector)


class AsyncFleetWeightUpdate:
    """The handle of a fleet's `weight_update()` block: one batch to every target."""

    def __init__(self, fleet: AsyncFleet) -> None:
        self._fleet = fleet
        self._pending: list[asyncio.Task[FleetResult[MessageResult]]] = []

    async def update(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> FleetResult[MessageResult]:
        """Send one batch to every target; FleetError when any failed."""
        result = await self._fleet._gather(
            lambda c: c.update_weights(update_info), self._fleet.urls, "update_weights"
        )
        return result.raise_for_errors()

    def start(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> asyncio.Task[FleetResult[MessageResult]]:
        """Send one batch to every target in the background; the block's end waits for it."""
        task = asyncio.ensure_future(self.update(update_info))
        self._pending.append(task)
        return task

    async def wait(self) -> list[FleetResult[MessageResult]]:
        pending, self._pending = self._pending, []
        return [await task for task in pending]

    async def settle(self) -> list[BaseException]:
        """Wait for every batch started in the background and return their failures instead of raising."""
        pending, self._pending = self._pending, []
        done = await asyncio.gather(*pending, return_exceptions=True)
        return [d for d in done if isinstance(d, BaseException)]
