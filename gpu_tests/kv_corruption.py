"""Test-only: an offloading spec that corrupts KV on its way back from the CPU tier.

Loaded by vLLM's OffloadingConnector through ``kv_connector_extra_config``::

    {"spec_name": "CorruptingCPUOffloadingSpec", "spec_module_path": "gpu_tests.kv_corruption", ...}

(``OffloadingSpecFactory.get_spec_cls`` imports ``spec_module_path`` for a spec name it does not know).
It is vLLM's own ``CPUOffloadingSpec``, except that every CPU->GPU load first zero-fills the CPU blocks it
is about to read: the stored copy is intact until the moment it is reloaded, so the cold runs are
untouched and only the reload run sees wrong KV, the way a stride or indexing bug in the load path
would. The offload check must then fail on ``answers_unchanged``.

This module is imported inside vLLM's engine processes (it needs vllm and torch), never by the tests.
Written against vLLM 0.26 (``CPUOffloadingWorker._load_handler.src_tensors``); later releases keep the
same names for the non-expedited path.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec

MARKER = "vllm-devclient mutation:"


def _cpu_tensors(worker: Any) -> list[torch.Tensor]:
    handler = getattr(worker, "_load_handler", None)
    tensors = getattr(handler, "src_tensors", None)
    if not tensors:
        raise RuntimeError(
            f"{MARKER} cannot find the CPU tensors of {type(worker).__name__}: this vLLM's offloading "
            "worker differs from 0.26's (no _load_handler.src_tensors)"
        )
    return list(tensors)


class CorruptingCPUOffloadingSpec(CPUOffloadingSpec):
    """CPUOffloadingSpec whose loads read zeroed CPU blocks."""

    def get_worker(self, kv_caches: Any) -> Any:
        worker = super().get_worker(kv_caches)
        if getattr(worker, "_vllm_devclient_corrupting", False):
            return worker
        cpu_tensors = _cpu_tensors(worker)
        real_submit_load = worker.submit_load
        loads = 0

        def submit_load(job_id: int, src_spec: Any, dst_spec: Any, *args: Any, **kwargs: Any) -> Any:
            nonlocal loads
            ids = torch.as_tensor(src_spec.block_ids, dtype=torch.long)
            # Host-side write to pinned memory before the copy is queued: the copy reads the zeros.
            for tensor in cpu_tensors:
                tensor.index_fill_(0, ids, 0)
            loads += 1
            print(
                f"{MARKER} zeroed {len(ids)} CPU blocks before load job {job_id} (load #{loads})",
                file=sys.stderr,
                flush=True,
            )
            return real_submit_load(job_id, src_spec, dst_spec, *args, **kwargs)

        worker.submit_load = submit_load
        worker._vllm_devclient_corrupting = True
        print(f"{MARKER} CorruptingCPUOffloadingSpec worker ready", file=sys.stderr, flush=True)
        return worker
