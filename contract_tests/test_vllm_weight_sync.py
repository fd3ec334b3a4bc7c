"""vLLM 0.33's own trainer-side engines (`vllm.distributed.weight_transfer`) driving `WeightSync` over our
DevClient and Fleet against both real frontends, beside vLLM's own `HTTPVLLMWeightSyncClient`.

Only the engines' data plane is played on the CPU (what needs a GPU: the device UUID, CUDA IPC export,
`ipc_collect`, the NCCL communicator and broadcast); every call they make on their client is vLLM's own.
IPC runs unpacked (vLLM's packed producer allocates its buffer on "cuda").
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import pickle
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from cpu_trainer import cpu_nccl_trainer

from vllm_devclient import DevClient, EngineCallError, Fleet, FleetError, WeightSync
from vllm_devclient.testing.engine_actions import Raise, Return
from vllm_devclient.testing.frontends import Frontend

if TYPE_CHECKING:
    import torch
    from vllm.distributed.weight_transfer import ModuleSource, VLLMWeightSyncClient
    from vllm.distributed.weight_transfer.base import WeightSource
    from vllm.distributed.weight_transfer.ipc_engine import IPCTrainerWeightTransferEngine

pytestmark = [pytest.mark.needs("vllm"), pytest.mark.frontend]

GPU_UUID = "GPU-00000000-0000-0000-0000-00000000cafe"


def cpu_reduce_tensor(tensor: torch.Tensor) -> tuple[Any, tuple[Any, ...]]:
    """`reduce_tensor` of a CUDA tensor, shaped alike for a CPU one: (rebuild function, its arguments: the
    tensor's type, size, stride, offset, storage type, dtype, device, handle bytes, ref counter ...)."""
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    storage = tensor.untyped_storage()
    handle = f"cuda-ipc:{tensor.data_ptr():x}".encode()
    return rebuild_cuda_tensor, (
        type(tensor), tensor.size(), tensor.stride(), tensor.storage_offset(), type(storage), tensor.dtype,
        0, handle, storage.nbytes(), 0, tensor.requires_grad, b"ref-counter", 0, b"event", False,
    )  # fmt: skip


@functools.cache
def cpu_ipc_trainer() -> type[IPCTrainerWeightTransferEngine]:
    """The engine class, made on first use (as cpu_trainer.py's NCCL one: collection imports no vLLM)."""
    from vllm.distributed.weight_transfer import TrainerWeightTransferEngine
    from vllm.distributed.weight_transfer.ipc_engine import IPCTrainerWeightTransferEngine

    class CpuIPCTrainer(IPCTrainerWeightTransferEngine):
        """vLLM's IPC trainer engine without CUDA: built by its own `trainer_init`; only the device is
        faked."""

        def __init__(self, **kwargs: Any) -> None:
            packed = kwargs.pop("packed", False)
            size = kwargs.pop("packed_buffer_size_bytes")
            TrainerWeightTransferEngine.__init__(self, **kwargs)
            self.packed, self.packed_buffer_size_bytes = packed, size
            self.device_index, self.gpu_uuid = 0, GPU_UUID

        @staticmethod
        def _post_send_sync() -> None:
            pass  # torch.cuda.ipc_collect()

    return CpuIPCTrainer


@pytest.fixture(autouse=True)
def _cpu_ipc(monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm.distributed.weight_transfer import ipc_engine

    monkeypatch.setattr(ipc_engine, "reduce_tensor", cpu_reduce_tensor)
    # What the server needs to read ipc_handles_pickled; the test reads the batch back the same way.
    monkeypatch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")


def _rpcs(fe: Frontend) -> list[tuple[str, Any]]:
    """The weight-transfer steps the engine got: (worker method, its kwargs' payload) in order."""
    out: list[tuple[str, Any]] = []
    for c in fe.engine.calls:
        if c.kind == "utility" and c.method == "collective_rpc":
            kwargs = c.args[3] or {}
            out.append((c.args[0], kwargs.get("update_info", kwargs.get("init_info"))))
        elif c.kind == "utility" and c.method == "set_weight_version":
            out.append(("set_weight_version", c.args[0]))
    return out


def _ipc_round(client: VLLMWeightSyncClient, source: WeightSource) -> None:
    from vllm.distributed.weight_transfer.ipc_engine import IPCTrainerInitInfo

    engine = cpu_ipc_trainer().trainer_init(IPCTrainerInitInfo(rank=0), client=client, source=source)
    engine.send_weights()


def test_ipc_engine_over_devclient_sends_what_vllms_http_client_sends(
    frontend: Frontend, source: ModuleSource
) -> None:
    """The same round through vLLM's HTTPVLLMWeightSyncClient and through WeightSync(DevClient): the
    engine receives the same steps and the same batch, byte for byte, IPC handles pickled."""
    from vllm.distributed.weight_transfer import HTTPVLLMWeightSyncClient, VLLMWeightSyncClient
    from vllm.distributed.weight_transfer.ipc_engine import IPCWeightTransferUpdateInfo

    _ipc_round(HTTPVLLMWeightSyncClient(frontend.base_url), source)
    theirs = _rpcs(frontend)
    frontend.engine.clear_calls()
    with DevClient(frontend.base_url) as client:
        sync = WeightSync(client)
        assert isinstance(sync, VLLMWeightSyncClient)
        _ipc_round(sync, source)
    ours = _rpcs(frontend)
    assert [step for step, _ in ours] == [
        "init_weight_transfer_engine", "start_weight_update", "update_weights", "finish_weight_update",
    ]  # fmt: skip
    assert ours == theirs
    assert ours[0][1] == {"packed": False}
    batch = ours[2][1]
    assert "ipc_handles" not in batch and isinstance(batch["ipc_handles_pickled"], str)
    # The server's own reader gets the handles back as the trainer exported them.
    read = IPCWeightTransferUpdateInfo(**batch)
    names = [name for name, _ in source.iter_full()]
    assert read.names == names
    assert read.shapes == [list(t.shape) for _, t in source.iter_full()]
    exported = [{GPU_UUID: cpu_reduce_tensor(t.detach().contiguous())[1]} for _, t in source.iter_full()]
    assert read.ipc_handles == exported


def test_nccl_engine_over_devclient(frontend: Frontend, source: ModuleSource) -> None:
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

    info = NCCLTrainerInitInfo(rank=0, master_address="127.0.0.1", master_port=29512, world_size=2)
    with DevClient(frontend.base_url) as client:
        engine = cpu_nccl_trainer().trainer_init(info, client=WeightSync(client), source=source)
        engine.send_weights()
        engine.send_weights()  # unchanged metadata: vLLM sends an empty update info the second time
    steps = _rpcs(frontend)
    assert [s for s, _ in steps] == ["init_weight_transfer_engine"] + [
        "start_weight_update", "update_weights", "finish_weight_update"
    ] * 2  # fmt: skip
    init = steps[0][1]
    assert (init["master_address"], init["master_port"], init["rank_offset"], init["world_size"]) == (
        "127.0.0.1", 29512, 1, 2,
    )  # fmt: skip
    names = [m.name for m in source.metadata]
    assert steps[2][1]["names"] == names and engine.sent == names
    assert steps[5][1]["names"] == []


@pytest.fixture
def both(python_frontend: Frontend, rust_frontend: Frontend, reset_engines: None) -> Iterator[Fleet]:
    with Fleet([python_frontend.base_url, rust_frontend.base_url]) as fleet:
        yield fleet


def test_ipc_engine_over_a_fleet_of_both_frontends(
    both: Fleet, python_frontend: Frontend, rust_frontend: Frontend, source: ModuleSource
) -> None:
    from vllm.distributed.weight_transfer import VLLMWeightSyncClient

    sync = WeightSync(both)
    assert isinstance(sync, VLLMWeightSyncClient)
    _ipc_round(sync, source)
    py, rs = _rpcs(python_frontend), _rpcs(rust_frontend)
    assert [s for s, _ in py] == [
        "init_weight_transfer_engine", "start_weight_update", "update_weights", "finish_weight_update",
    ]  # fmt: skip
    assert py == rs


def test_a_fleet_start_failing_on_one_target_raises_and_finishes_the_other(
    both: Fleet, python_frontend: Frontend, rust_frontend: Frontend, source: ModuleSource
) -> None:
    # init goes through, then start fails on the Rust frontend's engine only.
    rust_frontend.engine.script("collective_rpc", [Return([None]), Raise("no memory for the reload")])
    with pytest.raises(FleetError) as caught:
        _ipc_round(WeightSync(both), source)
    err = caught.value
    assert err.operation == "start_weight_update" and list(err.errors) == [rust_frontend.base_url]
    assert isinstance(err.errors[rust_frontend.base_url], EngineCallError)
    assert err.result.rollback is not None and list(err.result.rollback.ok) == [python_frontend.base_url]
    assert [s for s, _ in _rpcs(python_frontend)] == [
        "init_weight_transfer_engine", "start_weight_update", "finish_weight_update",
    ]  # fmt: skip
    assert [s for s, _ in _rpcs(rust_frontend)] == ["init_weight_transfer_engine", "start_weight_update"]


def test_a_fleet_batch_failing_on_one_target_finishes_the_update_on_every_target(
    both: Fleet, python_frontend: Frontend, rust_frontend: Frontend, source: ModuleSource
) -> None:
    python_frontend.engine.script(
        "collective_rpc", [Return([None]), Return([None]), Raise("bad batch"), Return([None])]
    )
    with pytest.raises(FleetError) as caught:
        _ipc_round(WeightSync(both), source)
    err = caught.value
    assert err.operation == "update_weights" and list(err.errors) == [python_frontend.base_url]
    assert err.result.rollback is not None and err.result.rollback.all_ok
    for fe in (python_frontend, rust_frontend):
        steps = [s for s, _ in _rpcs(fe)]
        assert steps == [
            "init_weight_transfer_engine", "start_weight_update", "update_weights", "finish_weight_update",
        ]  # fmt: skip
    # Finished without a version: nothing set one.
    assert not python_frontend.engine.calls_for("set_weight_version")


def test_a_failed_batch_on_one_client_is_finished_and_raised_typed(
    frontend: Frontend, source: ModuleSource
) -> None:
    frontend.engine.script(
        "collective_rpc", [Return([None]), Return([None]), Raise("bad batch"), Return([None])]
    )
    with DevClient(frontend.base_url) as client, pytest.raises(EngineCallError) as caught:
        _ipc_round(WeightSync(client), source)
    assert caught.value.engine_message == "bad batch"
    assert [s for s, _ in _rpcs(frontend)][-1] == "finish_weight_update"


def test_the_pickled_batch_is_vllms_own(source: ModuleSource) -> None:
    """The body update_weights sends for an IPC batch is what vLLM's HTTP client would send for it."""
    from vllm.distributed.weight_transfer.clients import _json_safe_update_payload
    from vllm.distributed.weight_transfer.ipc_engine import IPCWeightTransferUpdateInfo

    from vllm_devclient.routes import endpoint

    handles = [{GPU_UUID: cpu_reduce_tensor(t)[1]} for _, t in source.iter_full()]
    info = dataclasses.asdict(
        IPCWeightTransferUpdateInfo(names=["a", "b", "c", "d"], dtype_names=["float32"] * 4,
                                    shapes=[[3, 4], [3], [2, 3], [2]], ipc_handles=handles)
    )  # fmt: skip
    one = endpoint("update_weights", update_info=info)
    per_worker = endpoint("update_weights", update_info=[info])
    assert one.body == {"update_info": _json_safe_update_payload(info)}
    assert per_worker.body == {"update_info": _json_safe_update_payload([info])}
    sent = one.body["update_info"]["ipc_handles_pickled"]
    assert pickle.loads(base64.b64decode(sent)) == handles
