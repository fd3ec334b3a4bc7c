# Generated from vllm_devclient/routes/lora.py by scripts/generate.py; do not edit.
"""The lora methods of AsyncFleet, each on every target (the client method's signature and docstring)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from typing_extensions import Unpack

from ..._base_client import RequestOptions
from ...client import AsyncDevClient
from ...models import MessageResult
from ..results import FleetResult

__all__ = ["_AsyncLoraMethods"]

T = TypeVar("T")


class _AsyncLoraMethods:
    """The lora client methods on every target of the AsyncFleet."""

    if TYPE_CHECKING:

        async def _each(
            self,
            method: Callable[..., Awaitable[T]],
            arguments: dict[str, Any],
            *,
            shared_deadline: bool = False,
        ) -> FleetResult[T]: ...

    async def load_lora_adapter(
        self,
        lora_name: str,
        lora_path: str,
        *,
        load_inplace: bool = False,
        is_3d_lora_weight: bool = False,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[MessageResult]:
        """POST /v1/load_lora_adapter (needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 and --enable-lora).

        Args:
            lora_name: the name requests will use.
            lora_path: where the adapter is, on the server.
            load_inplace: replace an adapter of the same name in place.
            is_3d_lora_weight: the adapter's weights are 3-D (MoE experts).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(
            AsyncDevClient.load_lora_adapter,
            dict(
                lora_name=lora_name,
                lora_path=lora_path,
                load_inplace=load_inplace,
                is_3d_lora_weight=is_3d_lora_weight,
                **options,
            ),
        )

    async def unload_lora_adapter(
        self, lora_name: str, *, lora_int_id: int | None = None, **options: Unpack[RequestOptions]
    ) -> FleetResult[MessageResult]:
        """POST /v1/unload_lora_adapter.

        Args:
            lora_name: the adapter's name.
            lora_int_id: its numeric id, when the name is ambiguous.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(
            AsyncDevClient.unload_lora_adapter, dict(lora_name=lora_name, lora_int_id=lora_int_id, **options)
        )
