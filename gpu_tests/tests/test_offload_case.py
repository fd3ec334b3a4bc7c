"""run_case end to end with the real Rust frontend standing in for `vllm serve`: the server's flags, the probe
folder, the instruments' wiring, the report written and judged. The scripted engine offloads nothing, so the
check must refuse to call the reload proven instead of passing."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from gpu_tests.kv_proof.instruments import INSTRUMENTS
from gpu_tests.offload_check import PROFILES, CheckCase, OffloadCheckReport, run_case
from gpu_tests.offload_check.case import BATCH_CONTROL_S, batch_control_for
from gpu_tests.offload_check.cli import _sizes
from gpu_tests.offload_check.probe_files import PROBE_DIR_ENV
from vllm_devclient.testing import RustFrontend, ScriptedEngine

from .conftest import GSM8K_DIR


def _encode(text: str) -> list[int]:
    return [10 + ord(c) % 50 for c in text][:200]  # short prompts: the scripted engine's context is small


def _encode_whole(text: str) -> list[int]:
    return [10 + ord(c) % 50 for c in text]


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    configs: list[Any] = []

    class StandIn:
        def __init__(self, config: Any) -> None:
            configs.append(config)
            self.config = config
            self.log_path: Path | None = None  # no server log: the engine cannot have died

        def __enter__(self) -> StandIn:
            # What the recording scheduler writes at start: the layout (here one full-attention group).
            root = Path(self.config.env[PROBE_DIR_ENV])
            (root / "layout.json").write_text(
                json.dumps({"groups": [{"index": 0, "kind": "full", "block_size": 16}]})
            )
            self.fe = RustFrontend(engine=ScriptedEngine(token_ids=(19, 26), max_model_len=2048)).start()
            self.base_url = self.fe.base_url
            self.command = [*self.config.launcher, "serve", "m", "--port", "1"]
            return self

        def __exit__(self, *exc: object) -> None:
            self.fe.stop()

    monkeypatch.setattr("gpu_tests.offload_check.case.VllmServer", StandIn)
    return configs


def test_run_case_wires_server_probes_instruments_and_report(tmp_path: Path, stand_in: list[Any]) -> None:
    case = CheckCase(PROFILES["small"], "OffloadingConnector", "rust")
    report = run_case(
        case,
        report_dir=tmp_path,
        num_questions=2,
        max_tokens=2,
        iterations=1,
        instruments=INSTRUMENTS,
        mutations=("load_wrong_cpu_block", "state_ahead", "simple_load_wrong_place"),
        boundary_probes=1,
        use_kv_events=False,  # the scripted engine publishes no CPU stores to wait for
        gsm8k_dir=GSM8K_DIR,
        encoder=lambda model: _encode,
        extra_args=["--dtype", "half"],
    )
    (config,) = stand_in
    args = list(config.extra_args)
    assert args[-7:] == ["--dtype", "half", "--enable-prompt-tokens-details", *INSTRUMENTS.server_args]
    assert (
        "spec_name" not in config.connector_extra
    )  # the proof stands above every connector: vLLM's own spec
    assert config.env[PROBE_DIR_ENV] == str((tmp_path / f"{case.id}.probe").resolve())
    saved = OffloadCheckReport.model_validate_json((tmp_path / f"{case.id}.json").read_text())
    assert saved == report and report.format == 2
    assert [p.kind for p in report.probes].count("boundary") == 1 and report.layout[0].block_size == 16
    assert report.extra["mutations_not_applicable"] == {
        "state_ahead": "the model has no recurrent-state group",
        "simple_load_wrong_place": "it is injected into the SimpleCPUOffloadConnector",
    }
    assert [it.label for it in report.iterations] == ["clean-1", "mutation-load_wrong_cpu_block"]
    first = report.iterations[0]
    assert not first.assertion("reload_proven").passed  # nothing was offloaded, and the check says so
    # No recorder, no reference instrument ran in the stand-in: the check says the instruments are missing.
    assert report.assertion("instruments_ok").passed is False
    assert "no reference digests" in report.assertion("instruments_ok").message
    assert report.status == "failed" and report.frontend_observed == "rust"
    assert report.timings["server_startup_s"] >= 0 and report.timings["case_s"] >= report.timings["check_s"]


def test_run_case_without_instruments_says_what_it_could_not_prove(
    tmp_path: Path, stand_in: list[Any]
) -> None:
    case = CheckCase(PROFILES["small"], "SimpleCPUOffloadConnector", "rust")
    report = run_case(
        case,
        report_dir=tmp_path,
        num_questions=2,
        max_tokens=2,
        iterations=1,
        gsm8k_dir=GSM8K_DIR,
        encoder=lambda model: _encode,
    )
    (config,) = stand_in
    assert "--scheduler-cls" not in config.extra_args and "--worker-extension-cls" not in config.extra_args
    first = report.iterations[0]
    assert not first.assertion("kv_bytes_identical").evaluated
    assert report.assertion("instruments_ok").passed
    with pytest.raises(Exception, match="mutations need"):
        run_case(case, report_dir=tmp_path, mutations=("simple_load_wrong_place",), gsm8k_dir=GSM8K_DIR)


def test_a_control_cuts_its_boundary_probes_against_the_sizes_it_is_given(
    tmp_path: Path, stand_in: list[Any]
) -> None:
    """An uninstrumented control replays its instrumented case's prompts: the boundary sizes it is given stand
    for the layout the recorder would read, and the same sizes give the same probes."""
    case = CheckCase(PROFILES["small"], "SimpleCPUOffloadConnector", "rust")
    common: dict[str, Any] = {
        "num_questions": 2,
        "max_tokens": 2,
        "iterations": 1,
        "boundary_probes": 1,
        "gsm8k_dir": GSM8K_DIR,
        "encoder": lambda model: _encode,
    }
    read = run_case(case, report_dir=tmp_path / "layout", **common)  # the stand-in's layout: 16 tokens
    given = run_case(case, report_dir=tmp_path / "16", boundary_sizes=[16], **common)
    other = run_case(case, report_dir=tmp_path / "24", boundary_sizes=[24], **common)
    assert [p.key for p in given.probes] == [p.key for p in read.probes]
    assert {p.boundary for p in read.probes if p.kind == "boundary"} == {16}
    assert {p.boundary for p in other.probes if p.kind == "boundary"} == {24}
    assert all(p.length % 24 == 0 for p in other.probes if p.kind == "boundary")
    with pytest.raises(Exception, match="--boundary-sizes"):
        _sizes("16,x")


def test_mutation_iterations_send_their_probes_cut_short() -> None:
    from gpu_tests.offload_check.case import _mutation_plans
    from gpu_tests.offload_check.probe_files import GroupLayout
    from gpu_tests.offload_check.probes import PROBE_MAX_TOKENS, Probe

    layout = [GroupLayout(index=0, kind="full", block_size=16)]
    probes = [
        Probe("q00", "gsm8k", tuple(range(40)), 0, 3, 256),
        Probe("b16-q01", "boundary", tuple(range(32)), 1, None, 32, 16),
    ]
    plans, skipped = _mutation_plans(
        ["load_wrong_cpu_block"], "OffloadingConnector", INSTRUMENTS, layout, probes, 4
    )
    assert not skipped and [p.max_tokens for p in plans[0].probes] == [PROBE_MAX_TOKENS, PROBE_MAX_TOKENS]
    assert [p.token_ids for p in plans[0].probes] == [p.token_ids for p in probes]


def test_mutation_iterations_take_the_longest_boundary_probe_and_control_of_each_size() -> None:
    """At real size a block can outlast every question (Qwen3.5: 544 tokens, loads of one block each): the
    catalogue needs a probe whose load moves two blocks of a group, or swap_blocks never acts."""
    from gpu_tests.offload_check.case import _mutation_plans
    from gpu_tests.offload_check.probe_files import GroupLayout
    from gpu_tests.offload_check.probes import Probe

    layout = [GroupLayout(index=0, kind="full", block_size=16)]
    probes = [
        Probe("q00", "gsm8k", tuple(range(40)), 0, 3, 256),
        Probe("b16-q01", "boundary", tuple(range(32)), 1, None, 32, 16),
        Probe("b16-q02", "boundary", tuple(range(64)), 2, None, 32, 16),
        Probe("b16-q03", "boundary", tuple(range(64)), 3, None, 32, 16),
        Probe("c16-q04", "control", tuple(range(29)), 4, None, 32, 16),
        Probe("c16-q05", "control", tuple(range(61)), 5, None, 32, 16),
        Probe("b32-q06", "boundary", tuple(range(32)), 6, None, 32, 32),
    ]
    plans, _ = _mutation_plans(["load_plan_permuted"], "OffloadingConnector", INSTRUMENTS, layout, probes, 4)
    assert [p.id for p in plans[0].probes] == ["q00", "b16-q02", "c16-q05", "b32-q06"]


def test_each_defect_gets_questions_of_its_own() -> None:
    """What an earlier iteration left in the CPU tier belongs to other prompts: a store that copies nothing
    cannot pass on a slot that still holds the same prompt's bytes from the iteration before."""
    from gpu_tests.offload_check.case import _mutation_plans
    from gpu_tests.offload_check.probe_files import GroupLayout
    from gpu_tests.offload_check.probes import Probe

    layout = [GroupLayout(index=0, kind="full", block_size=16)]
    probes = [Probe(f"q{i:02d}", "gsm8k", tuple(range(40 + i)), i, 3, 256) for i in range(10)]
    names = ["store_wrong_block", "store_copies_nothing", "cpu_slot_shared"]
    plans, _ = _mutation_plans(names, "OffloadingConnector", INSTRUMENTS, layout, probes, 4)
    asked = [{p.id for p in plan.probes} for plan in plans]
    assert all(len(a) == 4 for a in asked)
    assert not asked[0] & asked[1] and not asked[1] & asked[2]  # consecutive iterations share no prompt


def test_consecutive_defects_take_other_boundary_probes_and_controls() -> None:
    """At real size the questions' one full block is the few-shot prefix they all share: the boundary probes
    and controls are what a defect's iteration stores. Only the same probes in two consecutive iterations
    would meet their own bytes in the CPU slots a full reset hands out again (a store that copies nothing
    passed so on Nemotron-H 8B and Qwen3.5, run real-size-2026-12-02): each iteration has new ones of its
    own, and sends the iteration before's again."""
    from gpu_tests.offload_check.case import _mutation_plans
    from gpu_tests.offload_check.probe_files import GroupLayout
    from gpu_tests.offload_check.probes import Probe

    layout = [GroupLayout(index=0, kind="full", block_size=16)]

    def cut_probe(kind: str, i: int, length: int) -> Probe:
        return Probe(f"{kind[0]}16-q{i:02d}", kind, tuple(range(length)), i, None, 32, 16)  # type: ignore[arg-type]

    probes = [
        Probe("q00", "gsm8k", tuple(range(40)), 0, 3, 256),
        *(cut_probe("boundary", i, 48 + 16 * i) for i in range(1, 4)),
        *(cut_probe("control", i, 45 + 16 * i) for i in range(4, 6)),
    ]
    names = ["store_wrong_block", "store_copies_nothing", "cpu_slot_shared", "load_wrong_cpu_block"]
    plans, _ = _mutation_plans(names, "OffloadingConnector", INSTRUMENTS, layout, probes, 4)
    cut = [[p.id for p in plan.probes if p.kind != "gsm8k"] for plan in plans]
    assert cut[0][:2] == ["b16-q03", "c16-q05"]  # the longest first
    own = [c[:2] for c in cut]
    assert all(not set(a) & set(b) for a, b in itertools.pairwise(own))
    assert {c[0] for c in own} == {"b16-q01", "b16-q02", "b16-q03"}  # every probe of a size in turn
    # The iteration before's probes come again after the reset: a slot the reset should have dropped is
    # looked up (stale_slot_after_reset missed on both real-size hybrids when no iteration did so).
    assert all(cut[k][2:] == own[k - 1] for k in range(1, len(cut)))


def test_requests_in_flight_together_send_the_batch_control_as_real_size_does() -> None:
    """Batches form by timing once requests are in flight together, so a reload's text may follow the batch
    (issue 35's first 0.26.0 run: 64 in flight, two cold runs of the same splits disagreed on 5 of 72); the
    batch control tells that from the KV, as it does for real-size models."""
    tiny, real = PROFILES["tiny-llama"], PROFILES["gemma-4-e4b-it-real"]
    assert batch_control_for(tiny, 1) == 0.0
    assert batch_control_for(tiny, 64) == batch_control_for(tiny, None) == BATCH_CONTROL_S > 0
    assert batch_control_for(real, 1) == BATCH_CONTROL_S


def test_volume_questions_replace_the_profile_s_and_each_holds_its_blocks(
    tmp_path: Path, stand_in: list[Any]
) -> None:
    """``--volume-blocks K`` (issue 53): each GSM8K question comes after examples of its own, to K whole
    blocks of the layout's block (16 tokens here), so its reload loads them from the CPU tier."""
    case = CheckCase(PROFILES["small"], "OffloadingConnector", "rust")
    report = run_case(
        case,
        report_dir=tmp_path,
        num_questions=2,
        max_tokens=2,
        iterations=1,
        boundary_probes=1,
        volume_blocks=20,
        use_kv_events=False,
        gsm8k_dir=GSM8K_DIR,
        encoder=lambda model: _encode_whole,
    )
    questions = [p for p in report.probes if p.kind == "gsm8k"]
    assert len(questions) == 2 and report.extra["volume_blocks"] == 20
    assert all((p.length - 1) // 16 >= 20 for p in questions)
    assert questions[0].key != questions[1].key  # own examples (a unit test checks the first blocks)
    assert [p.kind for p in report.probes].count("boundary") == 1  # the probes stay
