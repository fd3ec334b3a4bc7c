"""NCCL weight sync to a fleet on a real GPU (issue 50, item 1): two servers at TP1 (Python and Rust
frontends, tiny-llama, `--weight-transfer-config '{"backend": "nccl"}'`) and a trainer process running vLLM's
`NCCLTrainerWeightTransferEngine` over `WeightSync(Fleet(urls))` (gpu_tests/rl/nccl_fleet_trainer.py). Each
server gets its own rank offset; the broadcast of weights drawn from another seed changes both servers'
greedy answers.

The trainer and the servers each need their own GPU (three): NCCL refuses a communicator whose ranks share
a device ("Duplicate GPU detected", NCCL 2.5 on; `gpu_tests/runner/nccl_shared_gpu.py` asks a device).
Skipped, saying which, without vllm, without vLLM's trainer engine (`trainer_init(client=...)`, vLLM 0.28+),
or with fewer than three NVIDIA GPUs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from gpu_tests.conftest import REPO_ROOT, environment_skip_reason, report_dir, server_env

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(1500)]

PROMPTS = ("The capital of France is", "1, 2, 3, 4,", "def fibonacci(n):", "Once upon a time")
NCCL_ARGS = ("--weight-transfer-config", json.dumps({"backend": "nccl"}))


DEVICES = ("0", "1", "2")  # CUDA_VISIBLE_DEVICES of the trainer and of each server


def _skip_reason() -> str | None:
    reason = environment_skip_reason()
    if reason is not None:
        return reason
    from gpu_tests.offload_check import gpu_count

    if gpu_count() < len(DEVICES):
        return (
            f"{gpu_count()} GPU(s) visible; a trainer and two servers need {len(DEVICES)}: NCCL refuses "
            "ranks that share a GPU (Duplicate GPU detected)"
        )
    try:
        from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerWeightTransferEngine
    except ImportError:
        return "this vLLM has no NCCLTrainerWeightTransferEngine (vLLM 0.28+)"
    if not hasattr(NCCLTrainerWeightTransferEngine, "trainer_init"):
        return "this vLLM's NCCLTrainerWeightTransferEngine has no trainer_init (vLLM 0.28+)"
    return None


@pytest.fixture(scope="module")
def servers() -> Iterator[list[str]]:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    from gpu_tests.offload_check.profiles import PROFILES, resolve_model
    from gpu_tests.offload_check.server import VllmServer
    from gpu_tests.rl.run_rl import FRONTENDS, PROFILE, server_config

    out = report_dir() / "nccl-fleet"
    started: list[VllmServer] = []
    try:
        for frontend, device in zip(FRONTENDS, DEVICES[1:], strict=True):
            config = server_config(
                resolve_model(PROFILES[PROFILE]), frontend, server_args=NCCL_ARGS,
                log_path=out / f"{frontend}.log", transfer=False, sleep=False,
            )  # fmt: skip
            config = dataclasses.replace(
                config, env={**config.env, **server_env(), "CUDA_VISIBLE_DEVICES": device}
            )
            started.append(VllmServer(config).start(wait=False))
        for server in started:
            server.start(wait=True)
        yield [s.base_url for s in started]
    finally:
        for server in started:
            server.stop()


def _answers(url: str) -> list[str]:
    from vllm_devclient import DevClient

    with DevClient(url) as client:
        return [client.completion(p, max_tokens=16, temperature=0).text for p in PROMPTS]


def test_one_trainer_broadcasts_to_two_servers_with_a_rank_offset_each(servers: list[str]) -> None:
    from gpu_tests.offload_check.profiles import PROFILES, resolve_model
    from gpu_tests.rl.run_rl import PROFILE

    before = {url: _answers(url) for url in servers}
    report_path = report_dir() / "nccl-fleet" / "trainer.json"
    report_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **server_env(), "CUDA_VISIBLE_DEVICES": DEVICES[0]}
    cmd = [
        sys.executable,
        "-m",
        "gpu_tests.rl.nccl_fleet_trainer",
        "--model",
        resolve_model(PROFILES[PROFILE]),
    ]
    cmd += [arg for url in servers for arg in ("--url", url)] + ["--report", str(report_path)]
    done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    assert done.returncode == 0, f"trainer failed: {report or done.stderr[-3000:]}"
    assert report["world_size"] == 1 + len(servers)  # TP1 each: ranks 1 and 2 after the trainer's 0
    after = {url: _answers(url) for url in servers}
    for url in servers:
        assert after[url] != before[url], f"{url} still answers as before the broadcast"
    # Both servers now serve the same (broadcast) weights: the same greedy answers.
    assert after[servers[0]] == after[servers[1]]
    print(json.dumps({"report": report, "before": before, "after": after}, indent=1))
