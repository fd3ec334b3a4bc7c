"""Every scenario on both real frontends (the plugin's `frontend` fixture), sync and async clients.

Each test asserts the typed SDK result or exception the scenario names, and the engine calls the request
caused on the scripted engine (method and arguments). Default-setup scenarios run on the shared frontends;
API-key, dev-mode-off and dead-engine scenarios on the pool's extra frontends of the same kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from vllm_devclient.testing.contract import Scenario, ScenarioRun, arun_scenario, run_scenario
from vllm_devclient.testing.pool import FrontendPool
from vllm_devclient.testing.scenarios import SCENARIOS

pytestmark = [pytest.mark.frontend, pytest.mark.frontend_pool]


def _target(scenario: Scenario, frontend: Any, pool: FrontendPool) -> Any:
    return frontend if scenario.setup == "default" else pool.get(frontend.frontend, scenario.setup)


def _assert_contract(run: ScenarioRun, target: Any) -> None:
    problems = run.problems()
    if problems:
        listing = "\n".join(f"  - {p}" for p in problems)
        # A dead engine's frontend serves one run: the harness's is gone by now.
        tail = "(its frontend served one run)" if target is None else target.log_tail(15)
        pytest.fail(
            f"{run.scenario.name} on the {run.frontend} frontend ({run.mode}): {run.scenario.description}\n"
            f"{listing}\n{run.describe()}\n--- frontend log tail ---\n{tail}",
            pytrace=False,
        )


@pytest.mark.frontend_pool(harness_run=True)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_sync(
    scenario: Scenario,
    frontend: Any,
    frontend_pool: FrontendPool,
    harness_run: Callable[[Scenario, str], ScenarioRun | None],
) -> None:
    """The harness's run when the session made it (conftest's harness_run), else a run of its own."""
    made = harness_run(scenario, frontend.frontend)
    if made is not None:
        reusable = scenario.setup != "dead_engine"
        _assert_contract(made, _target(scenario, frontend, frontend_pool) if reusable else None)
        return
    target = _target(scenario, frontend, frontend_pool)
    _assert_contract(run_scenario(scenario, target), target)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_async(scenario: Scenario, frontend: Any, frontend_pool: FrontendPool) -> None:
    target = _target(scenario, frontend, frontend_pool)
    _assert_contract(await arun_scenario(scenario, target), target)


def test_every_scenario_family_is_listed() -> None:
    """A family module left out of FAMILIES would hold scenarios that never run."""
    import pkgutil

    from vllm_devclient.testing import scenarios

    modules = {m.name for m in pkgutil.iter_modules(scenarios.__path__) if not m.name.startswith("_")}
    assert modules == {family.__name__.rsplit(".", 1)[1] for family in scenarios.FAMILIES}
