"""A vLLM server with a CPU-offloading connector, reduced to what the offload check observes, for CPU tests.

It serves token-id prompts the way vLLM 0.26 splits them: the GPU prefix cache hits whole blocks up to
``len - 1``; the OffloadingConnector looks up chunks up to ``len - 1`` when the model has a sliding-window or
recurrent group (``len`` otherwise) and so, on a prompt ending exactly on a block, reports ``len - 1``
cached while restoring the last block; the SimpleCPUOffloadConnector splits as the GPU cache does. Greedy
text is a function of what the model really computed: the tokens, and (``split_sensitive``) the cached
count, as near-ties on random weights make it; a recurrent state restored ``d`` tokens ahead computes
``P[:c+d] + P[c:]``; a corrupted load computes something else. Switches: ``fixed`` (vLLM after #51100:
recurrent hits round down to the block), ``aligned_miss`` (as qwen3-next's ``align`` Mamba cache on vLLM
0.26: neither connector reloads a prompt that ends exactly on a block), ``corrupt`` (probe ids whose reload
is wrong), ``noise`` (run label -> probe ids that decode differently), ``fail`` (run label -> probe ids whose
request fails), ``raise_in`` (a run whose call raises), ``cpu_events`` (the CPU tier announces its stores
and removes as KV events, one placeholder hash per block), ``cpu_capacity`` (blocks the CPU tier holds; the
oldest is evicted first), ``evictions_as_gpu_removes`` (vLLM 0.26's Simple connector: no CPU stores on the
stream, each CPU eviction a GPU ``BlockRemoved``), the resets of older releases (``bare_200``: a reset answers
a bare 200, and with ``gpu_events`` a reset that went through sends ``AllBlocksCleared`` with the next engine
step; ``held_resets``: that many resets fail, blocks held; ``refuse_external``: vLLM 0.20.2-0.23.0's Simple
connector, whose ``reset_external`` answers 500 with these words after the GPU part ran; ``keeps_cpu_tier``:
vLLM 0.20.2's OffloadingConnector, whose full reset leaves its tier serving; ``dies_after_load_reset``: vLLM
0.22.0-0.25.1's OffloadingConnector, whose reset under load leaves stale jobs that kill the engine when the
running requests finish: they fail, and every call after raises), and the catalogue's defects: an
armed byte defect makes the loads it acts on wrong, which the reference instrument's first-use records show as
``x`` blocks (as the real instrument does, whatever the defect), and ``state_ahead`` moves the lookup.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpu_tests.kv_proof.catalogue import MUTATIONS
from gpu_tests.offload_check.events import GroupEventAccount
from gpu_tests.offload_check.probe_files import (
    FirstUse,
    FirstUseGroup,
    GroupLayout,
    LoadGroup,
    LoadPlan,
    MutationOrder,
)
from gpu_tests.offload_check.probes import Probe
from gpu_tests.offload_check.report import Answer, ResetResult, Run, SettleResult, Split
from gpu_tests.offload_check.resets import Answered, Outcome, Refused, confirm_reset, drive
from vllm_devclient import VersionInfo
from vllm_devclient.kv_events import AllBlocksCleared, BlockRemoved, BlockStored
from vllm_devclient.metrics import MetricsSnapshot, parse_metrics


def _h(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:10]


@dataclass
class FakeServer:
    layout: list[GroupLayout]
    connector: str = "OffloadingConnector"
    frontend: str = "python"
    split_sensitive: bool = True
    fixed: bool = False
    aligned_miss: bool = False
    reference_on: bool = True
    corrupt: set[str] = field(default_factory=set)
    noise: dict[str, set[str]] = field(default_factory=dict)
    fail: dict[str, set[str]] = field(default_factory=dict)  # run label -> probe ids whose request fails
    raise_in: str | None = None
    cpu_events: bool = False
    cpu_capacity: int | None = None
    evictions_as_gpu_removes: bool = False
    bare_200: bool = False
    gpu_events: bool = False
    held_resets: int = 0
    refuse_external: str | None = None
    keeps_cpu_tier: bool = False
    dies_after_load_reset: bool = False
    version_name: str = "0.26.0"
    texts: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.block = min(g.block_size for g in self.layout)
        self.recurrent = any(g.recurrent for g in self.layout)
        self.sliding = any(g.kind == "sliding" for g in self.layout)
        self.gpu: set[tuple[int, ...]] = set()
        self.cpu: dict[tuple[int, ...], None] = {}  # in store order: the oldest is evicted first
        self.c = dict.fromkeys(("queries", "hits", "ext_queries", "ext_hits", "load", "store"), 0)
        self.order: MutationOrder | None = None
        self.uses: list[FirstUse] = []
        self.plans: list[LoadPlan] = []
        self.applied: dict[str, int] = {}
        self.account = GroupEventAccount()
        self.now = 100.0
        self.calls: list[str] = []
        self.request_seq = 0
        self.clock_s = 0.0  # the barrier's clock: its pauses move it
        self._cleared_pending = False
        self.dead = False
        self.load_resets = 0

    # -- the engine
    def _split(self, ids: tuple[int, ...]) -> tuple[int, int]:
        n, b = len(ids), self.block
        local = 0
        for k in range((n - 1) // b, 0, -1):
            if ids[: k * b] in self.gpu:
                local = k * b
                break
        if self.aligned_miss and n % b == 0:
            hit = local
        elif self.connector == "SimpleCPUOffloadConnector":
            hit = 0
            for k in range((n - 1) // b, 0, -1):
                if ids[: k * b] in self.cpu:
                    hit = k * b
                    break
        else:
            max_hit = n - 1 if (self.sliding or self.recurrent) else n
            if self.fixed and self.recurrent:
                max_hit = max_hit // b * b
            chunks = 0
            for k in range(1, -(-max_hit // b) + 1):
                if ids[: k * b] in self.cpu:
                    chunks = k
                else:
                    break
            hit = min(max_hit, chunks * b)
            if hit - local < b:  # the connector never loads less than a chunk
                hit = local
            if self.order is not None and self.order.name == "state_ahead" and hit > local:
                self.applied["state_ahead"] = self.applied.get("state_ahead", 0) + 1
                hit -= 1
        return local, max(0, hit - local)

    def _answer(self, probe: Probe, label: str) -> Answer:
        ids = probe.token_ids
        local, external = self._split(ids)
        cached = local + external
        self.request_seq += 1
        rid = f"req-{self.request_seq}"
        self.c["queries"] += len(ids)
        self.c["hits"] += local
        self.c["ext_queries"] += len(ids) - local
        self.c["ext_hits"] += external
        effective, effective_cached = ids, cached
        corrupted = False
        if external:
            self.c["load"] += external * 64
            first = local // self.block
            blocks = -(-cached // self.block) - first
            groups = [
                LoadGroup(group=g.index, first_block=first, blocks=blocks, tokens_per_block=g.block_size)
                for g in self.layout
            ]
            self.plans.append(
                LoadPlan(
                    seq=len(self.plans),
                    pid=1,
                    request_id=rid,
                    job_id=len(self.plans),
                    local=local,
                    external=external,
                    groups=groups,
                )
            )
            if self.recurrent and cached % self.block:
                ahead = -(-cached // self.block) * self.block - cached
                effective = ids[: cached + ahead] + ids[cached:]
                effective_cached = cached + ahead
            corrupted = self._load_bytes()
        if probe.id in self.corrupt and label == "reload":
            corrupted = True
        if cached and self.reference_on:
            self._first_use(rid, local, cached, corrupted and external > 0)
        key = (effective, effective_cached if self.split_sensitive else 0, corrupted)
        text = f"t{_h(*key)}" + ("~" if probe.id in self.noise.get(label, set()) else "")
        digest = _h(text)
        self.texts[digest] = text
        for k in range(1, len(ids) // self.block + 1):
            self.gpu.add(ids[: k * self.block])
            if ids[: k * self.block] not in self.cpu:
                self._store_cpu(ids[: k * self.block])
        split = Split(prompt=len(ids), local=local, external=external)
        return Answer(probe=probe.id, text=digest, output_tokens=8, split=split, request_id=rid)

    def _store_cpu(self, prefix: tuple[int, ...]) -> None:
        if self.cpu_capacity is not None and len(self.cpu) >= self.cpu_capacity:
            oldest = next(iter(self.cpu))
            del self.cpu[oldest]
            if self.cpu_events:
                self.account.add([BlockRemoved(block_hashes=[_h(*oldest)], medium="CPU", group_idx=0)])
            elif self.evictions_as_gpu_removes:
                self.account.add([BlockRemoved(block_hashes=[_h(*oldest)], medium="GPU", group_idx=0)])
        self.cpu[prefix] = None
        self.c["store"] += 64
        if self.cpu_events:
            self.account.add([BlockStored(block_hashes=[_h(*prefix)], medium="CPU", group_idx=0)])

    def _load_bytes(self) -> bool:
        """True when the armed defect corrupts the bytes of this load (every defect but ``state_ahead``)."""
        name = self.order.name if self.order is not None else ""
        if name not in MUTATIONS or name == "state_ahead":
            return False
        self.applied[name] = self.applied.get(name, 0) + 1
        return True

    def _first_use(self, rid: str, local: int, cached: int, corrupted: bool) -> None:
        """What the reference instrument records at the request's first step."""
        groups = []
        for g in self.layout:
            if g.recurrent:
                verdicts = "v" if cached % g.block_size == 0 else "s"
            else:
                verdicts = "v" * (cached // g.block_size)
            if corrupted and g.index == self.layout[0].index:
                start = local // g.block_size
                verdicts = verdicts[:start] + "x" * len(verdicts[start:])
            groups.append(FirstUseGroup(group=g.index, block_size=g.block_size, regions=2, verdicts=verdicts))
        self.uses.append(FirstUse(seq=len(self.uses), pid=1, request_id=rid, cached=cached, groups=groups))

    # -- CheckIO
    def version(self) -> VersionInfo:
        return VersionInfo(
            version=self.version_name, rust_frontend_version="0.1.0" if self.frontend == "rust" else None
        )

    def metrics(self) -> MetricsSnapshot:
        self.now += 1
        c = self.c
        body = "\n".join(
            [
                f'vllm:prefix_cache_queries_total{{model_name="m"}} {c["queries"]}',
                f'vllm:prefix_cache_hits_total{{model_name="m"}} {c["hits"]}',
                f'vllm:external_prefix_cache_queries_total{{model_name="m"}} {c["ext_queries"]}',
                f'vllm:external_prefix_cache_hits_total{{model_name="m"}} {c["ext_hits"]}',
                f'vllm:kv_offload_total_bytes_total{{transfer_type="CPU_to_GPU"}} {c["load"]}',
                f'vllm:kv_offload_total_bytes_total{{transfer_type="GPU_to_CPU"}} {c["store"]}',
                "",
            ]
        )
        return parse_metrics(body, "text/plain; version=0.0.4", taken_at=self.now)

    def run(self, label: str, probes: Sequence[Probe], spread_s: float = 0.0) -> Run:
        self._alive()
        self.calls.append(f"run:{label}" + (f"@{spread_s:g}s" if spread_s else ""))
        if label == self.raise_in:
            raise ConnectionError("server went away")
        answers = [
            Answer(probe=p.id, text=None, error="InternalServerError: 500")
            if p.id in self.fail.get(label, set())
            else self._answer(p, label)
            for p in probes
        ]
        failed = sum(a.error is not None for a in answers)
        return Run(
            label=label, concurrency=1, latency_s=0.1, answers=answers, accuracy=0.0, failed_requests=failed
        )

    def _alive(self) -> None:
        if self.dead:
            raise ConnectionError("the engine died: connection refused")

    def run_resetting(self, label: str, probes: Sequence[Probe]) -> tuple[Run, list[ResetResult]]:
        self._alive()
        self.calls.append(f"run_resetting:{label}")
        half = len(probes) // 2
        first = self.run(label, probes[:half])
        # Mid-prefill the GPU part fails (blocks held); the connector's part runs.
        held, self.held_resets = self.held_resets, 1
        outcome = self._post_reset(True)
        self.held_resets = held
        self.load_resets += 1
        if self.dies_after_load_reset:
            self.dead = True
            failed = [Answer(probe=p.id, text=None, error="InternalServerError: 500") for p in probes[half:]]
            rest = Run(
                label=label, concurrency=None, latency_s=0.1, answers=failed, failed_requests=len(failed)
            )
        else:
            rest = self.run(label, probes[half:])
        answers = [*first.answers, *rest.answers]
        run = Run(
            label=label,
            concurrency=None,
            latency_s=0.2,
            answers=answers,
            failed_requests=sum(a.error is not None for a in answers),
        )
        said = "a bare 200" if isinstance(outcome, Answered) and outcome.success is None else "success=false"
        fired = ResetResult(
            attempts=1,
            engine_steps=0,
            elapsed_s=0.01,
            external=True,
            outcome="unconfirmed",
            confirmed_by=None,
            message=said,
        )
        return run, [fired]

    def step_engine(self) -> None:
        self._alive()
        self.calls.append("step")
        if self._cleared_pending and self.gpu_events:
            self.account.add([AllBlocksCleared()])
        self._cleared_pending = False

    def mark_stores(self) -> None:
        pass

    def settle_stores(self) -> SettleResult:
        return SettleResult(method="steps", seconds=0.0, engine_steps=3)

    def _post_reset(self, reset_external: bool) -> Outcome:
        self._alive()
        self.calls.append(f"reset:{reset_external}")
        if self.held_resets:
            self.held_resets -= 1
            return Answered(None if self.bare_200 else False)
        self.gpu.clear()
        self._cleared_pending = True
        if reset_external and self.refuse_external is not None:
            return Refused(500, self.refuse_external)
        if reset_external and not self.keeps_cpu_tier:
            if self.cpu_events and self.cpu:
                gone = [_h(*prefix) for prefix in self.cpu]
                self.account.add([BlockRemoved(block_hashes=gone, medium="CPU", group_idx=0)])
            self.cpu.clear()
        return Answered(None if self.bare_200 else True)

    def _sleep(self, seconds: float) -> None:
        self.clock_s += seconds

    def reset_prefix_cache(self, reset_external: bool) -> ResetResult:
        cleared = (lambda: self.account.cleared) if self.gpu_events else (lambda: None)
        op = confirm_reset(external=reset_external, deadline=60.0)
        return drive(
            op,
            post=self._post_reset,
            step=self.step_engine,
            cleared=cleared,
            sleep=self._sleep,
            clock=lambda: self.clock_s,
        )

    def cpu_blocks_stored(self) -> int | None:
        return self.account.stored_blocks("CPU") if self.cpu_events else None

    def events(self) -> GroupEventAccount | None:
        return self.account if self.cpu_events or self.evictions_as_gpu_removes or self.gpu_events else None

    def first_uses(self) -> list[FirstUse]:
        return list(self.uses)

    def poison(self) -> int | None:
        self.calls.append("poison")
        return 100 if self.reference_on else None

    def loads(self) -> list[LoadPlan]:
        return list(self.plans)

    def defects_applied(self) -> dict[str, int]:
        return dict(self.applied)

    def arm(self, order: MutationOrder | None) -> None:
        self.order = order
