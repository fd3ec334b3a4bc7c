"""Completions, engine stepping and the offload barrier (reset_prefix_cache_until_success)."""

from __future__ import annotations

from typing import Any

from ... import errors
from ..contract import Check, Expect, Scenario, ScenarioRun, call, raises, returns_model
from ..engine_actions import Return

_BARRIER_TIMEOUT = 1.0
_BARRIER_MAX_POLL = 0.1


def _engine_steps_match_adds(run: ScenarioRun) -> str | None:
    steps = getattr(run.outcome, "engine_steps", None)
    if run.engine_calls is None or steps is None:
        return None
    adds = sum(1 for c in run.engine_calls if c[0] == "add_request")
    resets = sum(1 for c in run.engine_calls if c[0] == "reset_prefix_cache")
    attempts = getattr(run.outcome, "attempts", None)
    # A step the client gave up on near the deadline still reached the engine but is not counted.
    timed_out_step = any(ex.error and ex.request["path"] == "/v1/completions" for ex in run.exchanges)
    if adds != steps and not (timed_out_step and adds == steps + 1):
        return f"the engine saw {adds} ADD requests but the SDK reports {steps} engine steps"
    if resets != attempts:
        return f"the engine saw {resets} reset_prefix_cache calls but the SDK reports {attempts} attempts"
    return None


def _refused_or_timed_out(err: Any) -> bool:
    last = getattr(err, "last", None)
    return isinstance(last, errors.APITimeoutError) or getattr(last, "success", None) is False


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "completion",
        "a greedy 2-token completion: /v1/models once for the served name, then /v1/completions",
        lambda c: c.completion("hello", max_tokens=2),
        returns_model("Completion", {"text": "he", "finish_reason": "length", "output_tokens": 2}),
        (call("add_request", 2),),
    ),
    Scenario(
        "step_engine",
        "a 1-token completion: /v1/models once, then /v1/completions; the engine sees one ADD",
        lambda c: c.step_engine(),
        Expect("str", {}, (Check("a non-empty completion", lambda o: bool(o)),)),
        (call("add_request", 1),),
    ),
    Scenario(
        "barrier_success_third_try",
        "reset answers false, false, true: success after 3 attempts and exactly 2 engine steps",
        lambda c: c.reset_prefix_cache_until_success(deadline=10.0, interval=0.01),
        returns_model("BarrierResult", {"attempts": 3, "engine_steps": 2}),
        (
            call("reset_prefix_cache", False, False),
            call("add_request", 1),
            call("reset_prefix_cache", False, False),
            call("add_request", 1),
            call("reset_prefix_cache", False, False),
        ),
        script={"reset_prefix_cache": [Return(False), Return(False), Return(True)]},
        run_checks=(_engine_steps_match_adds,),
    ),
    Scenario(
        "barrier_no_stepping",
        "step_engine=False: retries without completions",
        lambda c: c.reset_prefix_cache_until_success(deadline=10.0, step_engine=False, interval=0.01),
        returns_model("BarrierResult", {"attempts": 2, "engine_steps": 0}),
        (call("reset_prefix_cache", False, False), call("reset_prefix_cache", False, False)),
        script={"reset_prefix_cache": [Return(False), Return(True)]},
    ),
    Scenario(
        "barrier_external",
        "reset_external=True is sent on every attempt",
        lambda c: c.reset_prefix_cache_until_success(deadline=10.0, reset_external=True, interval=0.01),
        returns_model("BarrierResult", {"attempts": 2, "engine_steps": 1}),
        (
            call("reset_prefix_cache", False, True),
            call("add_request", 1),
            call("reset_prefix_cache", False, True),
        ),
        script={"reset_prefix_cache": [Return(False), Return(True)]},
    ),
    Scenario(
        "barrier_timeout",
        f"the engine never succeeds: BarrierTimeoutError at the {_BARRIER_TIMEOUT:.0f} s deadline "
        "plus one poll",
        lambda c: c.reset_prefix_cache_until_success(
            deadline=_BARRIER_TIMEOUT, interval=0.02, max_interval=_BARRIER_MAX_POLL
        ),
        raises(
            errors.BarrierTimeoutError,
            {},
            # The last try may be one the deadline cut short: a refusal or a timed-out try, never success.
            Check("the last answer was a refusal or a timed-out try", _refused_or_timed_out),
            Check("at least 3 attempts", lambda e: e.attempts >= 3),
            Check(
                "at most one engine step between attempts (none is started too close to the deadline)",
                lambda e: 1 <= e.engine_steps <= e.attempts - 1,
            ),
            Check("waited at least the deadline", lambda e: e.waited_s >= _BARRIER_TIMEOUT),
        ),
        None,
        script={"reset_prefix_cache": [Return(False)]},
        timing_dependent=True,
        min_elapsed_s=_BARRIER_TIMEOUT,
        # the deadline, and one last short try (MIN_TRY_SECONDS), on a slow 2-core machine
        max_elapsed_s=_BARRIER_TIMEOUT + 0.5,
        run_checks=(_engine_steps_match_adds,),
    ),
)
