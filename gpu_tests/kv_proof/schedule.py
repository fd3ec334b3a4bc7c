"""Test-only: what the scheduler hands a worker, as the reference instrument (``digests.Proof``) reads it.

Each request's prompt and block table as the steps change them (:func:`track`), the blocks a step completes
(:func:`completed`, :func:`completing`) and the blocks a request at its first step starts from
(:func:`first_use_plan`). Plain data from vLLM's ``SchedulerOutput``; no torch, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpu_tests.kv_proof.book import chain_keys

if TYPE_CHECKING:
    from gpu_tests.kv_proof.regions import Group

__all__ = [
    "NULL_BLOCK",
    "Plan",
    "Request",
    "completed",
    "completing",
    "finished",
    "first_use_plan",
    "starts",
    "step_blocks",
    "track",
]

NULL_BLOCK = 0

# (group, block index, block id or None: not checked) for every block of a cached prefix
Plan = list[tuple["Group", int, int | None]]


@dataclass
class Request:
    prompt: list[int]
    blocks: list[list[int]]
    first: bool = True
    keys: dict[int, list[bytes]] = field(default_factory=dict)  # block size -> chain keys

    def key(self, block_size: int, index: int) -> bytes:
        keys = self.keys.get(block_size, [])
        if index >= len(keys):
            keys = chain_keys(self.prompt, block_size, index + 1, keys)
            self.keys[block_size] = keys
        return keys[index]


def finished(out: Any) -> tuple[str, ...]:
    """The requests that finished before this step."""
    return tuple(getattr(out, "finished_req_ids", ()) or ())


def track(requests: dict[str, Request], out: Any) -> None:
    """Add the step's new requests to ``requests`` and extend (or, resumed, replace) the others' tables."""
    for new in out.scheduled_new_reqs:
        if new.prompt_token_ids is None:
            continue
        requests[new.req_id] = Request(
            prompt=list(new.prompt_token_ids), blocks=[list(b) for b in new.block_ids]
        )
    cached = out.scheduled_cached_reqs
    resumed: set[str] = getattr(cached, "resumed_req_ids", set()) or set()
    for i, rid in enumerate(cached.req_ids):
        req = requests.get(rid)
        new_ids = cached.new_block_ids[i] if i < len(cached.new_block_ids) else None
        if req is None or new_ids is None:
            continue
        if rid in resumed:
            req.blocks = [list(b) for b in new_ids]
            req.first = False  # a resumed request recomputes: its first step was checked already
        else:
            for g, ids in enumerate(new_ids):
                req.blocks[g].extend(ids)


def starts(out: Any) -> dict[str, int]:
    """Each scheduled request's computed tokens at the start of the step."""
    found = {new.req_id: int(new.num_computed_tokens) for new in out.scheduled_new_reqs}
    cached = out.scheduled_cached_reqs
    for i, rid in enumerate(cached.req_ids):
        found[rid] = int(cached.num_computed_tokens[i])
    return found


def step_blocks(requests: dict[str, Request], out: Any) -> dict[str, tuple[int, list[list[int]]]]:
    """Each scheduled request's computed tokens at the start of the step and its block table during it,
    read without changing ``requests`` (:func:`track` runs after the step)."""
    found = {
        new.req_id: (int(new.num_computed_tokens), [list(b) for b in new.block_ids])
        for new in out.scheduled_new_reqs
        if new.prompt_token_ids is not None
    }
    cached = out.scheduled_cached_reqs
    resumed: set[str] = getattr(cached, "resumed_req_ids", set()) or set()
    for i, rid in enumerate(cached.req_ids):
        req = requests.get(rid)
        new_ids = cached.new_block_ids[i] if i < len(cached.new_block_ids) else None
        if req is None:
            continue
        if new_ids is None:
            blocks = [list(b) for b in req.blocks]
        elif rid in resumed:
            blocks = [list(b) for b in new_ids]
        else:
            blocks = [list(b) + list(n) for b, n in zip(req.blocks, new_ids, strict=False)]
        found[rid] = (int(cached.num_computed_tokens[i]), blocks)
    return found


def completed(g: Group, c0: int, c1: int, end: int) -> range:
    """Block indices whose content the step completed (their reference is taken now)."""
    B = g.block_size
    if not g.recurrent or g.every_boundary:
        return range(c0 // B, end // B)
    if c1 == end and end % B == 0 and end > c0:  # a state kept where the step ended on a boundary
        return range(end // B - 1, end // B)
    return range(0)


def _new_prompt_length(out: Any, rid: str) -> int:
    for new in out.scheduled_new_reqs:
        if new.req_id == rid and new.prompt_token_ids is not None:
            return len(new.prompt_token_ids)
    return 0


def completing(
    groups: list[Group],
    requests: dict[str, Request],
    out: Any,
    tables: dict[str, tuple[int, list[list[int]]]],
) -> dict[tuple[int, int], str]:
    """(group, block id) -> the request whose step completes that block: its bytes are the forward's."""
    done: dict[tuple[int, int], str] = {}
    for rid, n in out.num_scheduled_tokens.items():
        if rid not in tables:
            continue
        c0, blocks = tables[rid]
        prompt = requests[rid].prompt if rid in requests else None
        length = len(prompt) if prompt is not None else _new_prompt_length(out, rid)
        for g in groups:
            for k in completed(g, c0, c0 + int(n), min(c0 + int(n), length)):
                if k < len(blocks[g.index]) and blocks[g.index][k] != NULL_BLOCK:
                    done[(g.index, blocks[g.index][k])] = rid
    return done


def first_use_plan(groups: list[Group], req: Request, cached: int) -> Plan:
    """(group, index, block id or None) for every block of the cached prefix; None: not checked. A state
    a request starts inside of (``mamba_cache_mode=all``) is the block's end state: its first step
    computes over it in place, so it is checked only where it was digested before the forward."""
    plan: Plan = []
    for g in groups:
        ids = req.blocks[g.index]
        B = g.block_size
        if g.recurrent:
            k = cached // B if cached % B else cached // B - 1
            inside = g.every_boundary and cached % B != 0
            if (cached % B == 0 or inside) and 0 <= k < len(ids) and ids[k] != NULL_BLOCK:
                plan.append((g, k, ids[k]))
            else:
                plan.append((g, -1, None))  # a state between snapshots
            continue
        for k in range(min(cached // B, len(ids))):
            plan.append((g, k, ids[k] if ids[k] != NULL_BLOCK else None))
    return plan
