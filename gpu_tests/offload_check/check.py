"""The offload-reload check: the sequence on one server, and what it measures. The judgement is ``judge.py``.

One server per case (model x connector x frontend). An *iteration* is:

1. full reset (``reset_external=True``): both tiers empty;
2. cold run: every probe (``probes.py``), its KV stored to the CPU tier as it is computed;
3. warm run: the same probes from the GPU prefix cache, the like-for-like reference of the reload; with
   ``batch_control_s`` (the real-size profiles, requests in flight together) and no mutation armed, a
   second warm run (``warm2``) sent spread over that many seconds: the same splits in other batches, which
   tells batch noise from the KV;
   with ``decode_in_flight``, that many questions again at once (``decode``: the budget's decode rate);
4. wait until the CPU-tier stores settle (KV events where the connector sends them, else metrics);
5. GPU-only reset (``reset_external=False``): GPU prefix cache dropped, CPU tier kept; then
   every free GPU block is poisoned (where the instruments can), so a load that copies nothing cannot pass
   on the bytes a block still held;
6. reload run: the KV must come back from the CPU;
7. where some reload shared no split with the warm run (or differed from it), and always in the first
   iteration: full reset, second cold run (in the first iteration of every probe: the engine's determinism,
   probe by probe; later, of those probes only) and, for a model with a recurrent-state group, a fingerprint
   run of the known failure shapes, served from the second cold run's clean GPU prefix cache;
8. with ``reset_under_load`` (a clean iteration): that many long prompts at once (``load``), full resets fired
   while their chunked prefill stores (``load_resets``, as answered), then a full reset once they finished
   (``after_load``): a connector a reset left with stale jobs fails requests, kills the engine, or the reset.

Every reset is confirmed (``resets.py``: the server's ``success``, or on a release that answers a bare 200 the
stream's ``AllBlocksCleared``); one refused or never confirmed is recorded as such (``barriers``) and the
iteration goes on, so a refused full reset leaves its evidence beside the runs it did not prevent.

``iterations`` clean iterations run first (a correct case must pass each), then one per defect of the
catalogue, armed from the iteration's first reset to the end of its reload (a store-side defect acts in the
cold run, a load-side one in the reload). Every request's first use of a cached prefix, in every run, is
checked by the reference instrument; the iteration keeps the records of its window.
:func:`run_check` only talks to a :class:`CheckIO` (``server_io.ServerIO`` is the real one, ``case.py`` starts
the server) and never raises: an error half-way ends the case with what was measured so far.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from vllm_devclient import VersionInfo
from vllm_devclient.metrics import MetricsDelta, MetricsSnapshot

from .events import GroupEventAccount
from .probe_files import FirstUse, GroupLayout, LoadPlan, MutationOrder
from .probes import SHAPES, Probe, fingerprint, load_probes
from .report import CpuTier, Iteration, OffloadCheckReport, ProbeInfo, ResetResult, Run, SettleResult
from .settings import CheckSettings

__all__ = ["CheckIO", "CheckStopped", "MutationPlan", "run_check", "settle"]


class CheckIO(Protocol):
    """What the check needs from a server and its instruments; `server_io.ServerIO` is the real one."""

    texts: dict[str, str]

    def version(self) -> VersionInfo: ...
    def metrics(self) -> MetricsSnapshot: ...
    def run(self, label: str, probes: Sequence[Probe], spread_s: float = 0.0) -> Run:
        """Send the probes (token ids, greedy), read each one's split; answer texts go into ``texts``.
        ``spread_s``: send them evenly over that many seconds (other batches), not at once."""
        ...

    def run_resetting(self, label: str, probes: Sequence[Probe]) -> tuple[Run, list[ResetResult]]:
        """Send the probes all at once and fire full resets while they run: the run, and each reset as
        answered (nothing confirms a reset that meets held blocks; none of them is judged)."""
        ...

    def step_engine(self) -> None: ...
    def mark_stores(self) -> None: ...
    def settle_stores(self) -> SettleResult: ...
    def reset_prefix_cache(self, reset_external: bool) -> ResetResult:
        """Reset and confirm it (``resets.py``); a reset refused or never confirmed is a result, not an
        exception (the judgement's ``resets_honoured``): only a server gone raises."""
        ...

    def cpu_blocks_stored(self) -> int | None: ...
    def events(self) -> GroupEventAccount | None: ...
    def first_uses(self) -> list[FirstUse]: ...
    def poison(self) -> int | None:
        """Poison every free GPU block; the blocks poisoned, or None where the server cannot."""
        ...

    def loads(self) -> list[LoadPlan]: ...
    def defects_applied(self) -> dict[str, int]: ...
    def arm(self, order: MutationOrder | None) -> None: ...


class CheckStopped(BaseException):
    """Raised (from a SIGTERM handler: the runner's deadline) to stop the check where it is. Not an
    ``Exception``, so nothing on the way swallows it; the iteration it interrupts keeps what it measured and
    the check ends there, with its report."""


@dataclass(frozen=True)
class MutationPlan:
    """One mutation iteration: the order for the instruments, on which probes."""

    order: MutationOrder
    probes: tuple[Probe, ...]


@dataclass
class _State:
    iterations: list[Iteration] = field(default_factory=list)
    fingerprints: dict[str, Probe] = field(default_factory=dict)
    reset_visible: bool | None = None
    version: VersionInfo | None = None
    stopped: bool = False


def _need_reference(reload: Run, warm: Run | None) -> list[str]:
    """Probes whose reload did not share the warm run's split, or answered otherwise."""
    warm_by = warm.by_probe() if warm is not None else {}
    out = []
    for a in reload.answers:
        w = warm_by.get(a.probe)
        if w is None or a.split is None or w.split is None:
            continue
        if a.split.cached != w.split.cached or a.text != w.text:
            out.append(a.probe)
    return out


def _shape_block(layout: Sequence[GroupLayout]) -> int:
    recurrent = [g.block_size for g in layout if g.recurrent]
    sizes = recurrent or [g.block_size for g in layout]
    return min(sizes) if sizes else 0


@dataclass
class _Pass:
    """One iteration under way, handed from stage to stage: what it measured so far, and where the
    instruments' records stood when it began."""

    io: CheckIO
    label: str
    clock: Callable[[], float]
    uses0: int
    loads0: int
    applied0: dict[str, int]
    timings: dict[str, float] = field(default_factory=dict)
    runs: dict[str, Run] = field(default_factory=dict)
    windows: dict[str, MetricsDelta] = field(default_factory=dict)
    barriers: dict[str, ResetResult] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def begin(cls, io: CheckIO, label: str, clock: Callable[[], float]) -> _Pass:
        return cls(io, label, clock, len(io.first_uses()), len(io.loads()), io.defects_applied())

    def timed(self, name: str, fn: Callable[[], Any]) -> Any:
        t0 = self.clock()
        try:
            return fn()
        finally:
            self.timings[name] = round(self.clock() - t0, 3)

    def mark(self, name: str) -> None:
        """Mark the KV-event account (where there is one) at ``label:name``."""
        account = self.io.events()
        if account is not None:
            account.mark(f"{self.label}:{name}")

    def iteration(self, order: MutationOrder | None) -> Iteration:
        return Iteration(
            label=self.label,
            mutation=order.name if order is not None else None,
            mutation_group=order.group if order is not None else None,
            runs=self.runs,
            windows=self.windows,
            barriers=self.barriers,
            timings=self.timings,
            **self.fields,
        )


def _full_reset(p: _Pass, st: _State) -> None:
    """Stage 1: both tiers emptied; the first reset after the first iteration tells whether the stream shows
    a reset at all."""
    io = p.io
    p.mark("reset")
    p.barriers["full"] = p.timed("reset_all_s", lambda: io.reset_prefix_cache(True))
    io.step_engine()  # the reset's events go out with the next engine step
    if st.reset_visible is None and st.iterations:
        account = io.events()
        if account is not None:
            delta = account.since(f"{p.label}:reset")
            st.reset_visible = delta.cleared > 0 or delta.removed("CPU") + delta.removed("GPU") > 0


def _stores(
    p: _Pass,
    probes: Sequence[Probe],
    *,
    order: MutationOrder | None,
    batch_control_s: float,
    decode_in_flight: int,
) -> None:
    """Stages 2-4: the cold run stores, the warm runs read the GPU prefix cache, the CPU-tier stores
    settle."""
    io = p.io
    m0 = io.metrics()
    stored0 = io.cpu_blocks_stored()
    io.mark_stores()
    p.mark("cold")
    held0 = account.live_blocks("CPU") if (account := io.events()) is not None else 0
    p.runs["cold"] = p.timed("cold_run_s", lambda: io.run("cold", probes))
    m1 = io.metrics()
    p.windows["cold"] = m1.delta(m0)
    p.runs["warm"] = p.timed("warm_run_s", lambda: io.run("warm", probes))
    if batch_control_s and order is None:
        # The same split in other batches: where the answer moves, text cannot judge the KV.
        p.runs["warm2"] = p.timed("warm2_run_s", lambda: io.run("warm2", probes, spread_s=batch_control_s))
    if decode_in_flight and order is None:
        few = [q for q in probes if q.kind == "gsm8k"][:decode_in_flight]
        p.runs["decode"] = p.timed("decode_run_s", lambda: io.run("decode", few))
    p.fields["settle"] = p.timed("settle_s", io.settle_stores)
    stored1 = io.cpu_blocks_stored()
    p.fields["cpu_blocks_stored"] = None if stored0 is None or stored1 is None else stored1 - stored0
    p.fields["cpu_tier"] = _cpu_tier(io, f"{p.label}:cold", held0)
    p.windows["warm"] = io.metrics().delta(m1)


def _reload(p: _Pass, probes: Sequence[Probe]) -> None:
    """Stages 5-6: GPU-only reset, the poison, the reload run (the defect disarmed after it), and what the
    instruments saw loaded and applied."""
    io = p.io
    p.barriers["gpu_only"] = p.timed("reset_gpu_s", lambda: io.reset_prefix_cache(False))
    p.fields["poisoned_blocks"] = p.timed("poison_s", io.poison)
    m3 = io.metrics()
    try:
        p.runs["reload"] = p.timed("reload_run_s", lambda: io.run("reload", probes))
    finally:
        io.arm(None)
    io.step_engine()  # connector stats reach /metrics with the next engine step's output
    p.windows["reload"] = io.metrics().delta(m3)
    p.fields["loads"] = io.loads()[p.loads0 :]
    applied = io.defects_applied()
    p.fields["instruments_applied"] = {
        k: v - p.applied0.get(k, 0) for k, v in applied.items() if v - p.applied0.get(k, 0)
    }


def _floor(
    p: _Pass,
    st: _State,
    probes: Sequence[Probe],
    layout: Sequence[GroupLayout],
    *,
    floor: bool,
    max_prompt: int | None,
) -> None:
    """Stage 7: where a reload needs a reference (always in the first iteration), full reset, second cold
    run and, with a recurrent group, the fingerprint run."""
    io = p.io
    need = _need_reference(p.runs["reload"], p.runs["warm"])
    if not (floor or need):
        return
    p.mark("floor")
    p.barriers["full_floor"] = p.timed("reset_floor_s", lambda: io.reset_prefix_cache(True))
    io.step_engine()
    m4 = io.metrics()
    # The first iteration measures every probe's determinism; later ones only lay the blocks of the
    # probes that need a reference into a clean GPU prefix cache.
    again = list(probes) if floor else [q for q in probes if q.id in need]
    p.runs["cold2"] = p.timed("cold2_run_s", lambda: io.run("cold2", again))
    p.windows["cold2"] = io.metrics().delta(m4)
    by_id = {q.id: q for q in probes}
    reload_by = p.runs["reload"].by_probe()
    block = _shape_block(layout)
    shapes = []
    # The shapes are of a restored recurrent state: without one there is nothing they could explain.
    for pid in need if any(g.recurrent for g in layout) else ():
        split = reload_by[pid].split
        for shape in SHAPES:
            fp = fingerprint(by_id[pid], split.cached if split else 0, shape, block, max_prompt)
            if fp is not None:
                shapes.append(fp)
                st.fingerprints[fp.id] = fp
    if shapes:
        p.runs["fingerprint"] = p.timed("fingerprint_run_s", lambda: io.run("fingerprint", shapes))


def _under_load(p: _Pass, load: Sequence[Probe]) -> None:
    """Stage 8: long prompts at once (chunked prefill stores over many steps), full resets fired among them;
    what a connector left stale shows as failed requests, a dead engine, or the reset after them."""
    io = p.io
    p.mark("load")
    p.runs["load"], p.fields["load_resets"] = p.timed("load_run_s", lambda: io.run_resetting("load", load))
    p.barriers["after_load"] = p.timed("reset_after_load_s", lambda: io.reset_prefix_cache(True))
    io.step_engine()


def _iteration(
    io: CheckIO,
    st: _State,
    label: str,
    probes: Sequence[Probe],
    layout: Sequence[GroupLayout],
    *,
    order: MutationOrder | None,
    floor: bool,
    clock: Callable[[], float],
    batch_control_s: float = 0.0,
    decode_in_flight: int = 0,
    load: Sequence[Probe] = (),
    max_prompt: int | None = None,
) -> Iteration:
    """One iteration's stages (the module docstring) on a :class:`_Pass`; an error or a stop half-way ends
    it with what it measured."""
    p = _Pass.begin(io, label, clock)
    try:
        io.arm(order)  # a defect acts from the first reset on: its stores, its slots, its loads
        _full_reset(p, st)
        _stores(p, probes, order=order, batch_control_s=batch_control_s, decode_in_flight=decode_in_flight)
        _reload(p, probes)
        _floor(p, st, probes, layout, floor=floor, max_prompt=max_prompt)
        if load and order is None:
            _under_load(p, load)
    except (Exception, CheckStopped) as exc:  # the iteration keeps what it measured
        p.fields["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        if isinstance(exc, CheckStopped):
            st.stopped = True
    finally:
        io.arm(None)
    try:
        p.fields["first_use"] = io.first_uses()[p.uses0 :]
    except Exception as exc:  # the records are read after the runs; a folder gone is the iteration's error
        p.fields.setdefault("error", f"{type(exc).__name__}: {exc}"[:2000])
    return p.iteration(order)


def _probe_info(p: Probe) -> ProbeInfo:
    return ProbeInfo(
        id=p.id,
        kind=p.kind,
        question=p.question,
        length=p.length,
        key=p.key,
        max_tokens=p.max_tokens,
        label=p.label,
        boundary=p.boundary,
        base=p.base,
        shape=p.shape,
        state_at=p.state_at,
    )


def _clean(
    io: CheckIO,
    st: _State,
    settings: CheckSettings,
    index: int,
    probes: Sequence[Probe],
    layout: Sequence[GroupLayout],
    load: Sequence[Probe],
    clock: Callable[[], float],
) -> Iteration:
    """Clean iteration ``index`` (from 0; the first measures every probe's second cold run)."""
    return _iteration(
        io,
        st,
        f"clean-{index + 1}",
        probes,
        layout,
        order=None,
        floor=index == 0,
        clock=clock,
        batch_control_s=settings.batch_control_s,
        decode_in_flight=settings.decode_in_flight,
        load=load,
        max_prompt=settings.max_prompt,
    )


def _armed(
    io: CheckIO,
    st: _State,
    settings: CheckSettings,
    plan: MutationPlan,
    layout: Sequence[GroupLayout],
    clock: Callable[[], float],
) -> Iteration:
    """The iteration of one defect of the catalogue, armed on its own probes."""
    label = f"mutation-{plan.order.name}"
    return _iteration(
        io,
        st,
        label,
        plan.probes,
        layout,
        order=plan.order,
        floor=False,
        clock=clock,
        max_prompt=settings.max_prompt,
    )


def run_check(
    io: CheckIO,
    settings: CheckSettings,
    probes: Sequence[Probe],
    layout: Sequence[GroupLayout],
    *,
    mutations: Sequence[MutationPlan] = (),
    report_fields: dict[str, Any] | None = None,
    clock: Callable[[], float] = time.monotonic,
    on_iteration: Callable[[OffloadCheckReport], None] | None = None,
) -> OffloadCheckReport:
    """Run the iterations against ``io``: what they measured, not judged (``judge.judge_case`` gives the
    verdicts; ``case.measure_and_judge`` runs both). An exception half-way leaves ``error`` set with what
    was measured until then."""
    st = _State()
    load = load_probes(probes, settings.reset_under_load, settings.load_length)
    timings: dict[str, float] = {}

    def each(key: str, make: Callable[[], Iteration]) -> None:
        # One iteration, timed under ``key``; the report so far, for a case stopped half-way, to on_iteration.
        t0 = clock()
        st.iterations.append(make())
        timings[key] = round(clock() - t0, 3)
        if on_iteration is not None:
            done = f"stopped after {len(st.iterations)} of {settings.iterations + len(mutations)} iterations"
            used = [*probes, *load]
            on_iteration(
                _report(io, settings, used, layout, mutations, st, done, dict(timings), report_fields)
            )

    start = clock()
    error: str | None = None
    try:
        st.version = io.version()
        for i in range(settings.iterations):
            each(
                f"clean_{i + 1}_s",
                functools.partial(_clean, io, st, settings, i, probes, layout, load, clock),
            )
            if st.iterations[-1].error:
                break
        for plan in mutations if not st.stopped else ():
            each(
                f"mutation_{plan.order.name}_s",
                functools.partial(_armed, io, st, settings, plan, layout, clock),
            )
            if st.stopped:
                break
    except (Exception, CheckStopped) as exc:
        error = f"{type(exc).__name__}: {exc}"[:2000]
    timings["check_s"] = round(clock() - start, 3)
    return _report(io, settings, [*probes, *load], layout, mutations, st, error, timings, report_fields)


def _cpu_tier(io: CheckIO, mark: str, held_at_mark: int) -> CpuTier | None:
    """The CPU tier's stores, evictions and occupancy since ``mark``; None without CPU-tier events."""
    account = io.events()
    if account is None:
        return None
    if not account.stored_blocks("CPU") and not account.removed_blocks("CPU"):
        return None  # no CPU-tier event in the whole case so far: the connector sends none
    delta = account.since(mark)
    return CpuTier(
        stored=delta.stored("CPU"),
        evicted=delta.removed("CPU"),
        live=account.live_blocks("CPU"),
        held_at_cold=held_at_mark,
    )


def _report(
    io: CheckIO,
    settings: CheckSettings,
    probes: Sequence[Probe],
    layout: Sequence[GroupLayout],
    mutations: Sequence[MutationPlan],
    st: _State,
    error: str | None,
    timings: dict[str, float],
    report_fields: dict[str, Any] | None,
) -> OffloadCheckReport:
    events = None
    try:
        account = io.events()
        events = account.summary() if account is not None else None
    except Exception as exc:  # a broken stream must not hide the runs
        error = error or f"{type(exc).__name__}: {exc}"
    used: dict[str, Probe] = {p.id: p for p in probes}
    used.update(st.fingerprints)
    for plan in mutations:  # the same probes, cut short (probes.PROBE_MAX_TOKENS): the clean ones are listed
        used.update({p.id: p for p in plan.probes if p.id not in used})
    version = st.version
    fields: dict[str, Any] = {
        "case_id": "adhoc",
        "profile": "",
        "model": "",
        "connector": "",
        "frontend": "",
        "num_questions": sum(p.kind == "gsm8k" for p in probes),
        "concurrency": 1,
        "accuracy_threshold": settings.accuracy_threshold,
        "tolerance": settings.tolerance,
        "max_failed_rate": settings.max_failed_rate,
        "vllm_version": version.version if version else None,
        "rust_frontend_version": version.rust_frontend_version if version else None,
        "frontend_observed": version.frontend if version else None,
        "layout": list(layout),
        "probes": [_probe_info(p) for p in used.values()],
        "texts": dict(io.texts),
        "iterations": list(st.iterations),
        "events": events,
        "reset_visible": st.reset_visible,
        "error": error,
    }
    fields.update(report_fields or {})
    fields["timings"] = {**fields.get("timings", {}), **timings}
    return OffloadCheckReport(**fields)


def settle(
    probe: Callable[[], float | None],
    step: Callable[[], None],
    *,
    method: Literal["kv_events", "metrics", "steps"],
    quiet_s: float = 1.0,
    timeout: float = 180.0,
    poll_s: float = 0.25,
    min_steps: int = 3,
    expect_growth: bool = True,
    baseline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> SettleResult:
    """Step the engine until ``probe`` (stored blocks or bytes) stops growing for ``quiet_s``.

    Stepping matters: the scheduler only learns that an offload store finished when the engine runs a step.
    With ``expect_growth`` the value must have grown past ``baseline`` first (default: its value when the
    wait starts; pass the value from before the workload, since stores start during it). A probe answering
    None (nothing to watch) just gets ``min_steps`` steps. Never raises: a timeout is in the result.
    """
    start = clock()
    first = probe()
    steps = 0
    if first is None:
        for _ in range(min_steps):
            step()
            steps += 1
        return SettleResult(method="steps", seconds=clock() - start, engine_steps=steps)
    last = first
    changed_at = clock()
    while True:
        step()
        steps += 1
        sleep(poll_s)
        value = probe()
        now = clock()
        if value is not None and value != last:
            last = value
            changed_at = now
        grown = last > (first if baseline is None else baseline) or not expect_growth
        if grown and steps >= min_steps and now - changed_at >= quiet_s:
            return SettleResult(
                method=method, seconds=now - start, engine_steps=steps, start_value=first, end_value=last
            )
        if now - start >= timeout:
            return SettleResult(
                method=method,
                seconds=now - start,
                engine_steps=steps,
                start_value=first,
                end_value=last,
                timed_out=True,
            )
