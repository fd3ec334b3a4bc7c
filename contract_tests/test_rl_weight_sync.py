"""examples/rl_weight_sync.py on the CPU: everything but CUDA IPC (issue 26; the GPU runner runs the rest).

- The batch the send callable posts is what vLLM's own IPC update info reads back: checked with the
  installed vLLM's `IPCWeightTransferUpdateInfo`, in a process of its own (importing vLLM loads torch).
- The sync flow against both real frontends: pause, start, one batch (exactly the posted update_info reaching
  the engine), finish with the version, resume; a failed send finishes without the version, then resumes. The
  CUDA part, vLLM's `trainer_send_weights`, is played by a function that calls the send callable with an
  update info as that engine builds it (names, dtypes, shapes, IPC handles).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from vllm_devclient import DevClient
from vllm_devclient.testing.frontends import Frontend

pytestmark = pytest.mark.frontend

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "rl_weight_sync.py"
# What reduce_tensor gives per GPU (the handle bytes among plain values), keyed by the GPU's UUID.
HANDLES = [{"GPU-0f3a": (1, (64, 32), b"\x00\x01cuda-ipc", 0, 4096, b"ref", 0, 1)}, {"GPU-0f3a": (2, b"h2")}]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rl_weight_sync", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = _load()


@dataclasses.dataclass
class UpdateInfo:
    """vLLM 0.26's IPCWeightTransferUpdateInfo, field for field (0.33 has no `packed`)."""

    names: list[str]
    dtype_names: list[str]
    shapes: list[list[int]]
    ipc_handles: Any = None
    ipc_handles_pickled: str | None = None
    tensor_sizes: list[int] | None = None
    packed: bool = False


class Tensor:
    def __init__(self, shape: tuple[int, ...], element_size: int) -> None:
        self.shape = shape
        self._element_size = element_size

    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def element_size(self) -> int:
        return self._element_size


PARAMS = [("model.embed_tokens.weight", Tensor((64, 32), 2)), ("lm_head.weight", Tensor((64, 32), 2))]


def send_weights(iterator: Iterator[tuple[str, Any]], trainer_args: Mapping[str, Any]) -> None:
    """trainer_send_weights without CUDA: one unpacked batch of every weight, handed to the send callable."""
    params = list(iterator)
    info = UpdateInfo(
        names=[n for n, _ in params],
        dtype_names=["bfloat16"] * len(params),
        shapes=[list(t.shape) for _, t in params],
        ipc_handles=HANDLES,
    )
    trainer_args["send_mode"](info)


def test_the_posted_batch_is_what_vllms_ipc_update_info_reads(tmp_path: Path) -> None:
    script = tmp_path / "check.py"
    script.write_text(
        "import json, os, pickle, sys\n"
        "os.environ['VLLM_ALLOW_INSECURE_SERIALIZATION'] = '1'\n"
        "from vllm.distributed.weight_transfer.ipc_engine import IPCWeightTransferUpdateInfo as Info\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "import rl_weight_sync\n"
        "handles = pickle.loads(bytes.fromhex(sys.argv[2]))\n"
        "sent = Info(names=['a', 'b'], dtype_names=['bfloat16'] * 2, shapes=[[64, 32], [64, 32]],"
        " ipc_handles=handles)\n"
        "payload = json.loads(json.dumps(rl_weight_sync.http_update_info(sent)))\n"
        "read = Info(**payload)\n"
        "print(json.dumps({'payload': sorted(payload), 'same': read.ipc_handles == handles,"
        " 'names': read.names, 'shapes': read.shapes}))\n"
    )
    import pickle

    done = subprocess.run(
        [sys.executable, str(script), str(EXAMPLE.parent), pickle.dumps(HANDLES).hex()],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["payload"] == ["dtype_names", "ipc_handles_pickled", "names", "shapes"]
    assert got["same"] is True and got["names"] == ["a", "b"] and got["shapes"] == [[64, 32], [64, 32]]


@pytest.fixture
def served(frontend: Frontend) -> Frontend:
    return frontend  # its engine's /is_paused follows the pauses and resumes (the kit's default)


def _steps(frontend: Frontend) -> list[Any]:
    out: list[Any] = []
    for call in frontend.engine.calls:
        if call.kind != "utility" or call.method == "is_scheduler_paused":
            continue
        if call.method == "collective_rpc":
            out.append((call.args[0], (call.args[3] or {}).get("update_info")))
        else:
            out.append((call.method, *call.args[:1]))
    return out


def test_sync_sends_one_batch_between_start_and_finish(served: Frontend) -> None:
    with DevClient(served.base_url) as client:
        report = example.sync(client, PARAMS, send_weights, version="seed-7", max_tokens=4)
    assert "failed" not in report
    assert (report["tensors"], report["bytes"], report["batches"]) == (2, 2 * 64 * 32 * 2, 1)
    assert report["paused_after"] is False
    # The scripted engine answers the same tokens whatever its weights: nothing changed here.
    assert report["answers_before"] == report["answers_after"] and report["answers_changed"] == 0
    assert len(report["answers_after"]) == len(example.PROMPTS)
    batch = example.http_update_info(UpdateInfo(["model.embed_tokens.weight", "lm_head.weight"],
                                                ["bfloat16"] * 2, [[64, 32], [64, 32]], HANDLES))  # fmt: skip
    assert _steps(served) == [
        ("pause_generation", "keep"),
        ("start_weight_update", None),
        ("update_weights", batch),
        ("finish_weight_update", None),
        ("set_weight_version", "seed-7"),
        ("resume_scheduler",),
        ("get_weight_version",),
    ]


def test_a_failed_send_is_finished_without_its_version_then_resumed(served: Frontend) -> None:
    """On vLLM 0.26 with IPC, an update left unfinished made the next request kill the engine (the H200 run,
    gpu_tests/results/rl-2026-12-01): the flow finishes it, without the version, before the resume."""
    with DevClient(served.base_url) as client:
        report = example.sync(client, PARAMS, send_weights, version="seed-8", fail_send=True, max_tokens=4)
    assert report["failed"] == "RuntimeError: the trainer's send failed (--fail-send)"
    assert report["paused_after"] is False and report["batches"] == 0
    assert report["answers_before"] == report["answers_after"]
    assert _steps(served) == [
        ("pause_generation", "keep"),
        ("start_weight_update", None),
        ("finish_weight_update", None),
        ("resume_scheduler",),
        ("get_weight_version",),
    ]
