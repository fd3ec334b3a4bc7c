"""Test-only instruments that run inside vLLM's engine processes and prove what the KV path did.

- ``recorder.RecordingScheduler`` (``--scheduler-cls``): the KV-cache layout, and per request how its prompt
  was served (GPU prefix cache, connector, computed). Any connector.
- ``spec.ProvingCPUOffloadingSpec`` (the OffloadingConnector's ``spec_name``/``spec_module_path``): the byte
  ledger of every stored and reloaded block, the load plans, and the mutation catalogue (``catalogue.py``,
  ``mutations.py``).

They talk to the check through the folder named by ``VLLM_DEVCLIENT_PROBE_DIR``
(``vllm_devclient.offload_check.probe_files``). ``instruments.INSTRUMENTS`` is what the check is given
(``--instruments gpu_tests.kv_proof.instruments:INSTRUMENTS``); this package imports neither vLLM nor torch.
"""

from __future__ import annotations

SCHEDULER_ARGS = ("--scheduler-cls", "gpu_tests.kv_proof.recorder.RecordingScheduler")
OFFLOADING_EXTRA = {"spec_name": "ProvingCPUOffloadingSpec", "spec_module_path": "gpu_tests.kv_proof.spec"}
