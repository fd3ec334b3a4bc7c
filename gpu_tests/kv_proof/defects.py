"""Test-only: the defect catalogue (``catalogue.py``) injected into vLLM's own offloading code, below the
proof.

A vLLM general plugin (``device_setup.sh`` registers :func:`register`): in every vLLM process with
``VLLM_DEVCLIENT_PROBE_DIR`` set it wraps a few of vLLM's own methods. Each wrapper acts only while the check
has armed its defect in ``mutation.json`` (``probe_files.MutationOrder``; for a whole mutation iteration, from
its first full reset to the end of its reload), and counts each time it changed something in
``defects-<pid>.json``. The reference instrument never reads the order: what breaks is hidden from the proof.

OffloadingConnector (vLLM 0.26: ``CPUOffloadingWorker``, ``CPUOffloadingManager``,
``OffloadingConnectorScheduler``):

- ``store_wrong_block``: a store reads the GPU block after the one planned (an off-by-one in the worker);
- ``store_copies_nothing``: a store is reported finished and successful without a copy;
- ``cpu_slot_shared``: the CPU block allocator hands the slot an earlier allocation's last key still names to
  every later allocation's last key;
- ``load_plan_permuted``: the scheduler's load job lists one group's GPU destinations in reverse;
- ``stale_slot_after_reset``: a full reset keeps half of the index while every slot is handed out again;
- ``load_wrong_cpu_block``: a load reads the CPU block after the one planned;
- ``changed_after_load``: a late write flips one byte of a loaded block after its load finished;
- ``state_ahead``: the lookup reports one token fewer than it found while the load covers the whole chunk
  (vLLM #51094's shape: the restored recurrent state holds a token the engine computes again).

SimpleCPUOffloadConnector (``DmaCopyBackend.launch_copy``):

- ``simple_load_wrong_place``: a load batch's GPU destinations rotated by one;
- ``simple_store_wrong_block``: a store batch's GPU sources rotated by one;
- ``simple_store_copies_nothing``: a store batch queued with no blocks, its event still recorded.

Both connectors:

- ``load_lands_late``: a load is reported finished with no copy (the Offloading worker's job in
  ``get_finished``, the Simple connector's batch queued empty, its event recorded); its copy is made after the
  forward of the step whose new requests' block tables hold its destinations (vLLM's ``Worker.execute_model``,
  once that forward ran on the GPU): the forward read what the blocks held before, and the step ends with the
  right bytes (vLLM #45704's and #47282's class: copies not ordered with the compute stream).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_tests.offload_check.probe_files import PROBE_DIR_ENV, read_order

_lock = threading.Lock()
_installed = False


class _Arming:
    """The armed defect, read from the folder at most every 50 ms, and the counts of what it did."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / f"defects-{os.getpid()}.json"
        self.applied: dict[str, int] = {}
        self.failed: dict[str, str] = {}
        self._name: str | None = None
        self._read_at = 0.0

    def armed(self, name: str) -> bool:
        now = time.monotonic()
        if now - self._read_at > 0.05:
            order = read_order(self.root)
            self._name = order.name if order is not None else None
            self._read_at = now
        return self._name == name

    def acted(self, name: str) -> None:
        with _lock:
            self.applied[name] = self.applied.get(name, 0) + 1
            self._write()

    def could_not(self, name: str, exc: BaseException) -> None:
        """A defect whose vLLM internals differ (another release) does nothing, says why, and never stops
        the engine."""
        with _lock:
            self.failed[name] = repr(exc)
            self._write()

    def _write(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps({"applied": self.applied, "failed": self.failed}))
        os.replace(tmp, self.path)


class _Late:
    """``load_lands_late``'s copies: each waits for the forward of a step that reads one of its blocks."""

    def __init__(self) -> None:
        self.pending: list[tuple[set[int], Callable[[], None]]] = []

    def defer(self, destinations: list[int], land: Callable[[], None]) -> None:
        with _lock:
            self.pending.append(({int(b) for b in destinations}, land))

    def after_step(self, out: Any, armed: bool) -> int:
        """Land every copy a new request of the step ``out`` read (all of them once disarmed): how many."""
        readers = {
            int(b) for new in getattr(out, "scheduled_new_reqs", ()) for ids in new.block_ids for b in ids
        }
        with _lock:
            due = [p for p in self.pending if not armed or p[0] & readers]
            self.pending = [p for p in self.pending if p not in due]
        for _, land in due:
            land()
        return len(due)


_late = _Late()
_own_jobs = itertools.count(-1, -1)  # the late copies' job ids: no job of vLLM's is negative


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _wrap(cls: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    real = getattr(cls, name)
    setattr(cls, name, make(real))


class _WorkerJobs:
    """The Offloading worker's jobs a defect answered for it: reported finished with no copy (``skipped``),
    loads and their GPU destinations (``loads``), and the late copies' own jobs, whose results were reported
    already (``swallowed``)."""

    def __init__(self) -> None:
        self.skipped: list[int] = []
        self.loads: dict[int, list[int]] = {}
        self.swallowed: set[int] = set()


def _submit_store(arm: _Arming, jobs: _WorkerJobs, real: Callable[..., Any]) -> Callable[..., Any]:
    import numpy as np

    def wrapper(self: Any, job_id: int, src_spec: Any, dst_spec: Any) -> Any:
        if arm.armed("store_copies_nothing"):
            jobs.skipped.append(job_id)
            arm.acted("store_copies_nothing")
            return True
        if arm.armed("store_wrong_block"):
            blocks = int(self._store_handler.src_tensors[0].shape[0])
            ids = np.asarray(src_spec.block_ids)
            src_spec.block_ids = np.where(ids + 1 < blocks, ids + 1, 1).astype(ids.dtype)
            arm.acted("store_wrong_block")
        return real(self, job_id, src_spec, dst_spec)

    return wrapper


def _submit_load(arm: _Arming, jobs: _WorkerJobs, real: Callable[..., Any]) -> Callable[..., Any]:
    import numpy as np

    def wrapper(self: Any, job_id: int, src_spec: Any, dst_spec: Any, *a: Any, **k: Any) -> Any:
        if arm.armed("load_wrong_cpu_block"):
            blocks = int(self._load_handler.src_tensors[0].shape[0])
            ids = np.asarray(src_spec.block_ids)
            src_spec.block_ids = ((ids + 1) % blocks).astype(ids.dtype)
            arm.acted("load_wrong_cpu_block")
        if arm.armed("load_lands_late"):
            jobs.skipped.append(job_id)  # reported finished at the next get_finished, nothing copied
            own = next(_own_jobs)

            def land() -> None:
                jobs.swallowed.add(own)
                real(self, own, src_spec, dst_spec, *a, **k)
                _sync()

            _late.defer([int(b) for b in dst_spec.block_ids], land)
            arm.acted("load_lands_late")
            return True
        jobs.loads[job_id] = [int(b) for b in dst_spec.block_ids]
        return real(self, job_id, src_spec, dst_spec, *a, **k)

    return wrapper


def _get_finished(
    arm: _Arming, jobs: _WorkerJobs, result_type: Any, real: Callable[..., Any]
) -> Callable[..., Any]:
    def wrapper(self: Any) -> Any:
        results = list(real(self))
        landed = {r.job_id for r in results} & jobs.swallowed
        jobs.swallowed.difference_update(landed)
        results = [r for r in results if r.job_id not in landed]
        while jobs.skipped:
            results.append(result_type(job_id=jobs.skipped.pop(0), success=True))
        for result in results:
            dst = jobs.loads.pop(result.job_id, None)
            if dst and arm.armed("changed_after_load"):
                gpu = self._load_handler.dst_tensors[0]
                row = gpu[dst[0]]
                row[row.shape[0] // 2 : row.shape[0] // 2 + 1].bitwise_xor_(1)
                arm.acted("changed_after_load")
        return results

    return wrapper


def _offloading_worker(arm: _Arming) -> None:
    from vllm.v1.kv_offload.base import TransferResult
    from vllm.v1.kv_offload.cpu.gpu_worker import CPUOffloadingWorker

    jobs = _WorkerJobs()
    _wrap(CPUOffloadingWorker, "submit_store", functools.partial(_submit_store, arm, jobs))
    _wrap(CPUOffloadingWorker, "submit_load", functools.partial(_submit_load, arm, jobs))
    _wrap(CPUOffloadingWorker, "get_finished", functools.partial(_get_finished, arm, jobs, TransferResult))


def _offloading_manager(arm: _Arming) -> None:
    from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager
    from vllm.v1.kv_offload.cpu.policies.base import BlockStatus

    def allocate(real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, keys: list[Any]) -> list[Any]:
            blocks = real(self, keys)
            if not blocks or not arm.armed("cpu_slot_shared"):
                return blocks  # type: ignore[no-any-return]
            # The slot handed out again is the one an earlier allocation's last key still names, to this
            # allocation's last key: last keys are what every reload loads (a recurrent group loads only its
            # last state), so one of the two reads the other's bytes.
            shared = getattr(self, "_defect_shared_slot", None)
            if shared is None:
                self._defect_shared_slot = int(blocks[-1].block_id)
            elif shared != blocks[-1].block_id:
                blocks[-1] = BlockStatus(shared)
                arm.acted("cpu_slot_shared")
            return blocks  # type: ignore[no-any-return]

        return wrapper

    def reset_cache(real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any) -> None:
            policy = self._policy
            entries = dict(getattr(policy, "blocks", {}) or {})
            real(self)
            if not entries or not arm.armed("stale_slot_after_reset"):
                return
            if not hasattr(self, "_num_evictable_cache_blocks"):
                # vLLM before 0.24 counts evictable blocks elsewhere: act on nothing rather than on half
                arm.could_not("stale_slot_after_reset", AttributeError("no _num_evictable_cache_blocks"))
                return
            kept = 0
            for key, block in entries.items():
                if block.block_id % 2 == 0 and block.is_ready:
                    policy.insert(key, block)
                    self._num_evictable_cache_blocks += 1
                    kept += 1
            if kept:
                arm.acted("stale_slot_after_reset")

        return wrapper

    _wrap(CPUOffloadingManager, "_allocate_blocks", allocate)
    _wrap(CPUOffloadingManager, "reset_cache", reset_cache)


def _offloading_scheduler(arm: _Arming) -> None:
    import numpy as np
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading.scheduler import (
        OffloadingConnectorScheduler as Sched,
    )

    def lookup(real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, req_status: Any) -> Any:
            hit = real(self, req_status)
            if hit and arm.armed("state_ahead"):
                arm.acted("state_ahead")
                return hit - 1
            return hit

        return wrapper

    def after_alloc(real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, request: Any, blocks: Any, num_external_tokens: int) -> None:
            before = set(self._current_batch_load_jobs)
            real(self, request, blocks, num_external_tokens)
            if not arm.armed("load_plan_permuted"):
                return
            for job_id in set(self._current_batch_load_jobs) - before:
                job = self._current_batch_load_jobs[job_id]
                if not hasattr(job, "dst_spec"):  # vLLM before 0.25: transfer_spec, read-only here
                    arm.could_not("load_plan_permuted", AttributeError("TransferJob has no dst_spec"))
                    return
                spec = job.dst_spec
                ids = np.asarray(spec.block_ids).copy()
                start = 0
                for size in spec.group_sizes:
                    if size >= 2:
                        ids[start : start + size] = ids[start : start + size][::-1].copy()
                        spec.block_ids = ids
                        arm.acted("load_plan_permuted")
                        break
                    start += size

        return wrapper

    _wrap(Sched, "_lookup", lookup)
    _wrap(Sched, "update_state_after_alloc", after_alloc)


def _simple(arm: _Arming) -> None:
    from vllm.v1.simple_kv_offload.copy_backend import DmaCopyBackend

    def launch_copy(real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(
            self: Any, src_blocks: list[int], dst_blocks: list[int], is_store: bool, *a: Any, **k: Any
        ) -> Any:
            src, dst = list(src_blocks), list(dst_blocks)
            if not is_store and len(dst) >= 2 and arm.armed("simple_load_wrong_place"):
                dst = dst[1:] + dst[:1]
                arm.acted("simple_load_wrong_place")
            if is_store and len(src) >= 2 and arm.armed("simple_store_wrong_block"):
                src = src[1:] + src[:1]
                arm.acted("simple_store_wrong_block")
            if is_store and src and arm.armed("simple_store_copies_nothing"):
                src, dst = [], []
                arm.acted("simple_store_copies_nothing")
            if not is_store and dst and a and arm.armed("load_lands_late"):
                _late.defer(dst, functools.partial(_simple_land, real, self, src, dst, a[0]))
                src, dst = [], []  # queued empty: its event says done
                arm.acted("load_lands_late")
            return real(self, src, dst, is_store, *a, **k)

        return wrapper

    _wrap(DmaCopyBackend, "launch_copy", launch_copy)


def _simple_land(real: Callable[..., Any], backend: Any, src: list[int], dst: list[int], idx: int) -> None:
    """A deferred Simple load, copied now on the backend's thread into a list of its own, and waited for."""
    done: list[Any] = []
    real(backend, src, dst, False, idx, done)
    deadline = time.monotonic() + 10.0
    while not done and time.monotonic() < deadline:
        time.sleep(0.001)
    for _, event in done:
        event.synchronize()


def _landing(arm: _Arming) -> None:
    """``load_lands_late``'s copies land after the forward of the step that reads them."""
    from vllm.v1.worker.gpu_worker import Worker

    def execute_model(real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, scheduler_output: Any, *a: Any, **k: Any) -> Any:
            output = real(self, scheduler_output, *a, **k)
            if _late.pending:
                _sync()  # the step's forward has run on the GPU
                try:
                    _late.after_step(scheduler_output, arm.armed("load_lands_late"))
                except Exception as exc:  # never stop the engine: say why
                    arm.could_not("load_lands_late", exc)
            return output

        return wrapper

    _wrap(Worker, "execute_model", execute_model)


def register() -> None:
    """The plugin entry point: install every defect once per process (armed by the check only)."""
    global _installed
    root = os.environ.get(PROBE_DIR_ENV)
    with _lock:
        if _installed or not root:
            return
        _installed = True
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    arm = _Arming(path)
    for install in (_offloading_worker, _offloading_manager, _offloading_scheduler, _simple, _landing):
        try:
            install(arm)
        except Exception as exc:  # a release without that class: its defects cannot act, and say so
            with (path / f"defects-errors-{os.getpid()}.txt").open("a") as fh:
                fh.write(f"{install.__name__}: {exc!r}\n")
