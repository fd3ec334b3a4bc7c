"""Test-only: reference digests taken where the KV is computed, checked where a request first uses it.

Given to ``vllm serve`` as ``--worker-extension-cls gpu_tests.kv_proof.reference.KVProofWorker`` with
``VLLM_DEVCLIENT_PROBE_DIR`` set. Importing this module (vLLM does, in each worker, before it builds the
worker) wraps two methods of vLLM's GPU ``Worker``, the same for the V1 and the V2 model runner and for every
KV connector, since the instrument (``digests.Proof``) reads only what the scheduler hands the worker and the
KV tensors:

- ``initialize_from_config``: once the KV cache exists, its blocks are viewed as rows of bytes, by group.
- the model runner's forward: right before it, on the compute stream, every block a request at its first
  step starts from (GPU prefix-cache hits and connector loads alike) is digested and checked against the
  book: the bytes the forward reads, so a copy that lands after the forward cannot pass (vLLM #45704's and
  #47282's class: copies not ordered with the compute stream). The point is the V1 runner's
  ``_model_forward`` or, in the V2 runner, its KV connector's ``pre_forward`` (after the connector started its
  loads); on a runner with neither, the start of ``execute_model`` (named in the snapshot: ``read_point``).
- ``execute_model``: after each step, on the worker's stream (so after the forward wrote its KV), every
  prompt block the step completed is digested and recorded under its key (``book.py``): for an attention
  group each block, for a recurrent group the state at a block boundary (every boundary with
  ``mamba_cache_mode=all``, else where the step ended on one); then one line per first-use request goes to
  ``firstuse-<pid>.jsonl`` with each block's verdict at the read. A block another request of the same step
  completes is checked after the step (that forward writes it).

The worker gains ``kv_proof_poison`` for ``/collective_rpc``: every block but the null block is filled with
0x41 bytes (finite in every float format), so a load that copies nothing, or part of a block, leaves what no
computation leaves. Nothing here reads the defect catalogue's order: the proof does not know what is broken.
"""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path
from typing import Any

from vllm.v1.worker.gpu_worker import Worker

from gpu_tests.kv_proof.digests import Proof
from gpu_tests.kv_proof.read_point import WORKER_POINT, install_read_point
from gpu_tests.offload_check.probe_files import PROBE_DIR_ENV


def _root() -> Path | None:
    root = os.environ.get(PROBE_DIR_ENV)
    if not root:
        return None
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


_real_init = Worker.initialize_from_config
_real_execute = Worker.execute_model


def _initialize_from_config(self: Any, kv_cache_config: Any, *args: Any, **kwargs: Any) -> Any:
    result = _real_init(self, kv_cache_config, *args, **kwargs)
    root = _root()
    if root is not None and getattr(self, "_kv_proof", None) is None:
        try:
            forward_context = self.vllm_config.compilation_config.static_forward_context
            self._kv_proof = Proof(kv_cache_config, forward_context, root)
            self._kv_proof.read_point = install_read_point(self, self._kv_proof)
            self._kv_proof.flush(force=True)
        except Exception:
            error = f"reference instrument: {traceback.format_exc(limit=4)}"[-1500:]
            with (root / f"firstuse-{os.getpid()}.jsonl").open("a") as fh:
                fh.write(json.dumps({"error": error}) + "\n")
    return result


def _execute_model(self: Any, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
    proof = getattr(self, "_kv_proof", None)
    if proof is not None:
        proof.pending = scheduler_output
        if proof.read_point == WORKER_POINT:
            proof.read()
    try:
        output = _real_execute(self, scheduler_output, *args, **kwargs)
    finally:
        if proof is not None:
            proof.pending = None  # a step without a forward reads nothing
    if proof is not None:
        try:
            proof.after_step(scheduler_output)
        except Exception:  # the instrument must never stop the engine; the check reads the error
            proof.error("after_step")
    return output


if not getattr(Worker, "_vllm_devclient_kv_proof", False):
    Worker.initialize_from_config = _initialize_from_config
    Worker.execute_model = _execute_model
    Worker._vllm_devclient_kv_proof = True


class KVProofWorker:
    """Mixed into vLLM's worker class (``--worker-extension-cls``): the poison, for ``/collective_rpc``."""

    def kv_proof_poison(self) -> dict[str, int]:
        proof = getattr(self, "_kv_proof", None)
        if proof is None:
            return {"blocks": 0, "regions": 0}
        return proof.poison()  # type: ignore[no-any-return]
