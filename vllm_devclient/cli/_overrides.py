"""The few things the client's method table cannot say, as tables keyed by method name: the commands whose
command line is not just their signature (OVERRIDES: names, option names kept from earlier releases, extra
options), how an answer reads in a table (RENDER), which answers count as failures (VERDICT), the topic
each command is listed under (TOPICS) and help for methods without a docstring (HELP, PARAM_HELP).
Everything else comes from the signatures (`_signature.py`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import click
import httpx
from pydantic import BaseModel

from ..models import ResetPrefixCacheResult, VersionInfo, WakeUpResult, WeightVersionResult
from ._envelope import jsonable
from ._settings import ParamTypeBase

__all__ = [
    "CATEGORIES",
    "HELP",
    "OVERRIDES",
    "PARAM_HELP",
    "RENDER",
    "TOPICS",
    "VERDICT",
    "Opt",
    "Override",
    "summary_line",
]


@dataclass(frozen=True)
class Opt:
    """How one parameter appears on the command line, where the generated default is not right."""

    decls: tuple[str, ...] = ()  # option names, e.g. ("--tag", "--tags")
    type: click.ParamType[Any] | None = None
    help: str | None = None
    metavar: str | None = None
    argument: bool = False  # an argument (a list parameter takes any number of them)
    multiple: bool = False  # a repeatable option (a list of `type`)


# (an answer, the keyword arguments the command line gave) -> None when it is what was asked for, else why not
ArgsVerdict = Callable[[Any, Mapping[str, Any]], str | None]

# (the fleet, the keyword arguments the command line gave) -> the fleet's result
FleetCall = Callable[[Any, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class Override:
    name: str | None = None  # the subcommand; default: the method name in kebab case
    params: Mapping[str, Opt] = field(default_factory=dict)
    extra: tuple[click.Parameter, ...] = ()  # options the method does not have
    prepare: Callable[[dict[str, Any]], None] | None = None  # check and convert the arguments in place
    fleet_call: FleetCall | None = None  # instead of the client method on every target
    render: Callable[[Any], str] | None = None  # one answer, for a person (else RENDER's, summary_line)
    result: Callable[[Any], Any] | None = None  # one answer, for `-o json`


# ---- renderings and verdicts ------------------------------------------------------------------------------


def summary_line(value: Any) -> str:
    """A one-line human rendering of any answer."""
    if value is None:
        return "done"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, httpx.Response):
        return f"{value.status_code} {value.text[:200]}"
    if isinstance(value, BaseModel):
        data = value.model_dump(mode="json", exclude_none=True)
        return ", ".join(f"{k}={json.dumps(jsonable(v))}" for k, v in data.items()) or "done"
    return json.dumps(jsonable(value), separators=(",", ":"))


def _pretty(value: Any) -> str:
    return json.dumps(jsonable(value), indent=2)


def _reset_verdict(value: Any, kwargs: Mapping[str, Any]) -> str | None:
    if isinstance(value, ResetPrefixCacheResult) and value.success is False:
        return (
            "success=false: the engine still holds blocks (running requests or in-flight offload stores); "
            "retry with `barrier`"
        )
    return None


def _reset_render(value: Any) -> str:
    if isinstance(value, ResetPrefixCacheResult):
        if value.success is None:
            return "done (this server cannot say whether the cache was reset)"
        return f"success={str(value.success).lower()}"
    return summary_line(value)


def _version_render(value: Any) -> str:
    if isinstance(value, VersionInfo):
        if value.rust_frontend_version:
            return f"vllm {value.version} (rust frontend {value.rust_frontend_version})"
        return f"vllm {value.version} (python frontend)"
    return summary_line(value)


def _weight_version_verdict(value: Any, kwargs: Mapping[str, Any]) -> str | None:
    if isinstance(value, WeightVersionResult) and value.success is False:
        return "success=false"
    return None


def _kv_sources_render(value: Any) -> str:
    lines = [f"rank {rank}: {src.endpoint} replay={src.replay_endpoint}" for rank, src in value.items()]
    return "\n".join(lines) or "(none: KV events are off)"


def _barrier_render(value: Any) -> str:
    return f"reset after {value.attempts} attempts, {value.engine_steps} engine steps, {value.elapsed_s:.2f}s"


# ---- commands that need more than their signature --------------------------------------------------------


def _abort_prepare(kwargs: dict[str, Any]) -> None:
    every = kwargs.pop("all", False)
    if bool(kwargs.get("request_ids")) == bool(every):
        raise click.UsageError("give request ids or --all (not both, not neither)")


def _wake_up_verdict(value: Any, kwargs: Mapping[str, Any]) -> str | None:
    full = not kwargs.get("tags")
    if full and isinstance(value, WakeUpResult) and value.awake is False:
        return f"still sleeping after wake_up (status {value.status!r})"
    return None


class _KeyValue(ParamTypeBase):
    name = "KEY=VALUE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        key, sep, val = str(value).partition("=")
        if not sep or not key:
            self.fail(f"expected KEY=VALUE, got {value!r}", param, ctx)
        return (key, val)


def _rename(legacy: str, current: str) -> Callable[[dict[str, Any]], None]:
    """Accept a hidden older option name (`legacy`) as the newer one."""

    def prepare(kwargs: dict[str, Any]) -> None:
        old = kwargs.pop(legacy, None)
        if old is not None:
            kwargs.setdefault(current, old)

    return prepare


async def _pause(fleet: Any, kwargs: dict[str, Any]) -> Any:
    rollback = kwargs.pop("rollback", False)
    return await fleet.pause(**kwargs, rollback=rollback)


_WAITS = {
    "ready": "/health answers 200 on every target",
    "sleeping": "every target reports is_sleeping=true",
    "awake": "every target reports is_sleeping=false",
    "paused": "every target reports is_paused=true",
    "resumed": "every target reports is_paused=false",
}


def _wait(state: str) -> Override:
    return Override(
        name=f"wait-{state}",
        render=lambda value: state,
        result=lambda value: {"state": state, **(jsonable(value) if isinstance(value, BaseModel) else {})},
    )


_MODE = Opt(type=click.Choice(["abort", "wait", "keep"]))

# The commands whose command line is not just their signature.
OVERRIDES: dict[str, Override] = {
    "reset_prefix_cache_until_success": Override(
        name="barrier",
        extra=(click.Option(["--step/--no-step", "step_legacy"], default=None, hidden=True),),
        prepare=_rename("step_legacy", "step_engine"),
    ),
    "sleep": Override(params={"level": Opt(type=click.IntRange(0, 2)), "mode": _MODE}),
    "wake_up": Override(params={"tags": Opt(decls=("--tag", "--tags"), metavar="TAG")}),
    "pause": Override(
        params={"mode": _MODE},
        extra=(
            click.Option(
                ["--rollback"], is_flag=True, help="If some targets fail, resume the ones that were paused."
            ),
        ),
        fleet_call=_pause,
    ),
    "abort_requests": Override(
        params={"request_ids": Opt(argument=True)},
        extra=(click.Option(["--all"], is_flag=True, help="Abort every request (when no id is given)."),),
        prepare=_abort_prepare,
    ),
    **{f"wait_until_{state}": _wait(state) for state in _WAITS},
    "collective_rpc": Override(
        params={
            "args": Opt(help="Positional arguments, a JSON list (or @file).  [default: []]"),
            "rpc_timeout": Opt(
                decls=("--deadline",),
                help="Seconds the workers get for the call (engine side; --timeout still ends the HTTP try).",
            ),
        },
        extra=(click.Option(["--rpc-timeout", "rpc_timeout_legacy"], type=float, hidden=True),),
        prepare=_rename("rpc_timeout_legacy", "rpc_timeout"),
    ),
    "request": Override(
        params={
            "params": Opt(
                decls=("--param",), type=_KeyValue(), multiple=True, help="Query parameter; repeat."
            ),
            "json": Opt(decls=("--body",), help="JSON body, or @file."),
        },
    ),
}

# How an answer reads in a table (default: `summary_line`).
RENDER: dict[str, Callable[[Any], str]] = {
    "health": lambda value: "ok",
    "version": _version_render,
    "models": lambda value: ", ".join(m.id for m in value.data) or "(none)",
    "metrics_text": lambda value: str(value).rstrip("\n"),
    "server_info": _pretty,
    "kv_event_sources": _kv_sources_render,
    "reset_prefix_cache": _reset_render,
    "reset_prefix_cache_until_success": _barrier_render,
    "completion": lambda value: value.text,
    "step_engine": lambda value: f"stepped (text {value!r})",
}

# Answers that come back but count as failures (exit 1, error type UnsuccessfulResultError).
VERDICT: dict[str, ArgsVerdict] = {
    "reset_prefix_cache": _reset_verdict,
    "wake_up": _wake_up_verdict,
    "update_weight_version": _weight_version_verdict,
}

# `--help` lists the commands by topic, in this order; tools under "tools", any other method under "more".
TOPICS: dict[str, tuple[str, ...]] = {
    "server": (
        "health", "version", "models", "metrics", "metrics_text", "server_info", "get_world_size",
        "kv_event_sources", "load", "tokenizer_info",
    ),
    "cache": (
        "reset_prefix_cache", "reset_prefix_cache_until_success", "reset_mm_cache", "reset_encoder_cache",
        "release_kv_cache_memory",
    ),
    "sleep": ("sleep", "wake_up", "is_sleeping"),
    "pause": ("pause", "resume", "is_paused", "abort_requests"),
    "wait": tuple(f"wait_until_{state}" for state in _WAITS),
    "weights": (
        "init_weight_transfer_engine", "start_weight_update", "start_draft_weight_update", "update_weights",
        "finish_weight_update", "update_weight_version", "weight_info", "weight_checker",
        "shutdown_weight_transfer_engine",
    ),
    "lora": ("load_lora_adapter", "unload_lora_adapter"),
    "engine": ("completion", "step_engine", "collective_rpc", "start_profile", "stop_profile", "request"),
}  # fmt: skip
CATEGORIES = (*TOPICS, "tools", "more")

# The help of a command whose method has no docstring yet (the method's docstring wins).
HELP: dict[str, str] = {
    "health": "GET /health: ok when the engine is alive (exit 1 when it is dead, 3 when unreachable).",
    "version": "GET /version: the vLLM version and which frontend serves it.",
    "models": "GET /v1/models: the served model names.",
    "metrics": "GET /metrics as a snapshot: prefix-cache and KV-offload counters.",
    "metrics_text": "GET /metrics: the Prometheus text exposition.",
    "server_info": "GET /server_info: the server's vLLM config and environment.",
    "get_world_size": "GET /get_world_size: the number of workers.",
    "kv_event_sources": "GET /kv_event_sources: where each data-parallel rank publishes KV-cache events.",
    "reset_prefix_cache": "POST /reset_prefix_cache once. Exit 1 on success=false (see barrier).",
    "reset_prefix_cache_until_success": "The offload barrier: reset the prefix cache until it succeeds.",
    "reset_mm_cache": "POST /reset_mm_cache: drop the multimodal cache.",
    "reset_encoder_cache": "POST /reset_encoder_cache: drop the encoder cache.",
    "release_kv_cache_memory": "POST /release_kv_cache_memory.",
    "sleep": "POST /sleep: offload (level 1) or discard (level 2) the weights and free the KV cache.",
    "wake_up": "POST /wake_up. Exit 1 when a full wake (no --tag) leaves the engine asleep.",
    "is_sleeping": "GET /is_sleeping: true or false.",
    "pause": "POST /pause: stop scheduling. With --rollback: paused everywhere or nowhere.",
    "resume": "POST /resume: schedule again.",
    "is_paused": "GET /is_paused: true or false.",
    "abort_requests": "POST /abort_requests for REQUEST_IDS, or every request with --all.",
    **{f"wait_until_{state}": f"Wait until {what}." for state, what in _WAITS.items()},
    "init_weight_transfer_engine": "POST /init_weight_transfer_engine.",
    "start_weight_update": "POST /start_weight_update.",
    "update_weights": "POST /update_weights.",
    "finish_weight_update": "POST /finish_weight_update.",
    "update_weight_version": "POST /update_weight_version. Exit 1 when a target answers success=false.",
    "weight_info": "GET /weight_info.",
    "completion": "POST /v1/completions, greedy by default: the generated text.",
    "step_engine": "A 1-token completion so the engine runs one step (frees finished blocks).",
    "collective_rpc": "POST /collective_rpc: call METHOD on every worker; prints the per-worker results.",
    "request": "Send any METHOD PATH with the same auth, timeouts and errors (a non-2xx answer fails).",
}

# Help for parameters many methods share, where the method's docstring says nothing.
PARAM_HELP = {
    "deadline": "Seconds the whole wait may take; exit 4 when it passes.",
    "interval": "Seconds between the first tries (the pause doubles up to --max-interval).",
    "max_interval": "Longest pause between tries, in seconds.",
    "mode": "What to do with running requests: abort them, wait for them, or keep them.",
    "level": "Sleep level: 0, 1 (offload the weights) or 2 (discard them).",
    "tags": "Wake only this part (weights, kv_cache); repeat.",
    "reset_external": "Also reset the connector's cache (e.g. the CPU offload tier).",
    "reset_running_requests": "Also preempt running requests to free their blocks.",
    "step_engine": "Step the engine between tries (frees blocks held by finished requests).",
    "clear_cache": "Reset the prefix cache too (deprecated by vLLM).",
    "model": "Model name.  [default: the first on /v1/models]",
    "max_tokens": "Tokens to generate.",
    "temperature": "Sampling temperature (0: greedy).",
    "seed": "Sampling seed.",
    "stop": "Stop string; repeat.",
    "include_dp": "Count data-parallel ranks too.",
    "config_format": "How the server renders its config.",
    "kwargs": "Keyword arguments, a JSON object (or @file).",
    "init_info": "The engine's init info, a JSON object (or @file).",
    "update_info": "What to update, JSON (or @file).",
    "weight_version": "The version the new weights carry.",
    "new_version": "The new weight version.",
    "request_ids": "Request ids.",
    "prompt": "The prompt.",
    "method": "The method.",
    "path": "The path, starting with /.",
}
