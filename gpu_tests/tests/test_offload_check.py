"""gpu_tests.offload_check on the CPU: the sequence, the like-for-like judgement, the byte and state
proofs, the mutation verdicts, named defects, and a report that judges the same again.

`FakeServer` (tests/offload_fake.py) splits prompts as vLLM 0.26 does, GPU prefix cache against
OffloadingConnector, and greedy text depends on the split, so a correct reload differs from a run that
computed other tokens: only a same-split comparison may count. Its metrics go through the real parser.
"""

from __future__ import annotations

from functools import cache

import pytest

from gpu_tests.kv_proof.instruments import INSTRUMENTS
from gpu_tests.offload_check.case import measure_and_judge
from gpu_tests.offload_check.check import MutationPlan, run_check
from gpu_tests.offload_check.defects import named_defects
from gpu_tests.offload_check.judge import judge_case, rejudge
from gpu_tests.offload_check.probe_files import GroupLayout, MutationOrder
from gpu_tests.offload_check.probes import Probe, boundary_sizes, build_probes
from gpu_tests.offload_check.report import OffloadCheckReport
from gpu_tests.offload_check.settings import CheckSettings
from vllm_devclient.gsm8k import load_gsm8k

from .conftest import GSM8K_DIR
from .offload_fake import FakeServer

FULL = [GroupLayout(index=0, kind="full", block_size=16)]
SLIDING = [
    GroupLayout(index=0, kind="sliding", block_size=16),
    GroupLayout(index=1, kind="full", block_size=16),
]
MAMBA = [GroupLayout(index=0, kind="mamba", block_size=16, cache_mode="all")]  # nemotron-h: all mode
EXPECT = {k: m.caught_by for k, m in INSTRUMENTS.mutations.items()}


def _encode(text: str) -> list[int]:
    return [ord(c) % 1000 for c in text]


@cache
def _probes(per_size: int = 2) -> tuple[Probe, ...]:
    train, test = load_gsm8k(data_dir=GSM8K_DIR)
    probes = build_probes(
        train,
        test,
        _encode,
        num_questions=8,
        num_shots=2,
        max_tokens=8,
        sizes=boundary_sizes([16]),
        per_size=per_size,
    )
    return tuple(probes)


def _check(server: FakeServer, layout: list[GroupLayout], **settings: object) -> OffloadCheckReport:
    kw: dict[str, object] = {"reference_digests": True, "mutation_expectations": EXPECT, **settings}
    return measure_and_judge(server, CheckSettings(**kw), list(_probes()), layout)  # type: ignore[arg-type]


def test_a_correct_sliding_window_reload_passes_when_only_same_split_answers_are_compared() -> None:
    server = FakeServer(layout=SLIDING)
    report = _check(server, SLIDING)
    assert report.status == "passed", report.summary()
    assert [it.label for it in report.iterations] == ["clean-1", "clean-2", "clean-3"]
    first = report.iterations[0]
    verdicts = {c.probe: c.verdict for c in first.comparisons}
    # Boundary probes: the connector cached len - 1, the GPU prefix cache len - 16: another split.
    for probe in (p for p in _probes() if p.kind == "boundary"):
        assert verdicts[probe.id] == "not_comparable"
        c = next(c for c in first.comparisons if c.probe == probe.id)
        assert c.reload_split is not None and c.reload_split.cached == probe.length - 1
        assert c.reference_split is not None and c.reference_split.cached == probe.length - 16
    assert all(v == "agree" for p, v in verdicts.items() if not p.startswith("b"))
    # The warm run computed other tokens than the cold one: comparing with cold would have failed the check.
    cold, reload_ = first.runs["cold"].by_probe(), first.runs["reload"].by_probe()
    assert any(cold[p].text != reload_[p].text for p in verdicts)
    assert first.assertion("kv_bytes_identical").passed
    assert first.assertion("boundaries_reached").passed
    assert not first.assertion("recurrent_state_consistent").evaluated
    # The first pass measures every probe's determinism; later ones re-run only what needs a reference.
    assert len(first.runs["cold2"].answers) == len(_probes())
    assert {a.probe for a in report.iterations[1].runs["cold2"].answers} == {
        p for p, v in verdicts.items() if v == "not_comparable"
    }


def test_the_0_26_recurrent_boundary_bug_fails_with_its_name_and_fingerprint() -> None:
    report = _check(FakeServer(layout=MAMBA), MAMBA)
    assert report.status == "failed"
    (defect,) = report.defects
    assert defect.id == "vllm#51094" and defect.url.endswith("/51094")
    boundary = {p.id for p in _probes() if p.kind == "boundary" or (p.kind == "gsm8k" and p.length % 16 == 0)}
    assert set(defect.probes) == boundary
    first = report.iterations[0]
    failing = first.assertion("recurrent_state_consistent")
    assert not failing.passed and "1 ahead" in failing.message
    for c in first.comparisons:
        if c.probe in boundary:
            assert c.restored_ahead == 1 and c.shape == "last_token_doubled" and c.verdict == "not_comparable"
        else:
            assert c.verdict == "agree" and not c.restored_ahead
    assert any("blocks" in e and "last_token_doubled" in e for e in defect.evidence)
    # The bytes came back intact: a byte digest cannot see this bug, the state position can.
    assert first.assertion("kv_bytes_identical").passed


def test_no_fingerprint_is_longer_than_the_server_takes() -> None:
    """The check sends a fingerprint only where it fits the server's context (``max_prompt``): a longer one
    would fail as a request, not show a shape."""

    def sent(report: OffloadCheckReport) -> list[int]:
        length = {p.id: p.length for p in report.probes}
        return [length[a.probe] for a in report.iterations[0].runs["fingerprint"].answers]

    full = sent(_check(FakeServer(layout=MAMBA), MAMBA))
    capped_report = _check(FakeServer(layout=MAMBA), MAMBA, max_prompt=max(full) - 1)
    capped = sent(capped_report)
    assert capped and len(capped) < len(full) and max(capped) < max(full)
    assert capped_report.status == "failed" and [d.id for d in capped_report.defects] == ["vllm#51094"]


def test_an_engine_death_in_the_offloading_scheduler_is_named_from_its_innermost_frame() -> None:
    """vllm#50454 (issue 33's fifth run, Nemotron-H 8B): the engine's fatal traceback, read from the server
    log, ends in the OffloadingConnector scheduler's assert. The same assert in a wrapper's frame, another
    exception, or the Simple connector names nothing."""
    report = _check(FakeServer(layout=MAMBA, fixed=True), MAMBA)
    where = (
        '  File "/site/vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py", line 816, '
        "in update_state_after_alloc"
    )

    def named(fault: str, connector: str = "OffloadingConnector") -> list[str]:
        dead = report.model_copy(update={"engine_fault": fault, "connector": connector})
        return [d.id for d in named_defects(dead, dead.iterations)]

    assert named(f"{where}\n    num_locally_computed_tokens\nAssertionError") == ["vllm#50454"]
    wrapper = '  File "/repo/gpu_tests/kv_proof/recorder.py", line 126, in update_state_after_alloc'
    assert named(f"{where}\n    x\n{wrapper}\n    y\nAssertionError") == []
    assert named(f"{where}\n    x\nRuntimeError: boom") == []
    assert named(f"{where}\n    x\nAssertionError", "SimpleCPUOffloadConnector") == []
    assert named("") == [] and report.defects == []


def test_an_assert_message_only_the_server_log_holds_names_its_defect() -> None:
    """A dead engine answers 500 with "EngineCore encountered an issue", not its assert: vLLM 0.22's
    align-mode assert (issue #45268) is named from the engine's traceback in the log."""
    report = _check(FakeServer(layout=MAMBA, fixed=True), MAMBA)
    layout = [g.model_copy(update={"cache_mode": "align"}) if g.recurrent else g for g in report.layout]
    fault = '  File "/site/vllm/v1/core/sched/scheduler.py", line 9, in schedule\n'
    fault += "AssertionError: External KV connector is not verified yet"
    update = {"engine_fault": fault, "connector": "OffloadingConnector", "layout": layout}
    dead = report.model_copy(update={**update, "vllm_version": "0.22.0"})
    assert [d.id for d in named_defects(dead, dead.iterations)] == ["vllm-issue45268"]
    later = dead.model_copy(update={"vllm_version": "0.23.0"})  # fixed there: the same text names nothing
    assert named_defects(later, later.iterations) == []


def test_an_engine_that_died_fails_requests_ok_and_the_case_instead_of_erring() -> None:
    """vLLM 0.22.0's align-mode assert (issue #45268) and 0.25.1's stale transfer jobs (PR #48102) kill the
    engine: what a user meets is that death, so the case fails ``requests_ok`` with the traceback's end, and
    is not an error. A death whose innermost frame is the check's own instrument stays the check's error."""
    report = _check(FakeServer(layout=MAMBA, fixed=True), MAMBA)
    settings = CheckSettings(reference_digests=True, iterations=1)
    broken = report.iterations[0].model_copy(update={"error": "InternalServerError: 500 EngineCore"})
    measured = report.model_copy(update={"iterations": [broken]})
    assert judge_case(settings, measured).status == "error"  # no death in the log: the check cannot say
    vllm = '  File "/site/vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py", line 9\n'
    dead = judge_case(settings, measured.model_copy(update={"engine_fault": vllm + "KeyError: 113"}))
    assert dead.status == "failed" and not dead.passed
    (death,) = [a for a in dead.assertions if a.name == "requests_ok"]
    assert not death.passed and death.evaluated and "the engine died during the case" in death.message
    assert "KeyError: 113" in death.message
    own = '  File "/repo/gpu_tests/kv_proof/recorder.py", line 69, in schedule\nValueError: ours'
    mine = judge_case(settings, measured.model_copy(update={"engine_fault": vllm + own}))
    assert mine.status == "error" and not any(a.name == "requests_ok" for a in mine.assertions)
    # A death after every iteration passed still fails the case.
    late = judge_case(settings, report.model_copy(update={"engine_fault": vllm + "AssertionError"}))
    assert report.status == "passed" and late.status == "failed"


def test_a_loaded_block_read_as_zeros_on_an_older_hybrid_names_the_zeroing() -> None:
    """Blocks wiped by the zeroing for Mamba models read as zeros at first use: named on a hybrid up to vLLM
    0.25.1, with either connector; the same bytes name nothing on 0.26.0 or on an attention-only model."""
    from gpu_tests.offload_check.probe_files import FirstUse, FirstUseExample, FirstUseGroup

    report = _check(FakeServer(layout=MAMBA, fixed=True), MAMBA)
    zeros = FirstUseExample(
        group=0,
        block=3,
        gpu_block=255,
        verdict="x",
        holds="zeros in every layer region: wiped, or never written",
    )
    use = FirstUse(
        seq=1,
        pid=1,
        request_id="cmpl-1",
        cached=64,
        groups=[FirstUseGroup(group=0, block_size=16, regions=1, verdicts="vvvx")],
        examples=[zeros],
    )
    it = report.iterations[0].model_copy(update={"first_use": [use]})
    wiped = report.model_copy(update={"iterations": [it], "vllm_version": "0.24.0"})
    for connector in ("OffloadingConnector", "SimpleCPUOffloadConnector"):
        older = wiped.model_copy(update={"connector": connector})
        (defect,) = named_defects(older, older.iterations)
        assert defect.id == "vllm-skip-zero-block-ids" and "GPU block 255) holds zeros" in defect.evidence[0]
    fixed = wiped.model_copy(update={"vllm_version": "0.26.0"})
    assert named_defects(fixed, fixed.iterations) == []
    attention = wiped.model_copy(update={"layout": [g for g in wiped.layout if not g.recurrent]})
    assert named_defects(attention, attention.iterations) == []
    other = zeros.model_copy(update={"holds": "bytes that match no computed block"})
    plain = it.model_copy(update={"first_use": [use.model_copy(update={"examples": [other]})]})
    assert named_defects(wiped.model_copy(update={"iterations": [plain]}), [plain]) == []


def test_the_fixed_connector_passes_the_same_recurrent_prompts() -> None:
    report = _check(FakeServer(layout=MAMBA, fixed=True), MAMBA)
    assert report.status == "passed" and report.defects == []
    assert report.iterations[0].assertion("recurrent_state_consistent").passed


def test_one_wrong_reload_fails_even_when_the_engine_is_noisy_elsewhere() -> None:
    """Question by question: a wrong reload on q03 is not excused by two other questions that decode
    differently on every cold run (the old count-based noise floor passed this)."""
    server = FakeServer(layout=FULL, corrupt={"q03"}, noise={"cold2": {"q01", "q02"}})
    report = _check(server, FULL)
    first = report.iterations[0]
    verdicts = {c.probe: c.verdict for c in first.comparisons}
    assert verdicts["q03"] == "differ"
    assert verdicts["q01"] == verdicts["q02"] == "nondeterministic"
    failing = first.assertion("answers_unchanged")
    assert not failing.passed and "['q03']" in failing.message
    assert report.status == "failed"


@pytest.mark.parametrize("layout", [FULL, SLIDING, MAMBA], ids=["full", "sliding", "mamba"])
def test_every_applicable_mutation_is_caught_by_the_assertion_the_catalogue_names(
    layout: list[GroupLayout],
) -> None:
    plans = []
    skipped = {}
    for token, (name, spec) in enumerate(INSTRUMENTS.mutations.items(), 1):
        why = spec.not_applicable(layout, "OffloadingConnector")
        if why is not None:
            skipped[name] = why
            continue
        order = MutationOrder(name=name, group=spec.target_group(layout), token=token)
        plans.append(
            MutationPlan(order, _probes()[:4] + tuple(p for p in _probes() if p.kind != "gsm8k")[:2])
        )
    server = FakeServer(layout=layout, fixed=True)
    report = measure_and_judge(
        server,
        CheckSettings(reference_digests=True, mutation_expectations=EXPECT, iterations=0),
        list(_probes()),
        layout,
    )
    assert report.iterations == []  # nothing to judge without a pass: an error, not a pass
    assert report.status == "error"
    report = measure_and_judge(
        server,
        CheckSettings(reference_digests=True, mutation_expectations=EXPECT, iterations=0),
        list(_probes()),
        layout,
        mutations=plans,
    )
    assert report.status == "passed", report.summary()
    for it in report.mutations():
        v = it.mutation_verdict
        assert v is not None and v.applied > 0 and v.caught, (it.mutation, v)
        assert set(v.expected) & set(v.failed)
        assert it.assertion("reload_proven").passed
    assert report.assertion("mutations_caught").passed
    simple = {n for n in INSTRUMENTS.mutations if n.startswith("simple_")}
    if layout is MAMBA:
        assert set(skipped) == {"load_plan_permuted"} | simple
        assert "state_ahead" in {it.mutation for it in report.mutations()}
    if layout is FULL:
        assert set(skipped) == {"state_ahead"} | simple


def test_a_mutation_that_never_ran_is_not_caught() -> None:
    server = FakeServer(layout=FULL, fixed=True)
    plan = MutationPlan(MutationOrder(name="not_an_instrument", token=1), _probes()[:2])
    report = measure_and_judge(
        server,
        CheckSettings(
            reference_digests=True, mutation_expectations={"not_an_instrument": ("kv_bytes_identical",)}
        ),
        list(_probes()),
        FULL,
        mutations=[plan],
    )
    (mutated,) = report.mutations()
    assert mutated.mutation_verdict is not None and not mutated.mutation_verdict.caught
    assert mutated.mutation_verdict.applied == 0 and "never acted" in mutated.mutation_verdict.message
    assert not report.assertion("mutations_caught").passed and report.status == "failed"


def test_what_was_not_evaluated_says_so_and_never_counts() -> None:
    report = _check(
        FakeServer(layout=FULL, connector="SimpleCPUOffloadConnector", reference_on=False),
        FULL,
        reference_digests=False,
    )
    first = report.iterations[0]
    bytes_ = first.assertion("kv_bytes_identical")
    assert (
        not bytes_.evaluated
        and bytes_.outcome == "not evaluated"
        and "without the instruments" in bytes_.message
    )
    assert "accuracy_held" not in {a.name for a in first.assertions}  # no threshold: not in the report
    # Every other assertion held, yet nothing proved the bytes: "not proven", never "passed".
    assert first.status == "not_proven" and report.status == "not_proven" and not report.passed
    # With a threshold it is evaluated (the fake answers nothing right).
    report = _check(FakeServer(layout=FULL), FULL, accuracy_threshold=0.5)
    held = report.iterations[0].assertion("accuracy_held")
    assert held.evaluated and not held.passed and report.status == "failed"


def test_a_server_that_should_hold_the_reference_and_checked_nothing_is_not_proven() -> None:
    report = _check(FakeServer(layout=FULL, reference_on=False), FULL)
    bytes_ = report.iterations[0].assertion("kv_bytes_identical")
    assert not bytes_.evaluated and "nothing is proven" in bytes_.message
    assert report.status == "not_proven" and not report.passed


def test_probes_whose_blocks_an_earlier_probe_loaded_do_not_count_as_reaching_the_boundary() -> None:
    """Cut from a question the run already asked, a boundary probe is served by the GPU prefix cache: the
    check says the boundary was not reached instead of passing on it."""
    whole = [p for p in _probes() if p.kind == "gsm8k"]
    shared = [
        Probe(f"b16-{p.id}", "boundary", p.token_ids[: p.length // 16 * 16], p.question, None, 8, 16)
        for p in whole[:2]
    ] + [
        Probe(f"c16-{p.id}", "control", p.token_ids[: p.length // 16 * 16 - 3], p.question, None, 8, 16)
        for p in whole[2:4]
    ]
    report = measure_and_judge(
        FakeServer(layout=SLIDING), CheckSettings(reference_digests=True), whole + shared, SLIDING
    )
    reached = report.iterations[0].assertion("boundaries_reached")
    assert not reached.passed and "no boundary probe of size 16" in reached.message
    assert report.status == "failed"


def test_a_boundary_vllm_never_reloads_is_not_evaluated_with_its_splits_and_passes_nothing_else() -> None:
    """qwen3-next on vLLM 0.26 (``align`` Mamba cache): neither connector reloads a prompt that ends on a
    block, while the GPU prefix cache serves it and the controls reload. No reload there to judge: the size
    is "not evaluated" with the splits, the case passes on what was judged; a wrong reload elsewhere still
    fails it."""
    report = _check(FakeServer(layout=MAMBA, aligned_miss=True, fixed=True), MAMBA)
    first = report.iterations[0]
    reached = first.assertion("boundaries_reached")
    assert not reached.evaluated and reached.passed
    assert "size 16 not evaluated" in reached.message and "reload cached 0 of" in reached.message
    assert report.status == "passed", report.summary()
    corrupt = {next(p.id for p in _probes() if p.kind == "control")}
    failing = _check(FakeServer(layout=MAMBA, aligned_miss=True, fixed=True, corrupt=corrupt), MAMBA)
    assert failing.status == "failed"
    assert not failing.iterations[0].assertion("boundaries_reached").evaluated


def _uncached(report: OffloadCheckReport, run: str, probes: set[str]) -> OffloadCheckReport:
    """``report`` as if ``run`` had found nothing cached for ``probes`` (blocks gone from the GPU)."""
    it = report.iterations[0]  # the first pass alone: what the assertions below read
    answers = [
        a.model_copy(update={"split": a.split.model_copy(update={"local": 0, "external": 0})})
        if a.probe in probes and a.split is not None
        else a
        for a in it.runs[run].answers
    ]
    runs = {**it.runs, run: it.runs[run].model_copy(update={"answers": answers})}
    return report.model_copy(update={"iterations": [it.model_copy(update={"runs": runs})]})


def test_a_declined_boundary_stays_not_evaluated_when_only_the_batch_control_found_its_blocks() -> None:
    """Qwen3.5 at real size with 12 GiB of KV: the warm run found the boundary probes gone from the GPU, the
    batch control (after the warm run computed them again) served them. That still shows them cacheable, so a
    boundary the reload declines is "not evaluated"; with no warm run caching any, it fails."""
    settings = CheckSettings(reference_digests=True, mutation_expectations=EXPECT, batch_control_s=2.0)
    report = _check(FakeServer(layout=MAMBA, aligned_miss=True, fixed=True), MAMBA, batch_control_s=2.0)
    assert "warm2" in report.iterations[0].runs
    boundary = {p.id for p in _probes() if p.kind == "boundary"}
    lost = rejudge(_uncached(report, "warm", boundary), settings)
    reached = lost.iterations[0].assertion("boundaries_reached")
    assert reached.passed and not reached.evaluated and "the warm runs cached" in reached.message
    never = rejudge(_uncached(_uncached(report, "warm", boundary), "warm2", boundary), settings)
    reached = never.iterations[0].assertion("boundaries_reached")
    assert not reached.passed and "no boundary probe of size 16" in reached.message


def test_a_byte_mutation_iteration_names_the_defect_its_untouched_splits_show_and_a_state_one_does_not() -> (
    None
):
    """The catalogue's own server can be the only one to reach a boundary (Nemotron-H at real size: the clean
    pass's 1 GiB tier evicted its probes). A byte mutation leaves the splits and states vLLM's own, so #51094
    shows there; state_ahead moves the state itself and names nothing."""
    probes = _probes()[:4] + tuple(p for p in _probes() if p.kind != "gsm8k")[:2]
    plans = [
        MutationPlan(MutationOrder(name=name, group=0, token=token), probes)
        for token, name in enumerate(("zero_fill", "state_ahead"), 1)
    ]
    settings = CheckSettings(reference_digests=True, mutation_expectations=EXPECT, iterations=0)
    report = measure_and_judge(FakeServer(layout=MAMBA), settings, list(_probes()), MAMBA, mutations=plans)
    (defect,) = report.defects
    assert defect.id == "vllm#51094" and defect.evidence
    assert all(e.startswith("mutation-zero_fill ") for e in defect.evidence), defect.evidence
    only_state = measure_and_judge(
        FakeServer(layout=MAMBA), settings, list(_probes()), MAMBA, mutations=plans[1:]
    )
    assert only_state.defects == []
    fixed = measure_and_judge(
        FakeServer(layout=MAMBA, fixed=True), settings, list(_probes()), MAMBA, mutations=plans
    )
    assert fixed.defects == []


def test_the_simple_connectors_cpu_evictions_sent_as_gpu_removes_fail_the_stream_and_are_named() -> None:
    """vLLM 0.26's SimpleCPUOffloadConnector: its CPU tier is a BlockPool whose events say GPU, and it never
    announces a store, so once the tier evicts (real size) the stream removes GPU hashes it never stored. The
    stream is wrong (``kv_events_consistent`` fails) and the report names why; the same removes from another
    connector are not given that name."""

    def check(server: FakeServer, connector: str) -> OffloadCheckReport:
        settings = CheckSettings(reference_digests=False, iterations=1)
        fields = {"connector": connector}
        return measure_and_judge(server, settings, list(_probes()), FULL, report_fields=fields)

    def evicting(connector: str) -> FakeServer:
        return FakeServer(
            layout=FULL,
            connector=connector,
            cpu_capacity=4,
            evictions_as_gpu_removes=True,
            reference_on=False,
        )

    simple = "SimpleCPUOffloadConnector"
    report = check(evicting(simple), simple)
    stream = report.assertion("kv_events_consistent")
    assert not stream.passed and "GPU group 0: removed hash" in stream.message
    (defect,) = report.defects
    assert defect.id == "vllm#54325" and defect.probes == [] and "not stored" in defect.evidence[0]
    assert report.status == "failed"
    other = check(evicting("OffloadingConnector"), "OffloadingConnector")
    assert not other.assertion("kv_events_consistent").passed and other.defects == []
    quiet = check(FakeServer(layout=FULL, connector=simple, reference_on=False), simple)
    assert quiet.defects == []


def test_failed_requests_make_the_iteration_an_error_and_a_crash_keeps_what_was_measured() -> None:
    report = _check(FakeServer(layout=FULL, fail={"reload": {"q00"}}), FULL)
    first = report.iterations[0]
    assert first.runs["reload"].failed_requests == 1 and first.status == "error"
    assert report.status == "error"
    partial: list[OffloadCheckReport] = []
    server = FakeServer(layout=FULL, raise_in="reload")
    report = measure_and_judge(
        server, CheckSettings(reference_digests=True), list(_probes()), FULL, on_iteration=partial.append
    )
    (it,) = report.iterations
    assert it.error is not None and "server went away" in it.error
    assert set(it.runs) == {"cold", "warm"} and it.barriers["gpu_only"].attempts == 1
    assert report.status == "error" and partial and partial[0].error is not None


def test_a_stored_report_judges_the_same_again() -> None:
    report = _check(FakeServer(layout=MAMBA), MAMBA)
    stored = OffloadCheckReport.model_validate_json(report.model_dump_json())
    settings = CheckSettings(reference_digests=True, mutation_expectations=EXPECT)
    assert rejudge(stored, settings) == report
    # A judge given the verdicts stripped recomputes them from the measurements alone.
    bare = stored.model_copy(
        update={
            "iterations": [
                it.model_copy(update={"assertions": [], "comparisons": []}) for it in stored.iterations
            ],
            "defects": [],
            "status": "error",
        }
    )
    assert rejudge(bare, settings) == report


def test_the_batch_control_judges_the_answers_only_where_the_batch_moves_none() -> None:
    """Real-size models answer by near-ties, so the same split in other batches answers otherwise. Where the
    spread second warm run moves no answer, a reload that differs fails as before; where it moves any, the
    answers follow the batch and cannot judge the KV: "not evaluated", with the figures and the verdicts."""
    server = FakeServer(layout=FULL, corrupt={"q03"})
    report = _check(server, FULL, batch_control_s=2.0, iterations=1)
    first = report.iterations[0]
    assert "run:warm2@2s" in server.calls and "warm2" in first.runs
    failing = first.assertion("answers_unchanged")
    assert not failing.passed and failing.evaluated and "['q03']" in failing.message

    noise = {"reload": {"q01", "q02"}, "warm2": {"q01", "q02"}}
    server = FakeServer(layout=FULL, corrupt={"q03"}, noise=noise)
    first = _check(server, FULL, batch_control_s=2.0, iterations=1).iterations[0]
    verdicts = {c.probe: c.verdict for c in first.comparisons}
    assert verdicts["q01"] == verdicts["q02"] == "nondeterministic" and verdicts["q03"] == "differ"
    assert "warm2" in next(c.reason for c in first.comparisons if c.probe == "q01")
    moved = first.assertion("answers_unchanged")
    assert moved.passed and not moved.evaluated
    assert "changed 2 of " in moved.message and "1 differ" in moved.message
    # Without the control the same noise is a difference; mutation iterations never send it.
    plain = _check(FakeServer(layout=FULL, noise={"reload": {"q01"}}), FULL, iterations=1)
    assert {c.probe: c.verdict for c in plain.iterations[0].comparisons}["q01"] == "differ"
    assert all("warm2" not in it.runs for it in plain.iterations)


def test_batch_noise_everywhere_leaves_the_answers_not_evaluated_and_the_kv_verdict_standing() -> None:
    ids = [p.id for p in _probes() if p.kind != "fingerprint"]
    server = FakeServer(layout=FULL, noise={"reload": set(ids), "warm2": set(ids)})
    report = _check(server, FULL, batch_control_s=2.0, iterations=1)
    first = report.iterations[0]
    answers = first.assertion("answers_unchanged")
    assert not answers.evaluated and answers.passed and "0 compared" in answers.message
    assert first.assertion("kv_bytes_identical").passed and report.status == "passed"


def test_a_tier_that_evicted_the_probes_leaves_the_boundaries_not_evaluated() -> None:
    """Upstream's 1 GiB at real size holds a fraction of 200 prompts: the probes' blocks are gone before
    the reload. That says nothing of the boundary (not evaluated, with the tier's figures); with a tier that
    evicted nothing, a probe that never came back still fails."""
    server = FakeServer(layout=FULL, cpu_events=True, cpu_capacity=4)
    first = _check(server, FULL, iterations=1, expect_cpu_store_events=True).iterations[0]
    tier = first.cpu_tier
    assert tier is not None and tier.evicted > 0
    reached = first.assertion("boundaries_reached")
    assert reached.passed and not reached.evaluated, reached.message
    assert "the CPU tier evicted" in reached.message and f"evicted {tier.evicted} of the {tier.stored}" in (
        reached.message
    )


def test_a_stopped_check_keeps_what_it_measured_and_runs_nothing_more() -> None:
    """The runner's deadline (SIGTERM, raised as CheckStopped) mid-reload: the iteration keeps its cold and
    warm runs, no mutation runs after it, and the partial report is handed out before the check returns."""
    import signal

    from gpu_tests.offload_check.check import CheckStopped
    from gpu_tests.offload_check.cli import _stop

    with pytest.raises(CheckStopped, match="SIGTERM"):
        _stop(signal.SIGTERM, None)
    server = FakeServer(layout=FULL)
    real_run = server.run

    def run(label: str, probes: object, spread_s: float = 0.0) -> object:
        if label == "reload":
            _stop(signal.SIGTERM, None)
        return real_run(label, probes, spread_s)  # type: ignore[arg-type]

    server.run = run  # type: ignore[method-assign]
    partial: list[OffloadCheckReport] = []
    plans = [MutationPlan(MutationOrder(name="zero_fill", group=0, token=1), _probes())]
    settings = CheckSettings(reference_digests=True, mutation_expectations=EXPECT, iterations=2)
    report = measure_and_judge(
        server, settings, list(_probes()), FULL, mutations=plans, on_iteration=partial.append
    )
    assert [it.label for it in report.iterations] == ["clean-1"] and partial
    (it,) = report.iterations
    assert it.error is not None and "SIGTERM" in it.error and {"cold", "warm"} <= set(it.runs)
    assert it.status == "error" and report.status == "error"


def test_rejudge_adds_information_but_never_turns_a_committed_failure_into_a_pass() -> None:
    failed = _check(FakeServer(layout=FULL, noise={"reload": {"q03"}}), FULL, iterations=1)
    assert failed.status == "failed"
    # Measurements that today's judge reads as a pass (the differing answer made equal): the failure stays.
    it = failed.iterations[0]
    warm = it.runs["warm"].by_probe()
    answers = [a.model_copy(update={"text": warm[a.probe].text}) for a in it.runs["reload"].answers]
    runs = {**it.runs, "reload": it.runs["reload"].model_copy(update={"answers": answers})}
    passing = failed.model_copy(update={"iterations": [it.model_copy(update={"runs": runs})]})
    settings = CheckSettings(reference_digests=True, iterations=1)
    assert rejudge(passing.model_copy(update={"status": "passed"}), settings).status == "passed"
    again = rejudge(passing, settings)
    assert again.status == "failed" and not again.passed
    kept = next(a for a in again.assertions if a.name == "device_verdict_kept")
    assert "the device's failed stands" in kept.message


def test_measuring_gives_measurements_only_and_judging_them_gives_the_verdicts() -> None:
    # The stages apart: run_check never judges; judge_case reads the same report without a server.
    settings = CheckSettings(reference_digests=True, mutation_expectations=EXPECT, iterations=1)
    measured = run_check(FakeServer(layout=FULL, noise={"reload": {"q03"}}), settings, list(_probes()), FULL)
    assert measured.iterations and measured.assertions == [] and measured.defects == []
    assert all(not it.assertions and not it.comparisons for it in measured.iterations)
    judged = judge_case(settings, measured)
    assert judged.status == "failed" and judged.iterations[0].comparisons
    assert judge_case(settings, measured) == judged  # the same measurements, the same verdicts


def test_a_release_whose_version_route_names_no_frontend_leaves_the_frontend_unjudged() -> None:
    """vLLM 0.22.0's vllm-rs answers /version without ``rust_frontend_version``: a Rust server reads as
    Python there, so the frontend is "not evaluated" with the reason, never failed or passed."""
    report = _check(FakeServer(layout=FULL), FULL)
    asked = report.model_copy(update={"frontend": "rust", "frontend_observed": "python"})
    older = rejudge(asked.model_copy(update={"vllm_version": "0.22.0"}))
    frontend = older.assertion("frontend")
    assert not frontend.evaluated and "does not name its frontend" in frontend.message
    newer = rejudge(asked.model_copy(update={"vllm_version": "0.23.0"}))
    assert not newer.assertion("frontend").passed and newer.assertion("frontend").evaluated
