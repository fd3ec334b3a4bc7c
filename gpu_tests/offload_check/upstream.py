"""A recorded copy of vLLM's own offload matrix, with the commit it was read from.

Source: ``tests/evals/gsm8k/test_gsm8k_offloading.py`` and the ``kv-offload-*`` steps of
``.buildkite/test_areas/lm_eval.yaml``, read at :data:`SOURCE` (the newest copy found: a fork of a recent
vLLM main; ``vllm-project/vllm`` itself was stored only at older commits, whose matrices had no
DeepSeek-V2-Lite case and one threshold per model). Values are copied as written there, nothing derived.

:mod:`.profiles` builds the real profiles from this table; ``gpu_tests/tests/test_offload_profiles.py`` checks
them against the values parsed from upstream's file itself (``gpu_tests/upstream/test_gsm8k_offloading.json``,
written by ``python -m gpu_tests.upstream.parse``), so a wrong value here or in the profiles fails CI.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "COMMON_SERVER_ARGS",
    "NUM_FEWSHOT",
    "NUM_QUESTIONS",
    "OFFLOAD_SYNC_TIMEOUT",
    "SOURCE",
    "STEPS",
    "UPSTREAM_CASES",
    "UpstreamCase",
    "UpstreamStep",
]


@dataclass(frozen=True)
class Source:
    repo: str
    commit: str
    test_path: str
    pipeline_path: str
    note: str


SOURCE = Source(
    repo="nludd25/vllm",
    commit="d0ae40de5b02e9a846c53e86a414c9af770cf027",
    test_path="tests/evals/gsm8k/test_gsm8k_offloading.py",
    pipeline_path=".buildkite/test_areas/lm_eval.yaml",
    note=(
        "fork of vllm-project/vllm main (mid-2026); the newest copy of the test stored in the search index. "
        "vllm-project/vllm was stored at 32a49608 (3 models x 2 connectors, no CPU sizes) and 0e958862 "
        "(KV-event waits, one threshold per model)."
    ),
)

NUM_QUESTIONS = 200
NUM_FEWSHOT = 6  # upstream's NUM_FEWSHOT at SOURCE (the older copies used 5)
OFFLOAD_SYNC_TIMEOUT = 60.0  # seconds the GPU-only reset is retried for
# Every case: server_args = [*COMMON_SERVER_ARGS, "--kv-transfer-config", JSON, *extra_server_args],
# env VLLM_SERVER_DEV_MODE=1 (plus the case's env_dict).
COMMON_SERVER_ARGS: tuple[str, ...] = (
    "--enforce-eager",
    "--max-model-len",
    "4096",
    "--enable-prefix-caching",
    "--no-disable-hybrid-kv-cache-manager",
    "--trust-remote-code",
    "--disable-uvicorn-access-log",
)


@dataclass(frozen=True)
class UpstreamCase:
    """One ``OffloadingModelConfig`` of upstream's ``MODELS``, field for field (defaults written out)."""

    id: str
    model: str
    connector: str
    accuracy_threshold: float
    tolerance: float = 0.05
    extra_server_args: tuple[str, ...] = ()
    cpu_offload_gib: int = 4
    startup_timeout: int = 600
    spec_name: str = "CPUOffloadingSpec"


_TP2_EP = ("--tensor-parallel-size", "2", "--enable-expert-parallel")
_TP4_EP_FP8 = (
    "--tensor-parallel-size",
    "4",
    "--enable-expert-parallel",
    "--kv-cache-dtype",
    "fp8",
    "--block-size",
    "256",
)

UPSTREAM_CASES: tuple[UpstreamCase, ...] = (
    # OffloadingConnector
    UpstreamCase(
        "offloading-nemotron-h-8b",
        "nvidia/Nemotron-H-8B-Base-8K",
        "OffloadingConnector",
        0.39,
        cpu_offload_gib=1,
    ),
    UpstreamCase(
        "offloading-gemma-4-e4b-it", "google/gemma-4-E4B-it", "OffloadingConnector", 0.55, cpu_offload_gib=1
    ),
    UpstreamCase(
        "offloading-qwen3.5-35b",
        "Qwen/Qwen3.5-35B-A3B",
        "OffloadingConnector",
        0.75,
        extra_server_args=_TP2_EP,
        startup_timeout=1200,
    ),
    UpstreamCase(
        "offloading-deepseek-v4-flash",
        "deepseek-ai/DeepSeek-V4-Flash",
        "OffloadingConnector",
        0.90,
        extra_server_args=_TP4_EP_FP8,
        cpu_offload_gib=16,
        startup_timeout=1200,
    ),
    UpstreamCase(
        "offloading-deepseek-v2-lite-tiering-tp2",
        "deepseek-ai/DeepSeek-V2-Lite",
        "OffloadingConnector",
        0.35,
        extra_server_args=("--tensor-parallel-size", "2"),
        cpu_offload_gib=8,
        startup_timeout=1200,
        spec_name="TieringOffloadingSpec",
    ),
    # SimpleCPUOffloadConnector
    UpstreamCase("simple-nemotron-h-8b", "nvidia/Nemotron-H-8B-Base-8K", "SimpleCPUOffloadConnector", 0.45),
    UpstreamCase("simple-gemma-4-e4b-it", "google/gemma-4-E4B-it", "SimpleCPUOffloadConnector", 0.55),
    UpstreamCase(
        "simple-qwen3.5-35b",
        "Qwen/Qwen3.5-35B-A3B",
        "SimpleCPUOffloadConnector",
        0.75,
        extra_server_args=_TP2_EP,
        startup_timeout=1200,
    ),
    UpstreamCase(
        "simple-deepseek-v4-flash",
        "deepseek-ai/DeepSeek-V4-Flash",
        "SimpleCPUOffloadConnector",
        0.90,
        extra_server_args=_TP4_EP_FP8,
        cpu_offload_gib=16,
        startup_timeout=1200,
    ),
)


@dataclass(frozen=True)
class UpstreamStep:
    """A ``kv-offload-*`` Buildkite step: ``pytest -s -v evals/gsm8k/test_gsm8k_offloading.py -k K``."""

    key: str
    label: str
    device: str
    num_devices: int
    timeout_in_minutes: int
    k: str


STEPS: tuple[UpstreamStep, ...] = (
    UpstreamStep(
        "kv-offload-small",
        ":nvidia: (H200 MIG 35GB) LM Eval KV-Offload",
        "h200_35gb",
        1,
        30,
        "nemotron-h-8b or gemma-4-e4b-it",
    ),
    UpstreamStep(
        "kv-offload-medium",
        ":nvidia: (H100) LM Eval KV-Offload Medium",
        "h100",
        2,
        45,
        "qwen3.5-35b or deepseek-v2-lite",
    ),
    UpstreamStep(
        "kv-offload-large", ":nvidia: (H100) LM Eval KV-Offload Large", "h100", 4, 40, "deepseek-v4-flash"
    ),
)
