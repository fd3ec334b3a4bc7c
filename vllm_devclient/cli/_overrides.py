"""The few things the client's method table cannot say: subcommand names that differ from the method's,
option names kept from earlier releases, which answers count as failures, how an answer reads to a person,
and where each command sits in `--help`. Everything else comes from the signatures (`_signature.py`).
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

__all__ = ["CATEGORIES", "OVERRIDES", "PARAM_HELP", "Opt", "Override", "summary_line"]


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
    category: str = "more"
    help: str | None = None  # when the method has no docstring
    params: Mapping[str, Opt] = field(default_factory=dict)
    extra: tuple[click.Parameter, ...] = ()  # options the method does not have
    prepare: Callable[[dict[str, Any]], None] | None = None  # check and convert the arguments in place
    fleet_call: FleetCall | None = None  # instead of the client method on every target
    verdict: ArgsVerdict | None = None  # which answers count as failures, given the arguments
    render: Callable[[Any], str] | None = None  # one answer, for a person
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


def _wait(state: str, what: str) -> Override:
    return Override(
        name=f"wait-{state}",
        category="wait",
        help=f"Wait until {what}.",
        render=lambda value: state,
        result=lambda value: {"state": state, **(jsonable(value) if isinstance(value, BaseModel) else {})},
    )


_MODE = Opt(type=click.Choice(["abort", "wait", "keep"]))

OVERRIDES: dict[str, Override] = {
    "health": Override(
        category="server",
        help="GET /health: ok when the engine is alive (exit 1 when it is dead, 3 when unreachable).",
        render=lambda value: "ok",
    ),
    "version": Override(
        category="server",
        help="GET /version: the vLLM version and which frontend serves it.",
        render=_version_render,
    ),
    "models": Override(
        category="server",
        help="GET /v1/models: the served model names.",
        render=lambda value: ", ".join(m.id for m in value.data) or "(none)",
    ),
    "metrics": Override(
        category="server", help="GET /metrics as a snapshot: prefix-cache and KV-offload counters."
    ),
    "metrics_text": Override(
        category="server",
        help="GET /metrics: the Prometheus text exposition.",
        render=lambda value: str(value).rstrip("\n"),
    ),
    "server_info": Override(
        category="server",
        help="GET /server_info: the server's vLLM config and environment.",
        render=_pretty,
    ),
    "get_world_size": Override(category="server", help="GET /get_world_size: the number of workers."),
    "kv_event_sources": Override(
        category="server",
        help="GET /kv_event_sources: where each data-parallel rank publishes KV-cache events.",
        render=_kv_sources_render,
    ),
    "reset_prefix_cache": Override(
        category="cache",
        help="POST /reset_prefix_cache once. Exit 1 when the engine answers success=false (see barrier).",
        verdict=_reset_verdict,
        render=_reset_render,
    ),
    "reset_prefix_cache_until_success": Override(
        name="barrier",
        category="cache",
        help="The offload barrier: reset the prefix cache until it succeeds on every target.",
        extra=(click.Option(["--step/--no-step", "step_legacy"], default=None, hidden=True),),
        prepare=_rename("step_legacy", "step_engine"),
        render=_barrier_render,
    ),
    "reset_mm_cache": Override(category="cache", help="POST /reset_mm_cache: drop the multimodal cache."),
    "reset_encoder_cache": Override(category="cache", help="POST /reset_encoder_cache."),
    "release_kv_cache_memory": Override(category="cache", help="POST /release_kv_cache_memory."),
    "sleep": Override(
        category="sleep",
        help="POST /sleep: offload (level 1) or discard (level 2) the weights and free the KV cache.",
        params={"level": Opt(type=click.IntRange(0, 2)), "mode": _MODE},
    ),
    "wake_up": Override(
        category="sleep",
        help="POST /wake_up. Exit 1 when a full wake (no --tag) leaves the engine asleep.",
        params={"tags": Opt(decls=("--tag", "--tags"), metavar="TAG")},
        verdict=_wake_up_verdict,
    ),
    "is_sleeping": Override(category="sleep", help="GET /is_sleeping: true or false."),
    "pause": Override(
        category="pause",
        help="POST /pause: stop scheduling. With --rollback the fleet is paused everywhere or nowhere.",
        params={"mode": _MODE},
        extra=(
            click.Option(
                ["--rollback"],
                is_flag=True,
                help="If some targets fail, resume the ones that were paused.",
            ),
        ),
        fleet_call=_pause,
    ),
    "resume": Override(category="pause", help="POST /resume: schedule again."),
    "is_paused": Override(category="pause", help="GET /is_paused: true or false."),
    "abort_requests": Override(
        category="pause",
        help="POST /abort_requests for REQUEST_IDS, or every request with --all.",
        params={"request_ids": Opt(argument=True)},
        extra=(click.Option(["--all"], is_flag=True, help="Abort every request (when no id is given)."),),
        prepare=_abort_prepare,
    ),
    "wait_until_ready": _wait("ready", "/health answers 200 on every target"),
    "wait_until_sleeping": _wait("sleeping", "every target reports is_sleeping=true"),
    "wait_until_awake": _wait("awake", "every target reports is_sleeping=false"),
    "wait_until_paused": _wait("paused", "every target reports is_paused=true"),
    "wait_until_resumed": _wait("resumed", "every target reports is_paused=false"),
    "init_weight_transfer_engine": Override(category="weights", help="POST /init_weight_transfer_engine."),
    "start_weight_update": Override(category="weights", help="POST /start_weight_update."),
    "update_weights": Override(category="weights", help="POST /update_weights."),
    "finish_weight_update": Override(category="weights", help="POST /finish_weight_update."),
    "update_weight_version": Override(
        category="weights",
        help="POST /update_weight_version. Exit 1 when a target answers success=false.",
        verdict=_weight_version_verdict,
    ),
    "weight_info": Override(category="weights", help="GET /weight_info."),
    "completion": Override(
        category="engine",
        help="POST /v1/completions, greedy by default: the generated text.",
        render=lambda value: value.text,
    ),
    "step_engine": Override(
        category="engine",
        help="A 1-token completion so the engine runs one step (frees finished blocks).",
        render=lambda value: f"stepped (text {value!r})",
    ),
    "collective_rpc": Override(
        category="engine",
        help="POST /collective_rpc: call METHOD on every worker; prints the per-worker results.",
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
        category="engine",
        help="Send any METHOD PATH with the same auth, timeouts and errors (a non-2xx answer fails).",
        params={
            "params": Opt(
                decls=("--param",), type=_KeyValue(), multiple=True, help="Query parameter; repeat."
            ),
            "json": Opt(decls=("--body",), help="JSON body, or @file."),
        },
    ),
}

# The order of `--help`'s command list; commands of no category are listed under "more".
CATEGORIES = ("server", "cache", "sleep", "pause", "wait", "weights", "engine", "tools", "more")

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
