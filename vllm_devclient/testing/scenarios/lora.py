"""Runtime LoRA adapters: /v1/load_lora_adapter and /v1/unload_lora_adapter (the extras setup)."""

from __future__ import annotations

from ... import errors
from ..contract import Check, Client, Scenario, raises, resolve, returns_model
from ..pool import lora_adapter_dir


def _load_then_unload(c: Client) -> object:
    """Both routes in one call, so the frontend is left as it was found; answers both results."""
    from ...client import AsyncDevClient

    path = str(lora_adapter_dir())
    if isinstance(c, AsyncDevClient):

        async def both() -> object:
            return [await c.load_lora_adapter("adapter-a", path), await c.unload_lora_adapter("adapter-a")]

        return both()
    return [c.load_lora_adapter("adapter-a", path), c.unload_lora_adapter("adapter-a")]


def _named(index: str, verb: str) -> Check:
    return Check(
        f"answer {index} says adapter-a was {verb}",
        lambda o: (
            "adapter-a" in str(resolve(o, f"{index}.message")) and verb in str(resolve(o, f"{index}.message"))
        ),
    )


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "load_then_unload_lora_adapter",
        "POST /v1/load_lora_adapter then /v1/unload_lora_adapter: plain-text success sentences, read as "
        "MessageResult",
        _load_then_unload,
        returns_model("list", {"len()": 2}, _named("0", "added"), _named("1", "removed")),
        None,
        setup="extras",
    ),
    Scenario(
        "unload_lora_adapter_unknown",
        "POST /v1/unload_lora_adapter of an adapter never loaded: 404 (a plain NotFoundError, not dev mode)",
        lambda c: c.unload_lora_adapter("never-loaded"),
        raises(errors.NotFoundError, {"status_code": 404}),
        None,
        setup="extras",
    ),
)
