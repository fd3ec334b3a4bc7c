"""AsyncFleet's flows, all targets or none: `paused()`, `sleeping()`, `checkpointed()`, `staged_wake()`
and `weight_update()` (with its handle). Each undoes a step that went through on some targets and failed
on others before it raises FleetError, and its closing step (resume, wake, restore) runs however the block
ends. Fleet runs them on its loop thread."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from typing_extensions import Self, Unpack

from .._async.flows import KV_CACHE, WEIGHTS
from .._base_client import RequestOptions, WeightUpdateOptions, weight_update_options
from ..client import AsyncDevClient
from ..constants import DEFAULT_WAIT_DEADLINE
from ..endpoints import PauseMode
from ..errors import add_note
from ..models import CheckpointStatus, MessageResult, SleepResult, StatusResult
from .results import FleetError, FleetResult

__all__ = ["AsyncFleetWeightUpdate"]

T = TypeVar("T")


class _AsyncFleetFlows:
    """The flows of AsyncFleet (a base of it)."""

    if TYPE_CHECKING:  # what the flows use of AsyncFleet
        urls: tuple[str, ...]

        async def _gather(
            self, fn: Callable[[AsyncDevClient], Awaitable[T]], urls: Sequence[str], operation: str
        ) -> FleetResult[T]: ...

        async def pause(
            self,
            mode: PauseMode = "abort",
            *,
            clear_cache: bool | None = None,
            rollback: bool = False,
            **options: Unpack[RequestOptions],
        ) -> FleetResult[StatusResult]: ...

    async def _all_or_none(
        self,
        fn: Callable[[AsyncDevClient], Awaitable[T]],
        operation: str,
        undo: Callable[[AsyncDevClient], Awaitable[object]],
        undo_operation: str,
    ) -> FleetResult[T]:
        """`fn` on every target; where it failed on some, `undo` on those where it went through, then
        FleetError (its result carries the undo as its rollback)."""
        done = await self._gather(fn, self.urls, operation)
        if done.failed:
            if done.ok:
                rollback = await self._gather(undo, list(done.ok), undo_operation)
                done = FleetResult(done.values(), operation=operation, rollback=rollback)
            raise FleetError(done)
        return done

    @asynccontextmanager
    async def paused(
        self, mode: PauseMode = "keep", *, clear_cache: bool | None = None, wait: bool = True
    ) -> AsyncIterator[Self]:
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
    ) -> AsyncIterator[Self]:
        """Put every target to sleep for the block and wake every one when it ends, however it ends.

        All or none: when some targets fail to sleep, the ones that slept are woken and FleetError is raised.

        Args:
            level: 0, 1 (offload weights) or 2 (discard them).
            mode: what happens to requests in flight: abort, wait or keep.
            wait: wait until every target says it sleeps before entering, and is awake after waking.
            reset_connector: False keeps each KV connector's tier (vLLM 0.34); None: the server's default.
        """
        await self._all_or_none(
            lambda c: c.sleep(level, mode=mode, reset_connector=reset_connector),
            "sleep",
            lambda c: c.wake_up(),
            "wake_up",
        )
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
        await self._all_or_none(
            lambda c: c.checkpoint_prepare(mode),
            "checkpoint_prepare",
            lambda c: c.checkpoint_restore(),
            "checkpoint_restore",
        )
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
    ) -> AsyncIterator[Self]:
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
        await self._all_or_none(
            lambda c: c.wake_up(WEIGHTS),
            "wake_up",
            lambda c: _sleep_again(c, level, reset_connector),
            "sleep",
        )
        try:
            yield self
        finally:
            kv = await self._gather(lambda c: c.wake_up(KV_CACHE), self.urls, "wake_up")
            if wait and kv.all_ok:
                awake = await self._gather(lambda c: c.wait_until_awake(), self.urls, "wait_until_awake")
                awake.raise_for_errors()
        kv.raise_for_errors()

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


async def _sleep_again(client: AsyncDevClient, level: int, reset_connector: bool | None) -> SleepResult:
    """Put a target whose weights a staged wake woke back to sleep (its undo); `reset_connector=False`
    keeps the offloaded KV tier across that sleep (vLLM 0.34)."""
    return await client.sleep(level, reset_connector=reset_connector)


class AsyncFleetWeightUpdate:
    """The handle of a fleet's `weight_update()` block: one batch to every target."""

    def __init__(self, fleet: _AsyncFleetFlows) -> None:
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
