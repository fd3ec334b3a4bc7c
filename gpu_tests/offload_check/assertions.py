"""The per-iteration assertions of the judgement (``judge.py`` says what each one means): pure functions from
an iteration's measurements to :class:`~.report.AssertionResult` values. No I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from vllm_devclient.metrics import MetricsDelta

from .events import KVEventsSummary
from .probe_files import FirstUse, GroupLayout, LoadPlan
from .report import (
    Answer,
    AssertionResult,
    Comparison,
    CpuTier,
    Iteration,
    ProbeInfo,
    ResetResult,
    Run,
    Split,
    Verdict,
)
from .settings import CheckSettings

__all__ = [
    "KINDS",
    "REQUEST_FAILURES",
    "compare",
    "moved_by_the_batch",
    "requests_ok",
    "resets_honoured",
    "same_split_pairs",
]

REQUEST_FAILURES = "requests_ok"


def _cached(answer_split: Split | None, usage: int | None) -> int | None:
    return answer_split.cached if answer_split is not None else usage


def _recurrent(layout: Sequence[GroupLayout]) -> list[GroupLayout]:
    return [g for g in layout if g.recurrent]


def _by_probe(it: Iteration, name: str) -> dict[str, Answer]:
    return it.runs[name].by_probe() if name in it.runs else {}


def _restored_ahead(plan: LoadPlan | None, recurrent: set[int]) -> int | None:
    """How far past the cached count a load's recurrent groups reach (None without its load plan)."""
    if plan is None:
        return None
    gaps = [g.end_token - plan.cached for g in plan.groups if g.group in recurrent and g.blocks > 0]
    return max(gaps) if gaps else None


def _shape(
    probe: ProbeInfo, text: str | None, fp_probes: Mapping[str, ProbeInfo], fp_run: dict[str, Answer]
) -> str | None:
    """The failure shape whose fingerprint of ``probe`` answered ``text``, if one did."""
    for fp_id, fp in fp_probes.items():
        got = fp_run.get(fp_id)
        if fp.base == probe.id and got is not None and got.text is not None and got.text == text:
            return fp.shape
    return None


def _against_warm(
    probe: ProbeInfo, r: Answer, ref: Answer, others: Mapping[str, dict[str, Answer]]
) -> tuple[Verdict, str]:
    """A reload answer against the warm one of the same probe (both answered): like for like only at the
    same split, and only where two cold runs and the batch control (``others``: by run, by probe) agree
    there."""
    rc, wc = _cached(r.split, r.usage_cached), _cached(ref.split, ref.usage_cached)
    if rc is None or wc is None:
        return "not_comparable", "the split of a request is unknown"
    if rc != wc:
        return "not_comparable", f"reload cached {rc} of {probe.length} tokens, warm {wc}"
    c1, c2 = others["cold"].get(probe.id), others["cold2"].get(probe.id)
    if (
        c1 is not None
        and c2 is not None
        and c1.text is not None
        and c2.text is not None
        and _cached(c1.split, c1.usage_cached) == _cached(c2.split, c2.usage_cached)
        and c1.text != c2.text
    ):
        return "nondeterministic", "two cold runs with the same split answered differently"
    w2 = others["warm2"].get(probe.id)
    if (
        w2 is not None
        and w2.text is not None
        and _cached(w2.split, w2.usage_cached) == wc
        and w2.text != ref.text
    ):
        return "nondeterministic", "the warm answer changed in other batches (warm2, same split)"
    return ("agree" if r.text == ref.text else "differ"), f"same split: {rc} cached"


def compare(it: Iteration, probes: Sequence[ProbeInfo], layout: Sequence[GroupLayout]) -> list[Comparison]:
    """Each non-fingerprint probe's reload answer against its like-for-like reference (module docstring)."""
    reload = it.runs["reload"].by_probe()
    warm = _by_probe(it, "warm")
    fp_run = _by_probe(it, "fingerprint")
    others = {name: _by_probe(it, name) for name in ("cold", "cold2", "warm2")}
    fp_probes = {p.id: p for p in probes if p.kind == "fingerprint"}
    plans = {p.request_id: p for p in it.loads}
    recurrent = {g.index for g in _recurrent(layout)}
    out: list[Comparison] = []
    for probe in probes:
        if probe.kind == "fingerprint" or probe.id not in reload:
            continue
        r = reload[probe.id]
        base = {
            "probe": probe.id,
            "reload_split": r.split,
            "shape": _shape(probe, r.text, fp_probes, fp_run),
            "restored_ahead": _restored_ahead(plans.get(r.request_id or ""), recurrent),
        }
        ref = warm.get(probe.id)
        if r.text is None:
            out.append(
                Comparison(**base, verdict="no_answer", reason=f"the reload request failed: {r.error}")
            )
        elif r.split is not None and not r.split.external:
            reason = "the reload loaded nothing from the connector: its answer says nothing of the reload"
            out.append(Comparison(**base, verdict="not_loaded", reason=reason))
        elif ref is None or ref.text is None:
            out.append(Comparison(**base, verdict="no_answer", reason="no warm answer to compare with"))
        else:
            verdict, reason = _against_warm(probe, r, ref, others)
            out.append(
                Comparison(
                    **base, reference="warm", reference_split=ref.split, verdict=verdict, reason=reason
                )
            )
    return out


def _grew(value: float | None) -> bool:
    return value is not None and value > 0


def _still(value: float | None) -> bool:
    return value is None or value == 0


def reload_proven(
    settings: CheckSettings,
    windows: Mapping[str, MetricsDelta],
    stored: int | None,
    events: KVEventsSummary | None,
) -> AssertionResult:
    reload = windows.get("reload")
    problems: list[str] = []
    notes: list[str] = []
    if reload is None:
        return AssertionResult(name="reload_proven", passed=False, message="no metrics of the reload run")
    # Only the cold runs must not load; a warm run may load a block-aligned prompt's last block.
    not_loading = [(name, w) for name, w in windows.items() if name in ("cold", "cold2")]
    if reload.external_prefix_cache_hits is None:
        problems.append(
            "the server exports no vllm:external_prefix_cache_hits, so the reload cannot be proven"
        )
    elif not _grew(reload.external_prefix_cache_hits):
        problems.append("external prefix-cache hits did not grow in the reload run (nothing loaded from CPU)")
    else:
        notes.append(f"external hits +{reload.external_prefix_cache_hits:.0f} tokens")
    for name, window in not_loading:
        if not _still(window.external_prefix_cache_hits):
            problems.append(
                f"external prefix-cache hits grew in the {name} run (+{window.external_prefix_cache_hits})"
            )
    for label, attr in (
        ("CPU->GPU bytes", "cpu_to_gpu_bytes"),
        ("simple-offload load blocks", "simple_load_blocks"),
    ):
        value = getattr(reload, attr)
        if value is None:
            continue
        if not _grew(value):
            problems.append(f"{label} did not grow in the reload run")
        else:
            notes.append(f"{label} +{value:.0f}")
        for name, window in not_loading:
            if not _still(getattr(window, attr)):
                problems.append(f"{label} grew in the {name} run (+{getattr(window, attr)})")
    if any(w.counter_went_back for w in windows.values()):
        problems.append("a counter went backwards: the server restarted during the check")
    if settings.expect_cpu_store_events:
        if not stored:
            problems.append("no CPU-tier BlockStored events were seen after the cold run")
        else:
            notes.append(f"{stored} CPU blocks stored (KV events)")
        if events is not None and events.missing_cpu_groups:
            problems.append(
                f"no CPU store for full-attention group(s) {events.missing_cpu_groups} "
                f"(GPU full-attention groups {events.gpu_full_attention_groups})"
            )
        elif events is not None and events.ungrouped_cpu_blocks:
            notes.append(
                f"per-group CPU stores not checked: {events.ungrouped_cpu_blocks} CPU blocks stored without "
                "a group (this release's events carry none)"
            )
    return AssertionResult(
        name="reload_proven", passed=not problems, message="; ".join(problems or notes) or "ok"
    )


def answers_unchanged(comparisons: Sequence[Comparison], it: Iteration) -> AssertionResult:
    """Fails on any ``differ``; "not evaluated" with nothing compared, or where the batch control moved an
    answer: then the engine's answers follow the batch, and a reload that differs says nothing of its KV."""
    name = "answers_unchanged"
    by: dict[str, list[str]] = {}
    for c in comparisons:
        by.setdefault(c.verdict, []).append(c.probe)
    compared = len(by.get("agree", [])) + len(by.get("differ", []))
    parts = [f"{len(v)} {k}" for k, v in sorted(by.items())]
    message = f"{compared} compared like for like: " + ", ".join(parts)
    moved = moved_by_the_batch(it)
    if moved is not None and moved[0]:
        unloaded = [
            c.probe
            for c in comparisons
            if c.verdict == "differ" and c.reload_split and not c.reload_split.external
        ]
        return AssertionResult(
            name=name,
            passed=True,
            evaluated=False,
            message=(
                "the answers follow the batch: the batch control (warm2: the same splits, other batches) "
                f"changed {moved[0]} of {moved[1]} warm answers, so a reload answering otherwise cannot be "
                f"told from batch noise ({message}; {len(unloaded)} of the {len(by.get('differ', []))} "
                "differing reloads loaded nothing from the CPU tier); the KV is judged by its bytes"
            ),
        )
    if by.get("differ"):
        message += f"; reload differs from the same-split warm answer on {by['differ']}"
    if by.get("not_comparable"):
        message += f"; not comparable (another split): {by['not_comparable'][:12]}"
    if compared == 0:
        return AssertionResult(name=name, passed=True, evaluated=False, message=message)
    return AssertionResult(name=name, passed=not by.get("differ"), message=message)


def same_split_pairs(a: Run, b: Run) -> list[tuple[Answer, Answer]]:
    """The answers of runs ``a`` and ``b`` to the same probe at the same split, both answered."""
    other = b.by_probe()
    return [
        (x, y)
        for x in a.answers
        if (y := other.get(x.probe)) is not None
        and x.text is not None
        and y.text is not None
        and _cached(x.split, x.usage_cached) == _cached(y.split, y.usage_cached)
    ]


def moved_by_the_batch(it: Iteration) -> tuple[int, int] | None:
    """(answers the batch control changed, answers it compared at the warm run's split); None without it."""
    if "warm2" not in it.runs or "warm" not in it.runs:
        return None
    pairs = same_split_pairs(it.runs["warm2"], it.runs["warm"])
    return sum(x.text != y.text for x, y in pairs), len(pairs)


def _first_use_problem(label: str, answer: Answer | None, use: FirstUse) -> str:
    """One request's blocks not as computed, with its first example."""
    ex = use.examples[0] if use.examples else None
    what = (
        f"group {ex.group} block {ex.block} (GPU block {ex.gpu_block}) holds "
        f"{ex.holds or 'no computation'}"
        + (f", {ex.regions_differ} layer regions differ" if ex.regions_differ else "")
        if ex is not None
        else ""
    )
    probe = answer.probe if answer is not None else use.request_id
    return f"{label} {probe}: {use.bad()} block(s) not as computed; {what}"


@dataclass
class _Tally:
    """The first-use verdicts of an iteration, counted: by verdict letter, and the reload's connector-loaded
    blocks (as computed, or not) with the groups that had one as computed and the regions per group."""

    counts: dict[str, int] = field(default_factory=dict)
    loaded: dict[str, int] = field(default_factory=lambda: {"v": 0, "other": 0})
    groups: set[int] = field(default_factory=set)
    regions: dict[int, int] = field(default_factory=dict)

    def add(self, use: FirstUse, label: str, local: int | None) -> None:
        for g in use.groups:
            self.regions[g.group] = g.regions
            for verdict in g.verdicts:
                self.counts[verdict] = self.counts.get(verdict, 0) + 1
            if label == "reload" and local is not None:
                start = local // g.block_size if g.block_size else 0
                tail = g.verdicts[start:]
                self.loaded["v"] += tail.count("v")
                self.loaded["other"] += len(tail) - tail.count("v") - tail.count("n") - tail.count("s")
                if tail.count("v"):
                    self.groups.add(g.group)

    def __str__(self) -> str:
        c = self.counts
        return (
            f"{sum(c.values())} blocks checked at first use ({c.get('v', 0)} as computed, "
            f"{c.get('x', 0)} corrupt, {c.get('u', 0)} never computed, {c.get('p', 0)} poison, "
            f"{c.get('n', 0)} null, {c.get('s', 0)} recurrent states between snapshots left to "
            f"recurrent_state_consistent); reload: {self.loaded['v']} connector-loaded blocks as computed in "
            f"{len(self.groups)} group(s) {sorted(self.groups)}, layer regions per group "
            f"{dict(sorted(self.regions.items()))}"
        )


def kv_bytes_identical(settings: CheckSettings, it: Iteration) -> AssertionResult:
    """Every block a request started from, in every run of the iteration, equals a computation of its prefix;
    and the reload's connector-loaded blocks were among them (else "not evaluated": nothing was proven)."""
    name = "kv_bytes_identical"
    if not settings.reference_digests:
        why = "no reference digests: the server was started without the instruments"
        return AssertionResult(name=name, passed=True, evaluated=False, message=why)
    answers = {
        a.request_id: (label, a) for label, run in it.runs.items() for a in run.answers if a.request_id
    }
    found = _Tally()
    problems: list[str] = []
    for use in it.first_use:
        label, answer = answers.get(use.request_id, ("another request", None))
        found.add(use, label, answer.split.local if answer is not None and answer.split is not None else None)
        if use.bad() and len(problems) < 4:
            problems.append(_first_use_problem(label, answer, use))
    bad = found.counts.get("x", 0) + found.counts.get("u", 0) + found.counts.get("p", 0)
    tally = str(found)
    at_read, late = sum(u.at_read for u in it.first_use), sum(u.late for u in it.first_use)
    if at_read:  # reports before the read point hold none
        tally += f"; {at_read} digested before the forward that read them, {late} wrong there and right after"
    if bad:
        return AssertionResult(name=name, passed=False, message="; ".join(problems) + f"; {tally}")
    if not found.loaded["v"]:
        return AssertionResult(
            name=name,
            passed=True,
            evaluated=False,
            message=f"no block the connector loaded in the reload was checked: nothing is proven; {tally}",
        )
    return AssertionResult(name=name, passed=True, message=tally)


def recurrent_state_consistent(
    it: Iteration,
    comparisons: Sequence[Comparison],
    probes: Mapping[str, ProbeInfo],
    layout: Sequence[GroupLayout],
) -> AssertionResult:
    name = "recurrent_state_consistent"
    rec = _recurrent(layout)
    if not rec:
        return AssertionResult(name=name, passed=True, evaluated=False, message="no recurrent-state group")
    reload = it.runs["reload"].by_probe()
    bad: list[str] = []
    checked = 0
    for c in comparisons:
        answer = reload.get(c.probe)
        split = answer.split if answer else None
        if split is None or split.external == 0:
            continue
        checked += 1
        if c.restored_ahead is not None:
            if c.restored_ahead > 0:
                bad.append(
                    f"{c.probe}: state restored at {split.cached + c.restored_ahead}, "
                    f"{split.cached} cached of "
                    f"{split.prompt} ({c.restored_ahead} ahead"
                    + (f", answer matches {c.shape}" if c.shape else "")
                    + ")"
                )
            continue
        off = [g.block_size for g in rec if split.cached % g.block_size]
        if off:
            bad.append(
                f"{c.probe}: {split.cached} cached of {split.prompt}, off the {off[0]}-token state grid"
            )
    if checked == 0:
        return AssertionResult(
            name=name, passed=True, evaluated=False, message="no reload loaded from the CPU tier"
        )
    if bad:
        return AssertionResult(
            name=name, passed=False, message=f"{len(bad)} of {checked} loads: " + "; ".join(bad[:8])
        )
    return AssertionResult(
        name=name, passed=True, message=f"{checked} loads restore state at the cached count"
    )


KINDS = ("boundary", "control")  # the probes cut to a boundary size, and those 3 tokens short of it


@dataclass
class _Boundaries:
    """What :func:`boundaries_reached` found, size by size: kinds of probe none of which the connector
    loaded, sizes and kinds loaded, sizes vLLM declined to reload, kinds the CPU tier evicted."""

    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    declined: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)


def _at_size(
    found: _Boundaries,
    size: int,
    probes: Sequence[ProbeInfo],
    reload: Mapping[str, Split],
    warms: Sequence[Mapping[str, Split]],
    evicting: CpuTier | None,
) -> None:
    """One boundary size's findings (the rules of :func:`boundaries_reached`) into ``found``."""
    ids = {kind: [p.id for p in probes if p.boundary == size and p.kind == kind] for kind in KINDS}
    loaded = {kind: [i for i in ids[kind] if i in reload and reload[i].external > 0] for kind in KINDS}
    declined = [reload[i] for i in ids["boundary"] if i in reload and reload[i].cached == 0]
    warm_cached = [max((w[i].cached for w in warms if i in w), default=0) for i in ids["boundary"]]
    # A tier that evicted explains an empty reload as well as a decline does: only eviction is said.
    if (
        evicting is None
        and ids["boundary"]
        and loaded["control"]
        and len(declined) == len(ids["boundary"])
        and any(warm_cached)
    ):
        prompts = "/".join(str(r.prompt) for r in declined)
        controls = f"{len(loaded['control'])}/{len(ids['control'])}"
        found.declined.append(
            f"size {size} not evaluated: vLLM reloaded none of the {len(declined)} boundary probes "
            f"(reload cached 0 of {prompts} tokens, nothing on the GPU; the warm runs cached "
            f"{'/'.join(map(str, warm_cached))}) while it loaded {controls} controls: no reload at this "
            "boundary to judge"
        )
        return
    for kind in KINDS:
        if ids[kind] and not loaded[kind] and evicting is not None:
            found.evicted.append(
                f"{kind} {size} not evaluated: none of {len(ids[kind])} was reloaded, and the CPU tier "
                f"evicted {evicting.evicted} of the {evicting.stored} entries this pass stored (it holds "
                f"{evicting.live}): their blocks were gone before the reload"
            )
        elif ids[kind] and not loaded[kind]:
            found.missing.append(
                f"no {kind} probe of size {size} was loaded by the connector ({len(ids[kind])} sent)"
            )
        elif ids[kind]:
            found.notes.append(f"{kind} {size}: {len(loaded[kind])}/{len(ids[kind])} loaded")


def boundaries_reached(it: Iteration, probes: Sequence[ProbeInfo]) -> AssertionResult:
    """Every boundary size had a boundary probe and a control whose reload the connector served: otherwise
    the iteration says nothing about the block and chunk boundaries.

    A size whose boundary probes all came back with nothing cached (nothing on the GPU after the reset, and
    the connector loaded none of them) while a warm run (``warm``, or the batch control ``warm2``) cached
    one of them and a control of that size was loaded, with a CPU tier that evicted nothing, is vLLM
    declining to reload at that boundary: there is no reload there to judge, so the size is "not
    evaluated", with the splits as evidence. (At real size the warm run can find a probe's blocks gone from
    the GPU, a KV cache too small to keep the cold run; the batch control, after the warm run computed them
    again, shows them cacheable.) A boundary probe served from the GPU prefix cache instead (a prefix
    another probe left there) is the check's own failure, and fails. A kind of probe none of which came
    back while the CPU tier evicted during the pass (a tier smaller than the pass's KV, as upstream's 1 GiB at
    real size) is "not evaluated" too: its blocks were gone, which says nothing of the boundary."""
    name = "boundaries_reached"
    sizes = sorted({p.boundary for p in probes if p.boundary is not None})
    if not sizes:
        return AssertionResult(
            name=name,
            passed=True,
            evaluated=False,
            message="no boundary probes (the KV-cache layout is unknown)",
        )
    reload = it.runs["reload"].splits()
    warms = [it.runs[k].splits() for k in ("warm", "warm2") if k in it.runs]
    evicting = it.cpu_tier if it.cpu_tier is not None and it.cpu_tier.evicted > 0 else None
    found = _Boundaries()
    for size in sizes:
        _at_size(found, size, probes, reload, warms, evicting)
    if found.missing:
        return AssertionResult(
            name=name, passed=False, message="; ".join(found.missing + found.declined + found.evicted)
        )
    return AssertionResult(
        name=name,
        passed=True,
        evaluated=bool(found.notes),
        message="; ".join(found.notes + found.declined + found.evicted),
    )


def accuracy_held(settings: CheckSettings, runs: Mapping[str, Run]) -> AssertionResult | None:
    if settings.accuracy_threshold is None:
        return None  # random weights answer nothing right: an accuracy of theirs would prove nothing
    floor = settings.accuracy_threshold - settings.tolerance
    accs = {k: runs[k].accuracy for k in ("cold", "reload") if k in runs and runs[k].accuracy is not None}
    low = sorted(k for k, a in accs.items() if a is not None and a < floor)
    text = ", ".join(f"{k} {a:.3f}" for k, a in accs.items() if a is not None)
    if not accs:
        return AssertionResult(
            name="accuracy_held", passed=False, evaluated=False, message="no GSM8K answers"
        )
    return AssertionResult(
        name="accuracy_held",
        passed=not low,
        message=f"{text} vs floor {floor:.3f}" + (f"; below: {low}" if low else ""),
    )


def requests_ok(runs: Mapping[str, Run], max_failed_rate: float) -> AssertionResult:
    """No run lost more than ``max_failed_rate`` of its requests (upstream counts them as invalid answers)."""
    over = {
        k: r.failed_requests
        for k, r in runs.items()
        if r.answers and r.failed_requests / len(r.answers) > max_failed_rate
    }
    total = sum(r.failed_requests for r in runs.values())
    message = f"{total} failed request(s) in {len(runs)} runs (limit {max_failed_rate:.0%} per run)"
    if over:
        first = next((a.error for r in runs.values() for a in r.answers if a.error), "")
        message += f"; over the limit: {over}; first error: {(first or '')[:300]}"
    return AssertionResult(name=REQUEST_FAILURES, passed=not over, message=message)


def resets_honoured(barriers: Mapping[str, ResetResult]) -> AssertionResult:
    """Every reset of the iteration was confirmed, each by what the release can say (``success``, else the
    stream's ``AllBlocksCleared``); a reset the server refused fails with its status and words, one nothing
    confirmed with the reason. Never a pass on an answer that says nothing."""
    name = "resets_honoured"
    if not barriers:
        return AssertionResult(name=name, passed=True, evaluated=False, message="no reset measured")
    bad: list[str] = []
    good: list[str] = []
    for key, r in barriers.items():
        what = f"{key} reset ({'reset_external' if r.external else 'GPU only'})"
        if r.outcome == "refused":
            bad.append(f"{what} refused: HTTP {r.http_status}: {r.message[:300]}")
        elif r.outcome == "unconfirmed":
            bad.append(f"{what} not confirmed: {r.message[:300]}")
        else:
            good.append(f"{key} by {r.confirmed_by} ({r.attempts} tr{'y' if r.attempts == 1 else 'ies'})")
    message = "; ".join(bad + (["confirmed: " + ", ".join(good)] if good else []))
    return AssertionResult(name=name, passed=not bad, message=message)
