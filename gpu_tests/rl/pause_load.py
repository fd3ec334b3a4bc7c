"""Point 3 of issue 26: pause under load, per pause mode, on the real engine.

Per mode: `requests` long greedy completions (`ignore_eos`, so none ends early) are started and left in
flight; once `/metrics` shows them running (at most `start_s`), `pause(mode)`, `wait_until_paused()` and,
right after it, `/metrics`' `vllm:num_requests_running` (0 shows the engine idle); for `keep`, a hold of
`hold_s` seconds in which no request may finish (frozen, not drained); then `resume()`, every request's
outcome and one new completion (the engine serves again). Times are seconds from the start of the mode's run.

An outcome is `aborted` (finish reason "abort" or an error), `finished` (done normally before the resume
was sent) or `kept` (done normally after that). :data:`EXPECTED` is what the SDK's docstring of `pause` (its
`mode` argument) says each mode does to requests in flight; a mode's row matches when every request that
was in flight at the pause has that outcome.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vllm_devclient import AsyncDevClient, PauseMode

from .steps import error_text

MODES: tuple[PauseMode, ...] = ("abort", "wait", "keep")
EXPECTED: Mapping[PauseMode, str] = {"abort": "aborted", "wait": "finished", "keep": "kept"}
RUNNING = "vllm:num_requests_running"


def outcome(result: Mapping[str, Any], resume_sent_at: float | None) -> str:
    """`aborted`, `finished` or `kept` (see the module docstring)."""
    if "error" in result or result.get("finish_reason") == "abort":
        return "aborted"
    if resume_sent_at is not None and result["done_s"] > resume_sent_at:
        return "kept"
    return "finished"


def mode_row(mode: PauseMode, run: Mapping[str, Any]) -> dict[str, Any]:
    """The table row of one mode's run: outcome counts of the requests in flight at the pause, and
    whether they all match :data:`EXPECTED`."""
    paused_at = run.get("pause_sent_s")
    in_flight = [r for r in run.get("requests", []) if paused_at is None or r["done_s"] >= paused_at]
    counts = Counter(outcome(r, run.get("resume_sent_s")) for r in in_flight)
    return {
        "mode": mode,
        "in_flight": len(in_flight),
        "finished": counts["finished"],
        "aborted": counts["aborted"],
        "kept": counts["kept"],
        "expected": EXPECTED[mode],
        "matches_docs": bool(in_flight) and counts[EXPECTED[mode]] == len(in_flight),
        "full_length": sum(r.get("tokens") == run.get("max_tokens") for r in in_flight),
        "running_after_paused": run.get("running_after_paused"),
        "pause_call_s": _diff(run.get("pause_returned_s"), paused_at),
        "until_paused_s": _diff(run.get("paused_s"), paused_at),
        "finished_during_hold": run.get("finished_during_hold"),
        "new_request_after_resume": run.get("new_request_ok"),
    }


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


async def _running(client: AsyncDevClient) -> float | None:
    return (await client.metrics()).value(RUNNING)


async def _wait_running(
    client: AsyncDevClient,
    tasks: Sequence[asyncio.Task[Any]],
    step: Callable[..., Any],
    *,
    t0: float,
    start_s: float,
    clock: Callable[[], float],
) -> float | None:
    """Until ``/metrics`` shows the requests running, they all ended, or ``start_s`` passed since ``t0``:
    the running count last read."""
    while True:
        running: float | None = await step("running_before", _running(client))
        if running or all(t.done() for t in tasks) or clock() - t0 > start_s:
            return running
        await asyncio.sleep(0.05 if running is not None else start_s / 4)


async def _pause_and_resume(
    client: AsyncDevClient,
    mode: PauseMode,
    run: dict[str, Any],
    tasks: Sequence[asyncio.Task[Any]],
    step: Callable[..., Any],
    *,
    hold_s: float,
    timeout: float,
    since: Callable[[], float],
) -> None:
    """Pause, wait until paused, read the running count; for ``keep`` hold and count what finished; resume.
    Each moment into ``run`` as seconds ``since`` the mode's start."""
    run["pause_sent_s"] = since()
    run["pause"] = await step("pause", client.pause(mode, timeout=timeout))
    run["pause_returned_s"] = since()
    await step("wait_until_paused", client.wait_until_paused(deadline=timeout))
    run["paused_s"] = since()
    run["running_after_paused"] = await step("running_after_paused", _running(client))
    run["done_at_paused"] = sum(t.done() for t in tasks)
    if mode == "keep":
        await asyncio.sleep(hold_s)
        run["finished_during_hold"] = sum(t.done() for t in tasks) - run["done_at_paused"]
    run["resume_sent_s"] = since()
    run["resumed"] = await step("resume", client.resume())
    run["resumed_s"] = since()


async def pause_under_load(
    client: AsyncDevClient,
    mode: PauseMode,
    *,
    requests: int = 16,
    max_tokens: int = 512,
    hold_s: float = 1.0,
    start_s: float = 5.0,
    timeout: float = 120.0,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """One mode's run (module docstring); every failure is recorded in the returned dict, never raised."""
    t0 = clock()
    run: dict[str, Any] = {"mode": mode, "requests_sent": requests, "max_tokens": max_tokens, "errors": {}}

    async def one(i: int) -> dict[str, Any]:
        try:
            c = await client.completion(
                f"Request {i}: count from one to a thousand.",
                max_tokens=max_tokens,
                extra_body={"ignore_eos": True},
                timeout=timeout,
            )
            return {
                "i": i,
                "done_s": clock() - t0,
                "finish_reason": c.finish_reason,
                "tokens": c.output_tokens,
            }
        except Exception as exc:
            return {"i": i, "done_s": clock() - t0, "error": error_text(exc)}

    async def step(name: str, call: Any) -> Any:
        try:
            return await call
        except Exception as exc:
            run["errors"][name] = error_text(exc)
            return None

    tasks = [asyncio.create_task(one(i)) for i in range(requests)]
    run["running_before_pause"] = await _wait_running(
        client, tasks, step, t0=t0, start_s=start_s, clock=clock
    )
    await _pause_and_resume(
        client, mode, run, tasks, step, hold_s=hold_s, timeout=timeout, since=lambda: clock() - t0
    )
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for task in pending:
        task.cancel()
    run["requests"] = sorted((t.result() for t in done), key=lambda r: r["i"])
    run["unfinished"] = len(pending)
    new = await step("new_request", client.completion("After the resume:", max_tokens=8, timeout=timeout))
    run["new_request_ok"] = new is not None
    run["row"] = mode_row(mode, run)
    return run


async def pause_modes(
    url: str, modes: Sequence[PauseMode] = MODES, **kwargs: Any
) -> dict[str, dict[str, Any]]:
    """Every mode in turn against the server at `url`, one client."""
    async with AsyncDevClient(url, timeout=60.0) as client:
        return {mode: await pause_under_load(client, mode, **kwargs) for mode in modes}
