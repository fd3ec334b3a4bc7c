"""Test-only: vLLM's CPU offloading spec with a byte ledger, the mutation catalogue, and a load planner log.

Loaded by vLLM's OffloadingConnector through ``kv_connector_extra_config``::

    {"spec_name": "ProvingCPUOffloadingSpec", "spec_module_path": "gpu_tests.kv_proof.spec", ...}

with ``VLLM_DEVCLIENT_PROBE_DIR`` set for the server (``vllm_devclient.offload_check.probe_files``).

- Worker side (``get_worker``): every store and load is laid out op by op from the scheduler's specs
  (``ledger.plan_ops``); when a store finishes, the digest of each CPU block's bytes is kept; when a load
  finishes, the bytes that landed in each GPU block are digested and compared with it. The ledger goes to
  ``ledger-<pid>.json``. Reading the bytes at ``get_finished`` is safe: a finished load's blocks wait for the
  request to be scheduled, and a stored CPU block cannot be reused before its store is reported.
- Before each load, the armed mutation (``mutation.json``) is applied (``mutations.py``), after the ledger
  has taken the plan: a wrong copy is judged against what the scheduler asked for.
- Scheduler side (``get_manager``): each load job the OffloadingConnector plans is logged with its request,
  split and per-group logical blocks (``loads-<pid>.jsonl``), and the ``state_ahead`` mutation is applied to
  the connector's lookup.

Written against vLLM 0.26 (``CPUOffloadingWorker`` with ``_store_handler``/``_load_handler`` holding
``src_tensors``/``dst_tensors``, ``OffloadingConnectorScheduler._lookup`` and ``update_state_after_alloc``);
anything missing is reported in the ledger's ``errors`` instead of crashing the engine.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec

from gpu_tests.kv_proof import mutations
from gpu_tests.kv_proof.ledger import Ledger, Op, Ref, digest, plan_ops
from vllm_devclient.offload_check.probe_files import PROBE_DIR_ENV, read_order

MARKER = "vllm-devclient kv-proof:"


def _probe_dir() -> Path | None:
    root = os.environ.get(PROBE_DIR_ENV)
    if not root:
        return None
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _log(message: str) -> None:
    print(f"{MARKER} {message}", file=sys.stderr, flush=True)


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


class _Proof:
    """The worker-side instrument around one ``CPUOffloadingWorker``."""

    def __init__(self, worker: Any, spec: CPUOffloadingSpec, root: Path) -> None:
        self.worker = worker
        self.root = root
        self.lock = threading.Lock()
        self.ledger = Ledger(pid=os.getpid())
        self.path = root / f"ledger-{os.getpid()}.json"
        store = worker._store_handler
        self.gpu: list[torch.Tensor] = list(store.src_tensors)
        self.cpu: list[torch.Tensor] = list(store.dst_tensors)
        self.blocks_per_chunk = int(spec.blocks_per_chunk)
        self.group_refs = self._refs(store.kv_cache_groups_data_refs, spec)
        self.mutator = mutations.Mutator(self)
        self.real_store = worker.submit_store
        self.real_load = worker.submit_load
        self.real_finished = worker.get_finished
        worker.submit_store = self.submit_store
        worker.submit_load = self.submit_load
        worker.get_finished = self.get_finished
        self.flush()
        _log(f"ledger on {len(self.gpu)} tensors, {len(self.group_refs)} groups, pid {os.getpid()}")

    @staticmethod
    def _refs(data_refs: Sequence[Sequence[Any]], spec: CPUOffloadingSpec) -> list[list[Ref]]:
        groups = getattr(spec.config, "groups", ())
        out: list[list[Ref]] = []
        for g, refs in enumerate(data_refs):
            names = list(groups[g].layer_names) if g < len(groups) else []
            per_layer = len(refs) // len(names) if names and len(refs) % len(names) == 0 else 0
            out.append(
                [
                    Ref(
                        tensor=int(r.tensor_idx),
                        size=int(r.page_size_bytes),
                        layer=names[i // per_layer] if per_layer else f"ref{i}",
                    )
                    for i, r in enumerate(refs)
                ]
            )
        return out

    def plan(self, gpu_spec: Any, cpu_spec: Any) -> list[Op]:
        return plan_ops(
            gpu_block_ids=[int(b) for b in gpu_spec.block_ids],
            group_sizes=list(gpu_spec.group_sizes),
            block_indices=list(gpu_spec.block_indices),
            cpu_block_ids=[int(b) for b in cpu_spec.block_ids],
            blocks_per_chunk=self.blocks_per_chunk,
            group_refs=self.group_refs,
        )

    def submit_store(self, job_id: int, src_spec: Any, dst_spec: Any) -> Any:
        try:
            with self.lock:
                self.ledger.submitted(job_id, "store", self.plan(src_spec, dst_spec))
        except Exception as exc:
            self.ledger.error(f"store plan {job_id}: {exc!r}")
        return self.real_store(job_id, src_spec, dst_spec)

    def submit_load(self, job_id: int, src_spec: Any, dst_spec: Any) -> Any:
        try:
            with self.lock:
                ops = self.plan(dst_spec, src_spec)
                self.ledger.submitted(job_id, "load", ops)
            order = read_order(self.root)
            if order is not None:
                src_spec, dst_spec = self.mutator.apply(order, job_id, ops, src_spec, dst_spec)
        except Exception:
            self.ledger.error(f"load {job_id}: {traceback.format_exc(limit=3)}")
        return self.real_load(job_id, src_spec, dst_spec)

    def get_finished(self) -> Any:
        results = self.real_finished()
        done = False
        for result in results:
            try:
                with self.lock:
                    done |= self.ledger.finished(
                        result.job_id, read_cpu=self.read_cpu, read_gpu=self.read_gpu
                    )
            except Exception:
                self.ledger.error(f"finish {result.job_id}: {traceback.format_exc(limit=3)}")
        if done:
            self.flush()
        return results

    def page(self, tensor: int) -> int:
        return int(self.gpu[tensor].shape[1])

    def read_cpu(self, ops: Sequence[Op]) -> list[str]:
        out = []
        for op in ops:
            start = op.sub * self.page(op.tensor)
            row = self.cpu[op.tensor][op.cpu_block, start : start + op.size]
            out.append(digest(row.numpy().tobytes()))
        return out

    def read_gpu(self, ops: Sequence[Op]) -> list[str]:
        by_tensor: dict[int, list[int]] = {}
        for i, op in enumerate(ops):
            by_tensor.setdefault(op.tensor, []).append(i)
        out = [""] * len(ops)
        for tensor, positions in by_tensor.items():
            gpu = self.gpu[tensor]
            index = torch.tensor([ops[i].gpu_block for i in positions], dtype=torch.long, device=gpu.device)
            width = max(ops[i].size for i in positions)
            rows = gpu.index_select(0, index)[:, :width].cpu().numpy()
            for row, i in zip(rows, positions, strict=False):
                out[i] = digest(row[: ops[i].size].tobytes())
        return out

    def flush(self) -> None:
        try:
            _write_json(self.path, self.ledger.snapshot())
        except OSError as exc:
            _log(f"cannot write {self.path}: {exc}")


class ProvingCPUOffloadingSpec(CPUOffloadingSpec):
    """CPUOffloadingSpec with the byte ledger, the mutations and the load-plan log (module docstring)."""

    def get_manager(self) -> Any:
        manager = super().get_manager()
        root = _probe_dir()
        if root is not None:
            mutations.patch_scheduler(root)
        return manager

    def get_worker(self, kv_caches: Any) -> Any:
        worker = super().get_worker(kv_caches)
        root = _probe_dir()
        if root is not None and not getattr(worker, "_vllm_devclient_proof", None):
            worker._vllm_devclient_proof = _Proof(worker, self, root)
        return worker
