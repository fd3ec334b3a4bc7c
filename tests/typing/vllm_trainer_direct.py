"""The clients themselves as vLLM's client: `mypy --strict` must reject each line marked `rejected` (their
typed answers and keyword-only version are not vLLM's protocol), as tests/test_weight_sync.py checks."""

from __future__ import annotations

from vllm.distributed.weight_transfer import VLLMWeightSyncClient

from vllm_devclient import AsyncDevClient, DevClient, Fleet

a: VLLMWeightSyncClient = DevClient("http://127.0.0.1:8000")  # rejected
b: VLLMWeightSyncClient = Fleet(["http://127.0.0.1:8000"])  # rejected
c: VLLMWeightSyncClient = AsyncDevClient("http://127.0.0.1:8000")  # rejected
