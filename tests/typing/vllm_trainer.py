"""A trainer as a vLLM 0.33 user writes it, checked with `mypy --strict` by tests/test_weight_sync.py: vLLM's
trainer engines take WeightSync over a DevClient, a Fleet or the async clients as their client."""

from __future__ import annotations

import torch
from vllm.distributed.weight_transfer import ModuleSource, VLLMWeightSyncClient
from vllm.distributed.weight_transfer.ipc_engine import IPCTrainerInitInfo, IPCTrainerWeightTransferEngine
from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo, NCCLTrainerWeightTransferEngine

from vllm_devclient import AsyncDevClient, AsyncFleet, DevClient, Fleet, WeightSync


def ipc_step(url: str, model: torch.nn.Module) -> None:
    client: VLLMWeightSyncClient = WeightSync(DevClient(url))
    engine = IPCTrainerWeightTransferEngine.trainer_init(
        IPCTrainerInitInfo(rank=0), client=client, source=ModuleSource(model)
    )
    engine.send_weights()


def nccl_step(urls: list[str], model: torch.nn.Module) -> None:
    info = NCCLTrainerInitInfo(rank=0, master_address="10.0.0.1", master_port=29500, world_size=1 + len(urls))
    engine = NCCLTrainerWeightTransferEngine.trainer_init(
        info, client=WeightSync(Fleet(urls)), source=ModuleSource(model)
    )
    engine.send_weights()


def async_clients(url: str) -> list[VLLMWeightSyncClient]:
    return [WeightSync(AsyncDevClient(url)), WeightSync(AsyncFleet([url]))]
