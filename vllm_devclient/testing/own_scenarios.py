"""Scenarios of your own, run beside the built-in ones by `parity` (and, in this repository's checkout, by the
fixture tools' `record` and `drift`).

Pin what your code relies on: a module with a `SCENARIOS` tuple of
:class:`~vllm_devclient.testing.contract.Scenario` (the call, what each frontend must give, the engine calls
it causes, a script for the engine), named on the command line by `--scenarios-from` (repeatable): an
importable module (`my_project.vllm_pins`) or a file (`tests/vllm_pins.py`)::

    from vllm_devclient.testing.contract import Scenario, call, returns

    SCENARIOS = (
        Scenario(
            "my_pause_is_seen",
            "pause (keep), then /is_paused says so",
            lambda c: (c.pause(mode="keep"), c.is_paused())[1],
            returns(True),
            (call("pause_generation", "keep", True), call("is_scheduler_paused")),
        ),
    )

then `vllm-devclient parity --scenarios-from tests/vllm_pins.py --scenarios my_pause_is_seen`. A name may not
repeat a built-in scenario's (or another module's).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from .contract import Scenario
from .scenarios import SCENARIOS as BUILT_IN

__all__ = ["ScenarioSourceError", "catalogue", "load", "select"]


class ScenarioSourceError(ValueError):
    """A `--scenarios-from` module that cannot be loaded, lacks `SCENARIOS`, or repeats a name; or a
    `--scenarios` name no catalogue has. `option` names the command-line option at fault."""

    def __init__(self, message: str, option: str = "--scenarios-from") -> None:
        super().__init__(message)
        self.option = option


def load(source: str) -> tuple[Scenario, ...]:
    """The `SCENARIOS` of a module given by import name or by the path of a `.py` file."""
    try:
        if source.endswith(".py") or "/" in source:
            path = Path(source)
            if not path.is_file():
                raise ScenarioSourceError(f"{source}: no such file")
            name = f"vllm_devclient_own_scenarios_{abs(hash(str(path.resolve())))}"
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module  # dataclasses and pickling look modules up by name
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(source)
    except ScenarioSourceError:
        raise
    except Exception as exc:
        raise ScenarioSourceError(f"{source} could not be loaded: {type(exc).__name__}: {exc}") from exc
    found = getattr(module, "SCENARIOS", None)
    if not isinstance(found, Sequence) or not all(isinstance(s, Scenario) for s in found) or not found:
        raise ScenarioSourceError(
            f"{source} has no SCENARIOS: define SCENARIOS = (Scenario(...), ...) there "
            "(vllm_devclient.testing.contract.Scenario)"
        )
    return tuple(found)


def catalogue(sources: Sequence[str] = ()) -> tuple[Scenario, ...]:
    """The built-in scenarios, then those of each source in order; a repeated name is refused."""
    out = list(BUILT_IN)
    origin = dict.fromkeys((s.name for s in BUILT_IN), "the built-in scenarios")
    for source in sources:
        for scenario in load(source):
            if scenario.name in origin:
                raise ScenarioSourceError(
                    f"{source}: the scenario name {scenario.name!r} is taken by {origin[scenario.name]}; "
                    "rename yours"
                )
            origin[scenario.name] = source
            out.append(scenario)
    return tuple(out)


def select(names: str | None, sources: Sequence[str] = ()) -> list[Scenario] | None:
    """The scenarios named (comma-separated) among the catalogue; every one when `names` is None and there
    are no sources (None), else the whole catalogue."""
    every = catalogue(sources)
    if names is None:
        return None if not sources else list(every)
    by_name = {s.name: s for s in every}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in by_name]
    if unknown or not wanted:
        where = " (give --scenarios-from for your own)" if not sources else ""
        raise ScenarioSourceError(
            f"no scenario named {', '.join(unknown) or '(none given)'}{where}", option="--scenarios"
        )
    return [by_name[n] for n in wanted]
