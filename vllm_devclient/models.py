"""Typed answers. Every model keeps fields it does not know, so a newer server never breaks parsing."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AbortRequestsResult",
    "BarrierResult",
    "Completion",
    "CompletionChoice",
    "CompletionUsage",
    "KVCacheReleaseResult",
    "KVEventSource",
    "LoadInfo",
    "MessageResult",
    "ModelCard",
    "ModelList",
    "PromptTokensDetails",
    "ResetPrefixCacheResult",
    "ServerInfo",
    "SleepResult",
    "StatusResult",
    "TokenizerInfo",
    "VersionInfo",
    "WakeUpResult",
    "WeightCheckResult",
    "WeightInfo",
    "WeightVersionResult",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)


class VersionInfo(_Model):
    version: str
    rust_frontend_version: str | None = None

    @property
    def frontend(self) -> Literal["python", "rust"]:
        """The Rust frontend adds rust_frontend_version to /version; the Python one does not."""
        return "rust" if self.rust_frontend_version is not None else "python"


class ModelCard(_Model):
    id: str
    object: str = "model"
    owned_by: str | None = None
    root: str | None = None
    max_model_len: int | None = None


class ModelList(_Model):
    object: str = "list"
    data: list[ModelCard]


class ResetPrefixCacheResult(_Model):
    """`success` is None only when an old server answered a bare 200 and so could not say."""

    success: bool | None
    status_code: int = 200


class SleepResult(_Model):
    status: str | None = None
    level: int | None = None


class WakeUpResult(_Model):
    """A partial wake (some tags still asleep) answers status "sleeping"."""

    status: str | None = None
    tags: list[str] | None = None

    @property
    def awake(self) -> bool | None:
        """True when the engine is fully awake; None when an old server did not say."""
        return None if self.status is None else self.status == "awake"


class StatusResult(_Model):
    status: str


class KVCacheReleaseResult(_Model):
    """`status` ("kv_cache_released") is None only when a server answered a bare 200 (vLLM 0.31.0): the
    engine released the memory and the server could not say so."""

    status: str | None = None


class CheckpointStatus(_Model):
    """The process-checkpoint state (vLLM 0.34): running, preparing, prepared, restoring or failed, and
    `error`, why it failed. `status_code` is the HTTP status it came with (/checkpoint/status: 200 once
    prepared, 503 until then, 500 after a failure)."""

    state: str
    error: str | None = None
    status_code: int | None = None

    @property
    def prepared(self) -> bool:
        """Safe to capture."""
        return self.state == "prepared"

    @property
    def failed(self) -> bool:
        return self.state == "failed"


class FaultToleranceAccepted(_Model):
    """A fault-tolerance instruction the server accepted (202): it runs in the background."""

    request_id: str
    message: str | None = None


class AbortRequestsResult(_Model):
    status: str | None = None
    aborted: int | None = None


class MessageResult(_Model):
    message: str | None


class WeightVersionResult(_Model):
    success: bool | None = None
    new_version: str | None = None


class WeightInfo(_Model):
    weight_version: str | None


class ServerInfo(_Model):
    """`config` is the server's configuration, whichever frontend sent it: a dict with config_format="json",
    a string with "text". The Python frontend sends it as `vllm_config`; vllm-rs from 0.34.0 sends
    `vllm_config: null` and its own as `rust_frontend_config` (before 0.34.0 as `vllm_config`)."""

    vllm_config: dict[str, Any] | str | None = None
    rust_frontend_config: dict[str, Any] | str | None = None
    vllm_env: dict[str, Any] = Field(default_factory=dict)
    system_env: dict[str, Any] = Field(default_factory=dict)

    @property
    def config(self) -> dict[str, Any] | str | None:
        return self.vllm_config if self.vllm_config is not None else self.rust_frontend_config


class KVEventSource(_Model):
    """Where one data-parallel rank publishes its KV-cache events."""

    endpoint: str
    replay_endpoint: str | None = None
    topic: str = ""
    enable_kv_cache_events: bool | None = None
    publisher: str | None = None


class BarrierResult(_Model):
    """What reset_prefix_cache_until_success did before the reset went through."""

    attempts: int
    engine_steps: int
    elapsed_s: float


class CompletionChoice(_Model):
    text: str
    index: int = 0
    finish_reason: str | None = None


class PromptTokensDetails(_Model):
    """`usage.prompt_tokens_details` (servers started with `--enable-prompt-tokens-details`)."""

    cached_tokens: int | None = None


class CompletionUsage(_Model):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tokens_details: PromptTokensDetails | None = None

    @property
    def cached_tokens(self) -> int | None:
        """Prompt tokens served from a cache (None when the server does not say)."""
        return self.prompt_tokens_details.cached_tokens if self.prompt_tokens_details else None


class Completion(_Model):
    """A `/v1/completions` answer: what engine stepping and the GSM8K evaluator read."""

    id: str | None = None
    model: str | None = None
    choices: list[CompletionChoice] = Field(min_length=1)
    usage: CompletionUsage | None = None

    @property
    def text(self) -> str:
        return self.choices[0].text

    @property
    def finish_reason(self) -> str | None:
        return self.choices[0].finish_reason

    @property
    def output_tokens(self) -> int:
        """Tokens generated (0 when the server did not report usage)."""
        return (self.usage.completion_tokens or 0) if self.usage is not None else 0


class LoadInfo(_Model):
    """`GET /load`: requests in flight on the GPU routes."""

    server_load: int


class TokenizerInfo(_Model):
    """`GET /tokenizer_info` (Python frontend with --enable-tokenizer-info-endpoint): the tokenizer's
    configuration; every key the server sends is kept."""

    tokenizer_class: str


class WeightCheckResult(_Model):
    """`POST /weight_checker`: `checksums` for action="checksum", `match`/`mismatches` for "compare",
    `status` "reset" for "reset"."""

    checksums: dict[str, str] | None = None
    match: bool | None = None
    mismatches: list[str] | None = None
    status: str | None = None
