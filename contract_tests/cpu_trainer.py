"""vLLM's NCCL trainer engine with its communicator and broadcast played on the CPU, for the weight-sync
contract tests (test_vllm_weight_sync.py, test_nccl_fleet.py): everything but the NCCL calls is vLLM's own,
the checks of every pair against the metadata the workers were told included."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerWeightTransferEngine

__all__ = ["cpu_nccl_trainer"]


@functools.cache
def cpu_nccl_trainer() -> type[NCCLTrainerWeightTransferEngine]:
    """The engine class, made on first use: importing this module imports no vLLM (pytest-xdist's workers
    each collect the whole suite; only the one running these tests pays for vLLM and torch)."""
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerWeightTransferEngine

    class CpuNCCLTrainer(NCCLTrainerWeightTransferEngine):
        """`sent`: the names the last broadcast sent."""

        sent: list[str] = []

        def _open_trainer_endpoint(self, init_info: Any) -> None:
            self.sent = []

        def _broadcast(self, *args: Any) -> None:
            # The hook is `(source, meta)` in vLLM 0.33 and `(meta, src)` from 0.34 (the engine's own source).
            source, meta = (self.source, args[0]) if isinstance(args[0], list) else (args[0], args[1])
            assert source is not None
            self.sent = [name for name, _ in self._checked_iter(source, meta)]

        def _post_send_sync(self) -> None:
            pass

    return CpuNCCLTrainer
