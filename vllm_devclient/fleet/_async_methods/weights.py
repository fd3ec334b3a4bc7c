# Generated from vllm_devclient/routes/weights.py by scripts/generate.py; do not edit.
"""The weights methods of AsyncFleet, each on every target (the client method's signature and docstring)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from typing_extensions import Unpack

from ..._base_client import RequestOptions
from ...client import AsyncDevClient
from ...models import MessageResult, WeightCheckResult, WeightInfo, WeightVersionResult
from ..results import FleetResult

__all__ = ["_AsyncWeightsMethods"]

T = TypeVar("T")


class _AsyncWeightsMethods:
    """The weights client methods on every target of the AsyncFleet."""

    if TYPE_CHECKING:

        async def _each(
            self,
            method: Callable[..., Awaitable[T]],
            arguments: dict[str, Any],
            *,
            shared_deadline: bool = False,
        ) -> FleetResult[T]: ...

    async def init_weight_transfer_engine(
        self, init_info: Mapping[str, Any], **options: Unpack[RequestOptions]
    ) -> FleetResult[MessageResult]:
        """POST /init_weight_transfer_engine (never resent; no HTTP timeout by default).

        Args:
            init_info: the transfer backend's settings (JSON), e.g. NCCL master address and ranks.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(
            AsyncDevClient.init_weight_transfer_engine, dict(init_info=init_info, **options)
        )

    async def start_weight_update(self, **options: Unpack[RequestOptions]) -> FleetResult[MessageResult]:
        """POST /start_weight_update (never resent); see also the weight_update() flow.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.start_weight_update, dict(**options))

    async def start_draft_weight_update(
        self, **options: Unpack[RequestOptions]
    ) -> FleetResult[MessageResult]:
        """POST /start_draft_weight_update: begin updating the draft (speculative) model's weights.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.start_draft_weight_update, dict(**options))

    async def update_weights(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]], **options: Unpack[RequestOptions]
    ) -> FleetResult[MessageResult]:
        """POST /update_weights: receive one batch of weights (never resent; no HTTP timeout by default).

        Args:
            update_info: names, dtypes and shapes of the tensors (JSON), or one such object per worker; CUDA
                IPC handles under ipc_handles travel pickled, as vLLM's HTTP client sends them.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.update_weights, dict(update_info=update_info, **options))

    async def finish_weight_update(
        self, *, weight_version: str | None = None, **options: Unpack[RequestOptions]
    ) -> FleetResult[MessageResult]:
        """POST /finish_weight_update (never resent).

        Args:
            weight_version: the version the new weights carry.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(
            AsyncDevClient.finish_weight_update, dict(weight_version=weight_version, **options)
        )

    async def update_weight_version(
        self, new_version: str, **options: Unpack[RequestOptions]
    ) -> FleetResult[WeightVersionResult]:
        """POST /update_weight_version.

        Args:
            new_version: the version string to set.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(
            AsyncDevClient.update_weight_version, dict(new_version=new_version, **options)
        )

    async def weight_info(self, **options: Unpack[RequestOptions]) -> FleetResult[WeightInfo]:
        """GET /weight_info: the weight version the server holds.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.weight_info, dict(**options))

    async def weight_checker(
        self,
        action: Literal["checksum", "reset", "compare"],
        *,
        baseline: Mapping[str, str] | None = None,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[WeightCheckResult]:
        """POST /weight_checker: checksum the weights, compare them with a baseline, or reset them.

        Args:
            action: "checksum", "compare" (needs baseline) or "reset" (never resent).
            baseline: the checksums of an earlier "checksum", for "compare".

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(
            AsyncDevClient.weight_checker, dict(action=action, baseline=baseline, **options)
        )

    async def shutdown_weight_transfer_engine(
        self, **options: Unpack[RequestOptions]
    ) -> FleetResult[MessageResult]:
        """POST /shutdown_weight_transfer_engine (never resent).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.shutdown_weight_transfer_engine, dict(**options))
