"""Completions, engine stepping, the offload barrier and the waits (operations of several requests)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from typing_extensions import Unpack

from .. import checkpoint_wait, polling, reset_check
from .. import operations as ops
from .._base_client import (
    RequestOptions,
    WaitOptions,
)
from ..constants import (
    DEFAULT_BARRIER_DEADLINE,
    DEFAULT_BARRIER_POLL_INTERVAL,
    DEFAULT_BARRIER_REQUEST_TIMEOUT,
    DEFAULT_POLL_INTERVAL,
    DEFAULT_POLL_MAX_INTERVAL,
    DEFAULT_READY_DEADLINE,
    DEFAULT_READY_REQUEST_TIMEOUT,
    DEFAULT_VERIFY_DEADLINE,
    DEFAULT_WAIT_DEADLINE,
    DEFAULT_WAIT_REQUEST_TIMEOUT,
)
from ..endpoints import Endpoint
from ..models import (
    BarrierResult,
    CheckpointStatus,
    Completion,
)
from ..reset_check import VerifiedReset
from ..routes import endpoint as route
from .routes import _AsyncRoutes

__all__ = ["_AsyncWaits"]


def _wait_options(wait: WaitOptions, deadline: float) -> tuple[float, float | None, polling.Backoff]:
    """(deadline, request_timeout, poll) from a wait's options, with this wait's default deadline."""
    unknown = set(wait) - set(WaitOptions.__annotations__)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    poll = polling.Backoff.of(wait.get("interval", DEFAULT_POLL_INTERVAL), DEFAULT_POLL_MAX_INTERVAL)
    return wait.get("deadline", deadline), wait.get("request_timeout"), poll


class _AsyncWaits(_AsyncRoutes):
    """Completions, stepping, the barrier and the waits; their logic is in `operations/` and
    `polling.py`."""

    # ---- completions and engine stepping ---------------------------------------------------------------

    async def completion(
        self,
        prompt: str | Sequence[int],
        *,
        model: str | None = None,
        max_tokens: int = 16,
        temperature: float = 0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
        **options: Unpack[RequestOptions],
    ) -> Completion:
        """POST /v1/completions, greedy by default (never resent: it would run twice).

        Args:
            prompt: the prompt text, or its token ids.
            model: the model name; default the client's, else the first on /v1/models.
            max_tokens: tokens to generate.
            temperature: sampling temperature (0: greedy).
            seed: sampling seed.
            stop: stop strings.
        """
        opts = self._options(options)
        timeouts = self._timeouts(opts, long_running=True)
        op = ops.completion(
            self._models,
            prompt,
            model=model,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            stop=stop,
            timeouts=timeouts,
            retry=self._retry_for(opts),
            ctx=self._context(),
        )
        return await self._run(op, opts)

    async def step_engine(self, **options: Unpack[RequestOptions]) -> str:
        """Send a 1-token greedy completion (prompt "0") so the engine runs a step; returns its text."""
        opts = self._options(options)
        timeouts = self._timeouts(opts, long_running=False)
        op = ops.step_engine(
            self._models, timeouts=timeouts, retry=self._retry_for(opts), ctx=self._context()
        )
        return await self._run(op, opts)

    # ---- the barrier and the waits ---------------------------------------------------------------------

    async def reset_prefix_cache_until_success(
        self,
        *,
        deadline: float = DEFAULT_BARRIER_DEADLINE,
        request_timeout: float | None = None,
        reset_external: bool = False,
        reset_running_requests: bool = False,
        step_engine: bool = True,
        interval: float = DEFAULT_BARRIER_POLL_INTERVAL,
        max_interval: float = DEFAULT_POLL_MAX_INTERVAL,
        on_attempt: Callable[[int, object], None] | None = None,
    ) -> BarrierResult:
        """The offload barrier: reset the prefix cache until it succeeds, stepping the engine between tries.

        Returns within `deadline` (plus at most one short try; the client's total_timeout ends it sooner when
        shorter) or raises BarrierTimeoutError; a success=false is never reported as success. Each try is one
        request; `attempts` counts them. When nothing listens at the URL (no connection, more tries in a row
        than max_retries) it raises BarrierUnreachableError at once.

        Args:
            deadline: seconds for the whole barrier.
            request_timeout: seconds for each try (default: the client's timeout when set, else 10).
            reset_external: also reset the connector's tier (default False: keep the CPU tier).
            reset_running_requests: preempt running requests so their blocks can be freed.
            step_engine: send a 1-token completion between tries, so finished blocks are released.
            interval: first pause between tries (doubling up to max_interval).
            max_interval: longest pause between tries.
            on_attempt: called after each try with (attempt number, its answer or error).
        """
        poll = polling.Backoff.of(interval, max_interval)
        op = polling.reset_prefix_cache_until_success(
            self._models,
            plan=self._plan(deadline, request_timeout, DEFAULT_BARRIER_REQUEST_TIMEOUT, poll),
            reset_external=reset_external,
            reset_running_requests=reset_running_requests,
            step=step_engine,
            ctx=self._context(),
            on_attempt=on_attempt,
        )
        return await self._run(op, {})

    async def reset_prefix_cache_verified(
        self,
        probe: str | Sequence[int],
        *,
        reset_external: bool = False,
        reset_running_requests: bool = False,
        deadline: float = DEFAULT_VERIFY_DEADLINE,
        **options: Unpack[RequestOptions],
    ) -> VerifiedReset:
        """Reset the prefix cache, then prove that every tier asked to clear serves nothing (opt-in).

        The reset is retried while the server answers success=false (blocks held by running requests or
        by offload stores in flight), stepping the engine, as reset_prefix_cache_until_success does. The
        probe (a greedy 1-token completion of `probe`, sent with a cache_salt of the check's own so no
        other request shares its blocks) is first shown to be cached, else ResetNotVerifiableError ("not
        verifiable", never a pass); then, after a reset, an answer that reports no cached token (servers
        started with --enable-prompt-tokens-details) is the proof, whatever other clients send.
        Otherwise the /metrics prefix-cache counters around a further reset and probe show which tier
        served: TierNotClearedError names a tier that still serves blocks (`.tier`: "GPU", or "external"
        with reset_external=True). /metrics count every request: that step needs a moment with no other
        request, and says "not verifiable" (reason "other traffic") when none comes before the deadline.

        Args:
            probe: a prompt of more than one KV-cache block (text or token ids); the check caches it.
            reset_external: also reset, and check, the connector's tier.
            reset_running_requests: preempt running requests so their blocks can be freed.
            deadline: seconds for the check's waits: refused resets retried, /metrics counting the probe.
        """
        opts = self._options(options)
        op = reset_check.verified_reset(
            self._models,
            probe,
            reset_external=reset_external,
            reset_running_requests=reset_running_requests,
            deadline=deadline,
            timeouts=self._timeouts(opts, long_running=False),
            retry=self._retry_for(opts),
            ctx=self._context(),
        )
        return await self._run(op, opts)

    async def wait_until_ready(self, **wait: Unpack[WaitOptions]) -> None:
        """Poll /health until it answers 200; EngineDeadError at once when the engine is dead.

        Takes the WaitOptions: deadline (default 120 s), request_timeout (default: the client's timeout when
        set, else 1 s: a starting Rust frontend accepts connections and says nothing), interval. Refused
        connections are waited through until the deadline (the server may be starting).
        """
        deadline, request_timeout, poll = _wait_options(wait, DEFAULT_READY_DEADLINE)
        plan = self._plan(deadline, request_timeout, DEFAULT_READY_REQUEST_TIMEOUT, poll)
        await self._run(polling.wait_until_ready(plan=plan, ctx=self._context()), {})

    async def _wait_flag(self, probe: Endpoint[bool], wanted: bool, wait: WaitOptions) -> None:
        deadline, request_timeout, poll = _wait_options(wait, DEFAULT_WAIT_DEADLINE)
        plan = self._plan(deadline, request_timeout, DEFAULT_WAIT_REQUEST_TIMEOUT, poll)
        what = f"{probe.path.lstrip('/')} == {str(wanted).lower()}"
        op = polling.wait_for_flag(probe, wanted, what=what, plan=plan, ctx=self._context())
        await self._run(op, {})

    async def wait_until_sleeping(self, **wait: Unpack[WaitOptions]) -> None:
        """Poll /is_sleeping until true (a 200 from /sleep does not prove the engine sleeps).

        Takes the WaitOptions: deadline (default 60 s), request_timeout (default: the client's timeout when
        set, else 5 s), interval. WaitUnreachableError at once when nothing listens at the URL.
        """
        await self._wait_flag(route("is_sleeping"), True, wait)

    async def wait_until_awake(self, **wait: Unpack[WaitOptions]) -> None:
        """Poll /is_sleeping until false.

        Takes the WaitOptions: deadline (default 60 s), request_timeout (default: the client's timeout when
        set, else 5 s), interval. WaitUnreachableError at once when nothing listens at the URL.
        """
        await self._wait_flag(route("is_sleeping"), False, wait)

    async def wait_until_paused(self, **wait: Unpack[WaitOptions]) -> None:
        """Poll /is_paused until true.

        Takes the WaitOptions: deadline (default 60 s), request_timeout (default: the client's timeout when
        set, else 5 s), interval. WaitUnreachableError at once when nothing listens at the URL.
        """
        await self._wait_flag(route("is_paused"), True, wait)

    async def wait_until_resumed(self, **wait: Unpack[WaitOptions]) -> None:
        """Poll /is_paused until false.

        Takes the WaitOptions: deadline (default 60 s), request_timeout (default: the client's timeout when
        set, else 5 s), interval. WaitUnreachableError at once when nothing listens at the URL.
        """
        await self._wait_flag(route("is_paused"), False, wait)

    async def wait_until_checkpoint_prepared(self, **wait: Unpack[WaitOptions]) -> CheckpointStatus:
        """Poll /checkpoint/status until prepared (its 503 is 'not yet'); CheckpointFailedError on failed.

        Takes the WaitOptions: deadline (default 60 s), request_timeout (default: the client's timeout when
        set, else 5 s), interval. WaitUnreachableError at once when nothing listens at the URL.
        """
        deadline, request_timeout, poll = _wait_options(wait, DEFAULT_WAIT_DEADLINE)
        plan = self._plan(deadline, request_timeout, DEFAULT_WAIT_REQUEST_TIMEOUT, poll)
        op = checkpoint_wait.wait_until_checkpoint_prepared(plan=plan, ctx=self._context())
        return await self._run(op, {})
