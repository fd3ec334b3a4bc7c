"""The byte ledger: which bytes a transfer copies, and whether what lands on the GPU is what was stored.

No vLLM and no torch here: the offloading spec (``spec.py``) feeds it block ids and digests.

One *op* is one GPU-sized block of one layer tensor: vLLM 0.26's ``SingleDirectionOffloadingHandler`` copies
exactly these, ``group_sizes[g] x len(group_data_refs[g])`` of them per transfer, group by group, reference
by reference. :func:`plan_ops` lays them out from the scheduler's specs as ``transfer_async`` does (a CPU
block holds ``blocks_per_chunk`` GPU blocks; a group's first GPU block may start in the middle of its first
CPU block, at ``block_indices[g] % blocks_per_chunk``). The ledger keys a stored op by its CPU location
``(tensor, cpu_block, sub_block)``, remembers the digest of the bytes there when the store finished, and
checks each load against it when the load finished. The plan comes from the specs the scheduler asked for,
never from the pointers a (possibly broken) copy used: a block copied to or from the wrong place shows up.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Ledger", "Op", "Ref", "digest", "plan_ops"]

MAX_EXAMPLES = 8


def digest(data: bytes | memoryview) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


@dataclass(frozen=True)
class Ref:
    """One layer tensor a group's blocks live in (vLLM's ``CanonicalKVCacheRef``, plus the layer's name)."""

    tensor: int
    size: int  # the un-padded page size in bytes: what a transfer copies
    layer: str = ""


@dataclass(frozen=True)
class Op:
    group: int
    ref: int
    tensor: int
    layer: str
    gpu_block: int
    cpu_block: int
    sub: int  # which GPU-sized slot of the CPU block
    size: int

    @property
    def cpu_key(self) -> tuple[int, int, int]:
        return (self.tensor, self.cpu_block, self.sub)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def plan_ops(
    *,
    gpu_block_ids: Sequence[int],
    group_sizes: Sequence[int],
    block_indices: Sequence[int],
    cpu_block_ids: Sequence[int],
    blocks_per_chunk: int,
    group_refs: Sequence[Sequence[Ref]],
) -> list[Op]:
    """Every op of one transfer, in the handler's order. Raises ValueError when the ids do not add up."""
    if not (len(group_sizes) == len(block_indices) == len(group_refs)):
        raise ValueError("group_sizes, block_indices and group_refs differ in length")
    if sum(group_sizes) != len(gpu_block_ids):
        raise ValueError(f"group sizes {list(group_sizes)} do not sum to {len(gpu_block_ids)} GPU blocks")
    ops: list[Op] = []
    gpu_off = cpu_off = 0
    for g, (size, first, refs) in enumerate(zip(group_sizes, block_indices, group_refs, strict=False)):
        if size == 0:
            continue
        skip = first % blocks_per_chunk
        cpu_count = _cdiv(size + skip, blocks_per_chunk)
        gpu = gpu_block_ids[gpu_off : gpu_off + size]
        cpu = cpu_block_ids[cpu_off : cpu_off + cpu_count]
        if len(cpu) != cpu_count:
            raise ValueError(f"group {g} needs {cpu_count} CPU blocks, the spec has {len(cpu)} left")
        for r, ref in enumerate(refs):
            for i in range(size):
                logical = skip + i
                ops.append(
                    Op(
                        group=g,
                        ref=r,
                        tensor=ref.tensor,
                        layer=ref.layer,
                        gpu_block=int(gpu[i]),
                        cpu_block=int(cpu[logical // blocks_per_chunk]),
                        sub=logical % blocks_per_chunk,
                        size=ref.size,
                    )
                )
        gpu_off += size
        cpu_off += cpu_count
    if cpu_off != len(cpu_block_ids):
        raise ValueError(f"the spec has {len(cpu_block_ids)} CPU blocks, the groups use {cpu_off}")
    return ops


Reader = Callable[[Sequence[Op]], list[str]]  # digests of the ops' bytes, in order


@dataclass
class _Counts:
    jobs: int = 0
    ops: int = 0
    bytes: int = 0

    def add(self, ops: Sequence[Op]) -> None:
        self.jobs += 1
        self.ops += len(ops)
        self.bytes += sum(op.size for op in ops)


@dataclass
class Ledger:
    """Store and load digests of one worker, and the verdict so far (see the module docstring)."""

    pid: int = 0
    stored: dict[tuple[int, int, int], str] = field(default_factory=dict)
    pending: dict[int, tuple[Literal["store", "load"], list[Op]]] = field(default_factory=dict)
    stores: _Counts = field(default_factory=_Counts)
    loads: _Counts = field(default_factory=_Counts)
    verified: int = 0
    mismatched: int = 0
    unverified: int = 0
    store_copy_mismatched: int = 0
    groups: set[int] = field(default_factory=set)
    tensors: set[int] = field(default_factory=set)
    layers: set[str] = field(default_factory=set)
    loaded_blocks_by_group: dict[int, int] = field(default_factory=dict)  # GPU blocks written by loads
    examples: list[dict[str, Any]] = field(default_factory=list)
    mutations_applied: dict[str, int] = field(default_factory=dict)
    mutation_notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def submitted(self, job_id: int, kind: Literal["store", "load"], ops: list[Op]) -> None:
        self.pending[job_id] = (kind, ops)

    def finished(self, job_id: int, *, read_cpu: Reader, read_gpu: Reader) -> bool:
        """Account a finished job; False when the ledger never saw it submitted."""
        item = self.pending.pop(job_id, None)
        if item is None:
            return False
        kind, ops = item
        if kind == "store":
            cpu = read_cpu(ops)
            gpu = read_gpu(ops)
            for op, landed, source in zip(ops, cpu, gpu, strict=False):
                self.stored[op.cpu_key] = landed
                if landed != source:
                    self.store_copy_mismatched += 1
            self.stores.add(ops)
            return True
        landed_all = read_gpu(ops)
        blocks: dict[int, set[int]] = {}
        for op in ops:
            blocks.setdefault(op.group, set()).add(op.gpu_block)
        for g, ids in blocks.items():
            self.loaded_blocks_by_group[g] = self.loaded_blocks_by_group.get(g, 0) + len(ids)
        for op, landed in zip(ops, landed_all, strict=False):
            self.groups.add(op.group)
            self.tensors.add(op.tensor)
            if op.layer:
                self.layers.add(op.layer)
            expected = self.stored.get(op.cpu_key)
            if expected is None:
                self.unverified += 1
            elif expected == landed:
                self.verified += 1
                continue
            else:
                self.mismatched += 1
            if len(self.examples) < MAX_EXAMPLES:
                self.examples.append(
                    {
                        "job_id": job_id,
                        "group": op.group,
                        "layer": op.layer,
                        "tensor": op.tensor,
                        "gpu_block": op.gpu_block,
                        "cpu_block": op.cpu_block,
                        "sub_block": op.sub,
                        "stored": expected,
                        "landed": landed,
                    }
                )
        self.loads.add(ops)
        return True

    def applied(self, mutation: str, note: str = "") -> None:
        self.mutations_applied[mutation] = self.mutations_applied.get(mutation, 0) + 1
        if note and len(self.mutation_notes) < 50:
            self.mutation_notes.append(note)

    def error(self, message: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(message)

    def snapshot(self) -> dict[str, Any]:
        """The JSON :class:`vllm_devclient.offload_check.probe_files.LedgerSnapshot` reads."""
        return {
            "pid": self.pid,
            "stores": vars(self.stores),
            "loads": vars(self.loads),
            "verified": self.verified,
            "mismatched": self.mismatched,
            "unverified": self.unverified,
            "store_copy_mismatched": self.store_copy_mismatched,
            "groups": sorted(self.groups),
            "tensors": sorted(self.tensors),
            "layers": sorted(self.layers),
            "loaded_blocks_by_group": {str(g): n for g, n in sorted(self.loaded_blocks_by_group.items())},
            "mismatch_examples": self.examples,
            "mutations_applied": dict(self.mutations_applied),
            "mutation_notes": list(self.mutation_notes),
            "errors": list(self.errors),
        }
