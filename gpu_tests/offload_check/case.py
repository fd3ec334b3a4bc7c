"""One case end to end: start ``vllm serve`` for it, build its probes, run the check, write the report.

:class:`.server_io.ServerIO` is the real :class:`.check.CheckIO` it measures through. The instruments
themselves are named by an :class:`Instruments` value (the repository's ``gpu_tests.kv_proof.INSTRUMENTS``):
the server arguments that load them (a scheduler class recording each request's split, a worker extension
taking reference digests and checking them at first use), the poison's RPC, and the defect catalogue. Without
them the check still runs, with the splits it can read from ``usage`` and without byte proof ("not proven").
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from vllm_devclient import InvalidParameterError
from vllm_devclient.gsm8k import GSM8KItem, load_gsm8k

from .check import CheckIO, MutationPlan, run_check
from .events import EventWatcher, open_event_watcher
from .judge import judge_case
from .probe_files import (
    PROBE_DIR_ENV,
    GroupLayout,
    MutationOrder,
    ProbeFiles,
)
from .probes import PROBE_MAX_TOKENS, Encode, Probe, build_probes
from .probes import boundary_sizes as probe_sizes
from .profiles import CheckCase, ModelProfile, gpu_count, resolve_model
from .report import OffloadCheckReport
from .server import KVEventsSettings, ServerConfig, VllmServer, engine_fault
from .server_io import ServerIO
from .settings import CheckSettings
from .volume import volume_questions

# Real-size models with random weights answer by bf16 near-ties, and requests in flight together batch by
# timing, so the greedy text may follow the batch: the clean iterations of either send a second warm run
# spread over this many seconds (the batch control, judge.py).
BATCH_CONTROL_S = 2.0
JUDGE_COMMIT_ENV = "VLLM_DEVCLIENT_JUDGE_COMMIT"
# The real-size budget's decode rate: this many questions at once, their prompts in the GPU prefix cache.
DECODE_IN_FLIGHT = 8
# The reset under load's prompts: this long (or the server's room), so each one's prefill spans steps.
LOAD_LENGTH = 8192

__all__ = ["Instruments", "MutationSpec", "hf_encoder", "run_case", "server_config_for"]


@dataclass(frozen=True)
class MutationSpec:
    """A mutation of the catalogue, as the check needs it: what must catch it, and where it applies."""

    name: str
    caught_by: tuple[str, ...]
    # why it cannot apply to a server with this layout and connector (None: it applies)
    not_applicable: Callable[[Sequence[GroupLayout], str], str | None]
    target_group: Callable[[Sequence[GroupLayout]], int | None] = lambda layout: None


@dataclass(frozen=True)
class Instruments:
    """Engine-side instruments to start a server with (see the module docstring)."""

    server_args: tuple[str, ...] = ()
    poison_rpc: str = ""  # the worker method that poisons every free GPU block (``/collective_rpc``)
    reference_digests: bool = False  # the worker digests each block where computed, checked at first use
    mutations: Mapping[str, MutationSpec] = field(default_factory=dict)


def hf_encoder(model: str) -> Encode:
    """The model's own tokenizer (what the server applies to a text prompt), as ``text -> token ids``."""
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise InvalidParameterError(
            "the offload check sends token ids and needs transformers to make them"
        ) from exc
    tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=True)

    def encode(text: str) -> list[int]:
        return list(tokenizer(text)["input_ids"])

    return encode


def server_config_for(
    case: CheckCase,
    *,
    model: str | None = None,
    served_model_name: str | None = None,
    cpu_gib: float | None = None,
    offload_block_size: int | None = None,
    kv_events: KVEventsSettings | None = None,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    startup_timeout: float | None = None,
) -> ServerConfig:
    """The :class:`ServerConfig` for a case: the profile's flags (upstream's, which already hold
    ``--enforce-eager``, ``--max-model-len`` and ``--enable-prefix-caching``), overridable."""
    p = case.profile
    args = (*p.server_args, *extra_args)
    offloading = case.connector == "OffloadingConnector"
    extra = dict(case.connector_extra)
    if case.self_describing_events and offloading:
        extra.setdefault("self_describing_kv_events", True)
    return ServerConfig(
        model=model or resolve_model(p),
        served_model_name=served_model_name or p.served_model_name,
        connector=case.connector,
        cpu_gib=cpu_gib if cpu_gib is not None else case.settings.cpu_gib,
        offload_block_size=(offload_block_size if offload_block_size is not None else p.offload_block_size)
        if offloading
        else None,
        spec_name=case.settings.spec_name if offloading and "spec_name" not in extra else None,
        connector_extra=extra,
        kv_events=kv_events,
        frontend=case.frontend,
        enforce_eager="--enforce-eager" not in args,
        max_model_len=None if "--max-model-len" in args else 4096,
        enable_prefix_caching="--enable-prefix-caching" not in args,
        extra_args=args,
        env={**p.env, **case.env, **(env or {})},
        startup_timeout=startup_timeout if startup_timeout is not None else p.startup_timeout,
        log_path=log_path,
    )


def _gpu_name() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    names = sorted({line.strip() for line in out.splitlines() if line.strip()})
    return ", ".join(names) or None


def _case_fields(case: CheckCase) -> dict[str, Any]:
    p = case.profile
    return {
        "case_id": case.id,
        "profile": p.name,
        "family": p.family,
        "architectures": list(p.architectures),
        "connector": case.connector,
        "frontend": case.frontend,
        "connector_extra": dict(case.connector_extra),
    }


def _probe_room(command: Sequence[str]) -> int | None:
    """The longest probe the server takes: its ``--max-model-len`` less a probe's tokens (None: not given)."""
    args = list(command)
    if "--max-model-len" not in args:
        return None
    return int(args[args.index("--max-model-len") + 1]) - PROBE_MAX_TOKENS


def _mutation_plans(
    names: Sequence[str],
    connector: str,
    instruments: Instruments,
    layout: Sequence[GroupLayout],
    probes: Sequence[Probe],
    questions: int,
) -> tuple[list[MutationPlan], dict[str, str]]:
    # Each defect gets questions of its own (in turn through the list): what an earlier iteration left in the
    # CPU tier belongs to other prompts, so a stale slot can never pass for a store that did not happen.
    asked = [p for p in probes if p.kind == "gsm8k"]
    # One boundary probe and one control per size, the longest first, in turn as well: a block of real size
    # can be longer than every question (whose one full block is then the few-shot prefix all questions
    # share), so the probes are the prompts a defect's iteration stores, and the iteration before it must have
    # left other ones in the CPU slots a full reset hands out again. Only a load of two blocks or more of one
    # group lets a mutation such as load_plan_permuted act: the longest come first.
    by_size: dict[tuple[int | None, str], list[Probe]] = {}
    for p in probes:
        if p.kind in ("boundary", "control"):
            by_size.setdefault((p.boundary, p.kind), []).append(p)
    ranked = [sorted(group, key=lambda p: -p.length) for group in by_size.values()]

    def chosen(turn: int) -> tuple[Probe, ...]:
        start = (turn * questions) % len(asked) if asked else 0
        own = (asked[start:] + asked[:start])[:questions]
        cut = [group[turn % len(group)] for group in ranked]
        # And the probes of the iteration before, sent again after the full reset that begins this one: what
        # the CPU tier held before a reset must not come back from it (a stale slot is looked up only so).
        cut += [group[(turn - 1) % len(group)] for group in ranked if turn and len(group) > 1]
        # Caught by the bytes and the restored state, not by the answers: a few tokens will do.
        return tuple(replace(p, max_tokens=min(p.max_tokens, PROBE_MAX_TOKENS)) for p in [*own, *cut])

    plans: list[MutationPlan] = []
    skipped: dict[str, str] = {}
    for token, name in enumerate(names, 1):
        spec = instruments.mutations.get(name)
        if spec is None:
            raise InvalidParameterError(
                f"unknown mutation {name!r}: known are {sorted(instruments.mutations)}"
            )
        why = spec.not_applicable(layout, connector)
        if why is not None:
            skipped[name] = why
            continue
        order = MutationOrder(name=name, group=spec.target_group(layout), token=token)
        plans.append(MutationPlan(order, chosen(len(plans))))
    return plans, skipped


def measure_and_judge(
    io: CheckIO,
    settings: CheckSettings,
    probes: Sequence[Probe],
    layout: Sequence[GroupLayout],
    *,
    on_iteration: Callable[[OffloadCheckReport], None] | None = None,
    **measure: Any,
) -> OffloadCheckReport:
    """The two stages of one case on a server: measure (``check.run_check``), then judge
    (``judge.judge_case``); each partial report handed to ``on_iteration`` is judged too."""

    def judged(report: OffloadCheckReport) -> None:
        if on_iteration is not None:
            on_iteration(judge_case(settings, report))

    report = run_check(io, settings, probes, layout, on_iteration=judged, **measure)
    return judge_case(settings, report)


def batch_control_for(profile: ModelProfile, concurrency: int | None) -> float:
    """The batch control's spread for a case: a real-size model answers by near-ties, and requests in flight
    together (``concurrency`` other than 1; None: all at once) batch by timing."""
    return BATCH_CONTROL_S if profile.real_size_of is not None or concurrency != 1 else 0.0


@dataclass(frozen=True)
class _Options:
    """What :func:`run_case` was asked (its arguments but the server's)."""

    report_dir: str | os.PathLike[str] | None
    num_questions: int | None
    concurrency: int | None
    max_tokens: int | None
    accuracy_threshold: float | Literal["profile"] | None
    iterations: int
    mutations: Sequence[str]
    instruments: Instruments | None
    boundary_probes: int
    boundary_sizes: Sequence[int]
    mutation_questions: int
    reset_under_load: int
    volume_blocks: int
    use_kv_events: bool
    kv_events_bind: Literal["subscriber", "publisher"]
    gsm8k_dir: str | os.PathLike[str] | None
    encoder: Callable[[str], Encode]


@dataclass
class _Setup:
    """A case made ready to start, handed from stage to stage: what was asked, its server's config, its
    settings and report fields (filled in as it runs), its files, questions and KV-event watcher."""

    case: CheckCase
    options: _Options
    config: ServerConfig
    settings: CheckSettings
    fields: dict[str, Any]
    files: ProbeFiles
    out_dir: Path
    watcher: EventWatcher | None
    train: list[GSM8KItem]
    test: list[GSM8KItem]
    chunk: int | None  # the connector's offload block size, in tokens


def _server_for(
    case: CheckCase, options: _Options, files: ProbeFiles, overrides: dict[str, Any]
) -> tuple[ServerConfig, EventWatcher | None]:
    """The case's server config (the instruments' arguments, the probe folder, the KV-event endpoints) and
    the KV-event watcher, subscribed before the server starts so that no early event is missed."""
    env = dict(overrides.pop("env", None) or {})
    env[PROBE_DIR_ENV] = str(files.root.resolve())
    extra_args = list(overrides.pop("extra_args", ()))
    extra_args.append("--enable-prompt-tokens-details")
    if options.instruments is not None:
        extra_args += options.instruments.server_args
    watcher: EventWatcher | None = None
    kv_settings: KVEventsSettings | None = None
    if options.use_kv_events:
        kv_settings = KVEventsSettings.on_free_port(bind=options.kv_events_bind)
        watcher = open_event_watcher(kv_settings, self_describing=case.self_describing_events)
    config = server_config_for(case, kv_events=kv_settings, extra_args=extra_args, env=env, **overrides)
    return config, watcher


def _settings_for(case: CheckCase, options: _Options) -> CheckSettings:
    p, instruments = case.profile, options.instruments
    return CheckSettings(
        accuracy_threshold=case.settings.threshold
        if options.accuracy_threshold == "profile"
        else options.accuracy_threshold,
        tolerance=p.tolerance,
        expect_cpu_store_events=options.use_kv_events and case.connector == "OffloadingConnector",
        expected_frontend=case.frontend,
        iterations=options.iterations,
        reference_digests=instruments is not None and instruments.reference_digests,
        batch_control_s=batch_control_for(p, options.concurrency),
        decode_in_flight=DECODE_IN_FLIGHT if p.real_size_of is not None else 0,
        mutation_expectations={
            k: m.caught_by for k, m in (instruments.mutations.items() if instruments else ())
        },
    )


def _report_fields(
    case: CheckCase, options: _Options, config: ServerConfig, settings: CheckSettings, files: ProbeFiles
) -> dict[str, Any]:
    """The report's fields known before the server starts."""
    p = case.profile
    return {
        **_case_fields(case),
        "model": config.model,
        "num_questions": options.num_questions if options.num_questions is not None else p.num_questions,
        "num_shots": p.num_shots,
        "max_tokens": options.max_tokens if options.max_tokens is not None else p.max_tokens,
        "concurrency": options.concurrency,
        "cpu_gib": config.cpu_gib,
        "gpus": gpu_count(),
        "gpus_used": p.gpus,
        "gpu_name": _gpu_name(),
        "server_env": {k: v for k, v in config.env.items() if k.startswith("VLLM_")},
        # the commit of the judge that gives this report's verdicts, fixed before the run (the runner sets it)
        "judge_commit": os.environ.get(JUDGE_COMMIT_ENV),
        "extra": {
            "reference_digests": settings.reference_digests,
            "expect_cpu_store_events": settings.expect_cpu_store_events,
            "mutation_expectations": {k: list(v) for k, v in settings.mutation_expectations.items()},
            "reset_under_load": options.reset_under_load,
            "probe_dir": files.root.name,
        },
    }


def _set_up(case: CheckCase, options: _Options, server_overrides: dict[str, Any]) -> _Setup:
    """Stage 1: the questions, the report folder, the probe files, the server's config and watcher, the
    settings and the report's first fields."""
    train, test = load_gsm8k(data_dir=options.gsm8k_dir)
    out_dir = Path(options.report_dir) if options.report_dir is not None else Path("offload-check-reports")
    out_dir.mkdir(parents=True, exist_ok=True)
    overrides = dict(server_overrides)
    overrides.setdefault("log_path", out_dir / f"{case.id}.server.log")
    files = ProbeFiles(out_dir / f"{case.id}.probe")
    files.prepare()
    config, watcher = _server_for(case, options, files, overrides)
    settings = _settings_for(case, options)
    chunk = overrides.get("offload_block_size") or case.profile.offload_block_size
    fields = _report_fields(case, options, config, settings, files)
    return _Setup(case, options, config, settings, fields, files, out_dir, watcher, train, test, chunk)


def _probes_for(setup: _Setup, layout: Sequence[GroupLayout], room: int | None) -> list[Probe]:
    """The case's probes, cut to the layout's block and chunk sizes (or those asked) and to the server's
    room; with ``volume_blocks``, its questions by volume instead."""
    options, fields, p = setup.options, setup.fields, setup.case.profile
    block = min((g.block_size for g in layout), default=0)
    bpc = setup.chunk // block if setup.chunk and block else 1
    fields["blocks_per_chunk"] = bpc
    probes = build_probes(
        setup.train,
        setup.test,
        options.encoder(setup.config.model),
        num_questions=fields["num_questions"],
        num_shots=p.num_shots,
        max_tokens=fields["max_tokens"],
        sizes=sorted(set(options.boundary_sizes))
        if options.boundary_sizes
        else probe_sizes((g.block_size for g in layout), bpc),
        per_size=options.boundary_probes,
        max_length=room,
    )
    if options.volume_blocks and layout:
        long = volume_questions(
            setup.train,
            setup.test,
            options.encoder(setup.config.model),
            num_questions=fields["num_questions"],
            block_size=max(g.block_size for g in layout),
            blocks=options.volume_blocks,
            max_tokens=fields["max_tokens"],
            max_length=room,
        )
        probes = [*long, *(q for q in probes if q.kind != "gsm8k")]
    fields["extra"]["volume_blocks"] = options.volume_blocks
    return probes


def _on_server(setup: _Setup, server: VllmServer) -> OffloadCheckReport:
    """Stage 2, on the started server: build the probes and the defects' plans, measure and judge (each
    iteration's report written as it comes), then judge again with the instruments' errors and the
    engine's fault."""
    options, fields, instruments = setup.options, setup.fields, setup.options.instruments
    fields["server_args"] = server.command[len(setup.config.launcher) :]
    layout = setup.files.layout() or []
    room = _probe_room(server.command)
    probes = _probes_for(setup, layout, room)
    settings = replace(
        setup.settings,
        reset_under_load=options.reset_under_load,
        load_length=min(room, LOAD_LENGTH) if room is not None else LOAD_LENGTH,
        max_prompt=room,
    )
    plans, skipped = (
        _mutation_plans(
            options.mutations, setup.case.connector, instruments, layout, probes, options.mutation_questions
        )
        if instruments is not None
        else ([], {})
    )
    fields["extra"]["mutations_not_applicable"] = skipped
    io = ServerIO(
        server.base_url,
        concurrency=options.concurrency,
        num_shots=setup.case.profile.num_shots,
        model=setup.config.served_model_name,
        watcher=setup.watcher,
        store_events=settings.expect_cpu_store_events,
        files=setup.files,
        poison_rpc=instruments.poison_rpc if instruments is not None else "",
    )
    report_path = setup.out_dir / f"{setup.case.id}.json"

    def partial(report: OffloadCheckReport) -> None:
        # A case stopped half-way (a deadline) still leaves what it measured, judged.
        report_path.write_text(report.model_dump_json(indent=1) + "\n")

    try:
        report = measure_and_judge(
            io, settings, probes, layout, mutations=plans, report_fields=fields, on_iteration=partial
        )
    finally:
        io.close()
    return _with_server_evidence(setup, settings, server, layout, report)


def _with_server_evidence(
    setup: _Setup,
    settings: CheckSettings,
    server: VllmServer,
    layout: Sequence[GroupLayout],
    report: OffloadCheckReport,
) -> OffloadCheckReport:
    """The report judged again with what the server left: the instruments' errors (and the ones that never
    ran) and the engine's fatal traceback."""
    errors = setup.files.instrument_errors()
    if setup.options.instruments is not None and not layout:
        errors.insert(0, "no layout.json: the recording scheduler did not run (--scheduler-cls)")
    if settings.reference_digests and not setup.files.references():
        errors.insert(0, "no reference digests: the worker extension did not run (--worker-extension-cls)")
    fault = engine_fault(server.log_path)
    return judge_case(
        settings, report.model_copy(update={"instrument_errors": errors, "engine_fault": fault})
    )


def _run(setup: _Setup) -> OffloadCheckReport:
    """Stages 2 and 3: start the server, run the case on it, stop it; write the report with its timings.
    A server that never came up leaves an error report, not a crash of the matrix."""
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    try:
        with VllmServer(setup.config) as server:
            timings["server_startup_s"] = round(time.monotonic() - t0, 3)
            setup.fields["timings"] = dict(
                timings
            )  # a report written half-way (a deadline) keeps the startup
            report = _on_server(setup, server)
    except Exception as exc:
        timings["server_startup_s"] = round(time.monotonic() - t0, 3)
        report = OffloadCheckReport(
            **setup.fields,
            accuracy_threshold=setup.settings.accuracy_threshold,
            tolerance=setup.case.profile.tolerance,
            status="error",
            error=f"{type(exc).__name__}: {exc}"[-4000:],
        )
    finally:
        if setup.watcher is not None:
            setup.watcher.close()
    timings["case_s"] = round(time.monotonic() - t0, 3)
    all_timings = {**report.timings, **timings}
    total = all_timings.get("case_s", 0.0)
    shares = {k: round(v / total, 3) for k, v in all_timings.items() if total and k != "case_s"}
    report = report.model_copy(update={"timings": all_timings, "phase_shares": shares})
    (setup.out_dir / f"{setup.case.id}.json").write_text(report.model_dump_json(indent=1) + "\n")
    return report


def run_case(
    case: CheckCase,
    *,
    report_dir: str | os.PathLike[str] | None = None,
    num_questions: int | None = None,
    concurrency: int | None = 1,
    max_tokens: int | None = None,
    accuracy_threshold: float | Literal["profile"] | None = "profile",
    iterations: int = 3,
    mutations: Sequence[str] = (),
    instruments: Instruments | None = None,
    boundary_probes: int = 4,
    boundary_sizes: Sequence[int] = (),
    mutation_questions: int = 4,
    reset_under_load: int = 0,
    volume_blocks: int = 0,
    use_kv_events: bool = True,
    kv_events_bind: Literal["subscriber", "publisher"] = "subscriber",
    gsm8k_dir: str | os.PathLike[str] | None = None,
    encoder: Callable[[str], Encode] = hf_encoder,
    **server_overrides: Any,
) -> OffloadCheckReport:
    """Start the server for ``case`` once, run the check on it, stop it, write ``{case.id}.json``.

    ``mutations`` (names of ``instruments.mutations``) run after the clean iterations, each on a reload of a
    few probes; ``boundary_sizes``, where given, are the prompt lengths the boundary probes end on instead of
    those of the layout the recorder reads (a run without instruments has none); ``reset_under_load`` long
    prompts end each clean iteration, full resets fired among them
    (``check.py``); ``volume_blocks``: each question after examples of its own, to that many whole blocks
    of the layout's largest block (``volume.py``: real size by volume); ``server_overrides`` go to
    :func:`server_config_for`.
    """
    if mutations and instruments is None:
        raise InvalidParameterError("mutations need the instruments (--instruments)")
    options = _Options(
        report_dir=report_dir,
        num_questions=num_questions,
        concurrency=concurrency,
        max_tokens=max_tokens,
        accuracy_threshold=accuracy_threshold,
        iterations=iterations,
        mutations=mutations,
        instruments=instruments,
        boundary_probes=boundary_probes,
        boundary_sizes=boundary_sizes,
        mutation_questions=mutation_questions,
        reset_under_load=reset_under_load,
        volume_blocks=volume_blocks,
        use_kv_events=use_kv_events,
        kv_events_bind=kv_events_bind,
        gsm8k_dir=gsm8k_dir,
        encoder=encoder,
    )
    return _run(_set_up(case, options, server_overrides))
