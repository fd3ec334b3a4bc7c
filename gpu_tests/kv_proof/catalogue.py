"""The catalogue of KV-path mutations: what each one breaks, where it applies, which assertion must catch it.

No vLLM and no torch here (the CPU tests, the planner and the tables read it); ``mutations.py`` holds the
instruments themselves. Every mutation is a realistic bug in the path a block takes from the CPU tier back
to the GPU, armed by the check for the reload run only (``probe_files.MutationOrder``), so the stored copy
and the cold runs stay intact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vllm_devclient.offload_check.probe_files import GroupLayout

__all__ = ["MUTATIONS", "Mutation", "applicable", "target_group"]


@dataclass(frozen=True)
class Mutation:
    name: str
    bug: str  # the real bug it stands for
    caught_by: tuple[str, ...]  # the check's assertions, any of which must fail
    needs: str = ""  # "" (every family), "multi_group", "recurrent", "attention"


MUTATIONS: dict[str, Mutation] = {
    m.name: m
    for m in (
        Mutation(
            "zero_fill",
            "loads read zeroed CPU blocks (a stale or never-written host page)",
            ("kv_bytes_identical",),
        ),
        Mutation(
            "swap_blocks",
            "two GPU destinations of one group exchanged (a permuted block table)",
            ("kv_bytes_identical",),
            needs="attention",
        ),
        Mutation(
            "off_by_one", "every CPU source block id one too high (an indexing slip)", ("kv_bytes_identical",)
        ),
        Mutation(
            "one_group",
            "only the sliding-window or recurrent group's blocks come back zeroed (a per-group stride bug)",
            ("kv_bytes_identical",),
            needs="multi_group",
        ),
        Mutation(
            "one_layer",
            "one layer tensor of one group comes back zeroed (a per-layer offset bug)",
            ("kv_bytes_identical",),
        ),
        Mutation(
            "single_element",
            "one byte of one reloaded block flipped (the smallest corruption)",
            ("kv_bytes_identical",),
        ),
        Mutation(
            "state_ahead",
            "the connector reports one token fewer than the recurrent state it restores holds "
            "(vLLM #51094's shape)",
            ("recurrent_state_consistent",),
            needs="recurrent",
        ),
    )
}


def applicable(mutation: Mutation, layout: Sequence[GroupLayout]) -> str | None:
    """Why ``mutation`` cannot apply to a model with these groups, or None when it applies."""
    if mutation.needs == "multi_group" and len(layout) < 2:
        return "the model has one KV-cache group"
    if mutation.needs == "recurrent" and not any(g.recurrent for g in layout):
        return "the model has no recurrent-state group"
    if mutation.needs == "attention" and all(g.recurrent for g in layout):
        return "every group holds one recurrent state per request: no load moves two blocks of one group"
    return None


def target_group(layout: Sequence[GroupLayout]) -> int:
    """The group a one-group or one-layer mutation aims at: a recurrent group, else a sliding-window one,
    else the first."""
    for kind in ("mamba", "sliding"):
        for g in layout:
            if g.kind == kind:
                return g.index
    return layout[0].index if layout else 0
