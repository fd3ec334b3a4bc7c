"""The RL frameworks' transcription (tools/rl_frameworks/transcription.py) and its committed record
(docs/rl_frameworks.json, rendered into docs/weight-sync.md by scripts/figures.py):

- every SDK call a step names exists on both clients and both fleets (a call through `WeightSync` on
  WeightSync; a call inside a block on what the block yields, on all four), with the keywords it passes;
- every template resolves on one server and on two (no unknown value, no arithmetic `Expr` refuses);
- the record holds the transcription as it is now (a step changed here and not run again is stale:
  contract_tests/test_rl_frameworks_run.py runs it and compares what it observes);
- the table has a row per step, a column per framework, and a ≠ exactly where the record says the SDK's
  call did not cover the framework's requests.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Iterator
from typing import Any

import pytest
from typing_extensions import Self, Unpack

from tools.rl_frameworks.record import COMMAND, RECORD
from tools.rl_frameworks.render import table
from tools.rl_frameworks.sdk import BLOCK_ACTIONS
from tools.rl_frameworks.spec import Call, Env, Step, resolve, to_json
from tools.rl_frameworks.transcription import FRAMEWORKS, STEPS, VALUES
from vllm_devclient import AsyncDevClient, AsyncFleet, DevClient, Fleet, WeightSync

DATA = json.loads(RECORD.read_text())
SURFACES = (DevClient, AsyncDevClient, Fleet, AsyncFleet)


def _parameters(owner: type, name: str) -> set[str]:
    """The keywords a method takes: its parameters, and the keys of a `**options: Unpack[SomeTypedDict]`."""
    method = getattr(owner, name)
    names = set(inspect.signature(method).parameters)
    for hint in typing.get_type_hints(method, include_extras=True).values():
        if typing.get_origin(hint) is Unpack:
            names |= set(typing.get_type_hints(typing.get_args(hint)[0]))
    return names


def _yielded(owner: type, name: str) -> type:
    """What `with owner.name(...) as x` binds x to, from the method's return annotation."""
    (inner,) = typing.get_args(typing.get_type_hints(getattr(owner, name))["return"])
    return owner if inner is Self else inner


def _calls(owner: type, call: Call) -> Iterator[tuple[type, Call]]:
    yield (WeightSync if call.via == "WeightSync" else owner), call
    for inner in call.block or ():
        if isinstance(inner, Call):
            yield from _calls(_yielded(owner, call.method), inner)


@pytest.mark.parametrize("step", STEPS, ids=[s.name for s in STEPS])
def test_every_sdk_call_exists_on_both_clients_and_both_fleets(step: Step) -> None:
    for surface in SURFACES:
        for call in step.sdk:
            for owner, each in _calls(surface, call):
                assert callable(getattr(owner, each.method, None)), (
                    f"{owner.__name__}.{each.method} does not exist"
                )
                unknown = set(each.kwargs) - _parameters(owner, each.method)
                assert not unknown, f"{owner.__name__}.{each.method} takes no {sorted(unknown)}"
            actions = [b for b in call.block or () if isinstance(b, str)]
            assert set(actions) <= set(BLOCK_ACTIONS), actions


@pytest.mark.parametrize("env", [Env(0, (1,)), Env(1, (1, 2))], ids=["one server", "second of two"])
def test_every_template_resolves(env: Env) -> None:
    for step in STEPS:
        for part in step.frameworks.values():
            for send in part.sends if part else ():
                resolved = resolve([dict(send.query), send.json], env, VALUES)
                assert "$" not in json.dumps(resolved, default=repr), (step.name, resolved)
        for call in step.sdk:
            resolve([list(call.args), dict(call.kwargs)], env, VALUES)


def test_the_record_holds_the_transcription_as_it_is() -> None:
    stale = f"docs/rl_frameworks.json is stale: run `{COMMAND}`"
    assert DATA["frameworks"] == {k: vars(fw) for k, fw in FRAMEWORKS.items()}, stale
    assert DATA["values"] == to_json(VALUES), stale
    assert [s["step"] for s in DATA["steps"]] == [s.name for s in STEPS], stale
    for recorded, step in zip(DATA["steps"], STEPS, strict=True):
        assert recorded["sdk"]["spec"] == to_json(step.sdk), (stale, step.name)
        assert recorded["servers"] == step.servers, (stale, step.name)
        for key, part in step.frameworks.items():
            got = recorded["frameworks"][key]
            assert (got is None) == (part is None), (stale, step.name, key)
            if part is not None:
                assert got["source"] == to_json(part.source), (stale, step.name, key)
                assert got.get("sends", []) == to_json(part.sends), (stale, step.name, key)


def test_every_framework_is_read_at_a_commit_and_every_step_says_where() -> None:
    for fw in FRAMEWORKS.values():
        assert len(fw.commit) == 40 and int(fw.commit, 16) >= 0, fw.name
    for step in STEPS:
        assert set(step.frameworks) == set(FRAMEWORKS), step.name
        for part in step.frameworks.values():
            if part is not None:
                assert part.source and all(s.path and s.function for s in part.source), step.name
                assert bool(part.sends) != bool(part.in_process), step.name


def _differs(part: dict[str, Any] | None) -> bool:
    return part is not None and any(r for servers in part["differs"].values() for r in servers.values())


def test_the_table_marks_exactly_the_differences_the_record_holds() -> None:
    rows = [line for line in table(DATA).splitlines() if line.startswith("| **")]
    assert len(rows) == len(DATA["steps"])
    for row, step in zip(rows, DATA["steps"], strict=True):
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert len(cells) == len(FRAMEWORKS) + 2, row
        for cell, key in zip(cells[1:-1], FRAMEWORKS, strict=True):
            part = step["frameworks"][key]
            assert ("**≠**" in cell) == _differs(part), (step["step"], key, cell)
            assert (cell == "-") == (part is None), (step["step"], key)
