# Generated from vllm_devclient/_async/flows.py by scripts/unasync.py; do not edit.
"""The flows: context managers that always undo what they did (pause/resume, sleep/wake, weight update),
and the watchdog beside a block."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from typing_extensions import Self, Unpack

from .._base_client import RequestOptions, WeightUpdateOptions, weight_update_options
from ..constants import DEFAULT_WAIT_DEADLINE, DEFAULT_WATCHDOG_FAILURES, DEFAULT_WATCHDOG_INTERVAL
from ..endpoints import PauseMode
from ..errors import DevClientError, add_note
from ..models import (
    CheckpointStatus,
    MessageResult,
)
from ..watchdog import OnTrip, Watch
from ._support import Guard, Pending, background, result_of
from .waits import _SyncWaits

__all__ = ["KV_CACHE", "WEIGHTS", "WeightUpdate", "_SyncFlows"]

# The sleep-mode tags a staged wake wakes, in its order (vLLM's CuMemAllocator tags).
WEIGHTS, KV_CACHE = ("weights",), ("kv_cache",)


class _SyncFlows(_SyncWaits):
    """paused(), sleeping(), staged_wake(), checkpointed(), watchdog() and weight_update()."""

    # ---- flows ---------------------------------------------------------------------------------------------

    @contextmanager
    def paused(
        self, mode: PauseMode = "keep", *, clear_cache: bool | None = None, wait: bool = True
    ) -> Iterator[Self]:
        """Pause for the block, resume when it ends, however it ends.

        Args:
            mode: what happens to requests in flight: abort, wait or keep.
            clear_cache: also clear the caches when pausing.
            wait: wait until /is_paused says true before entering the block.
        """
        self.pause(mode, clear_cache=clear_cache)
        try:
            if wait:
                self.wait_until_paused()
            yield self
        finally:
            self.resume()

    @contextmanager
    def sleeping(
        self,
        level: int = 1,
        *,
        mode: PauseMode = "abort",
        wait: bool = True,
        reset_connector: bool | None = None,
    ) -> Iterator[Self]:
        """Sleep for the block, wake up when it ends, however it ends.

        Args:
            level: 0, 1 (offload weights) or 2 (discard them).
            mode: what happens to requests in flight: abort, wait or keep.
            wait: wait until /is_sleeping says true before entering, and false after waking.
            reset_connector: False keeps the KV connector's tier (vLLM 0.34); None: the server's default.
        """
        self.sleep(level, mode=mode, reset_connector=reset_connector)
        try:
            if wait:
                self.wait_until_sleeping()
            yield self
        finally:
            self.wake_up()
            if wait:
                self.wait_until_awake()

    @contextmanager
    def checkpointed(
        self, mode: PauseMode = "wait", *, deadline: float = DEFAULT_WAIT_DEADLINE
    ) -> Iterator[CheckpointStatus]:
        """Prepare a process checkpoint, wait until it is prepared, yield its status (safe to capture),
        restore when the block ends, however it ends (vLLM 0.34).

        Args:
            mode: how the drain treats requests in flight: wait (they finish first), abort or keep.
            deadline: seconds the wait for the prepared state may take (WaitTimeoutError past it).
        """
        self.checkpoint_prepare(mode)
        try:
            yield self.wait_until_checkpoint_prepared(deadline=deadline)
        finally:
            self.checkpoint_restore()

    @contextmanager
    def staged_wake(self, *, wait: bool = True) -> Iterator[Self]:
        """Wake a sleeping server in stages, as verl, TRL's colocate mode and SkyRL do: the weights
        (`wake_up(["weights"])`), then the block (your weight update: it never competes with the KV cache
        for memory), then the KV cache (`wake_up(["kv_cache"])`), however the block ends.

        A block that fails leaves the served weights to the update's own rules (`weight_update()` finishes
        a failed update without its version); the server is woken all the same, and the block's error
        raised.

        Args:
            wait: after waking the KV cache, wait until /is_sleeping says false.
        """
        self.wake_up(WEIGHTS)
        try:
            yield self
        finally:
            self.wake_up(KV_CACHE)
            if wait:
                self.wait_until_awake()

    @contextmanager
    def watchdog(
        self,
        interval: float = DEFAULT_WATCHDOG_INTERVAL,
        failures: int = DEFAULT_WATCHDOG_FAILURES,
        *,
        request_timeout: float | None = None,
        on_trip: OnTrip | None = None,
    ) -> Iterator[Watch]:
        """Watch the server's health beside the block: GET /health every `interval` seconds; after
        `failures` failed checks in a row, `ServerUnhealthyError` (the server and its last error).

        The asyncio client cancels the task that entered the block, and the context raises the error in
        place of the cancellation. The blocking client checks on a daemon thread and cannot stop your
        code: the context raises at the block's end (call `watch.check()` in a loop to stop sooner, or act
        in `on_trip`). The check stops with the block either way, however it ends (no task or thread is
        left behind; the block's end waits for a check in flight, at most its request_timeout and retries).

        Args:
            interval: seconds between checks (the first is at once).
            failures: the checks in a row that must fail to trip the watchdog.
            request_timeout: seconds for each check (None: `interval`).
            on_trip: called once with the error when the watchdog trips (on its thread or task).
        """
        watch = Watch(
            (self.base_url,), interval=interval, failures=failures, request_timeout=request_timeout,
            on_trip=on_trip,
        )  # fmt: skip

        def probe() -> bool:
            try:
                self.health(timeout=watch.request_timeout)
            except DevClientError as error:
                return watch.failed(self.base_url, error)
            watch.passed(self.base_url)
            return False

        guard = Guard(probe, watch.interval)
        try:
            yield watch
        except BaseException as failure:
            if guard.stop() and watch.error is not None:
                raise watch.error from failure
            raise
        if guard.stop() and watch.error is not None:
            raise watch.error

    @contextmanager
    def weight_update(self, **options: Unpack[WeightUpdateOptions]) -> Iterator[WeightUpdate]:
        """Pause, start a weight update, yield a handle to send batches with, finish it, resume.

        Takes the WeightUpdateOptions (weight_version, pause_mode, clear_cache, draft). Batches sent with
        `update.start(info)` run beside your own code (e.g. the trainer's NCCL send) and are complete before
        the finish; resume always runs.

        When the block fails after the start, the update is still finished, without `weight_version`, and
        the block's error is raised (what else failed is added to it as notes). vLLM moves the served
        weights out at the start and puts back what no batch replaced only at the finish: on vLLM 0.26 with
        the IPC backend, a started update left unfinished made the next request kill the engine, while a
        finish after a failed send kept the old weights serving (measured on an H200,
        gpu_tests/results/rl-2026-12-01). Layers a batch did reach before the failure keep the new weights:
        send the update again.
        """
        weight_version, pause_mode, clear_cache, draft = weight_update_options(options)
        with self.paused(pause_mode, clear_cache=clear_cache):
            if draft:
                self.start_draft_weight_update()
            else:
                self.start_weight_update()
            update = WeightUpdate(self)
            try:
                yield update
                update.wait()
            except BaseException as failure:
                for error in update.settle():
                    add_note(failure, f"a batch sent in the background failed too: {error!r}")
                try:
                    self.finish_weight_update(weight_version=None)
                except Exception as error:
                    add_note(failure, f"finishing the failed update (without its version) failed: {error!r}")
                raise
            self.finish_weight_update(weight_version=weight_version)


class WeightUpdate:
    """The handle of a `weight_update()` block: send weight batches, in the foreground or beside your code."""

    def __init__(self, client: _SyncFlows) -> None:
        self._client = client
        self._pending: list[Pending[MessageResult]] = []

    def update(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]], **options: Unpack[RequestOptions]
    ) -> MessageResult:
        """Send one batch and wait for the server to take it."""
        return self._client.update_weights(update_info, **options)

    def start(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]], **options: Unpack[RequestOptions]
    ) -> Pending[MessageResult]:
        """Send one batch in the background (the server blocks until the trainer's tensors arrive) and
        return at once; the block's end waits for it."""
        pending = background(self._client.update_weights, update_info, **options)
        self._pending.append(pending)
        return pending

    def wait(self) -> list[MessageResult]:
        """Wait for every batch started in the background; the first failure is raised."""
        pending, self._pending = self._pending, []
        return [result_of(p) for p in pending]

    def settle(self) -> list[Exception]:
        """Wait for every batch started in the background and return their failures instead of raising."""
        pending, self._pending = self._pending, []
        errors: list[Exception] = []
        for p in pending:
            try:
                result_of(p)
            except Exception as error:
                errors.append(error)
        return errors
