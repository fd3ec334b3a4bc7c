"""A vLLM worker extension for the RL checks: methods the GPU worker gains, called through `/collective_rpc`,
one answer per rank (`--worker-extension-cls gpu_tests.rl.worker_extension.RLWorkerExtension`).

- `weight_checksums`: a SHA-256 of every parameter's bytes, by vLLM's parameter names, for releases without
  `/weight_checker` (vLLM 0.26): two servers hold the same weights when their checksums are equal.
- `rank_info`: who answered (rank, local rank, device, process), for `collective_rpc` on real workers.

Runs inside the worker only (torch, a GPU); imported by vLLM from this repository on PYTHONPATH.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any


class RLWorkerExtension:
    """Mixed into vLLM's worker class: `self` is the worker (`model_runner`, `rank`, `local_rank`,
    `device`)."""

    model_runner: Any
    rank: int
    local_rank: int

    def weight_checksums(self) -> dict[str, str]:
        import torch

        out = {}
        for name, param in self.model_runner.model.named_parameters():
            data = param.detach().contiguous().view(-1).view(torch.uint8).cpu().numpy().tobytes()
            out[name] = hashlib.sha256(data).hexdigest()
        return out

    def rank_info(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "local_rank": self.local_rank,
            "device": str(getattr(self, "device", "")),
            "pid": os.getpid(),
        }
