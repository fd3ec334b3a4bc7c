"""docs/rl_frameworks.json is what a run observes: the RL frameworks' requests and the SDK's calls, sent to
both real frontends on the kit's scripted engine (`tools.rl_frameworks`), reach the servers, get the statuses
and make the engine calls the committed record says, and the SDK covers the framework steps it says it covers.

The run reuses the pool's extras frontends (LoRA enabled, shared with the scenario tests), so it costs the
steps alone, a few seconds, where those frontends are up already.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tools.rl_frameworks.cli import differences
from tools.rl_frameworks.record import COMMAND, RECORD, record
from tools.rl_frameworks.runner import observe
from tools.rl_frameworks.transcription import STEPS
from vllm_devclient.testing.pool import FRONTENDS, FrontendPool, lora_adapter_dir

pytestmark = [pytest.mark.frontend, pytest.mark.frontend_pool(setups=("extras",))]


@pytest.fixture(scope="module")
def observed(frontend_pool: FrontendPool) -> Iterator[dict[str, Any]]:
    """One run on the pool's extras frontends (their engines reset after it: other tests share them)."""
    frontends = {fe: frontend_pool.get(fe, "extras") for fe in FRONTENDS}
    try:
        yield record(observe(frontends, str(lora_adapter_dir())))
    finally:
        for fe in frontends.values():
            fe.engine.reset()


def test_the_committed_record_is_what_a_run_observes(observed: dict[str, Any]) -> None:
    found = differences(json.loads(RECORD.read_text()), observed)
    assert not found, f"docs/rl_frameworks.json differs from this run (run `{COMMAND}`):\n" + "\n".join(
        found[:20]
    )


def test_every_step_ran_on_both_frontends_and_the_sdk_raised_nothing(observed: dict[str, Any]) -> None:
    assert [s["step"] for s in observed["steps"]] == [s.name for s in STEPS]
    for step in observed["steps"]:
        runs = step["sdk"]["observed"]
        servers = {server for run in runs.values() for server in run["servers"]}
        assert servers == set(FRONTENDS), step["step"]
        assert all(run["error"] is None for run in runs.values()), (step["step"], runs)
        assert all(got["requests"] for run in runs.values() for got in run["servers"].values()), step["step"]
