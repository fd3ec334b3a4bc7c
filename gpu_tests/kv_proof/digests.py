"""Test-only: the reference instrument's work, on the KV tensors and what the scheduler hands a worker (torch
only; ``reference.py`` hooks it into vLLM's worker). See ``reference.py`` for what it proves and when.

- :func:`regions`: every layer's blocks as rows of bytes (block-major, as vLLM lays them out; a recurrent
  layer through its first state tensor; a K/V-outermost layer, vLLM 0.20-0.22's FLASH_ATTN, as a K region and
  a V region), by KV-cache group; one region per distinct memory region. A layer whose block is not one dense
  page in memory (a cross-layer cache, which splits a layer's page by head under HND; K/V leading the shape
  over block-major memory, vLLM 0.22's hybrids) is read through its own logical view, gathered: the elements
  its kernels read, never another layer's.
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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gpu_tests.kv_proof.book import Book, chain_keys

POISON_BYTE = 0x41
NULL_BLOCK = 0
CHUNK_BYTES = 256 << 20
MAX_EXAMPLES = 6
_SEED = 20261202


@dataclass
class _Region:
    # (num_blocks, page) int8 view of one memory region; gathered: the layer's logical (num_blocks, ...) view
    # as integers of its element size, any strides
    rows: torch.Tensor
    width: int  # bytes of a page that hold data (unpadded), a multiple of 4
    layer: str
    gathered: bool = False


@dataclass
class _Group:
    index: int
    block_size: int
    recurrent: bool
    every_boundary: bool  # a recurrent group with mamba_cache_mode=all keeps a state at each boundary
    regions: list[_Region]


@dataclass
class _Request:
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


@dataclass
class _Read:
    """A first-use request's plan and the digests of its blocks taken before the forward."""

    plan: list[tuple[_Group, int, int | None]]
    digests: dict[tuple[int, int], bytes] = field(default_factory=dict)


def _unpadded(spec: Any) -> int:
    """The bytes of a page a kernel writes (a hybrid pads attention pages up to the recurrent page size)."""
    try:
        if "Mamba" not in type(spec).__name__ and hasattr(spec, "unpadded_page_size_bytes"):
            return int(spec.unpadded_page_size_bytes)
        if getattr(spec, "page_size_padded", None) is not None:  # before vLLM 0.26 for attention too
            return int(replace(spec, page_size_padded=None).page_size_bytes)
        return int(spec.page_size_bytes)
    except Exception:
        return int(spec.page_size_bytes)


def _kv_outermost(kv: torch.Tensor) -> bool:
    """FLASH_ATTN's (2, num_blocks, ...) layout in vLLM 0.20-0.22: all K blocks, then all V blocks."""
    return kv.dim() >= 3 and kv.shape[0] == 2 and kv.stride(0) > kv.stride(1)


def _rows(tensor: torch.Tensor, num_blocks: int, page: int, stride: int) -> torch.Tensor:
    raw = torch.empty(0, dtype=torch.int8, device=tensor.device).set_(tensor.untyped_storage())
    offset = tensor.storage_offset() * tensor.element_size()
    return torch.as_strided(raw, (num_blocks, page), (stride, 1), offset)


_INTS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _ident(rows: torch.Tensor) -> tuple[int, int, int]:
    """Where a region's rows lie: two regions with the same are one memory region."""
    return (rows.untyped_storage().data_ptr(), rows.storage_offset(), rows.stride(0))


def _block_major(kv: torch.Tensor, stride: int) -> bool:
    """Whether ``kv``'s blocks lie at ``stride`` bytes, each one dense run of bytes: readable as raw rows."""
    block = kv[0]
    span = sum((n - 1) * st for n, st in zip(block.shape, block.stride(), strict=True)) + 1
    return kv.stride(0) * kv.element_size() == stride and span == block.numel()


def _block_views(layer: str, kv: torch.Tensor, num_blocks: int) -> list[torch.Tensor]:
    """The layer's KV as logical views with the block dimension first, as integers of its element size: the
    tensor itself, or its K and V halves where (2, blocks) leads the shape. A kernel block smaller than the
    group's (a hybrid's attention at 64 tokens a kernel block, 256 a block: vLLM 0.22) counts ``m`` kernel
    blocks a block, block b being kernel blocks b*m .. b*m+m-1: they are unflattened into one."""

    def counts_blocks(n: int) -> bool:
        return n >= num_blocks and n % num_blocks == 0

    if kv.dim() >= 3 and kv.shape[0] == 2 and counts_blocks(kv.shape[1]):
        halves = [kv[0], kv[1]]
    elif kv.dim() >= 2 and counts_blocks(kv.shape[0]):
        halves = [kv]
    else:
        raise ValueError(
            f"layer {layer}: a KV cache of shape {tuple(kv.shape)} has no dimension of its {num_blocks} "
            "blocks where the reference digests look for one (first, or second after K/V)"
        )
    if kv.element_size() not in _INTS:
        raise ValueError(f"layer {layer}: elements of {kv.element_size()} bytes")
    per = [
        h.unflatten(0, (num_blocks, h.shape[0] // num_blocks)) if h.shape[0] != num_blocks else h
        for h in halves
    ]
    return [h.view(_INTS[kv.element_size()]) for h in per]


def regions(kv_cache_config: Any, forward_context: dict[str, Any]) -> list[_Group]:
    """Every KV-cache group with its block size, kind and distinct memory regions."""
    num_blocks = int(kv_cache_config.num_blocks)
    packed = {
        name
        for t in kv_cache_config.kv_cache_tensors
        if getattr(t, "block_stride", 0) > 0
        for name in t.shared_by
    }
    groups = []
    for g, group in enumerate(kv_cache_config.kv_cache_groups):
        # Groups share memory (each owns its own blocks of it): a region is distinct within its group only.
        seen: set[tuple[int, int, int]] = set()
        spec = group.kv_cache_spec
        per_layer = getattr(spec, "kv_cache_specs", {}) or {}
        recurrent = "Mamba" in type(spec).__name__
        regions = []
        for layer in group.layer_names:
            module = forward_context.get(layer)
            kv = getattr(module, "kv_cache", None)
            if kv is None:
                continue
            lspec = per_layer.get(layer, spec)
            page = int(lspec.page_size_bytes)
            width = _unpadded(lspec) // 4 * 4
            if isinstance(kv, (list, tuple)):  # a recurrent layer: its states share one block-major region
                if not kv:
                    continue
                found = [_Region(rows=_rows(kv[0], num_blocks, page, page), width=width, layer=layer)]
            elif _kv_outermost(kv):  # a block is a K row in one half and a V row in the other
                half = kv.stride(1) * kv.element_size()
                found = [
                    _Region(
                        rows=_rows(part, num_blocks, half, half),
                        width=_unpadded(lspec) // 2 // 4 * 4,
                        layer=layer,
                    )
                    for part in (kv[0], kv[1])
                ]
            else:
                stride = kv.stride(0) * kv.element_size() if layer in packed else page
                if _block_major(kv, stride):
                    found = [_Region(rows=_rows(kv, num_blocks, page, stride), width=width, layer=layer)]
                else:
                    found = [
                        _Region(
                            rows=v, width=v[0].numel() * v.element_size() // 4 * 4, layer=layer, gathered=True
                        )
                        for v in _block_views(layer, kv, num_blocks)
                    ]
            for region in found:
                if _ident(region.rows) not in seen:
                    seen.add(_ident(region.rows))
                    regions.append(region)
        groups.append(
            _Group(
                index=g,
                block_size=int(spec.block_size),
                recurrent=recurrent,
                every_boundary=getattr(spec, "mamba_cache_mode", None) == "all",
                regions=regions,
            )
        )
    return groups


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
        self.requests: dict[str, _Request] = {}
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

    def _digest(self, group: _Group, block_ids: list[int]) -> list[bytes]:
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

    def _poison_digest(self, group: _Group) -> bytes:
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
                    ident = _ident(rows)
                    if ident in done:
                        continue
                    done.add(ident)
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
        for rid in getattr(out, "finished_req_ids", ()) or ():
            self.requests.pop(rid, None)
            self.before.pop(rid, None)
        for new in out.scheduled_new_reqs:
            if new.prompt_token_ids is None:
                continue
            self.requests[new.req_id] = _Request(
                prompt=list(new.prompt_token_ids), blocks=[list(b) for b in new.block_ids]
            )
        cached = out.scheduled_cached_reqs
        resumed = getattr(cached, "resumed_req_ids", set()) or set()
        for i, rid in enumerate(cached.req_ids):
            req = self.requests.get(rid)
            new_ids = cached.new_block_ids[i] if i < len(cached.new_block_ids) else None
            if req is None or new_ids is None:
                continue
            if rid in resumed:
                req.blocks = [list(b) for b in new_ids]
                req.first = False  # a resumed request recomputes: its first step was checked already
            else:
                for g, ids in enumerate(new_ids):
                    req.blocks[g].extend(ids)

    def _starts(self, out: Any) -> dict[str, int]:
        """Each scheduled request's computed tokens at the start of the step."""
        starts = {new.req_id: int(new.num_computed_tokens) for new in out.scheduled_new_reqs}
        cached = out.scheduled_cached_reqs
        for i, rid in enumerate(cached.req_ids):
            starts[rid] = int(cached.num_computed_tokens[i])
        return starts

    def _step_blocks(self, out: Any) -> dict[str, tuple[int, list[list[int]]]]:
        """Each scheduled request's computed tokens at the start of the step and its block table during it,
        read without changing the tracked state (``_track`` runs after the step)."""
        found = {
            new.req_id: (int(new.num_computed_tokens), [list(b) for b in new.block_ids])
            for new in out.scheduled_new_reqs
            if new.prompt_token_ids is not None
        }
        cached = out.scheduled_cached_reqs
        resumed = getattr(cached, "resumed_req_ids", set()) or set()
        for i, rid in enumerate(cached.req_ids):
            req = self.requests.get(rid)
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

    def _completing(
        self, out: Any, tables: dict[str, tuple[int, list[list[int]]]]
    ) -> dict[tuple[int, int], str]:
        """(group, block id) -> the request whose step completes that block: its bytes are the forward's."""
        done: dict[tuple[int, int], str] = {}
        for rid, n in out.num_scheduled_tokens.items():
            if rid not in tables:
                continue
            c0, blocks = tables[rid]
            prompt = self.requests[rid].prompt if rid in self.requests else None
            length = len(prompt) if prompt is not None else self._new_prompt_length(out, rid)
            for g in self.groups:
                for k in self._completed(g, c0, c0 + int(n), min(c0 + int(n), length)):
                    if k < len(blocks[g.index]) and blocks[g.index][k] != NULL_BLOCK:
                        done[(g.index, blocks[g.index][k])] = rid
        return done

    @staticmethod
    def _new_prompt_length(out: Any, rid: str) -> int:
        for new in out.scheduled_new_reqs:
            if new.req_id == rid and new.prompt_token_ids is not None:
                return len(new.prompt_token_ids)
        return 0

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
            tables = self._step_blocks(out)
            completing = self._completing(out, tables)
            wanted: dict[int, list[tuple[str, int]]] = {}
            for new in out.scheduled_new_reqs:
                c0 = int(new.num_computed_tokens)
                rid = new.req_id
                if new.prompt_token_ids is None or c0 <= 0 or rid in self.before:
                    continue
                req = _Request(prompt=list(new.prompt_token_ids), blocks=tables[rid][1])
                plan = self._plan(req, c0)
                self.before[rid] = _Read(plan=plan)
                for g, _, block in plan:
                    if block is not None and completing.get((g.index, block), rid) == rid:
                        wanted.setdefault(g.index, []).append((rid, block))
            for g in self.groups:
                items = wanted.get(g.index, [])
                digests = self._digest(g, [block for _, block in items])
                for (rid, block), digest in zip(items, digests, strict=True):
                    self.before[rid].digests[(g.index, block)] = digest

    def after_step(self, out: Any) -> None:
        with self.lock:
            self._track(out)
            starts = self._starts(out)
            records: list[tuple[_Group, bytes, int]] = []
            firsts: list[tuple[str, _Request, int]] = []
            for rid, n in out.num_scheduled_tokens.items():
                req = self.requests.get(rid)
                if req is None or rid not in starts:
                    continue
                c0 = starts[rid]
                end = min(c0 + int(n), len(req.prompt))
                for g in self.groups:
                    for k in self._completed(g, c0, c0 + int(n), end):
                        if k < len(req.blocks[g.index]) and req.blocks[g.index][k] != NULL_BLOCK:
                            records.append((g, req.key(g.block_size, k), req.blocks[g.index][k]))
                if req.first:
                    req.first = False
                    if c0 > 0:
                        firsts.append((rid, req, c0))
            wanted: dict[int, set[int]] = {}
            for g, _, block in records:
                wanted.setdefault(g.index, set()).add(block)
            reads = {rid: self.before.pop(rid, None) for rid, _, _ in firsts}
            plans = {
                rid: r.plan if (r := reads[rid]) is not None else self._plan(req, c0)
                for rid, req, c0 in firsts
            }
            for plan in plans.values():
                for g, _, block in plan:
                    if block is not None:
                        wanted.setdefault(g.index, set()).add(block)
            digests: dict[tuple[int, int], bytes] = {}
            for g in self.groups:
                ids = sorted(wanted.get(g.index, ()))
                for block, digest in zip(ids, self._digest(g, ids), strict=True):
                    digests[(g.index, block)] = digest
            for g, key, block in records:
                self.book.record(g.index, key, digests[(g.index, block)])
            lines = [self._first_use(rid, c0, plans[rid], reads[rid], digests) for rid, _, c0 in firsts]
            if lines:
                with self.uses.open("a") as fh:
                    fh.write("".join(json.dumps(line) + "\n" for line in lines))
            self.flush(force=bool(lines))

    @staticmethod
    def _completed(g: _Group, c0: int, c1: int, end: int) -> range:
        """Block indices whose content the step completed (their reference is taken now)."""
        B = g.block_size
        if not g.recurrent or g.every_boundary:
            return range(c0 // B, end // B)
        if c1 == end and end % B == 0 and end > c0:  # a state kept where the step ended on a boundary
            return range(end // B - 1, end // B)
        return range(0)

    def _plan(self, req: _Request, cached: int) -> list[tuple[_Group, int, int | None]]:
        """(group, index, block id or None) for every block of the cached prefix; None: not checked. A state
        a request starts inside of (``mamba_cache_mode=all``) is the block's end state: its first step
        computes over it in place, so it is checked only where it was digested before the forward."""
        plan: list[tuple[_Group, int, int | None]] = []
        for g in self.groups:
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

    def _first_use(
        self,
        rid: str,
        cached: int,
        plan: list[tuple[_Group, int, int | None]],
        read: _Read | None,
        after: dict[tuple[int, int], bytes],
    ) -> dict[str, Any]:
        """One request's first-use line: each block's verdict at the read (after the step where the forward
        wrote it, or where no read point ran), and the blocks wrong at the read yet as computed after."""
        req = self.requests[rid]
        verdicts: dict[int, list[str]] = {g.index: [] for g in self.groups}
        examples = []
        at_read = late = 0
        for g, k, block in plan:
            if block is None:
                verdicts[g.index].append("s" if g.recurrent else "n")
                continue
            key = req.key(g.block_size, k)
            digest = read.digests.get((g.index, block)) if read is not None else None
            served = digest is not None
            if digest is None and g.recurrent and g.every_boundary and cached % g.block_size:
                verdicts[g.index].append("s")  # computed over in place: no digest of what it was served
                continue
            found = self.book.check(g.index, key, digest if served else after[(g.index, block)])
            at_read += served
            holds = found.holds
            in_place = g.recurrent and g.every_boundary and cached % g.block_size != 0
            if served and not in_place:  # the same block after the step: a write the forward did not make
                later = self.book.check(g.index, key, after[(g.index, block)])
                if found.verdict != "v" and later.verdict == "v":
                    late += 1
                    holds = f"{holds}; as computed after the step: the copy landed after the forward read it"
                elif found.verdict == "v" and later.verdict != "v":
                    found, holds = (
                        later,
                        f"{later.holds}; as computed when the forward read it: changed during the step",
                    )
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
