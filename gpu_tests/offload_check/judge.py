"""The judgement: from what an iteration measured to its verdicts. No I/O; a committed report can be judged
again (:func:`rejudge`).

Per iteration:

1. ``reload_proven``: external prefix-cache hits (and CPU-to-GPU bytes, where exported) grew in the reload
   run and not in the cold runs; where the connector announces its CPU stores, they were seen, for every
   full-attention group the GPU events show.
2. ``answers_unchanged``, probe by probe: a reload answer is compared only with a reference that served the
   same split, the warm run (the same prompt from the GPU prefix cache, whose blocks are the ones that were
   offloaded). Same cached-token count: the answers must be equal (``agree``/``differ``). Another count:
   ``not_comparable``, never agreement nor corruption. Where the two cold runs of a probe (same split)
   disagree, the engine is not deterministic there: ``nondeterministic``; so too where the batch control
   (``warm2``: the warm run again, same split, other batches) answered otherwise than the warm run, since
   then the answer follows the batch and not only the KV. Fails on any ``differ``; with nothing compared, or
   where the batch control moved any answer (the engine's answers follow the batch, as a real-size model
   with random weights does: a difference cannot be told from noise), "not evaluated", with the figures.
   The real-size profiles and every case with requests in flight together (concurrency other than 1, where
   batches form by timing) send the batch control.
3. ``kv_bytes_identical`` (servers with the reference instrument): every block a request started from, in
   every run, equals a computation of its prefix, layer region by layer region (digests taken where the model
   computed the block, checked at its first use: ``gpu_tests/kv_proof/reference.py``); no block holds the
   poison, another prefix's bytes or bytes no computation left. Not evaluated when no block the connector
   loaded in the reload was checked, and then the iteration is "not proven", never "passed".
4. ``recurrent_state_consistent`` (models with a recurrent-state group): a restored state stands exactly at
   the cached-token count. A load whose recurrent group reaches past it (``restored_ahead`` tokens) means the
   state already holds tokens the engine computes again; without load plans, a cached count off the group's
   block grid means the same.
5. ``boundaries_reached``: for every boundary size, a boundary probe and a control were loaded by the
   connector in the reload run (else the iteration proves nothing about boundaries); a size at which vLLM
   reloads no boundary probe at all, while it reloads the controls, is "not evaluated", with its splits, and
   so is a kind of probe none of which came back while the CPU tier evicted during the pass.
6. ``accuracy_held`` (a model with a threshold: a trained checkpoint): cold and reload accuracy >= threshold -
   tolerance. Without a threshold (random or dummy weights) it is not in the report at all.
7. ``requests_ok``: no run lost more than ``max_failed_rate`` of its requests, else the iteration is an
   error.
8. ``resets_honoured``: every reset of the iteration was confirmed (``success``, or on a release that answers
   a bare 200 the stream's ``AllBlocksCleared``); a refused one fails with the server's status and words.

A reload answer whose request loaded nothing from the connector is ``not_loaded``: never agreement.

A mutation iteration is ``caught`` when its defect acted and one of the assertions the catalogue names failed
(the bytes at first use are evidence whether or not the reload was proven).

For the whole case: ``kv_events_consistent``, ``frontend``, ``instruments_ok``, (with mutations)
``mutations_caught``, and ``requests_ok`` where the engine died (:func:`engine_death`). Its status is
``passed`` only when each clean iteration passed with a byte verdict; ``not_proven`` when every evaluated
assertion held without one; ``failed``, not ``error``, when vLLM's engine died, whatever its requests then
raised: the death is what a user meets, and the check's evidence of it. :data:`.defects.KNOWN_DEFECTS` names a
vLLM defect whose fingerprint the clean iterations show, or a byte mutation's (its splits and states are
vLLM's own), or the case's KV-event stream.

The assertions are ``assertions.py``, the known defects ``defects.py``, the settings ``settings.py``; what is
judged is the report the sequence measured (``check.run_check``), and nothing here reads or writes a file.
"""

from __future__ import annotations

from collections.abc import Sequence

from .assertions import (
    REQUEST_FAILURES,
    accuracy_held,
    answers_unchanged,
    boundaries_reached,
    compare,
    kv_bytes_identical,
    recurrent_state_consistent,
    reload_proven,
    requests_ok,
    resets_honoured,
)
from .defects import named_defects
from .events import KVEventsSummary
from .probe_files import GroupLayout
from .releases import release
from .report import (
    AssertionResult,
    Iteration,
    MutationVerdict,
    OffloadCheckReport,
    ProbeInfo,
    Status,
)
from .settings import CheckSettings

__all__ = ["CheckSettings", "judge_case", "judge_iteration", "rejudge"]


def _status(assertions: Sequence[AssertionResult]) -> Status:
    for a in assertions:
        if a.name == REQUEST_FAILURES and not a.passed:
            return "error"
    if not all(a.passed or not a.evaluated for a in assertions):
        return "failed"
    proof = next((a for a in assertions if a.name == "kv_bytes_identical"), None)
    return "passed" if proof is not None and proof.evaluated else "not_proven"


def judge_iteration(
    settings: CheckSettings,
    it: Iteration,
    *,
    probes: Sequence[ProbeInfo],
    layout: Sequence[GroupLayout],
    events: KVEventsSummary | None = None,
) -> Iteration:
    """``it`` with its comparisons, assertions, status (and mutation verdict) from its measurements."""
    if it.error is not None or "reload" not in it.runs:
        return it.model_copy(update={"status": "error", "comparisons": [], "assertions": []})
    by_id = {p.id: p for p in probes}
    comparisons = compare(it, probes, layout)
    found = [
        reload_proven(settings, it.windows, it.cpu_blocks_stored, events),
        answers_unchanged(comparisons, it),
        kv_bytes_identical(settings, it),
        recurrent_state_consistent(it, comparisons, by_id, layout),
        boundaries_reached(it, probes),
        accuracy_held(settings, it.runs),
        requests_ok(it.runs, settings.max_failed_rate),
        resets_honoured(it.barriers),
    ]
    assertions = [a for a in found if a is not None]
    status = _status(assertions)
    verdict = None
    if it.mutation is not None:
        expected = list(settings.mutation_expectations.get(it.mutation, ()))
        failed = [a.name for a in assertions if a.evaluated and not a.passed]
        applied = it.instruments_applied.get(it.mutation, 0)
        caught = applied > 0 and any(e in failed for e in expected)
        if applied == 0:
            note = "the defect never acted: nothing it applies to was stored or loaded"
        elif not caught:
            note = f"none of {expected} failed"
        else:
            note = f"caught by {[e for e in expected if e in failed]}"
        verdict = MutationVerdict(
            name=it.mutation, applied=applied, expected=expected, failed=failed, caught=caught, message=note
        )
    return it.model_copy(
        update={
            "comparisons": comparisons,
            "assertions": assertions,
            "status": status,
            "mutation_verdict": verdict,
        }
    )


def _split_untouched(it: Iteration) -> bool:
    """A clean iteration, or a mutation that corrupts bytes only: its splits and restored states are vLLM's
    own, so a known defect's shape there is vLLM's (the catalogue's own server may be the only one that
    reaches a boundary the clean pass's tier evicted). A mutation the catalogue expects
    ``recurrent_state_consistent`` to catch moves the state itself."""
    if it.mutation is None:
        return True
    return (
        it.mutation_verdict is not None and "recurrent_state_consistent" not in it.mutation_verdict.expected
    )


def _version_names_frontend(version: str | None) -> bool:
    """Whether ``version``'s /version tells the Rust frontend from the Python one (unknown: it does)."""
    if version is None:
        return True
    try:
        return release(version).version_names_frontend
    except ValueError:  # older than every release the check knows
        return True


_OWN_CODE = ("/gpu_tests/", "/vllm_devclient/")  # a traceback frame in the check's own code


def engine_death(report: OffloadCheckReport) -> AssertionResult | None:
    """``requests_ok`` failed by the engine's death (its fatal traceback, ``engine_fault``), or None. The
    death is vLLM's unless the traceback's innermost frame is the check's own code (its instruments run inside
    the engine): that is the check's error, and stays one."""
    lines = [x.strip() for x in (report.engine_fault or "").splitlines() if x.strip()]
    if not lines:
        return None
    frames = [x for x in lines if x.startswith("File ")]
    if frames and any(own in frames[-1] for own in _OWN_CODE):
        return None
    return AssertionResult(
        name=REQUEST_FAILURES,
        passed=False,
        message=f"the engine died during the case: {' | '.join(lines[-3:])}"[:600],
    )


def _events_consistent(report: OffloadCheckReport, events: KVEventsSummary) -> AssertionResult:
    """``kv_events_consistent``: the stream's payloads and reference counts, and a full reset it showed."""
    problems = [*events.payload_problems[:5], *events.refcount_problems[:5]]
    if report.reset_visible is False:
        problems.append("the full reset left no trace on the stream (no AllBlocksCleared, no BlockRemoved)")
    mode = "self-describing" if events.self_describing else "placeholder"
    repeated = sum(g.repeated_stores for g in events.groups)
    note = (
        f"{mode} CPU payloads as expected; {repeated} repeated store(s) counted; "
        f"{events.cleared} AllBlocksCleared"
    )
    return AssertionResult(
        name="kv_events_consistent", passed=not problems, message="; ".join(problems) or note
    )


def _frontend(settings: CheckSettings, report: OffloadCheckReport) -> AssertionResult:
    """``frontend``: the one asked for served. A release whose /version names no frontend cannot show which
    one served: not evaluated there."""
    observable = _version_names_frontend(report.vllm_version)
    seen = (
        f"/version says {report.frontend_observed}"
        if observable
        else f"vLLM {report.vllm_version}'s /version does not name its frontend"
    )
    return AssertionResult(
        name="frontend",
        passed=not observable or report.frontend_observed == settings.expected_frontend,
        evaluated=observable,
        message=f"asked for {settings.expected_frontend}, {seen}",
    )


def _mutations_caught(mutated: Sequence[Iteration]) -> AssertionResult:
    missed = [it.mutation for it in mutated if not (it.mutation_verdict and it.mutation_verdict.caught)]
    return AssertionResult(
        name="mutations_caught",
        passed=not missed,
        message=f"{len(mutated) - len(missed)}/{len(mutated)} caught"
        + (f"; missed {missed}" if missed else ""),
    )


def _case_assertions(
    settings: CheckSettings, report: OffloadCheckReport, iterations: Sequence[Iteration]
) -> list[AssertionResult]:
    """The case's own assertions (the module docstring), the engine's death last."""
    assertions: list[AssertionResult] = []
    if report.events is not None:
        assertions.append(_events_consistent(report, report.events))
    if settings.expected_frontend is not None and report.frontend_observed is not None:
        assertions.append(_frontend(settings, report))
    errors = report.instrument_errors
    assertions.append(
        AssertionResult(
            name="instruments_ok",
            passed=not errors,
            message="; ".join(errors[:3]) if errors else "the instruments reported no error",
        )
    )
    mutated = [it for it in iterations if it.mutation is not None]
    if mutated:
        assertions.append(_mutations_caught(mutated))
    death = engine_death(report)
    if death is not None:
        assertions.append(death)
    return assertions


def _case_status(
    report: OffloadCheckReport, iterations: Sequence[Iteration], assertions: Sequence[AssertionResult]
) -> Status:
    clean = [it for it in iterations if it.mutation is None]
    if engine_death(report) is not None:
        return "failed"
    if report.error is not None or not iterations or any(it.status == "error" for it in iterations):
        return "error"
    if any(it.status == "failed" for it in clean) or any(a.evaluated and not a.passed for a in assertions):
        return "failed"
    if any(it.status != "passed" for it in clean):
        return "not_proven"  # a catalogue's own case (no clean pass) stands on mutations_caught
    return "passed"


def judge_case(settings: CheckSettings, report: OffloadCheckReport) -> OffloadCheckReport:
    """Judge every iteration, then the case: its own assertions, named defects, status."""
    probes, layout, events = report.probes, report.layout, report.events
    iterations = [
        judge_iteration(settings, it, probes=probes, layout=layout, events=events) for it in report.iterations
    ]
    assertions = _case_assertions(settings, report, iterations)
    status = _case_status(report, iterations, assertions)
    return report.model_copy(
        update={
            "iterations": iterations,
            "assertions": assertions,
            "defects": named_defects(report, [it for it in iterations if _split_untouched(it)]),
            "status": status,
            "passed": status == "passed",
        }
    )


def rejudge(report: OffloadCheckReport, settings: CheckSettings | None = None) -> OffloadCheckReport:
    """Judge a stored report again with today's judge (settings from the report unless given)."""
    if settings is None:
        settings = CheckSettings(
            accuracy_threshold=report.accuracy_threshold,
            tolerance=report.tolerance,
            expect_cpu_store_events=bool(report.extra.get("expect_cpu_store_events", False)),
            expected_frontend=report.frontend,  # type: ignore[arg-type]
            max_failed_rate=report.max_failed_rate,
            reference_digests=bool(report.extra.get("reference_digests", False)),
            mutation_expectations={
                k: tuple(v) for k, v in report.extra.get("mutation_expectations", {}).items()
            },
        )
    judged = judge_case(settings, report)
    if report.status in ("failed", "error") and judged.status not in ("failed", "error"):
        # A committed failure is the device's verdict: today's judge may add information, never turn it.
        kept = AssertionResult(
            name="device_verdict_kept",
            passed=False,
            message=f"today's judge reads {judged.status}; the device's {report.status} stands until a fresh "
            "device run of this case shows otherwise",
        )
        judged = judged.model_copy(
            update={"status": report.status, "passed": False, "assertions": [*judged.assertions, kept]}
        )
    return judged
