"""vLLM's engine-core protocol as the scripted engine speaks it: the message types a frontend sends, the
finish reasons, the ready response an engine registers with, and the record of a message received.

Both vLLM frontends reach their engine core over ZMQ with msgpack payloads; the first frame of every
frontend -> engine message says its type.
"""

from __future__ import annotations

import importlib.metadata
import struct
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from .engine_state import named_arguments

__all__ = [
    "ENGINE_CORE_DEAD",
    "KV_EVENTS_FIELDS",
    "EngineCall",
    "FinishReason",
    "KVEventsConfigError",
    "build_ready_response",
    "check_kv_events_config",
    "failed_call",
    "token_outputs",
    "utility_outputs",
]

# Request types: the first frame of every frontend -> engine message.
_ADD: Final = b"\x00"
_ABORT: Final = b"\x01"
_START_DP_WAVE: Final = b"\x02"
_UTILITY: Final = b"\x03"
ENGINE_CORE_DEAD: Final = b"ENGINE_CORE_DEAD"


class FinishReason:
    """Finish reasons as the engine sends them (``vllm.v1.engine.FinishReason``)."""

    STOP: Final = 0
    LENGTH: Final = 1
    ABORT: Final = 2
    ERROR: Final = 3


def token_outputs(rank: int, request_id: str, tokens: list[int], reason: int) -> list[Any]:
    """EngineCoreOutputs (array_like) with one request's tokens: engine_index, outputs, scheduler_stats,
    timestamp; an EngineCoreOutput is request_id, new_token_ids, new_logprobs, new_prompt_logprobs_tensors,
    pooling_output, finish_reason, stop_reason."""
    return [rank, [[request_id, tokens, None, None, None, reason, None]], None, time.monotonic()]


def utility_outputs(rank: int, utility: list[Any]) -> list[Any]:
    """EngineCoreOutputs (array_like) answering a utility call: engine_index, outputs, scheduler_stats,
    timestamp, utility_output = [call_id, failure_message, [result_type, result] | None]."""
    return [rank, [], None, time.monotonic(), utility]


def failed_call(call_id: int, method: str, message: str) -> list[Any]:
    """A utility_output saying the call failed, as vLLM's engine words it."""
    return [call_id, f"Call to {method} method failed: {message}", None]


@dataclass(frozen=True)
class EngineCall:
    """One message the engine received from a frontend.

    ``kind`` is ``"utility"`` (``method`` is the utility method name, ``args`` its positional
    arguments), ``"add"`` (``method`` is ``"add_request"``, ``args`` is ``(request_id,
    sampling_params)``) or ``"abort"`` (``method`` is ``"abort_requests"``, ``args`` is
    ``(request_ids,)``). ``kwargs`` names them as vLLM's engine does (``call.kwargs["mode"]``).
    """

    kind: Literal["utility", "add", "abort"]
    method: str
    args: tuple[Any, ...]
    time: float
    call_id: int | None = None
    client_index: int = 0

    @property
    def kwargs(self) -> dict[str, Any]:
        """The arguments by vLLM's parameter names, its defaults filled in for those not sent
        (``sleep`` -> ``{"level": 1, "mode": "abort"}``). A method vLLM names no parameters of gives
        ``{"arg0": ..., ...}`` for whatever was sent."""
        return named_arguments(self.method, self.args)


# vLLM's KVEventsConfig, every field of which its engine sends and vllm-rs requires.
KV_EVENTS_FIELDS: Final = (
    "enable_kv_cache_events",
    "publisher",
    "endpoint",
    "replay_endpoint",
    "buffer_steps",
    "hwm",
    "max_queue_size",
    "topic",
)


class KVEventsConfigError(ValueError):
    """A scripted engine's ``kv_events_config`` lacks a field vLLM's engine always sends, or has one it
    never sends (``vllm-rs`` would exit at startup with ``missing field``)."""


def check_kv_events_config(config: Mapping[str, Any]) -> None:
    """Raise :class:`KVEventsConfigError` naming every missing and unknown field of ``config``."""
    missing = [f for f in KV_EVENTS_FIELDS if f not in config]
    unknown = sorted(set(config) - set(KV_EVENTS_FIELDS))
    if not missing and not unknown:
        return
    what = []
    if missing:
        what.append(f"lacks {', '.join(missing)} (vllm-rs exits with `missing field {missing[0]}`)")
    if unknown:
        what.append(f"has {', '.join(unknown)}, which vLLM's KVEventsConfig does not")
    raise KVEventsConfigError(
        f"kv_events_config {' and '.join(what)}: vLLM's engine sends exactly its fields "
        f"({', '.join(KV_EVENTS_FIELDS)}). Use vllm_devclient.testing.kv_events_config() for a complete one, "
        "or PublishingEngine(), which also runs the publisher"
    )


def _installed_vllm_version() -> str:
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return "0.34.0"


def build_ready_response(
    *,
    max_model_len: int,
    num_gpu_blocks: int,
    block_size: int,
    rank: int,
    kv_events_config: Mapping[str, Any] | None,
    enable_sleep_mode: bool,
    weight_transfer_backend: str | None,
) -> dict[str, Any]:
    """The registration map an engine of one rank sends its frontend (a new ``instance_id`` each call)."""
    if kv_events_config is not None:
        check_kv_events_config(kv_events_config)
    return {
        "max_model_len": max_model_len,
        "num_gpu_blocks": num_gpu_blocks,
        "block_size": block_size,
        "dp_stats_address": None,
        "dtype": "bfloat16",
        "vllm_version": _installed_vllm_version(),
        "world_size": 1,
        "data_parallel_size": 1,
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1,
        "decode_context_parallel_size": 1,
        "data_parallel_rank": rank,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 2048,
        "instance_id": uuid.uuid4().hex,
        "supports_lora": False,
        "max_loras": 0,
        "mamba_block_size": None,
        "kv_cache_size_tokens": num_gpu_blocks * block_size,
        "kv_cache_max_concurrency": num_gpu_blocks * block_size / max_model_len,
        "kv_events_config": dict(kv_events_config) if kv_events_config is not None else None,
        "weight_transfer_backend": weight_transfer_backend,
        "enable_sleep_mode": enable_sleep_mode,
        "supports_draft_weight_updates": False,
        "effective_attention_block_size": block_size,
        "coord_store_port": 0,
        "coordinator_input_address": None,
        "coordinator_output_address": None,
    }


# vLLM's msgpack extension type of an array's raw bytes sent inline (`vllm.v1.serial_utils`).
_RAW_VIEW: Final = 3
# The integer dtypes a frontend sends token ids as (numpy's kind and size: Python's `<i4`, vllm-rs's `=u4`),
# by their struct codes.
_INT_CODES: Final[Mapping[str, str]] = {"i4": "i", "i8": "q", "u4": "I", "u8": "Q"}


def prompt_token_ids(value: Any, frames: list[bytes]) -> list[int]:
    """The prompt token ids of an ADD request: a list (vLLM 0.33 and older), or from 0.34 a 32-bit int
    ndarray as vLLM encodes one, `[dtype, shape, data]`, its bytes inline (an extension of type 3) or
    the index of a buffer (a long prompt): vLLM numbers the request itself 0 and the frames after it 1, 2...,
    and `frames` starts with the message type."""
    if value is None:
        return []
    if isinstance(value, list) and len(value) == 3 and isinstance(value[0], str):
        dtype, _, data = value
        raw = frames[1 + data] if isinstance(data, int) else data.data
        order, code = dtype[:1].replace("|", "="), _INT_CODES.get(dtype[1:])
        if order not in "<>=" or code is None:
            raise ValueError(f"prompt token ids sent as {dtype!r}, which the kit does not read")
        return [t[0] for t in struct.iter_unpack(order + code, bytes(raw))]
    return list(value)
