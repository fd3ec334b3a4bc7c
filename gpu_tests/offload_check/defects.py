"""vLLM's known defects, in one shape: a :class:`KnownDefect` names the defect and how its fingerprint shows,
either in a reload answer (a comparison and its split) or in the case's KV-event stream. The judgement names
each one a case shows (``Defect`` in the report); a known defect explains a failure, it never passes one.

One fingerprint may be two defects: ``applies`` says on which servers a defect can be the one (its cache mode,
its vLLM release), so a recurrent state restored one token ahead at a chunk boundary is vllm#51094 in Mamba
``all`` mode and PR #44599's bug in ``align`` mode on vLLM 0.23.0 and before. The bugs issue 35 grades
(``gpu_tests/history/bugs.py``) that leave a fingerprint of their own are named here too: the engine's
assert on the first CPU hit in align mode, the Simple connector's refused reset, the OffloadingConnector's
tier that serves after a full reset, a loaded block wiped by the zeroing for Mamba models. The grade never
reads these names, only the judge's assertions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .releases import version_key
from .report import Comparison, Defect, Iteration, OffloadCheckReport, Split

__all__ = ["KNOWN_DEFECTS", "KnownDefect", "named_defects"]

ProbeMatch = Callable[[Comparison, Split], bool]
StreamMatch = Callable[[OffloadCheckReport], list[str]]
Applies = Callable[[OffloadCheckReport], bool]


@dataclass(frozen=True)
class KnownDefect:
    """A vLLM defect and its fingerprint: in a reload answer (``probe``: a comparison and its split match)
    or in the case's KV-event stream (``stream``: the evidence lines it finds, none when absent)."""

    id: str
    title: str
    url: str
    probe: ProbeMatch | None = None
    stream: StreamMatch | None = None
    applies: Applies | None = None  # None: on every server


def _recurrent_modes(report: OffloadCheckReport) -> set[str | None]:
    return {g.cache_mode for g in report.layout if g.recurrent}


def _in_mode(mode: str, up_to: str | None = None) -> Applies:
    """A server with a recurrent group in Mamba ``mode`` (and, with ``up_to``, a vLLM no newer than it)."""

    def applies(report: OffloadCheckReport) -> bool:
        if mode not in _recurrent_modes(report):
            return False
        if up_to is None:
            return True
        return report.vllm_version is not None and version_key(report.vllm_version) <= version_key(up_to)

    return applies


def _up_to(connectors: tuple[str, ...], version: str, mode: str | None = None) -> Applies:
    """A server of one of ``connectors`` on vLLM ``version`` or older (with ``mode``: in that Mamba cache
    mode)."""

    def applies(report: OffloadCheckReport) -> bool:
        if report.connector not in connectors or report.vllm_version is None:
            return False
        if mode is not None and mode not in _recurrent_modes(report):
            return False
        return version_key(report.vllm_version) <= version_key(version)

    return applies


def _errors_with(needle: str) -> StreamMatch:
    """The case's and its iterations' errors, its failed requests', and the engine's fatal traceback (a dead
    engine answers 500 without its message), that contain ``needle``."""

    def match(report: OffloadCheckReport) -> list[str]:
        texts = [report.error, report.engine_fault, *(it.error for it in report.iterations)]
        texts += [a.error for it in report.iterations for r in it.runs.values() for a in r.answers]
        hits = [t for t in texts if t and needle in t]
        return [f"vLLM {report.vllm_version}: {' '.join(t.split())[:200]}" for t in dict.fromkeys(hits)][:12]

    return match


def _engine_died_in(path: str, function: str, exception: str) -> StreamMatch:
    """The engine's fatal traceback (``engine_fault``, from the server log) raised ``exception`` in its
    innermost frame, ``function`` of a file whose path holds ``path``: its last lines are the evidence."""

    def match(report: OffloadCheckReport) -> list[str]:
        lines = [x.strip() for x in (report.engine_fault or "").splitlines()]
        frames = [x for x in lines if x.startswith("File ")]
        if not lines or not lines[-1].startswith(exception) or not frames:
            return []
        if path not in frames[-1] or not frames[-1].endswith(f"in {function}"):
            return []
        return [f"vLLM {report.vllm_version}: the engine died: {' | '.join(lines[-3:])}"]

    return match


def _hybrid_offloading(report: OffloadCheckReport) -> bool:
    return report.connector == "OffloadingConnector" and any(g.recurrent for g in report.layout)


def _cold_runs_loaded(report: OffloadCheckReport) -> list[str]:
    """Cold runs, after the full reset, that loaded from the CPU tier (what fails ``reload_proven``)."""
    return [
        f"vLLM {report.vllm_version} {it.label}: external prefix-cache hits grew in the {name} run after the "
        f"full reset (+{hits:.0f} tokens)"
        for it in report.clean()
        for name in ("cold", "cold2")
        if (hits := getattr(it.windows.get(name), "external_prefix_cache_hits", None) or 0) > 0
    ][:12]


def _restored_ahead_at_boundary(c: Comparison, s: Split) -> bool:
    return c.restored_ahead == 1 and s.cached == s.prompt - 1


def _simple_evictions_as_gpu_removes(report: OffloadCheckReport) -> list[str]:
    """Removes of never-stored hashes from a server whose CPU tier is the Simple connector's BlockPool (vLLM
    0.26 labels that pool's events GPU). ``kv_events_consistent`` still fails: the stream is wrong; this
    names why."""
    events = report.events
    if events is None or report.connector != "SimpleCPUOffloadConnector":
        return []
    removes = [p for p in events.refcount_problems if p.startswith("GPU ") and "not stored" in p]
    return [f"vLLM {report.vllm_version}: {p}" for p in removes[:12]]


def _hybrid_up_to(version: str) -> Applies:
    """A server with a recurrent (Mamba) group, on vLLM ``version`` or older, with either CPU connector."""
    older = _up_to(("OffloadingConnector", "SimpleCPUOffloadConnector"), version)
    return lambda report: older(report) and any(g.recurrent for g in report.layout)


def _zeros_at_first_use(report: OffloadCheckReport) -> list[str]:
    """Blocks a request started from that read as zeros (the instrument names them: ``book.zero_regions``)."""
    return [
        f"vLLM {report.vllm_version} {it.label}: request {use.request_id[:24]} group {e.group} "
        f"block {e.block} (GPU block {e.gpu_block}) holds {e.holds}"
        for it in report.clean()
        for use in it.first_use
        for e in use.examples
        if e.holds.startswith("zeros")
    ][:12]


KNOWN_DEFECTS: tuple[KnownDefect, ...] = (
    KnownDefect(
        "vllm#51094",
        "OffloadingConnector restores a recurrent state that already holds the last prompt token at an exact "
        "chunk boundary, then computes that token again (mamba_cache_mode=all; fixed after 0.26.0 by #51100)",
        "https://github.com/vllm-project/vllm/issues/51094",
        probe=_restored_ahead_at_boundary,
        applies=_in_mode("all"),
    ),
    KnownDefect(
        "vllm-pr44599",
        "OffloadingConnector's hit in Mamba align mode is not rounded down to the Mamba block: at a prompt "
        "of exactly k blocks the restored state already holds the last prompt token, which is computed again "
        "(mamba_cache_mode=align; vLLM 0.23.0 and before, fixed in 0.24.0 by #44599)",
        "https://github.com/vllm-project/vllm/pull/44599",
        probe=_restored_ahead_at_boundary,
        applies=_in_mode("align", up_to="0.23.0"),
    ),
    KnownDefect(
        "vllm-issue45268",
        "The scheduler asserts 'External KV connector is not verified yet' on the first CPU hit in Mamba "
        "align mode and the engine dies (vLLM 0.22.0 and before, fixed in 0.23.0 by #42554)",
        "https://github.com/vllm-project/vllm/issues/45268",
        stream=_errors_with("External KV connector is not verified yet"),
        applies=_up_to(("OffloadingConnector", "SimpleCPUOffloadConnector"), "0.22.0", mode="align"),
    ),
    KnownDefect(
        "vllm-pr39726",
        "SimpleCPUOffloadConnector.reset_cache() raises NotImplementedError, so a full reset answers 500 and "
        "its CPU tier stays full (vLLM 0.23.0 and before, fixed in 0.24.0 by #39726)",
        "https://github.com/vllm-project/vllm/pull/39726",
        stream=_errors_with("does not support reset_cache"),
        applies=_up_to(("SimpleCPUOffloadConnector",), "0.23.0"),
    ),
    KnownDefect(
        "vllm-pr41956",
        "OffloadingConnector has no reset_cache(): a full reset (reset_external=true) answers success and "
        "its CPU tier keeps serving the next cold run (vLLM 0.20.2 and before, fixed in 0.22.0 by #41956)",
        "https://github.com/vllm-project/vllm/pull/41956",
        stream=_cold_runs_loaded,
        applies=_up_to(("OffloadingConnector",), "0.20.2"),
    ),
    KnownDefect(
        "vllm-skip-zero-block-ids",
        "The blocks vLLM zeroes for Mamba models each step include those an asynchronous load is filling, "
        "and the zeroing can land after the load: a loaded prefix reads as zeros (vLLM 0.25.1 and before, "
        "fixed in 0.26.0 by _skip_zero_block_ids)",
        "https://github.com/vllm-project/vllm/compare/v0.25.1...v0.26.0",
        stream=_zeros_at_first_use,
        applies=_hybrid_up_to("0.25.1"),
    ),
    KnownDefect(
        "vllm#50454",
        "OffloadingConnectorScheduler.update_state_after_alloc asserts num_locally_computed_tokens <= the "
        "hash-backed GPU blocks and the engine dies: a hybrid (Mamba) model with prefix caching whose GPU "
        "prefix cache evicts while the CPU tier serves (reported on 0.25.1 with MTP; open)",
        "https://github.com/vllm-project/vllm/issues/50454",
        stream=_engine_died_in("offloading/scheduler.py", "update_state_after_alloc", "AssertionError"),
        applies=_hybrid_offloading,
    ),
    KnownDefect(
        "vllm#54325",
        "SimpleCPUOffloadConnector puts its CPU tier's evictions on the KV-event stream as GPU BlockRemoved "
        "events, for hashes whose stores it never announced (its CPU BlockPool emits with medium GPU; fixed "
        "by #54325, which labels them CPU and sends the BlockStored)",
        "https://github.com/vllm-project/vllm/pull/54325",
        stream=_simple_evictions_as_gpu_removes,
    ),
)


def named_defects(report: OffloadCheckReport, iterations: Sequence[Iteration]) -> list[Defect]:
    """Every known defect whose fingerprint ``report`` shows: in ``iterations`` (those whose splits are
    vLLM's own, the judge chooses them) or in its stream."""
    found: list[Defect] = []
    for known in KNOWN_DEFECTS:
        if known.applies is not None and not known.applies(report):
            continue
        probes, evidence = _probe_evidence(known.probe, iterations) if known.probe else ([], [])
        if known.stream is not None:
            evidence += known.stream(report)
        if probes or evidence:
            found.append(
                Defect(id=known.id, title=known.title, url=known.url, probes=probes, evidence=evidence)
            )
    return found


def _probe_evidence(matches: ProbeMatch, iterations: Sequence[Iteration]) -> tuple[list[str], list[str]]:
    """The probes whose reload answer matches, and up to 12 lines of evidence."""
    probes: list[str] = []
    evidence: list[str] = []
    for it in iterations:
        reload = it.runs.get("reload")
        answers = reload.by_probe() if reload else {}
        plans = {p.request_id: p for p in it.loads}
        for c in it.comparisons:
            split = answers[c.probe].split if c.probe in answers else None
            if split is not None and matches(c, split):
                if c.probe not in probes:
                    probes.append(c.probe)
                if len(evidence) < 12:
                    plan = plans.get(answers[c.probe].request_id or "")
                    blocks = (
                        "; loaded "
                        + ", ".join(
                            f"group {g.group} blocks {g.first_block}..{g.first_block + g.blocks - 1}"
                            for g in plan.groups
                            if g.blocks
                        )
                        + (f" into GPU blocks {plan.gpu_block_ids}" if plan.gpu_block_ids else "")
                        if plan is not None
                        else ""
                    )
                    evidence.append(
                        f"{it.label} {c.probe}: prompt {split.prompt}, cached {split.cached} "
                        f"(GPU {split.local}, loaded {split.external}), "
                        f"state restored at {split.cached + (c.restored_ahead or 0)}; "
                        + (
                            f"answer equals the {c.shape} fingerprint"
                            if c.shape
                            else "no fingerprint matched"
                        )
                        + blocks
                    )
    return probes, evidence
