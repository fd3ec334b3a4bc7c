"""The contract scenarios, by route family: one definition used by the contract tests, the parity report,
the recorder and the replay tests.

Each family module holds a `SCENARIOS` tuple of pure data (see `vllm_devclient.testing.contract` for what a
:class:`~vllm_devclient.testing.contract.Scenario` says). A new route needs one scenario in the family
it belongs to; a new family module is listed in `FAMILIES` (a guard test checks that none is left out).
The order of `FAMILIES` is the order of the parity report's rows and of the fixture summary.

What a scenario is and how it runs is in `vllm_devclient.testing.contract`.
"""

from __future__ import annotations

from types import ModuleType

from .. import contract
from . import (
    barrier,
    caches,
    checkpoint,
    failures,
    flows,
    info,
    lora,
    pause,
    profile,
    raw,
    rpc,
    setups,
    sleep,
    weights,
)

__all__ = ["FAMILIES", "SCENARIOS", "get_scenario"]

FAMILIES: tuple[ModuleType, ...] = (
    info,
    caches,
    sleep,
    checkpoint,
    pause,
    rpc,
    weights,
    lora,
    profile,
    flows,
    barrier,
    failures,
    raw,
    setups,
)

SCENARIOS: tuple[contract.Scenario, ...] = tuple(sc for family in FAMILIES for sc in family.SCENARIOS)


def _check_unique() -> None:
    seen: set[str] = set()
    for sc in SCENARIOS:
        if sc.name in seen:
            raise RuntimeError(f"duplicate scenario name {sc.name!r}")
        seen.add(sc.name)


_check_unique()


def get_scenario(name: str) -> contract.Scenario:
    for sc in SCENARIOS:
        if sc.name == name:
            return sc
    raise KeyError(f"no scenario named {name!r}")
