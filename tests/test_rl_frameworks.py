"""docs/rl_frameworks.json (the RL frameworks' steps and the SDK call for each, rendered into
docs/weight-sync.md by scripts/figures.py): every SDK call it names exists on both clients and both fleets,
every name it exports is the package's, and each is quoted in the row's SDK cell."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

import vllm_devclient
from vllm_devclient import AsyncDevClient, AsyncFleet, DevClient, Fleet
from vllm_devclient._base_client import WeightUpdateOptions

DATA = json.loads((Path(__file__).resolve().parent.parent / "docs" / "rl_frameworks.json").read_text())
ROWS = DATA["steps"]


@pytest.mark.parametrize("row", ROWS, ids=[r["step"] for r in ROWS])
def test_every_sdk_call_named_exists_on_both_clients_and_both_fleets(row: dict[str, Any]) -> None:
    for name in row["calls"]:
        for surface in (DevClient, AsyncDevClient, Fleet, AsyncFleet):
            assert callable(getattr(surface, name, None)), f"{surface.__name__}.{name} does not exist"
        assert re.search(rf"\b{name}\b", row["sdk"]), f"{name} is checked but the cell does not show it"
    for name in row["exports"]:
        assert name in vllm_devclient.__all__ and getattr(vllm_devclient, name) is not None
        assert re.search(rf"\b{name}\b", row["sdk"]), f"{name} is checked but the cell does not show it"


def test_the_keywords_quoted_are_the_calls_own() -> None:
    # `watchdog(interval=10, failures=6)`, `paused("keep", clear_cache=False)`, ...: real parameters.
    quoted = {
        "watchdog": {"interval", "failures"},
        "paused": {"clear_cache"},
        "weight_update": {"pause_mode", "clear_cache"},
        "load_lora_adapter": {"load_inplace"},
    }
    for name, keywords in quoted.items():
        params = set(inspect.signature(getattr(DevClient, name)).parameters)
        if name == "weight_update":  # its options are a TypedDict
            params = set(WeightUpdateOptions.__annotations__)
        assert keywords <= params, (name, keywords - params)


def test_every_framework_has_a_cell_in_every_row() -> None:
    for row in ROWS:
        assert all(row.get(key) for key in DATA["frameworks"]), row["step"]
        assert row["sdk"]
