"""What stops generation: /pause (modes, clear_cache), /resume, /is_paused, the pause waits, and
/abort_requests."""

from __future__ import annotations

from ..contract import Scenario, call, returns, returns_model
from ..engine_actions import Return

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "pause",
        "POST /pause with the defaults: mode abort, clear_cache left to the server (true)",
        lambda c: c.pause(),
        returns_model("StatusResult", {"status": "paused"}),
        (call("pause_generation", "abort", True),),
    ),
    Scenario(
        "pause_keep_no_clear",
        "POST /pause?mode=keep&clear_cache=false",
        lambda c: c.pause(mode="keep", clear_cache=False),
        returns_model("StatusResult", {"status": "paused"}),
        (call("pause_generation", "keep", False),),
    ),
    Scenario(
        "pause_wait",
        "POST /pause?mode=wait",
        lambda c: c.pause(mode="wait"),
        returns_model("StatusResult", {"status": "paused"}),
        (call("pause_generation", "wait", True),),
    ),
    Scenario(
        "resume",
        "POST /resume",
        lambda c: c.resume(),
        returns_model("StatusResult", {"status": "resumed"}),
        (call("resume_scheduler"),),
    ),
    Scenario(
        "is_paused_false",
        "GET /is_paused, scheduler running",
        lambda c: c.is_paused(),
        returns(False),
        (call("is_scheduler_paused"),),
        safe=True,
    ),
    Scenario(
        "is_paused_true",
        "GET /is_paused, scheduler paused",
        lambda c: c.is_paused(),
        returns(True),
        (call("is_scheduler_paused"),),
        script={"is_scheduler_paused": [Return(True)]},
    ),
    Scenario(
        "wait_until_paused",
        "wait_until_paused polls /is_paused until the engine says true (false, true)",
        lambda c: c.wait_until_paused(deadline=10.0, interval=0.01),
        returns(None),
        (call("is_scheduler_paused"), call("is_scheduler_paused")),
        script={"is_scheduler_paused": [Return(False), Return(True)]},
    ),
    Scenario(
        "wait_until_resumed",
        "wait_until_resumed polls /is_paused until the engine says false",
        lambda c: c.wait_until_resumed(deadline=10.0, interval=0.01),
        returns(None),
        (call("is_scheduler_paused"),),
    ),
    Scenario(
        "abort_requests_ids",
        "POST /abort_requests with ids that are not running: nothing reaches the engine",
        lambda c: c.abort_requests(["req-a", "req-b"]),
        {
            "python": returns_model("AbortRequestsResult", {"status": "aborted", "aborted": 2}),
            "rust": returns_model("AbortRequestsResult", {"status": "aborted", "aborted": 2}),
        },
        (),
    ),
    Scenario(
        "abort_requests_all",
        "POST /abort_requests with no ids aborts everything in flight (nothing is)",
        lambda c: c.abort_requests(),
        {
            "python": returns_model("AbortRequestsResult", {"status": "aborted", "aborted": 0}),
            "rust": returns_model("AbortRequestsResult", {"status": "aborted", "aborted": None}),
        },
        (),
        sdk_difference="aborting all: Python counts what was in flight, Rust's empty 200 cannot say",
    ),
)
