# Generated from vllm_devclient/routes/engine.py and calls.py by scripts/generate.py; do not edit.
"""The engine methods of AsyncFleet, each on every target (the client method's signature and docstring)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from typing_extensions import Unpack

from ..._base_client import RequestOptions
from ...client import AsyncDevClient
from ...models import Completion, FaultToleranceAccepted
from ..results import FleetResult

if TYPE_CHECKING:
    from ...responses import HTTPResponse

__all__ = ["_AsyncEngineMethods"]

T = TypeVar("T")


class _AsyncEngineMethods:
    """The engine client methods on every target of the AsyncFleet."""

    if TYPE_CHECKING:

        async def _each(
            self,
            method: Callable[..., Awaitable[T]],
            arguments: dict[str, Any],
            *,
            shared_deadline: bool = False,
        ) -> FleetResult[T]: ...

    async def collective_rpc(
        self,
        method: str,
        *,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        rpc_timeout: float | None = None,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[list[Any]]:
        """POST /collective_rpc: a method on every worker, one result each (never resent, no HTTP timeout).

        Args:
            method: the worker method's name.
            args: positional arguments, a JSON list.
            kwargs: keyword arguments, a JSON object.
            rpc_timeout: seconds the workers get for the call (engine side; the HTTP timeout ends the try).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(
            AsyncDevClient.collective_rpc,
            dict(method=method, args=args, kwargs=kwargs, rpc_timeout=rpc_timeout, **options),
        )

    async def start_profile(
        self,
        *,
        profile_prefix: str | None = None,
        delay_iterations: int | None = None,
        max_iterations: int | None = None,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[None]:
        """POST /start_profile (a server started with --profiler-config); 409 while one runs.

        Args:
            profile_prefix: a prefix for the trace files.
            delay_iterations: engine steps to skip before recording.
            max_iterations: engine steps to record at most.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(
            AsyncDevClient.start_profile,
            dict(
                profile_prefix=profile_prefix,
                delay_iterations=delay_iterations,
                max_iterations=max_iterations,
                **options,
            ),
        )

    async def stop_profile(self, **options: Unpack[RequestOptions]) -> FleetResult[None]:
        """POST /stop_profile: stop and write the trace (no HTTP timeout by default).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.stop_profile, dict(**options))

    async def apply_fault_tolerance(
        self,
        instruction: str,
        *,
        request_id: str,
        params: Mapping[str, Any] | None = None,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[FaultToleranceAccepted]:
        """POST /v1/fault_tolerance/apply: start a recovery round (--enable-fault-tolerance).

        Args:
            instruction: retry or scale_down.
            request_id: the round's id: the same on every engine of one recovery round.
            params: the instruction's parameters.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(
            AsyncDevClient.apply_fault_tolerance,
            dict(instruction=instruction, request_id=request_id, params=params, **options),
        )

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
    ) -> FleetResult[Completion]:
        """POST /v1/completions, greedy by default (never resent: it would run twice).

        Args:
            prompt: the prompt text, or its token ids.
            model: the model name; default the client's, else the first on /v1/models.
            max_tokens: tokens to generate.
            temperature: sampling temperature (0: greedy).
            seed: sampling seed.
            stop: stop strings.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(
            AsyncDevClient.completion,
            dict(
                prompt=prompt,
                model=model,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                stop=stop,
                **options,
            ),
        )

    async def step_engine(self, **options: Unpack[RequestOptions]) -> FleetResult[str]:
        """Send a 1-token greedy completion (prompt "0") so the engine runs a step; returns its text.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.step_engine, dict(**options))

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        json: Any = None,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[HTTPResponse]:
        """Any request, with this client's auth, timeouts and typed errors (a non-2xx raises).

        Args:
            method: the HTTP method.
            path: the path, starting with "/" (no query: pass params).
            params: query parameters; booleans go out as true/false.
            json: a JSON body.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(
            AsyncDevClient.request, dict(method=method, path=path, params=params, json=json, **options)
        )
