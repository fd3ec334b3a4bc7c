"""Test-only: the reference instrument's work, on the KV tensors and what the scheduler hands a worker (torch
only; ``reference.py`` hooks it into vLLM's worker). See ``reference.py`` for what it proves and when.

- ``regions.py``: every layer's blocks as rows of bytes, by KV-cache group (where the KV lies);
  ``schedule.py``: each request's blocks as the scheduler hands them, the blocks a step completes, and those
  a request at its first step starts from.
- :class:`Proof`: before the forward of each step, on the compute stream (``reference.py`` finds the point),
  digests every block a request at its first step starts from and checks it then, against the book
  (``book.py``): what the forward reads, whatever a connector's copies did after it. After the step it records
  the digest of every prompt block the step completed (the references), digests the first-use blocks again,
  and writes one line per first-use request to ``firstuse-<pid>.jsonl``: the verdict of each block at the
  read, and how many were wrong at the read yet as computed after the step (a copy that landed after the
  forward that read it: vLLM #45704's and #47282's class). A block another request of the same step completes
  is checked after the step (its bytes are written by that forward). Also the poison.

A digest is one int64 per layer region: the block's bytes as int32 words, times odd weights, summed modulo
2**64 on the device (exact, order-free; one changed word always changes it).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gpu_tests.kv_proof.book import Book, Check
from gpu_tests.kv_proof.regions import Group, ident, regions
from gpu_tests.kv_proof.schedule import (
    NULL_BLOCK,
    Plan,
    Request,
    completed,
    completing,
    finished,
    first_use_plan,
    starts,
    step_blocks,
    track,
)

__all__ = ["NULL_BLOCK", "POISON_BYTE", "Proof"]

POISON_BYTE = 0x41
CHUNK_BYTES = 256 << 20
MAX_EXAMPLES = 6
_SEED = 20261202


@dataclass
class _Read:
    """A first-use request's plan and the digests of its blocks taken before the forward."""

    plan: Plan
    digests: dict[tuple[int, int], bytes] = field(default_factory=dict)


class Proof:
    def __init__(self, kv_cache_config: Any, forward_context: dict[str, Any], root: Path) -> None:
        self.root = root
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.groups = regions(kv_cache_config, forward_context)
        self.device = next((r.rows.device for g in self.groups for r in g.regions), torch.device("cuda"))
        widest = max((r.width for g in self.groups for r in g.regions), default=4)
        gen = torch.Generator(device="cpu").manual_seed(_SEED)
        weights = torch.randint(-(2**62), 2**62, (widest // 4,), generator=gen, dtype=torch.int64) | 1
        self.weights = weights.to(self.device)
        self.book = Book()
        self.requests: dict[str, Request] = {}
        # request -> its first-use plan and the digests taken before the forward: see before_forward
        self.before: dict[str, _Read] = {}
        self.read_point = ""  # where reference.py hooked before_forward: named in the snapshot
        self.pending: Any = None  # the step's scheduler output until its forward's read point
        self.seq = 0
        self.poisoned = 0
        self.poisoned_blocks = 0
        self.errors: list[str] = []
        self.last_flush = 0.0
        self.uses = root / f"firstuse-{self.pid}.jsonl"
        self.snapshot_path = root / f"reference-{self.pid}.json"
        for g in self.groups:
            if g.regions:
                self.book.poison[g.index] = self._poison_digest(g)
        self.flush(force=True)
        print(
            f"vllm-devclient kv-proof: reference digests on {len(self.groups)} groups, "
            f"{sum(len(g.regions) for g in self.groups)} regions, pid {self.pid}",
            file=sys.stderr,
            flush=True,
        )

    # -- digests --------------------------------------------------------------------------------------------

    def _digest_rows(self, rows: torch.Tensor, width: int) -> torch.Tensor:
        words = rows[:, :width].contiguous().view(torch.int32).to(torch.int64)
        return (words * self.weights[: width // 4]).sum(dim=1)

    def _digest(self, group: Group, block_ids: list[int]) -> list[bytes]:
        """One digest per block (the int64 of every region, in order), read from the GPU once."""
        if not block_ids or not group.regions:
            return [b"" for _ in block_ids]
        index = torch.tensor(block_ids, dtype=torch.long, device=self.device)
        columns = []
        for region in group.regions:
            step = max(1, CHUNK_BYTES // max(region.width * 2, 1))
            parts = []
            for i in range(0, len(block_ids), step):
                rows = region.rows.index_select(0, index[i : i + step])
                if region.gathered:  # the logical elements, in order, as bytes
                    rows = rows.reshape(rows.shape[0], -1).view(torch.int8)
                parts.append(self._digest_rows(rows, region.width))
            columns.append(torch.cat(parts))
        table = torch.stack(columns, dim=1).cpu().numpy().astype("<i8")
        return [row.tobytes() for row in table]

    def _poison_digest(self, group: Group) -> bytes:
        digests = []
        for region in group.regions:
            rows = torch.full((1, region.width), POISON_BYTE, dtype=torch.int8, device=self.device)
            digests.append(int(self._digest_rows(rows, region.width)[0]))
        return np.array(digests, dtype="<i8").tobytes()

    def poison(self) -> dict[str, int]:
        done: set[tuple[int, int, int]] = set()
        blocks = 0
        with self.lock:
            for group in self.groups:
                for region in group.regions:
                    rows = region.rows
                    if ident(rows) in done:
                        continue
                    done.add(ident(rows))
                    # every byte POISON_BYTE, whatever the element size of a gathered view
                    rows[NULL_BLOCK + 1 :].fill_(
                        int.from_bytes(bytes([POISON_BYTE]) * rows.element_size(), "little", signed=True)
                    )
                    blocks = max(blocks, rows.shape[0] - 1)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.poisoned += 1
            self.poisoned_blocks = blocks
            self.flush(force=True)
        return {"blocks": blocks, "regions": len(done)}

    # -- the step -------------------------------------------------------------------------------------------

    def _track(self, out: Any) -> None:
        for rid in finished(out):
            self.requests.pop(rid, None)
            self.before.pop(rid, None)
        track(self.requests, out)

    def read(self) -> None:
        """The read point (``reference.py``): the pending step's first-use blocks, once, before its forward.
        A forward without a pending step (warm-up, CUDA-graph capture) reads nothing."""
        out, self.pending = self.pending, None
        if out is None:
            return
        try:
            self.before_forward(out)
        except Exception:  # the instrument must never stop the engine; the check reads the error
            self.error("before_forward")

    def before_forward(self, out: Any) -> None:
        """Digest, on the compute stream before the forward, every block a request at its first step starts
        from (GPU prefix-cache hits and connector loads alike): the bytes the forward is about to read. A
        block another request of the step completes is left to after the step."""
        with self.lock:
            tables = step_blocks(self.requests, out)
            completes = completing(self.groups, self.requests, out, tables)
            wanted: dict[int, list[tuple[str, int]]] = {}
            for new in out.scheduled_new_reqs:
                c0 = int(new.num_computed_tokens)
                rid = new.req_id
                if new.prompt_token_ids is None or c0 <= 0 or rid in self.before:
                    continue
                req = Request(prompt=list(new.prompt_token_ids), blocks=tables[rid][1])
                plan = first_use_plan(self.groups, req, c0)
                self.before[rid] = _Read(plan=plan)
                for g, _, block in plan:
                    if block is not None and completes.get((g.index, block), rid) == rid:
                        wanted.setdefault(g.index, []).append((rid, block))
            for g in self.groups:
                items = wanted.get(g.index, [])
                digests = self._digest(g, [block for _, block in items])
                for (rid, block), digest in zip(items, digests, strict=True):
                    self.before[rid].digests[(g.index, block)] = digest

    def after_step(self, out: Any) -> None:
        with self.lock:
            self._track(out)
            begun = starts(out)
            records: list[tuple[Group, bytes, int]] = []
            firsts: list[tuple[str, Request, int]] = []
            for rid, n in out.num_scheduled_tokens.items():
                req = self.requests.get(rid)
                if req is None or rid not in begun:
                    continue
                c0 = begun[rid]
                end = min(c0 + int(n), len(req.prompt))
                for g in self.groups:
                    for k in completed(g, c0, c0 + int(n), end):
                        if k < len(req.blocks[g.index]) and req.blocks[g.index][k] != NULL_BLOCK:
                            records.append((g, req.key(g.block_size, k), req.blocks[g.index][k]))
                if req.first:
                    req.first = False
                    if c0 > 0:
                        firsts.append((rid, req, c0))
            reads = {rid: self.before.pop(rid, None) for rid, _, _ in firsts}
            plans = {
                rid: r.plan if (r := reads[rid]) is not None else first_use_plan(self.groups, req, c0)
                for rid, req, c0 in firsts
            }
            digests = self._digests_after(records, plans.values())
            for g, key, block in records:
                self.book.record(g.index, key, digests[(g.index, block)])
            lines = [self._first_use(rid, c0, plans[rid], reads[rid], digests) for rid, _, c0 in firsts]
            if lines:
                with self.uses.open("a") as fh:
                    fh.write("".join(json.dumps(line) + "\n" for line in lines))
            self.flush(force=bool(lines))

    def _digests_after(
        self, records: list[tuple[Group, bytes, int]], plans: Iterable[Plan]
    ) -> dict[tuple[int, int], bytes]:
        """The digest after the step of every block the step completed and of every first-use block."""
        wanted: dict[int, set[int]] = {}
        for g, _, block in records:
            wanted.setdefault(g.index, set()).add(block)
        for plan in plans:
            for g, _, planned in plan:
                if planned is not None:
                    wanted.setdefault(g.index, set()).add(planned)
        digests: dict[tuple[int, int], bytes] = {}
        for g in self.groups:
            ids = sorted(wanted.get(g.index, ()))
            for block, digest in zip(ids, self._digest(g, ids), strict=True):
                digests[(g.index, block)] = digest
        return digests

    # -- the first-use line ---------------------------------------------------------------------------------

    def _first_use(
        self,
        rid: str,
        cached: int,
        plan: Plan,
        read: _Read | None,
        after: dict[tuple[int, int], bytes],
    ) -> dict[str, Any]:
        """One request's first-use line: each block's verdict at the read (after the step where the forward
        wrote it, or where no read point ran), and the blocks wrong at the read yet as computed after."""
        req = self.requests[rid]
        verdicts: dict[int, list[str]] = {g.index: [] for g in self.groups}
        examples: list[dict[str, Any]] = []
        at_read = late = 0
        for g, k, block in plan:
            if block is None:
                verdicts[g.index].append("s" if g.recurrent else "n")
                continue
            key = req.key(g.block_size, k)
            digest = read.digests.get((g.index, block)) if read is not None else None
            in_place = g.recurrent and g.every_boundary and cached % g.block_size != 0
            if digest is None and in_place:
                verdicts[g.index].append("s")  # computed over in place: no digest of what it was served
                continue
            found, holds, landed_late = self._verdict(g, key, digest, after[(g.index, block)], in_place)
            at_read += digest is not None
            late += landed_late
            verdicts[g.index].append(found.verdict)
            if found.verdict != "v" and len(examples) < MAX_EXAMPLES:
                examples.append(
                    {
                        "group": g.index,
                        "block": k,
                        "gpu_block": block,
                        "verdict": found.verdict,
                        "holds": holds,
                        "regions_differ": found.regions_differ,
                    }
                )
        self.seq += 1
        return {
            "seq": self.seq,
            "pid": self.pid,
            "request_id": rid,
            "cached": cached,
            "groups": [
                {
                    "group": g.index,
                    "block_size": g.block_size,
                    "regions": len(g.regions),
                    "verdicts": "".join(verdicts[g.index]),
                }
                for g in self.groups
            ],
            "examples": examples,
            "at_read": at_read,
            "late": late,
        }

    def _verdict(
        self, g: Group, key: bytes, at_read: bytes | None, after: bytes, in_place: bool
    ) -> tuple[Check, str, bool]:
        """One block's verdict, what it holds, and whether it was wrong at the read yet as computed after:
        at the read where it was digested there (else after the step), checked against after the step
        unless its first step computes over it in place."""
        found = self.book.check(g.index, key, at_read if at_read is not None else after)
        if at_read is None or in_place:
            return found, found.holds, False
        later = self.book.check(g.index, key, after)  # a write the forward did not make
        if found.verdict != "v" and later.verdict == "v":
            return (
                found,
                f"{found.holds}; as computed after the step: the copy landed after the forward read it",
                True,
            )
        if found.verdict == "v" and later.verdict != "v":
            return (
                later,
                f"{later.holds}; as computed when the forward read it: changed during the step",
                False,
            )
        return found, found.holds, False

    def flush(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last_flush < 1.0:
            return
        self.last_flush = now
        data = {
            "pid": self.pid,
            **self.book.snapshot(),
            "regions_by_group": {str(g.index): len(g.regions) for g in self.groups},
            "layers_by_group": {str(g.index): [r.layer for r in g.regions] for g in self.groups},
            "read_point": self.read_point,
            "poisoned": self.poisoned,
            "poisoned_blocks": self.poisoned_blocks,
            "errors": self.errors[:20],
        }
        tmp = self.snapshot_path.with_name(f".{self.snapshot_path.name}.tmp")
        try:
            tmp.write_text(json.dumps(data))
            os.replace(tmp, self.snapshot_path)
        except OSError:
            pass

    def error(self, what: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(f"{what}: {traceback.format_exc(limit=4)}"[-1500:])
        self.flush(force=True)
