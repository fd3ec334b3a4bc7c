"""Issue 53, real size by volume: what each real-size model's newest clean pass proved (reload requests that
loaded from the CPU tier, connector-loaded first-use blocks checked), and the plan that would make every model
reach :data:`~gpu_tests.offload_check.volume.MIN_LOADED_SHARE` of its reload requests and
:data:`~gpu_tests.offload_check.volume.MIN_LOADED_BLOCKS` blocks per clean pass (``offload_check/volume.py``:
each question after examples of its own, to whole blocks of the model's block size).

The plan reads each model's block size, context and CPU bytes per block from its newest committed clean pass
(``tables.newest_real``'s rows, handed in: the reports, no estimate); ``run_matrix --families real --volume``
runs it, and with ``--dry-run`` prints it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gpu_tests.offload_check.profiles import PROFILES
from gpu_tests.offload_check.report import Iteration, OffloadCheckReport
from gpu_tests.offload_check.volume import MIN_LOADED_BLOCKS, MIN_LOADED_SHARE, VolumePlan, plan_volume

__all__ = ["Volume", "describe", "pass_volume", "volume_figure", "volume_plans"]

ANSWER_ROOM = 512  # a question's own tokens and what it may generate, past its examples


@dataclass(frozen=True)
class Volume:
    """One clean pass: reload requests, those the CPU tier served, connector-loaded first-use blocks."""

    requests: int
    from_cpu: int
    loaded_blocks: int

    def meets(self) -> bool:
        return self.from_cpu >= MIN_LOADED_SHARE * self.requests and self.loaded_blocks >= MIN_LOADED_BLOCKS


def pass_volume(it: Iteration) -> Volume:
    """Counted as ``kv_bytes_identical`` counts: a reload request's first-use blocks past its GPU hits, every
    verdict but null and recurrent-between-snapshots."""
    reload = {a.request_id: a for a in it.runs["reload"].answers} if "reload" in it.runs else {}
    from_cpu = sum(a.split is not None and a.split.external > 0 for a in reload.values())
    loaded = 0
    for use in it.first_use:
        answer = reload.get(use.request_id)
        if answer is None or answer.split is None:
            continue
        for g in use.groups:
            tail = g.verdicts[answer.split.local // g.block_size :] if g.block_size else ""
            loaded += sum(v not in "ns" for v in tail)
    return Volume(len(reload), from_cpu, loaded)


class _Row(Protocol):
    """``tables.RealRow``: a model's newest clean pass (``clean.report``) and where it came from."""

    @property
    def clean(self) -> Any: ...


def volume_figure(rows: Sequence[_Row]) -> str:
    """Per real-size model, its newest clean pass (run and judge): the volume it proved, and the target."""
    lines = []
    for row in rows:
        r = row.clean.report
        passes = [pass_volume(it) for it in r.clean()]
        said = "; ".join(
            f"{v.from_cpu} of {v.requests} reload requests loaded from the CPU tier, {v.loaded_blocks} "
            f"connector-loaded first-use blocks checked"
            for v in passes
        )
        met = passes and all(v.meets() for v in passes)
        lines.append(
            f"- `{r.profile}`, {row.clean.source()}, {row.clean.verdict}: {said or 'no clean pass'}: "
            f"{'meets' if met else 'short of'} issue 53's volume."
        )
    return "\n".join(lines)


def _context(r: OffloadCheckReport) -> int:
    args = list(r.server_args)
    return int(args[args.index("--max-model-len") + 1]) if "--max-model-len" in args else 4096


def _cpu_block_bytes(r: OffloadCheckReport) -> int:
    """CPU-tier bytes per GPU block, from the pass's stores (GPU->CPU bytes over the entries stored)."""
    it = r.clean()[0] if r.clean() else None
    if it is None or it.cpu_tier is None or not it.cpu_tier.stored:
        return 0
    stored = sum(w.gpu_to_cpu_bytes or 0.0 for k, w in it.windows.items() if k in ("cold", "warm"))
    return math.ceil(stored / it.cpu_tier.stored / max(1, r.blocks_per_chunk or 1))


def volume_plans(rows: Sequence[_Row]) -> dict[str, VolumePlan]:
    """Per real-size profile, the questions, blocks per prompt and CPU tier of a clean pass by volume."""
    out = {}
    for row in rows:
        r = row.clean.report
        out[r.profile] = plan_volume(
            r.profile,
            block_size=max(g.block_size for g in r.layout),
            context=_context(r),
            answer_room=ANSWER_ROOM,
            cpu_block_bytes=_cpu_block_bytes(r),
            min_questions=PROFILES[r.profile].num_questions,
        )
    return out


def describe(plans: dict[str, VolumePlan]) -> list[str]:
    return [
        f"{p.model}: block {p.block_size}, {p.blocks_per_prompt} whole blocks a question, {p.questions} "
        f"questions: {p.loaded_blocks} connector-loaded blocks a pass (target {MIN_LOADED_BLOCKS}); CPU tier "
        f"{p.cpu_gib:g} GiB ({p.cpu_block_bytes} bytes a block, every block twice)"
        for p in plans.values()
    ]
