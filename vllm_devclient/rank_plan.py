"""Each server's own NCCL init payload when one trainer broadcasts to a fleet (no I/O).

vLLM's NCCL trainer engines build one worker payload, `rank_offset` 1 (the trainer is rank 0) and
`world_size` the whole group's. A worker's rank is `rank_offset + dp_rank * (TP x PP) + rank`
(`nccl_common._worker_group_rank`), so the same payload sent to several servers makes each claim the ranks
from 1 and the rendezvous never completes. Server i must instead start where the servers before it end:

    rank_offset(i) = rank_offset + sum(world size of the servers before i)
    world_size     = rank_offset + sum(every server's world size)      (the trainer's plan, checked)

where a server's world size is `/get_world_size` with data-parallel ranks counted (TP x PP x DP).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from .errors import DevClientError, WorldSizeMismatchError

__all__ = ["plans_ranks", "worker_payloads"]


def plans_ranks(init_info: object) -> bool:
    """Whether an init payload places workers by rank (NCCL: `rank_offset` and `world_size`), so a fleet must
    give each server its own."""
    return isinstance(init_info, Mapping) and "rank_offset" in init_info and "world_size" in init_info


def worker_payloads(init_info: Mapping[str, Any], answers: Mapping[str, object]) -> dict[str, dict[str, Any]]:
    """URL -> that server's init payload, from the trainer's payload and each server's `/get_world_size`
    answer (in the fleet's order), or `WorldSizeMismatchError` naming the servers that did not answer or
    whose world sizes do not add up to the trainer's plan."""
    first, planned = init_info["rank_offset"], init_info["world_size"]
    if not _whole(first) or not _whole(planned) or first < 1:
        raise WorldSizeMismatchError(
            f"the init payload's rank_offset ({first!r}) and world_size ({planned!r}) must be whole numbers, "
            "rank_offset at least 1 (the trainer's ranks come first)",
            planned=planned if _whole(planned) else None,
            world_sizes={},
            unanswered={},
        )
    sizes: dict[str, int] = {url: a for url, a in answers.items() if _whole(a)}
    unanswered = {url: a for url, a in answers.items() if isinstance(a, DevClientError)}
    bad = {url: a for url, a in answers.items() if url not in sizes and url not in unanswered}
    if unanswered or bad:
        lines = [f"  {url}: {type(e).__name__}: {e}" for url, e in unanswered.items()]
        lines += [f"  {url}: world size {a!r} (not a positive whole number)" for url, a in bad.items()]
        raise WorldSizeMismatchError(
            "cannot plan the NCCL ranks: these servers did not give their world size:\n" + "\n".join(lines),
            planned=planned,
            world_sizes=sizes,
            unanswered=unanswered,
        )
    total = first + sum(sizes.values())
    if total != planned:
        listed = ", ".join(f"{url}: {n}" for url, n in sizes.items())
        raise WorldSizeMismatchError(
            f"the trainer planned an NCCL group of world_size {planned}, but its {first} rank(s) and the "
            f"servers' world sizes ({listed}) make {total}: build the trainer's init info with "
            f"world_size={total}, or send to the servers it was planned for",
            planned=planned,
            world_sizes=sizes,
            unanswered={},
        )
    out: dict[str, dict[str, Any]] = {}
    offset = first
    for url, size in sizes.items():
        out[url] = {**init_info, "rank_offset": offset}
        offset += size
    return out


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
