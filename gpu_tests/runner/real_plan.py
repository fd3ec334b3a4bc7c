"""The real-size matrix on one GPU: its cases, what each costs (estimates, taken from the last run) and
how they are dealt over device calls when GPU memory, not CPU cores, bounds what runs at once.

Every upstream profile at real size (``profiles.real_size_profile``) x its connectors x both frontends, one
clean pass each (as the CI steps run them), 200 questions at once with the profile's 256 tokens; per profile
one more case runs the mutation catalogue on its own server (not for a TieringOffloadingSpec profile: the
mutations act through the proving CPUOffloadingSpec, as in the CI). Each case gets a fixed KV cache
(``--kv-cache-memory-bytes``) and reserves weights + KV + overhead of the GPU's memory.

:data:`ESTIMATES` come from the committed run named there (``gpu_tests/real_size/PLAN.md`` compares them with
the plan that run was dealt by); the weights are the models' parameter counts with the stand-in vocabulary, in
bf16. :func:`deal` simulates the calls in a given order (list scheduling by GPU memory, as the runner starts
cases); :func:`best_deal` searches from the priority order (each profile's offloading/python case and its
catalogue first, the rust frontends last) for the order that fits the most, and says what does not fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from gpu_tests.kv_proof.catalogue import MUTATIONS
from gpu_tests.offload_check.profiles import CONNECTOR_SHORT, PROFILES, REAL_SIZE_ARGS, connector_by_name
from gpu_tests.offload_check.volume import VolumePlan

from .jobs import Job, case_args, make_case_id

GIB = 1 << 30
H200_GIB = 139.0  # what the device tool reports for one H200
OVERHEAD_GIB = 4.0  # CUDA context, activations and workspace of one server (estimate)
# The KV a catalogue case gets at most: a mutation reloads a few probes at once (Nemotron's longest, 3,840
# tokens, x 8 is 31k tokens, about an eighth of what 4 GiB holds of its blocks).
CATALOGUE_KV_GIB = 4.0
# A catalogue's CPU tier holds every block an iteration stores (its probes of up to four blocks, the iteration
# before's again, every group): Nemotron-H's upstream 1 GiB holds 61 of its 17.6 MB blocks, fewer than the 70
# that makes, and a block the tier evicts before the reload leaves its defect nothing to act on.
CATALOGUE_CPU_GIB = 4.0


@dataclass(frozen=True)
class Estimate:
    """What one real-size server is expected to cost on an H200 (ESTIMATES, not measurements)."""

    weights_gib: float  # bf16 parameters with the stand-in vocabulary (computed, see the tests)
    kv_gib: float  # the KV cache it is given
    upstream_kv_gib: float  # what upstream's device leaves for KV at the same token capacity (estimate)
    cold_startup_s: float  # first server of the model on the machine (Triton kernels compile)
    startup_s: float  # later ones (warm Triton cache)
    run_s: float  # one run: 200 questions + probes at once, 256 tokens
    mutation_s: float  # the catalogue after the clean pass: 7 mutations x (cold, warm, reload), 32 tokens

    @property
    def mem_gib(self) -> float:
        return self.weights_gib + self.kv_gib + OVERHEAD_GIB


# From the real-size run real-size-2026-12-01b (up to four servers on one H200; a byte-ledger run, retired:
# git history, commit 81f2ae5): cold startups (the first server of a model on the machine: the catalogues,
# DeepSeek), warm ones (the clean passes of the second call), the mean run of the first clean pass (cold,
# warm, warm2, reload, cold2 with 206-216 requests at once), the catalogues. KV: what that run gave, so that
# two calls hold every model's Offloading/python case and catalogue. Qwen's 12 GiB (16 before) did not keep
# the cold run's probes on the GPU until the warm run (the judge reads the batch control then); DeepSeek's
# 10 GiB held its 208 prompts whole.
# Still estimates: DeepSeek's warm startup (real-size-2026-12-01's rust case, retired likewise) and catalogue
# (it ran none).
ESTIMATES: dict[str, Estimate] = {
    "nemotron-h-8b": Estimate(13.8, 12.0, 12.0, 159.0, 50.0, 62.0, 97.0),
    "gemma-4-e4b-it": Estimate(12.9, 12.0, 13.0, 71.0, 55.0, 46.0, 87.0),
    "qwen3.5-35b": Estimate(63.0, 12.0, 74.0, 171.0, 55.0, 65.0, 148.0),
    "deepseek-v2-lite-tiering-tp2": Estimate(28.8, 10.0, 55.0, 111.0, 49.0, 43.0, 70.0),
}
# cold, warm, warm2 (the batch control), reload, cold2 and some fingerprints; store waits
RUNS_IN_FIRST_PASS, WAITS_S = 5.5, 15.0


# The defects run b's catalogue times (``Estimate.mutation_s``) held.
MEASURED_DEFECTS = 7


def case_s(est: Estimate, *, cold: bool, kind: str = "matrix", defects: int = MEASURED_DEFECTS) -> float:
    """A case: its server's startup, then one clean pass (``matrix``) or a catalogue of ``defects``
    (``mutations``)."""
    startup = est.cold_startup_s if cold else est.startup_s
    if kind == "mutations":
        return startup + est.mutation_s * defects / MEASURED_DEFECTS
    return startup + RUNS_IN_FIRST_PASS * est.run_s + WAITS_S


def _case_order(name: str, mutations: bool) -> list[tuple[str, str, str]]:
    """A profile's cases by rank, (connector, frontend, kind): offloading/python, simple/python, then the
    rust frontends; one catalogue per connector right after that connector's python case
    (TieringOffloadingSpec's primary tier is the CPUOffloadingManager and its worker the CPUOffloadingWorker
    the defects act in)."""
    order = [("offloading", "python"), ("simple", "python"), ("offloading", "rust"), ("simple", "rust")]
    connectors = {CONNECTOR_SHORT[c] for c in PROFILES[name].connectors}
    cases: list[tuple[str, str, str]] = [(c, f, "matrix") for c, f in order if c in connectors]
    if mutations:
        for c in ("simple", "offloading"):
            if c in connectors:
                at = next(i for i, case in enumerate(cases) if case[0] == c) + 1
                cases.insert(at, (c, "python", "mutations"))
    return cases


def _real_job(
    name: str,
    est: Estimate,
    rank: int,
    case: tuple[str, str, str],
    *,
    report_dir: Path,
    gsm8k_dir: str | None,
    num_questions: int | None,
    timeout_margin: float,
    volume: VolumePlan | None,
) -> Job:
    """The job of one real-size case at ``rank`` of its profile's order (the first starts cold)."""
    connector, frontend, kind = case
    catalogue = kind == "mutations"
    # A catalogue sends a few short requests at a time: a small KV lets it share the GPU.
    size = replace(est, kv_gib=min(est.kv_gib, CATALOGUE_KV_GIB)) if catalogue else est
    args = case_args(
        name,
        connector,
        frontend,
        report_dir=report_dir,
        gsm8k_dir=gsm8k_dir,
        server_args=f"--gpu-memory-utilization 0.05 --kv-cache-memory-bytes {int(size.kv_gib * GIB)}",
        iterations=0 if catalogue else 1,
        label="mutations" if catalogue else "",
        mutations="all" if catalogue else "",
        num_questions=num_questions,
        concurrency=PROFILES[name].concurrency,
    )
    if catalogue:
        cpu_gib = max(PROFILES[name].cpu_gib(connector_by_name(connector)), CATALOGUE_CPU_GIB)
        args = (*args, "--cpu-gib", f"{cpu_gib:g}")
    defects = catalogue_size(connector)
    expected = case_s(est, cold=rank == 0, kind=kind, defects=defects)
    # The timeout assumes the model's first server on the machine: --only may run any case first,
    # and its kernels then compile (the fourth run's catalogues were stopped at twice a warm start).
    timeout = case_s(est, cold=True, kind=kind, defects=defects) * timeout_margin
    label = "mutations" if catalogue else ""
    if volume is not None and not catalogue:
        tier = PROFILES[name].cpu_gib(connector_by_name(connector))
        args = _by_volume(args, volume, tier)
        expected = volume_s(est, volume, cold=rank == 0)
        timeout, label = volume_s(est, volume, cold=True) * timeout_margin, "volume"
    case_id = make_case_id(name, connector, frontend, label)
    return Job(case_id, name, kind, args, timeout, expected, mem_gib=size.mem_gib)


def plan_real(
    *,
    report_dir: Path,
    gsm8k_dir: str | None = None,
    profiles: Sequence[str] = tuple(REAL_SIZE_ARGS),
    num_questions: int | None = None,
    timeout_margin: float = 2.0,
    kv_gib: Mapping[str, float] | None = None,
    mutations: bool = True,
    volume: Mapping[str, VolumePlan] | None = None,
) -> list[Job]:
    """The real-size cases in priority order: per rank (offloading/python, the catalogue, simple/python,
    offloading/rust, simple/rust), the largest model first. The catalogue is a case of its own (its server,
    no clean pass: each mutation brings its own cold, warm and reload), as in the tiny matrix, so that a
    model whose clean pass nearly fills a device call still gets it. ``kv_gib`` gives a model another KV cache
    than its estimate's; ``mutations=False`` runs no catalogue; ``volume`` (by profile, ``real_volume``) runs
    each clean case by volume instead (issue 53: its questions, blocks a question and CPU tier; label
    ``volume``), its time scaled by its tokens (an estimate: no such run has been measured)."""
    unknown = set(kv_gib or {}) - set(profiles)
    if unknown:
        raise ValueError(
            f"--kv-gib names no real-size model: {sorted(unknown)}; known are {sorted(profiles)}"
        )
    ranked: list[tuple[int, float, Job]] = []
    for upstream_name in profiles:
        name = next(n for n, p in PROFILES.items() if p.real_size_of == upstream_name)
        est = ESTIMATES[upstream_name]
        if kv_gib and upstream_name in kv_gib:
            est = replace(est, kv_gib=kv_gib[upstream_name])
        for rank, case in enumerate(_case_order(name, mutations)):
            job = _real_job(
                name,
                est,
                rank,
                case,
                report_dir=report_dir,
                gsm8k_dir=gsm8k_dir,
                num_questions=num_questions,
                timeout_margin=timeout_margin,
                volume=volume.get(name) if volume else None,
            )
            ranked.append((rank, -est.mem_gib, job))
    return [job for _, _, job in sorted(ranked, key=lambda t: (t[0], t[1]))]


# A case by volume generates VOLUME_MAX_TOKENS a question (the bytes judge it: real-size answers are not
# evaluated) and prefills its prompts at VOLUME_PREFILL_TOK_S (an ESTIMATE: no such run has been measured).
VOLUME_MAX_TOKENS = 8
VOLUME_PREFILL_TOK_S = 20000.0
# The runs that prefill every prompt whole: cold and cold2; warm, warm2 and reload compute each prompt's last
# block only (the GPU prefix cache, the CPU tier), counted as half a run together.
VOLUME_PREFILL_RUNS = 2.5


def _by_volume(args: Sequence[str], plan: VolumePlan, cpu_gib: float) -> tuple[str, ...]:
    """A clean case's arguments by volume: its questions, whole blocks a question, a CPU tier at least the
    profile's, a few tokens a question."""
    out = list(args)
    for flag in ("--num-questions", "--label", "--max-tokens"):
        if flag in out:
            at = out.index(flag)
            del out[at : at + 2]
    out += ["--num-questions", str(plan.questions), "--volume-blocks", str(plan.blocks_per_prompt)]
    out += ["--cpu-gib", f"{max(cpu_gib, plan.cpu_gib):g}", "--max-tokens", str(VOLUME_MAX_TOKENS)]
    return (*out, "--label", "volume")


def volume_s(est: Estimate, plan: VolumePlan, *, cold: bool) -> float:
    """A clean pass by volume (ESTIMATE): each run's decode scaled from the estimate's 200 questions of 256
    tokens, plus its prompts' prefill in the runs that compute them whole."""
    startup = est.cold_startup_s if cold else est.startup_s
    decode = est.run_s * plan.questions / 200 * VOLUME_MAX_TOKENS / 256
    prefill = plan.questions * (plan.blocks_per_prompt * plan.block_size + 1) / VOLUME_PREFILL_TOK_S
    return startup + RUNS_IN_FIRST_PASS * decode + VOLUME_PREFILL_RUNS * prefill + WAITS_S


@dataclass(frozen=True)
class Slot:
    job: Job
    call: int
    start_s: float
    end_s: float


def deal(
    jobs: Sequence[Job],
    *,
    calls: int = 2,
    call_s: float = 575.0,
    setup_s: float = 90.0,
    gpu_mem_gib: float = H200_GIB,
    parallel: int = 4,
) -> tuple[list[Slot], list[Job]]:
    """List scheduling in ``jobs`` order over ``calls`` calls of ``call_s`` (the first loses ``setup_s``):
    a job starts when it fits in the free memory, a free slot and before its call's deadline, as
    ``run_matrix.run_jobs`` starts them. Returns the schedule and the jobs that fit in no call. A case pays
    the warm startup only once its model's first server has compiled its kernels into the machine's cache
    (its cold startup has passed, in this call or an earlier one): servers started together all compile."""
    queue = list(jobs)
    slots: list[Slot] = []
    compiled: dict[str, tuple[int, float]] = {}  # model -> (call, time) its kernels are in the cache
    for call in range(1, calls + 1):
        now = setup_s if call == 1 else 0.0
        running: list[Slot] = []
        while queue:
            free = gpu_mem_gib - sum(s.job.mem_gib for s in running)
            fits = [
                j
                for j in queue
                if j.mem_gib <= free
                and len(running) < parallel
                and now + _cost(j, compiled, call, now) <= call_s
            ]
            if fits:
                job = fits[0]
                queue.remove(job)
                cost = _cost(job, compiled, call, now)
                est = ESTIMATES[PROFILES[job.family].real_size_of or job.family]
                compiled.setdefault(job.family, (call, now + est.cold_startup_s))
                slot = Slot(replace(job, expected_s=cost), call, now, now + cost)
                running.append(slot)
                slots.append(slot)
                continue
            if not running:
                break
            done = min(running, key=lambda s: s.end_s)
            running.remove(done)
            now = max(now, done.end_s)
    return slots, queue


def _cost(job: Job, compiled: dict[str, tuple[int, float]], call: int, now: float) -> float:
    """A case started before its model's kernels are compiled pays the cold startup."""
    est = ESTIMATES[PROFILES[job.family].real_size_of or job.family]
    ready = compiled.get(job.family)
    cold = ready is None or (ready[0] == call and now < ready[1])
    connector = "simple" if "-simple-" in job.case_id else "offloading"
    cost = case_s(est, cold=cold, kind=job.kind, defects=catalogue_size(connector))
    # a case by volume: plan_real's estimate (volume_s), not measured
    return max(cost, job.expected_s) if job.case_id.endswith("-volume") else cost


def catalogue_size(connector: str) -> int:
    """How many catalogue defects act in ``connector`` (its short name)."""
    long = next(k for k, v in CONNECTOR_SHORT.items() if v == connector)
    return sum(m.acts_in(long) for m in MUTATIONS.values())


def essential(job: Job) -> bool:
    """A model's Offloading/python case (its budget figures: startup, rates, phases, CPU tier, reload) or its
    catalogue (the mutations): what the issue asks of every model."""
    return job.kind == "mutations" or job.case_id.endswith("-offloading-python")


def _score(slots: Sequence[Slot], calls: int) -> tuple[int, int, int, float]:
    """What a deal is worth, in the issue's order: every model's essential cases, every model at all, the
    most cases, then the earliest ends."""
    ends = sum(max((s.end_s for s in slots if s.call == c), default=0.0) for c in range(1, calls + 1))
    return (
        sum(essential(s.job) for s in slots),
        len({s.job.family for s in slots}),
        len(slots),
        -ends,
    )


def best_deal(
    jobs: Sequence[Job], *, calls: int = 2, rounds: int = 6, **deal_args: float
) -> tuple[list[Slot], list[Job]]:
    """:func:`deal` of the order that schedules the most by :func:`_score`, from ``jobs``' priority order,
    moving one job at a time to an earlier place while that improves the deal (deterministic, a few
    thousand simulations). The schedule lists each call's cases in their start order, which is the order
    the runner is given, so its list scheduling starts them as simulated (while the estimates hold)."""
    order = list(jobs)
    best = deal(order, calls=calls, **deal_args)
    for _ in range(rounds):
        improved = False
        for i in range(1, len(order)):
            for j in range(i):
                trial = [*order[:j], order[i], *order[j:i], *order[i + 1 :]]
                result = deal(trial, calls=calls, **deal_args)
                if _score(result[0], calls) > _score(best[0], calls):
                    order, best, improved = trial, result, True
        if not improved:
            break
    return best


def describe(slots: Sequence[Slot], left: Sequence[Job], *, calls: int, setup_s: float) -> list[str]:
    """The dry run's lines: per call its cases and end, then what does not fit. ESTIMATES throughout."""
    lines = [
        "real-size plan on one H200 (ESTIMATED costs, from the shared-GPU run real-size-2026-12-01b, "
        "retired: git history, commit 81f2ae5)"
    ]
    for call in range(1, calls + 1):
        mine = [s for s in slots if s.call == call]
        end = max((s.end_s for s in mine), default=setup_s if call == 1 else 0.0)
        setup = setup_s if call == 1 else 0.0
        lines.append(f"call {call}: {len(mine)} cases, estimated end {end:.0f} s (setup {setup:.0f} s)")
        for s in mine:
            lines.append(
                f"  {s.job.case_id:52} start {s.start_s:5.0f} end {s.end_s:5.0f} mem {s.job.mem_gib:5.1f} GiB"
            )
    lines.append(
        f"does not fit: {len(left)} cases" + (": " + ", ".join(j.case_id for j in left) if left else "")
    )
    return lines
