"""The defect catalogue (v2): what each defect breaks in vLLM's own code, where it applies, which assertion
must catch it.

No vLLM and no torch here (the CPU tests, the planner and the tables read it); ``defects.py`` injects them.
Every defect is a realistic bug in the path a block takes through a connector: the store, the CPU slot, the
load plan, the copy, or a write after the load. The check arms one for a whole mutation iteration (its cold
run stores through it, its reload loads through it). The proof stands above all of them, at the block's first
use, and knows none of them: a defect is caught by the bytes the model was about to read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpu_tests.offload_check.probe_files import GroupLayout

__all__ = ["MUTATIONS", "Mutation", "applicable", "target_group"]

OFFLOADING = "OffloadingConnector"
SIMPLE = "SimpleCPUOffloadConnector"
BYTES = ("kv_bytes_identical",)


@dataclass(frozen=True)
class Mutation:
    name: str
    bug: str  # the real bug it stands for
    where: str  # the vLLM code it is injected into
    connectors: tuple[str, ...]  # the connectors it acts in
    caught_by: tuple[str, ...] = BYTES  # the check's assertions, any of which must fail
    needs: str = ""  # "" (every family), "recurrent", "attention"

    def acts_in(self, connector: str) -> bool:
        return connector in self.connectors


MUTATIONS: dict[str, Mutation] = {
    m.name: m
    for m in (
        Mutation(
            "store_wrong_block",
            "a store reads the GPU block after the one planned (an off-by-one in the worker)",
            "CPUOffloadingWorker.submit_store",
            (OFFLOADING,),
        ),
        Mutation(
            "store_copies_nothing",
            "a store reports success and copies nothing (a dropped transfer)",
            "CPUOffloadingWorker.submit_store / get_finished",
            (OFFLOADING,),
        ),
        Mutation(
            "cpu_slot_shared",
            "two hashes share one CPU slot (the allocator hands a slot still in use out again)",
            "CPUOffloadingManager._allocate_blocks",
            (OFFLOADING,),
        ),
        Mutation(
            "load_plan_permuted",
            "the scheduler's load job lists a group's GPU destinations in the wrong order",
            "OffloadingConnectorScheduler.update_state_after_alloc",
            (OFFLOADING,),
            needs="attention",
        ),
        Mutation(
            "stale_slot_after_reset",
            "a full reset leaves index entries behind while their slots are handed out again",
            "CPUOffloadingManager.reset_cache",
            (OFFLOADING,),
            # Served before its slot is reused, a stale entry holds the right bytes: the cold run after the
            # full reset is then not cold (a recurrent model reads only its last state, stored again).
            caught_by=(*BYTES, "reload_proven"),
        ),
        Mutation(
            "load_wrong_cpu_block",
            "a load reads the CPU block after the one planned",
            "CPUOffloadingWorker.submit_load",
            (OFFLOADING,),
        ),
        Mutation(
            "changed_after_load",
            "a late write changes one byte of a loaded block after its load finished",
            "CPUOffloadingWorker.get_finished",
            (OFFLOADING,),
        ),
        Mutation(
            "state_ahead",
            "the connector reports one token fewer than the recurrent state it restores holds "
            "(vLLM #51094's shape)",
            "OffloadingConnectorScheduler._lookup",
            (OFFLOADING,),
            caught_by=("recurrent_state_consistent",),
            needs="recurrent",
        ),
        Mutation(
            "simple_load_wrong_place",
            "the Simple connector's copy sends loaded blocks to the wrong GPU blocks",
            "DmaCopyBackend.launch_copy (loads)",
            (SIMPLE,),
        ),
        Mutation(
            "simple_store_wrong_block",
            "the Simple connector stores the wrong GPU blocks",
            "DmaCopyBackend.launch_copy (stores)",
            (SIMPLE,),
        ),
        Mutation(
            "simple_store_copies_nothing",
            "the Simple connector's store copies nothing and still reports done",
            "DmaCopyBackend.launch_copy (stores)",
            (SIMPLE,),
        ),
        Mutation(
            "load_lands_late",
            "a load is reported finished before its copy, which lands after the forward that reads its "
            "blocks (copies not ordered with the compute stream: vLLM #45704's and #47282's class)",
            "CPUOffloadingWorker.submit_load / get_finished; DmaCopyBackend.launch_copy (loads); "
            "Worker.execute_model (the landing)",
            (OFFLOADING, SIMPLE),
        ),
    )
}


def applicable(mutation: Mutation, layout: Sequence[GroupLayout], connector: str) -> str | None:
    """Why ``mutation`` cannot apply to this server, or None when it applies."""
    if not mutation.acts_in(connector):
        return f"it is injected into the {' and the '.join(mutation.connectors)}"
    if mutation.needs == "recurrent" and not any(g.recurrent for g in layout):
        return "the model has no recurrent-state group"
    if mutation.needs == "attention" and all(g.recurrent for g in layout):
        return "every group holds one recurrent state per request: no load moves two blocks of one group"
    return None


def target_group(layout: Sequence[GroupLayout]) -> int:
    """The group a report names for a one-group defect: a recurrent group, else a sliding-window one, else the
    first."""
    for kind in ("mamba", "sliding"):
        for g in layout:
            if g.kind == kind:
                return g.index
    return layout[0].index if layout else 0
