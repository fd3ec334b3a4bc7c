"""Test-only: the mutation instruments of ``catalogue.py``, applied inside vLLM's engine processes.

Worker side (:class:`Mutator`, called by the proving spec before each load, after the ledger took the plan):

- ``zero_fill``: the load's CPU source blocks are zeroed before the copy is queued;
- ``swap_blocks``: the first two GPU destinations of one group are exchanged;
- ``off_by_one``: every CPU source block id is one higher (modulo the CPU tier);
- ``one_group``: only the aimed group's CPU blocks are zeroed;
- ``one_layer``: only the first layer tensor of the aimed group is zeroed;
- ``single_element``: one byte in the middle of one block of the aimed group is flipped, once per arming.

Scheduler side (:func:`patch_scheduler`): ``state_ahead`` makes the OffloadingConnector's lookup report one
token fewer than it found, while the load still covers the whole last chunk (the scheduler loads
``cdiv(cached, block)`` blocks): a recurrent state that already holds the last cached token is restored and
that token is computed again, vLLM #51094's shape. The same patch logs every load job the scheduler plans.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vllm_devclient.offload_check.probe_files import MutationOrder, read_order

if TYPE_CHECKING:
    from gpu_tests.kv_proof.ledger import Op
    from gpu_tests.kv_proof.spec import _Proof


class Mutator:
    def __init__(self, proof: _Proof) -> None:
        self.proof = proof
        self.spent: set[int] = set()  # arming tokens a once-per-arming mutation has used

    def apply(
        self, order: MutationOrder, job_id: int, ops: Sequence[Op], src: Any, dst: Any
    ) -> tuple[Any, Any]:
        name = order.name
        handler = getattr(self, f"_{name}", None)
        if handler is None:
            self.proof.ledger.error(f"unknown mutation {name!r}")
            return src, dst
        result = handler(order, job_id, ops, src, dst)
        if result is None:
            return src, dst
        src, dst, note = result
        self.proof.ledger.applied(name, f"job {job_id}: {note}")
        return src, dst

    def _state_ahead(self, order: MutationOrder, job_id: int, ops: Sequence[Op], src: Any, dst: Any) -> Any:
        return None  # applied by the scheduler's lookup (patch_scheduler), not to the copy

    def _zero(self, ops: Sequence[Op], tensors: set[int] | None = None) -> int:
        rows: dict[int, set[int]] = {}
        for op in ops:
            if tensors is None or op.tensor in tensors:
                rows.setdefault(op.tensor, set()).add(op.cpu_block)
        import torch

        for tensor, blocks in rows.items():
            index = torch.tensor(sorted(blocks), dtype=torch.long)
            self.proof.cpu[tensor].index_fill_(0, index, 0)
        return sum(len(b) for b in rows.values())

    def _zero_fill(self, order: MutationOrder, job_id: int, ops: Sequence[Op], src: Any, dst: Any) -> Any:
        return src, dst, f"zeroed {self._zero(ops)} CPU rows"

    def _one_group(self, order: MutationOrder, job_id: int, ops: Sequence[Op], src: Any, dst: Any) -> Any:
        mine = [op for op in ops if op.group == order.group]
        if not mine:
            return None
        return src, dst, f"zeroed {self._zero(mine)} CPU rows of group {order.group}"

    def _one_layer(self, order: MutationOrder, job_id: int, ops: Sequence[Op], src: Any, dst: Any) -> Any:
        mine = [op for op in ops if op.group == order.group and op.ref == 0]
        if not mine:
            return None
        tensor = mine[0].tensor
        count = self._zero(mine, {tensor})
        return src, dst, f"zeroed {count} CPU rows of tensor {tensor} ({mine[0].layer}), group {order.group}"

    def _single_element(
        self, order: MutationOrder, job_id: int, ops: Sequence[Op], src: Any, dst: Any
    ) -> Any:
        if order.token in self.spent:
            return None
        mine = [op for op in ops if op.group == order.group] or list(ops)
        if not mine:
            return None
        op = mine[0]
        offset = op.sub * self.proof.page(op.tensor) + op.size // 2
        cell = self.proof.cpu[op.tensor][op.cpu_block, offset : offset + 1]
        cell.bitwise_xor_(1)
        self.spent.add(order.token)
        return src, dst, f"flipped byte {offset} of CPU block {op.cpu_block}, tensor {op.tensor} ({op.layer})"

    def _swap_blocks(self, order: MutationOrder, job_id: int, ops: Sequence[Op], src: Any, dst: Any) -> Any:
        ids = np.array(dst.block_ids, copy=True)
        start = 0
        for g, size in enumerate(dst.group_sizes):
            if size >= 2:
                ids[start], ids[start + 1] = ids[start + 1], ids[start]
                swapped = copy.copy(dst)
                swapped.block_ids = ids
                return src, swapped, f"group {g}: GPU blocks {ids[start + 1]} and {ids[start]} exchanged"
            start += size
        return None

    def _off_by_one(self, order: MutationOrder, job_id: int, ops: Sequence[Op], src: Any, dst: Any) -> Any:
        total = int(self.proof.cpu[0].shape[0])
        shifted = copy.copy(src)
        shifted.block_ids = (np.asarray(src.block_ids, dtype=np.int64) + 1) % total
        return shifted, dst, f"{len(shifted.block_ids)} CPU source ids + 1"


_patched = False
_lock = threading.Lock()


def patch_scheduler(root: Path) -> None:
    """In the scheduler's process: log each planned load job, and apply ``state_ahead`` to the lookup."""
    global _patched
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading.scheduler import (
        OffloadingConnectorScheduler as Sched,
    )

    with _lock:
        if _patched:
            return
        _patched = True
    path = root / f"loads-{os.getpid()}.jsonl"
    notes = root / f"scheduler-{os.getpid()}.json"
    seq = 0
    applied: dict[str, int] = {}
    real_lookup = Sched._lookup
    real_after_alloc = Sched.update_state_after_alloc

    def _lookup(self: Any, req_status: Any) -> int | None:
        hit = real_lookup(self, req_status)
        if not hit:
            return hit
        order = read_order(root)
        if order is None or order.name != "state_ahead":
            return hit
        applied["state_ahead"] = applied.get("state_ahead", 0) + 1
        notes.write_text(json.dumps({"mutations_applied": applied}))
        return hit - 1

    def update_state_after_alloc(self: Any, request: Any, blocks: Any, num_external_tokens: int) -> None:
        nonlocal seq
        before = set(self._current_batch_load_jobs)
        real_after_alloc(self, request, blocks, num_external_tokens)
        try:
            for job_id in set(self._current_batch_load_jobs) - before:
                job = self._current_batch_load_jobs[job_id]
                status = self._req_status[request.request_id]
                groups = []
                for cfg, size, first in zip(
                    self.config.kv_group_configs,
                    job.dst_spec.group_sizes,
                    job.dst_spec.block_indices,
                    strict=False,
                ):
                    groups.append(
                        {
                            "group": int(cfg.group_idx),
                            "first_block": int(first),
                            "blocks": int(size),
                            "tokens_per_block": int(cfg.tokens_per_block),
                        }
                    )
                order = read_order(root)
                record = {
                    "seq": seq,
                    "pid": os.getpid(),
                    "request_id": str(request.request_id),
                    "job_id": int(job_id),
                    "local": int(status.num_locally_computed_tokens),
                    "external": int(num_external_tokens),
                    "groups": groups,
                    "gpu_block_ids": [int(b) for b in job.dst_spec.block_ids],
                    "mutation": order.name if order is not None else None,
                }
                seq += 1
                with path.open("a") as fh:
                    fh.write(json.dumps(record) + "\n")
        except Exception as exc:  # the log must never stop the engine
            with path.open("a") as fh:
                fh.write(json.dumps({"error": repr(exc)}) + "\n")

    Sched._lookup = _lookup
    Sched.update_state_after_alloc = update_state_after_alloc
