"""Deprecated: GSM8K moved to :mod:`vllm_devclient.offload_check.gsm8k` (this alias stays one release)."""

import warnings

from vllm_devclient.offload_check.gsm8k import (
    CACHE_DIR_ENV,
    DATA_DIR_ENV,
    GSM8K_SHA256,
    GSM8K_URLS,
    STOP,
    GSM8KDataError,
    GSM8KItem,
    GSM8KPrompt,
    GSM8KResult,
    QuestionResult,
    build_prompts,
    default_cache_dir,
    evaluate_gsm8k,
    evaluate_gsm8k_async,
    extract_answer,
    load_gsm8k,
    load_split,
)

warnings.warn(
    "vllm_devclient.gsm8k moved to vllm_devclient.offload_check.gsm8k; the old name goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "CACHE_DIR_ENV",
    "DATA_DIR_ENV",
    "GSM8K_SHA256",
    "GSM8K_URLS",
    "STOP",
    "GSM8KDataError",
    "GSM8KItem",
    "GSM8KPrompt",
    "GSM8KResult",
    "QuestionResult",
    "build_prompts",
    "default_cache_dir",
    "evaluate_gsm8k",
    "evaluate_gsm8k_async",
    "extract_answer",
    "load_gsm8k",
    "load_split",
]
