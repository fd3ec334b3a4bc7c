"""The profiler: /start_profile and /stop_profile (the extras setup)."""

from __future__ import annotations

from ..contract import Client, Scenario, call, returns


def _start_then_stop(c: Client) -> object:
    # One session, so the frontend is left as it was found.
    from ...client import AsyncDevClient

    if isinstance(c, AsyncDevClient):

        async def both() -> None:
            await c.start_profile()
            await c.stop_profile()

        return both()
    c.start_profile()
    c.stop_profile()
    return None


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "start_stop_profile",
        "POST /start_profile then /stop_profile: empty 200s, the engine's profile(True) then profile(False)",
        _start_then_stop,
        returns(None),
        {
            "python": (
                call("profile", True, None, None, None, None),
                call("profile", False, None, None, None, None),
            ),
            # vllm-rs 0.34 sends the start's fifth argument (profiler_kwargs); the stop stays two.
            "rust": (call("profile", True, None, None, None, None), call("profile", False, None)),
        },
        setup="extras",
    ),
)
