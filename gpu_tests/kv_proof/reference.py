"""Test-only: reference digests taken where the KV is computed, checked where a request first uses it.

Given to ``vllm serve`` as ``--worker-extension-cls gpu_tests.kv_proof.reference.KVProofWorker`` with
``VLLM_DEVCLIENT_PROBE_DIR`` set. Importing this module (vLLM does, in each worker, before it builds the
worker) wraps two methods of vLLM's GPU ``Worker``, the same for the V1 and the V2 model runner and for every
KV connector, since the instrument (``digests.Proof``) reads only what the scheduler hands the worker and the
KV tensors:

- ``initialize_from_config``: once the KV cache exists, its blocks are viewed as rows of bytes, by group.
- ``execute_model``: after each step, on the worker's stream (so after the forward wrote its KV),
  (1) every prompt block the step completed is digested and recorded under its key (``book.py``): for an
  attention group each block, for a recurrent group the state at a block boundary (every boundary with
  ``mamba_cache_mode=all``, else where the step ended on one); (2) every request at its first step is
  checked block by block against the book over the prefix it started from, and one line goes to
  ``firstuse-<pid>.jsonl``. A state a request starts inside of (``all`` mode: the block's end state, vLLM
  #51094's load) is digested before the step, since the step computes on it in place. Loads of both
  connectors finish before their request's first step (they are asynchronous), and a block computed in the
  same step is recorded before the checks.

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
        except Exception:
            error = f"reference instrument: {traceback.format_exc(limit=4)}"[-1500:]
            with (root / f"firstuse-{os.getpid()}.jsonl").open("a") as fh:
                fh.write(json.dumps({"error": error}) + "\n")
    return result


def _execute_model(self: Any, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
    proof = getattr(self, "_kv_proof", None)
    if proof is not None:
        try:
            proof.before_step(scheduler_output)
        except Exception:  # the instrument must never stop the engine; the check reads the error
            proof.error("before_step")
    output = _real_execute(self, scheduler_output, *args, **kwargs)
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
