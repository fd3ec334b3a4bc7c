"""Test-only instruments that run inside vLLM's engine processes and prove what the KV path did, and the
defect catalogue they are graded on.

- ``recorder.RecordingScheduler`` (``--scheduler-cls``): the KV-cache layout, per request how its prompt was
  served (GPU prefix cache, connector, computed), and the OffloadingConnector's load plans. Any connector.
- ``reference.KVProofWorker`` (``--worker-extension-cls``): reference digests of every block where the model
  computes it, checked at each request's first use (``book.py``), and the poison. Any connector.
- ``defects`` (a vLLM plugin) injects the catalogue (``catalogue.py``) into vLLM's own offloading code.

They talk to the check through the folder named by ``VLLM_DEVCLIENT_PROBE_DIR``
(``gpu_tests.offload_check.probe_files``). ``instruments.INSTRUMENTS`` is what the check is given
(``--instruments gpu_tests.kv_proof.instruments:INSTRUMENTS``); this package imports neither vLLM nor torch.
"""

from __future__ import annotations

SERVER_ARGS = (
    "--scheduler-cls",
    "gpu_tests.kv_proof.recorder.RecordingScheduler",
    "--worker-extension-cls",
    "gpu_tests.kv_proof.reference.KVProofWorker",
)
POISON_RPC = "kv_proof_poison"
