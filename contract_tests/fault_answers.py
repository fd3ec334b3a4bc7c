"""What the fault suite's modules (contract_tests/test_faults_*.py, issue 11) share: the answers they script
on `MisbehavingServer` (vllm_devclient/testing/misbehaving.py; conftest.py's `server` fixture is one), which
does what no real frontend will: hang after reading, trickle bytes, reset, close right after answering, echo
headers, send 50 MB pages.

The suite, one class of the issue after another, each run against the real vLLM frontends where it applies:

1. Deadlines, and 7. a dead engine: test_faults_deadlines.py.
2. No unsafe resend, and 3. concurrency on one client: test_faults_resends.py.
4. Credentials: test_faults_secrets.py.
5. Raw exceptions, and 9. the frontend label: test_faults_errors.py.
6. Bad arguments: test_faults_bad_arguments.py.
8. KV events, publisher restarts: test_faults_kv_events.py.

The suite is written against the planned client API (PLAN.md: `deadline=` on the barrier and the waits,
keyword-only options after the first argument).
"""

from __future__ import annotations

from typing import Any

from vllm_devclient.testing.misbehaving_behaviours import Answer

MODELS = Answer(200, json={"object": "list", "data": [{"id": "m", "object": "model"}]})
COMPLETION = Answer(
    200,
    json={
        "id": "cmpl-1",
        "object": "text_completion",
        "model": "m",
        "choices": [{"index": 0, "text": "x", "finish_reason": "length"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    },
)


def engine_error(method: str = "collective_rpc", status: int = 500, **kw: Any) -> Answer:
    """What the Python frontend answers when an engine call raised (without its `server` header)."""
    error = {
        "message": f"Call to {method} method failed: boom",
        "type": "InternalServerError",
        "param": None,
        "code": status,
    }
    return Answer(status, json={"error": error}, **kw)
