"""The few client calls whose keyword changes during the client's rename (``timeout=`` -> ``deadline=``).

The waits and the barrier take their overall bound as ``deadline=`` in the new client API and as ``timeout=``
before it (kept one release as a deprecated alias). These helpers pass whichever the installed client names,
so the campaign runs against both without warnings.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from vllm_devclient.models import BarrierResult

__all__ = ["reset_until_success", "wait_ready"]


def _bound(method: Callable[..., Any], seconds: float) -> dict[str, float]:
    params = inspect.signature(method).parameters
    return {"deadline": seconds} if "deadline" in params else {"timeout": seconds}


def wait_ready(client: Any, seconds: float, *, request_timeout: float = 1.0) -> None:
    """``client.wait_until_ready`` bounded by ``seconds`` (raises WaitTimeoutError after it)."""
    method = client.wait_until_ready
    method(**_bound(method, seconds), request_timeout=request_timeout)


def reset_until_success(client: Any, seconds: float, *, reset_external: bool) -> BarrierResult:
    """``client.reset_prefix_cache_until_success`` bounded by ``seconds`` (steps the engine between tries)."""
    method = client.reset_prefix_cache_until_success
    result: BarrierResult = method(**_bound(method, seconds), reset_external=reset_external)
    return result
