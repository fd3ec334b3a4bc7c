"""The `vllm-devclient` command line: every client method as a subcommand, on one server or a fleet.

Every subcommand runs through `AsyncFleet` (one server is a fleet of one), so the output shape and the exit
codes are the same whatever the number of `--url`s. Human output by default, `--json` for machines.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any, NoReturn, TypeVar

try:
    import click
    from click.core import ParameterSource
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
    from rich.table import Table
    from rich.text import Text
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        f"the vllm-devclient command line needs click and rich ({exc}): pip install 'vllm-devclient[cli]'"
    ) from exc

import httpx
import pydantic_core
from pydantic import BaseModel

from ._version import __version__
from .client import DEFAULT_TIMEOUT, DevClient
from .constants import DEFAULT_MAX_CONCURRENCY
from .errors import (
    APIConnectionError,
    APIStatusError,
    AuthenticationError,
    BarrierTimeoutError,
    DevClientError,
    DevModeDisabledError,
    EngineCallError,
    InvalidParameterError,
    PermissionDeniedError,
    WaitTimeoutError,
)
from .fleet import AsyncFleet, FleetResult, TargetOutcome
from .models import ResetPrefixCacheResult, VersionInfo, WakeUpResult, WeightVersionResult

__all__ = ["ExitCode", "cli", "exit_code_for", "main"]

DEFAULT_URL = "http://127.0.0.1:8000"
F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


class ExitCode(IntEnum):
    """What the command line exits with. Scripts may rely on these; docs/cli.md lists them too."""

    OK = 0
    FAILED = 1  # a target failed or answered success=false; failures of different kinds; parity differs
    USAGE = 2  # bad command line or argument: nothing was sent
    CONNECTION = 3  # a target could not be reached or did not answer within --timeout
    DEADLINE = 4  # barrier / wait-* / kv-events deadline passed before the state was reached
    DEV_MODE = 5  # a dev route answered 404: the server runs without VLLM_SERVER_DEV_MODE=1
    AUTH = 6  # 401/403: missing or wrong --api-key
    UNAVAILABLE = 7  # an optional part is not installed (KV events, parity harness, vLLM)
    INTERRUPTED = 130  # Ctrl-C


EXIT_CODES_HELP = """\b
Exit codes (per target; when several targets fail for different reasons, 1):
  0  every target succeeded
  1  a target failed (server or engine error, unexpected answer),
     answered success=false, or targets failed in different ways;
     parity: the SDK results differ between the servers
  2  usage error: bad option or argument, nothing was sent
  3  a target could not be reached or timed out (--timeout)
  4  a barrier / wait-* / kv-events deadline passed
  5  dev mode is off on a target (VLLM_SERVER_DEV_MODE=1 missing)
  6  authentication failed (401/403): check --api-key / VLLM_API_KEY
  7  an optional part is not installed (pip install 'vllm-devclient[all]')
  130 interrupted (Ctrl-C)
"""


def exit_code_for(error: BaseException) -> ExitCode:
    """The exit code one target's error maps to."""
    if isinstance(error, WaitTimeoutError):
        return ExitCode.DEADLINE
    if isinstance(error, APIConnectionError):
        return ExitCode.CONNECTION
    if isinstance(error, DevModeDisabledError):
        return ExitCode.DEV_MODE
    if isinstance(error, AuthenticationError | PermissionDeniedError):
        return ExitCode.AUTH
    if isinstance(error, InvalidParameterError):
        return ExitCode.USAGE
    return ExitCode.FAILED


def combine(codes: Sequence[int]) -> int:
    """One exit code for many targets: 0, the one failure kind they share, or 1 when they differ."""
    failing = {c for c in codes if c != ExitCode.OK}
    if not failing:
        return ExitCode.OK
    return failing.pop() if len(failing) == 1 else ExitCode.FAILED


class Unavailable(click.ClickException):
    """An optional part is missing; exits 7."""

    exit_code = ExitCode.UNAVAILABLE


# ---- settings shared by every subcommand -------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    urls: tuple[str, ...]
    urls_given: bool  # on the command line (not from VLLM_DEVCLIENT_URL or the default)
    api_key: str | None = field(repr=False)
    timeout: float
    retries: int
    concurrency: int
    json: bool
    progress: bool

    @property
    def http_timeout(self) -> httpx.Timeout:
        return httpx.Timeout(self.timeout, connect=min(self.timeout, DEFAULT_TIMEOUT.connect or 5.0))

    def fleet(self, on_result: Callable[[TargetOutcome[Any]], None] | None = None) -> AsyncFleet:
        return AsyncFleet(
            self.urls,
            api_key=self.api_key,
            timeout=self.http_timeout,
            max_retries=self.retries,
            max_concurrency=self.concurrency,
            on_result=on_result,
        )


_COMMON = ("urls", "api_key", "timeout", "retries", "concurrency", "as_json", "no_progress")


def _common_options(*, top: bool) -> Callable[[F], F]:
    """The options every subcommand takes; on the group they read the environment and have defaults, on a
    subcommand they override the group's (so `vllm-devclient health --url X` works as well as before it)."""

    def decorate(fn: F) -> F:
        options = [
            click.option(
                "--url",
                "urls",
                multiple=True,
                metavar="URL",
                envvar="VLLM_DEVCLIENT_URL" if top else None,
                show_envvar=top,
                help=f"Server base URL; repeat for a fleet. [default: {DEFAULT_URL}]",
            ),
            click.option(
                "--api-key",
                envvar="VLLM_API_KEY" if top else None,
                show_envvar=top,
                help="Bearer key for the server's --api-key (never printed).",
            ),
            click.option(
                "--timeout",
                type=click.FloatRange(min=0, min_open=True),
                default=30.0 if top else None,
                show_default=top,
                help="Seconds to wait for each HTTP answer.",
            ),
            click.option(
                "--retries",
                type=click.IntRange(min=0),
                default=2 if top else None,
                show_default=top,
                help="Retries of idempotent calls on connection errors and 502/503/504.",
            ),
            click.option(
                "--concurrency",
                type=click.IntRange(min=1),
                default=DEFAULT_MAX_CONCURRENCY if top else None,
                show_default=top,
                help="Most targets in flight at once.",
            ),
            click.option("--json", "as_json", is_flag=True, default=None, help="Print JSON for machines."),
            click.option("--no-progress", is_flag=True, default=None, help="No progress display on stderr."),
        ]
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorate


def _settings(ctx: click.Context, sub: Mapping[str, Any]) -> Settings:
    """The group's options, overridden by those given after the subcommand."""
    root = ctx.find_root()
    top: Mapping[str, Any] = root.params

    def pick(name: str) -> Any:
        value = sub.get(name)
        return value if value not in (None, ()) else top.get(name)

    sub_urls = tuple(sub.get("urls") or ())
    urls = sub_urls or tuple(top.get("urls") or ()) or (DEFAULT_URL,)
    given = bool(sub_urls) or root.get_parameter_source("urls") is ParameterSource.COMMANDLINE
    return Settings(
        urls=urls,
        urls_given=given,
        api_key=pick("api_key"),
        timeout=float(pick("timeout")),
        retries=int(pick("retries")),
        concurrency=int(pick("concurrency")),
        json=bool(pick("as_json")),
        progress=not pick("no_progress"),
    )


# ---- the group ---------------------------------------------------------------------------------------------


class _Group(click.Group):
    """Adds hidden aliases (the SDK's method names) and turns SDK argument errors into usage errors."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aliases: dict[str, str] = {}

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, self.aliases.get(cmd_name, cmd_name))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(ExitCode.INTERRUPTED) from None
        except InvalidParameterError as exc:
            raise click.UsageError(str(exc), ctx) from exc


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EXIT_CODES_HELP,
)
@_common_options(top=True)
@click.version_option(__version__, prog_name="vllm-devclient")
def cli(**_: Any) -> None:
    """Drive the development-mode endpoints of one vLLM server or a fleet (Python or Rust frontend).

    \b
    Examples:
      vllm-devclient parity                      # Python vs Rust frontend, on a scripted engine
      vllm-devclient reset-prefix-cache --reset-external
      vllm-devclient --url http://a:8000 --url http://b:8000 barrier --deadline 60
      vllm-devclient pause --rollback --json --url ... --url ...
    """


# ---- running one SDK call over the fleet -------------------------------------------------------------------


Verdict = Callable[[Any], str | None]


def _no_verdict(value: Any) -> str | None:
    return None


@dataclass(frozen=True)
class Job:
    """What a subcommand does: the fleet call, which answers count as failures, how to show one answer."""

    call: Callable[[AsyncFleet], Awaitable[FleetResult[Any]]]
    verdict: Verdict = _no_verdict
    render: Callable[[Any], str] | None = None


def _jsonable(value: Any) -> Any:
    if isinstance(value, httpx.Response):
        try:
            body: Any = value.json()
        except ValueError:
            body = value.text
        return {"status_code": value.status_code, "body": body}
    return pydantic_core.to_jsonable_python(value, serialize_unknown=True)


def _error_json(error: BaseException) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    if isinstance(error, APIStatusError):
        out.update(status_code=error.status_code, frontend=error.frontend, path=error.path)
        if error.param is not None:
            out["param"] = error.param
    if isinstance(error, EngineCallError):
        out.update(engine_method=error.method, engine_message=error.engine_message)
    if isinstance(error, APIConnectionError):
        out["url"] = error.url
    if isinstance(error, WaitTimeoutError):
        out["waited_s"] = round(error.waited_s, 3)
    if isinstance(error, BarrierTimeoutError):
        out.update(attempts=error.attempts, engine_steps=error.engine_steps)
    return out


def _target_json(outcome: TargetOutcome[Any], verdict: Verdict) -> dict[str, Any]:
    if outcome.error is not None:
        code: int = exit_code_for(outcome.error)
        entry: dict[str, Any] = {"ok": False, "exit_code": code, "result": None}
        entry["error"] = _error_json(outcome.error)
    else:
        problem = verdict(outcome.value)
        code = ExitCode.FAILED if problem else ExitCode.OK
        entry = {"ok": problem is None, "exit_code": code, "result": _jsonable(outcome.value)}
        entry["error"] = {"type": "Unsuccessful", "message": problem} if problem else None
    entry["elapsed_s"] = round(outcome.elapsed_s, 6)
    return entry


def report(command: str, result: FleetResult[Any], verdict: Verdict = _no_verdict) -> dict[str, Any]:
    """The JSON document `--json` prints: the same shape for one target or many."""
    targets = {url: _target_json(o, verdict) for url, o in result.items()}
    code = combine([t["exit_code"] for t in targets.values()])
    doc: dict[str, Any] = {
        "command": command,
        "ok": code == ExitCode.OK,
        "exit_code": code,
        "targets": targets,
    }
    if result.rollback is not None:
        doc["rollback"] = {url: _target_json(o, _no_verdict) for url, o in result.rollback.items()}
    return doc


def _summary(value: Any) -> str:
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
        return ", ".join(f"{k}={json.dumps(v)}" for k, v in data.items()) or "done"
    return json.dumps(_jsonable(value), separators=(",", ":"))


class _ProgressDisplay:
    """A transient progress bar on stderr: only on a terminal, and only once a call has taken 0.3 s."""

    def __init__(self, settings: Settings, label: str, total: int, delay: float = 0.3) -> None:
        console = Console(stderr=True)
        self._show = settings.progress and console.is_terminal
        self._bar = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=console,
            transient=True,
            disable=not self._show,
        )
        self._task = self._bar.add_task(label, total=total)
        self._start_at = time.monotonic() + delay
        self._started = False

    def advance(self, _: TargetOutcome[Any]) -> None:
        self._bar.advance(self._task)
        self.tick()

    def tick(self) -> None:
        if self._show and not self._started and time.monotonic() >= self._start_at:
            self._started = True
            self._bar.start()

    def close(self) -> None:
        if self._started:
            self._bar.stop()


async def _with_ticker(call: Awaitable[T], tick: Callable[[], None], period: float = 0.1) -> T:
    # The bar must appear for a call that hangs on every target too, not only when one finishes.
    async def ticker() -> None:
        while True:
            await asyncio.sleep(period)
            tick()

    ticking = asyncio.ensure_future(ticker())
    try:
        return await call
    finally:
        ticking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticking


def _execute(ctx: click.Context, settings: Settings, command: str, job: Job) -> NoReturn:
    display = _ProgressDisplay(settings, command, len(settings.urls))

    async def go() -> FleetResult[Any]:
        async with settings.fleet(on_result=display.advance) as fleet:
            return await _with_ticker(job.call(fleet), display.tick)

    try:
        result = asyncio.run(go())
    finally:
        display.close()
    doc = report(command, result, job.verdict)
    if settings.json:
        click.echo(json.dumps(doc, indent=2))
    else:
        _print_human(doc, result, job)
    ctx.exit(doc["exit_code"])


def _problem(outcome: TargetOutcome[Any], entry: Mapping[str, Any], *, short: bool) -> str:
    if outcome.error is not None:
        return _short_error(outcome.error) if short else f"{type(outcome.error).__name__}: {outcome.error}"
    return str(entry["error"]["message"]) if entry.get("error") else ""


def _print_human(doc: dict[str, Any], result: FleetResult[Any], job: Job) -> None:
    terminal = Console().is_terminal
    # Piped output is not cut to 80 columns: a log keeps whole lines.
    out = Console(highlight=False, soft_wrap=len(result) == 1, width=None if terminal else 200)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    render = job.render or _summary
    if len(result) == 1:
        (url, entry), outcome = next(iter(doc["targets"].items())), next(iter(result.values()))
        if outcome.error is None:
            out.print(render(outcome.value), markup=False)
        if not entry["ok"]:
            err.print(Text(f"error: {url}: {_problem(outcome, entry, short=False)}", style="red"))
    else:
        table = Table(show_edge=False, pad_edge=False)
        for column in ("target", "", "answer", "time"):
            table.add_column(column, overflow="fold")
        for url, entry in doc["targets"].items():
            outcome = result[url]
            if entry["ok"]:
                mark, answer = Text("ok", style="green"), Text(render(outcome.value))
            else:
                mark, answer = Text("FAIL", style="bold red"), Text(_problem(outcome, entry, short=True))
            table.add_row(url, mark, answer, f"{outcome.elapsed_s * 1000:.0f} ms")
        out.print(table)
        failed = sum(1 for e in doc["targets"].values() if not e["ok"])
        line = f"{len(result) - failed} of {len(result)} targets ok"
        err.print(Text(line, style="red" if failed else "green"))
    if result.rollback is not None:
        undo = result.rollback
        err.print(f"rolled back: resumed {len(undo.ok)} paused targets: {', '.join(undo.ok) or '-'}")
        for url, error in undo.failed.items():
            err.print(Text(f"rollback failed, still paused: {url}: {_short_error(error)}", style="red"))


def fleet_command(
    name: str, *, aliases: Sequence[str] = (), group: click.Group | None = None
) -> Callable[[Callable[..., Job]], click.Command]:
    """Register `fn` (which builds a Job from its own options) as a subcommand run over the fleet."""

    def decorate(fn: Callable[..., Job]) -> click.Command:
        @functools.wraps(fn)
        def callback(**kwargs: Any) -> None:
            ctx = click.get_current_context()
            settings = _settings(ctx, {k: kwargs.pop(k) for k in _COMMON})
            _execute(ctx, settings, name, fn(**kwargs))

        command = click.command(name, epilog=EXIT_CODES_HELP)(_common_options(top=False)(callback))
        target = group if group is not None else cli
        target.add_command(command)
        if isinstance(target, _Group):
            target.aliases.update({alias: name for alias in aliases})
        return command

    return decorate


class _JSONParam(click.ParamType[Any]):
    """A JSON value given inline or as @path to a file holding it."""

    name = "JSON"

    def __init__(self, kind: type[Any] | tuple[type[Any], ...] = object) -> None:
        self.kind = kind

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        text = value
        if value.startswith("@"):
            try:
                text = Path(value[1:]).read_text()
            except OSError as exc:
                self.fail(f"cannot read {value[1:]}: {exc.strerror}", param, ctx)
        try:
            data = json.loads(text)
        except ValueError as exc:
            self.fail(f"not valid JSON ({exc}): {value[:80]!r}", param, ctx)
        if not isinstance(data, self.kind):
            kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
            wanted = " or ".join("an object" if k is dict else "a list" for k in kinds)
            self.fail(f"must be {wanted}, got {type(data).__name__}", param, ctx)
        return data


MODES = click.Choice(["abort", "wait", "keep"])


# ---- verdicts and renderings -------------------------------------------------------------------------------


def _reset_verdict(value: Any) -> str | None:
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
    return _summary(value)


def _version_render(value: Any) -> str:
    if isinstance(value, VersionInfo):
        if value.rust_frontend_version:
            return f"vllm {value.version} (rust frontend {value.rust_frontend_version})"
        return f"vllm {value.version} (python frontend)"
    return _summary(value)


def _short_error(error: BaseException) -> str:
    """One line for the human table; --json keeps the full message."""
    if isinstance(error, DevModeDisabledError):
        return f"dev mode off: {error.status_code} on {error.path}"
    if isinstance(error, EngineCallError):
        return f"engine call {error.method} failed: {error.engine_message}"
    if isinstance(error, APIStatusError):
        return f"{error.status_code} on {error.http_method} {error.path}: {error.message}"
    if isinstance(error, BarrierTimeoutError):
        return (
            f"barrier deadline passed after {error.waited_s:.1f}s: {error.attempts} attempts, "
            f"{error.engine_steps} engine steps, still success=false"
        )
    lines = str(error).splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


# ---- one subcommand per client method ----------------------------------------------------------------------


@fleet_command("health")
def _health() -> Job:
    """GET /health: ok when the engine is alive (exit 1 when it is dead, 3 when unreachable)."""
    return Job(lambda f: f.health(), render=lambda v: "ok")


@fleet_command("version")
def _version() -> Job:
    """GET /version: the vLLM version and which frontend serves it."""
    return Job(lambda f: f.version(), render=_version_render)


@fleet_command("models")
def _models() -> Job:
    """GET /v1/models: the served model names (needs --api-key when the server has one)."""
    return Job(lambda f: f.models(), render=lambda v: ", ".join(m.id for m in v.data) or "(none)")


@fleet_command("metrics-text")
def _metrics_text() -> Job:
    """GET /metrics: the Prometheus text exposition."""
    return Job(lambda f: f.metrics_text(), render=lambda v: str(v).rstrip("\n"))


@fleet_command("metrics")
def _metrics() -> Job:
    """GET /metrics as a snapshot: prefix-cache and KV-offload counters (needs the metrics extra)."""
    return Job(lambda f: f.metrics())


@fleet_command("completion")
@click.argument("prompt")
@click.option(
    "--max-tokens", type=click.IntRange(min=1), default=16, show_default=True, help="Tokens to generate."
)
@click.option("--model", default=None, help="Model name [default: the first on /v1/models].")
def _completion(prompt: str, max_tokens: int, model: str | None) -> Job:
    """POST /v1/completions, greedy: the generated text."""
    return Job(lambda f: f.completion(prompt, model=model, max_tokens=max_tokens), render=lambda v: v.text)


@fleet_command("reset-prefix-cache")
@click.option("--reset-running-requests", is_flag=True, help="Also preempt running requests to free blocks.")
@click.option("--reset-external", is_flag=True, help="Also reset the connector's cache (e.g. CPU offload).")
def _reset_prefix_cache(reset_running_requests: bool, reset_external: bool) -> Job:
    """POST /reset_prefix_cache once. Exit 1 when the engine answers success=false (see `barrier`)."""
    return Job(
        lambda f: f.reset_prefix_cache(
            reset_running_requests=reset_running_requests, reset_external=reset_external
        ),
        verdict=_reset_verdict,
        render=_reset_render,
    )


@fleet_command("reset-mm-cache")
def _reset_mm_cache() -> Job:
    """POST /reset_mm_cache: drop the multimodal input cache."""
    return Job(lambda f: f.reset_mm_cache())


@fleet_command("reset-encoder-cache")
def _reset_encoder_cache() -> Job:
    """POST /reset_encoder_cache: drop the encoder cache."""
    return Job(lambda f: f.reset_encoder_cache())


@fleet_command("sleep")
@click.option("--level", type=click.IntRange(0, 2), default=1, show_default=True, help="Sleep level.")
@click.option("--mode", type=MODES, default="abort", show_default=True, help="What to do with requests.")
def _sleep(level: int, mode: Any) -> Job:
    """POST /sleep: offload (level 1) or discard (level 2) the weights and free the KV cache."""
    return Job(lambda f: f.sleep(level, mode=mode))


@fleet_command("wake-up")
@click.option(
    "--tag", "--tags", "tags", multiple=True, help="Wake only this part (weights, kv_cache); repeat."
)
def _wake_up(tags: tuple[str, ...]) -> Job:
    """POST /wake_up. Exit 1 when a full wake (no --tag) leaves the engine asleep."""

    def verdict(value: Any) -> str | None:
        if not tags and isinstance(value, WakeUpResult) and value.awake is False:
            return f"still sleeping after wake_up (status {value.status!r})"
        return None

    return Job(lambda f: f.wake_up(list(tags) or None), verdict=verdict)


@fleet_command("is-sleeping")
def _is_sleeping() -> Job:
    """GET /is_sleeping: true or false."""
    return Job(lambda f: f.is_sleeping())


@fleet_command("release-kv-cache-memory")
def _release_kv_cache_memory() -> Job:
    """POST /release_kv_cache_memory."""
    return Job(lambda f: f.release_kv_cache_memory())


@fleet_command("pause")
@click.option("--mode", type=MODES, default="abort", show_default=True, help="What to do with requests.")
@click.option("--clear-cache/--no-clear-cache", default=None, help="Reset the prefix cache too (deprecated).")
@click.option("--rollback", is_flag=True, help="If some targets fail, resume the ones that were paused.")
def _pause(mode: Any, clear_cache: bool | None, rollback: bool) -> Job:
    """POST /pause: stop scheduling. With --rollback the fleet is paused everywhere or nowhere it was."""
    return Job(lambda f: f.pause(mode, clear_cache=clear_cache, rollback=rollback))


@fleet_command("resume")
def _resume() -> Job:
    """POST /resume."""
    return Job(lambda f: f.resume())


@fleet_command("is-paused")
def _is_paused() -> Job:
    """GET /is_paused: true or false."""
    return Job(lambda f: f.is_paused())


@fleet_command("abort-requests")
@click.argument("request_ids", nargs=-1)
@click.option("--all", "abort_all", is_flag=True, help="Abort every request (needed when no id is given).")
def _abort_requests(request_ids: tuple[str, ...], abort_all: bool) -> Job:
    """POST /abort_requests for REQUEST_IDS, or every request with --all."""
    if bool(request_ids) == abort_all:
        raise click.UsageError("give request ids or --all (not both, not neither)")
    return Job(lambda f: f.abort_requests(list(request_ids) or None))


@fleet_command("collective-rpc")
@click.argument("method")
@click.option("--args", "rpc_args", type=_JSONParam(list), default="[]", help="Positional args (JSON list).")
@click.option("--kwargs", "rpc_kwargs", type=_JSONParam(dict), default=None, help="Keyword args (JSON).")
@click.option("--rpc-timeout", type=float, default=None, help="Engine-side timeout in seconds.")
def _collective_rpc(
    method: str, rpc_args: list[Any], rpc_kwargs: dict[str, Any] | None, rpc_timeout: float | None
) -> Job:
    """POST /collective_rpc: call METHOD on every worker; prints the per-worker results."""
    return Job(lambda f: f.collective_rpc(method, args=rpc_args, kwargs=rpc_kwargs, rpc_timeout=rpc_timeout))


@fleet_command("server-info")
@click.option("--config-format", type=click.Choice(["json", "text"]), default="json", show_default=True)
def _server_info(config_format: Any) -> Job:
    """GET /server_info: the server's vLLM config and environment."""
    return Job(lambda f: f.server_info(config_format), render=lambda v: _pretty(v))


@fleet_command("kv-event-sources")
def _kv_event_sources() -> Job:
    """GET /kv_event_sources: where each data-parallel rank publishes KV-cache events."""

    def render(value: Any) -> str:
        lines = [f"rank {rank}: {src.endpoint} replay={src.replay_endpoint}" for rank, src in value.items()]
        return "\n".join(lines) or "(none: KV events are off)"

    return Job(lambda f: f.kv_event_sources(), render=render)


@fleet_command("get-world-size")
@click.option("--include-dp/--no-include-dp", default=True, show_default=True)
def _get_world_size(include_dp: bool) -> Job:
    """GET /get_world_size."""
    return Job(lambda f: f.get_world_size(include_dp=include_dp))


@fleet_command("init-weight-transfer-engine")
@click.option("--init-info", type=_JSONParam(dict), required=True, help="JSON object, or @file.")
def _init_weight_transfer_engine(init_info: dict[str, Any]) -> Job:
    """POST /init_weight_transfer_engine."""
    return Job(lambda f: f.init_weight_transfer_engine(init_info))


@fleet_command("start-weight-update")
def _start_weight_update() -> Job:
    """POST /start_weight_update."""
    return Job(lambda f: f.start_weight_update())


@fleet_command("update-weights")
@click.option("--update-info", type=_JSONParam((dict, list)), required=True, help="JSON, or @file.")
def _update_weights(update_info: Any) -> Job:
    """POST /update_weights."""
    return Job(lambda f: f.update_weights(update_info))


@fleet_command("finish-weight-update")
@click.option("--weight-version", default=None, help="The version the new weights carry.")
def _finish_weight_update(weight_version: str | None) -> Job:
    """POST /finish_weight_update."""
    return Job(lambda f: f.finish_weight_update(weight_version=weight_version))


@fleet_command("update-weight-version")
@click.argument("new_version")
def _update_weight_version(new_version: str) -> Job:
    """POST /update_weight_version. Exit 1 when a target answers success=false."""

    def verdict(value: Any) -> str | None:
        if isinstance(value, WeightVersionResult) and value.success is False:
            return "success=false"
        return None

    return Job(lambda f: f.update_weight_version(new_version), verdict=verdict)


@fleet_command("weight-info")
def _weight_info() -> Job:
    """GET /weight_info."""
    return Job(lambda f: f.weight_info())


@fleet_command("step-engine")
def _step_engine() -> Job:
    """A 1-token completion so the engine runs one step (frees finished blocks)."""
    return Job(lambda f: f.step_engine(), render=lambda v: f"stepped (text {v!r})")


@fleet_command("request")
@click.argument("method")
@click.argument("path")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="Query parameter; repeat.")
@click.option("--body", type=_JSONParam(), default=None, help="JSON body, or @file.")
def _request(method: str, path: str, params: tuple[str, ...], body: Any) -> Job:
    """Send any METHOD PATH with the same auth, timeouts and errors (a non-2xx answer fails)."""
    pairs: list[tuple[str, str]] = []
    for item in params:
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--param")
        pairs.append((key, val))
    return Job(lambda f: f.request(method, path, params=pairs or None, json=body))


@fleet_command("barrier", aliases=["reset-prefix-cache-until-success"])
@click.option("--deadline", type=click.FloatRange(min=0, min_open=True), default=60.0, show_default=True)
@click.option("--reset-external", is_flag=True, help="Also reset the connector's cache (e.g. CPU offload).")
@click.option("--reset-running-requests", is_flag=True, help="Also preempt running requests.")
@click.option("--step/--no-step", default=True, show_default=True, help="Step the engine between tries.")
@click.option(
    "--request-timeout", type=click.FloatRange(min=0, min_open=True), default=10.0, show_default=True
)
def _barrier(
    deadline: float, reset_external: bool, reset_running_requests: bool, step: bool, request_timeout: float
) -> Job:
    """The offload barrier: reset the prefix cache until it succeeds on every target (exit 4 at deadline)."""
    return Job(
        lambda f: f.reset_prefix_cache_until_success(
            deadline=deadline,
            reset_external=reset_external,
            step_engine=step,
            reset_running_requests=reset_running_requests,
            request_timeout=request_timeout,
        ),
        render=lambda v: (
            f"reset after {v.attempts} attempts, {v.engine_steps} engine steps, {v.elapsed_s:.2f}s"
        ),
    )


def _deadline_option(default: float) -> Callable[[F], F]:
    return click.option(
        "--deadline",
        type=click.FloatRange(min=0, min_open=True),
        default=default,
        show_default=True,
        help="Seconds to wait before giving up (exit 4).",
    )


# (subcommand, Fleet method, default deadline, what is waited for, what it prints)
_WAITS = (
    ("wait-ready", "wait_until_ready", 120.0, "/health answers 200 on every target", "ready"),
    ("wait-sleeping", "wait_until_sleeping", 60.0, "every target reports is_sleeping=true", "sleeping"),
    ("wait-awake", "wait_until_awake", 60.0, "every target reports is_sleeping=false", "awake"),
    ("wait-paused", "wait_until_paused", 60.0, "every target reports is_paused=true", "paused"),
    ("wait-resumed", "wait_until_resumed", 60.0, "every target reports is_paused=false", "resumed"),
)


def _wait_command(name: str, method: str, default: float, what: str, done: str) -> None:
    @fleet_command(name, aliases=[method.replace("_", "-")])
    @_deadline_option(default)
    def wait(deadline: float) -> Job:
        return Job(lambda f: getattr(f, method)(deadline), render=lambda v: done)

    wait.help = f"Wait until {what}."


for _wait in _WAITS:
    _wait_command(*_wait)


def _pretty(value: Any) -> str:
    return json.dumps(_jsonable(value), indent=2)


# ---- parity ------------------------------------------------------------------------------------------------


@cli.command("parity", epilog=EXIT_CODES_HELP)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the Markdown table to this file.",
)
@click.option(
    "--allow-reset",
    is_flag=True,
    help="With two --url: also compare reset_prefix_cache (idempotent, but it drops the prefix cache).",
)
@_common_options(top=False)
def _parity(report_path: Path | None, allow_reset: bool, **common: Any) -> None:
    """Compare the frontends: what each answered, and what the SDK made of it.

    With no --url: starts the real Python and Rust frontends on this machine, each on a scripted engine
    (no GPU, no model weights), runs every scenario through the SDK and prints the parity table. With
    --url A --url B: compares two live servers with read-only calls only. Only --url given on the command
    line counts here (VLLM_DEVCLIENT_URL is ignored). Exit 1 when the SDK's result differs between the two
    (a mismatch); raw answers that differ are what the SDK hides, and exit 0.
    """
    ctx = click.get_current_context()
    settings = _settings(ctx, common)
    urls = list(settings.urls) if settings.urls_given else None
    if urls is not None and len(urls) != 2:
        raise click.UsageError(f"parity compares two servers: give --url twice, or none (got {len(urls)})")
    try:
        from .testing.frontends import FrontendStartupError, VllmNotInstalledError
        from .testing.parity import run_parity
    except ImportError as exc:
        raise Unavailable(
            f"the parity harness is not available ({exc}). Install the test harness: "
            "pip install 'vllm-devclient[testing]', and vLLM for the embedded run (scripts/setup.sh)"
        ) from exc
    what = (
        "comparing the two servers" if urls else "starting the Python and Rust frontends, running scenarios"
    )
    console = Console(stderr=True)
    status = console.status(what) if settings.progress and console.is_terminal else contextlib.nullcontext()
    try:
        with status:
            parity = run_parity(
                urls,
                report_path=report_path,
                api_key=settings.api_key if urls else None,
                allow_reset=allow_reset,
            )
    except VllmNotInstalledError as exc:
        raise Unavailable(str(exc)) from exc
    except FrontendStartupError as exc:
        raise click.ClickException(f"a frontend did not start: {exc}") from exc
    mismatches = parity.sdk_mismatches
    if settings.json:
        click.echo(parity.to_json())
    else:
        click.echo(parity.to_markdown())
        click.echo(
            f"{len(parity.rows)} scenarios; raw answers differ in {len(parity.differences)}; "
            f"SDK mismatches: {len(mismatches)}" + (f" ({', '.join(mismatches)})" if mismatches else ""),
            err=True,
        )
        if report_path is not None:
            click.echo(f"report written to {report_path}", err=True)
    ctx.exit(ExitCode.FAILED if mismatches else ExitCode.OK)


# ---- kv-events ---------------------------------------------------------------------------------------------


@cli.group("kv-events", cls=_Group)
def kv_events() -> None:
    """KV-cache events published by the engine (needs pyzmq and msgspec: the [zmq] extra)."""


def _batch_line(batch: Any) -> str:
    """One human line per batch: what was stored, removed or cleared, per medium."""
    from .kv_events import AllBlocksCleared, BlockRemoved, BlockStored

    parts: list[str] = []
    for event in batch.events:
        if isinstance(event, BlockStored):
            parts.append(f"stored {event.medium or '-'} {_hashes(event.block_hashes)}")
        elif isinstance(event, BlockRemoved):
            parts.append(f"removed {event.medium or '-'} {_hashes(event.block_hashes)}")
        elif isinstance(event, AllBlocksCleared):
            parts.append("all blocks cleared")
        else:
            parts.append(f"unknown event {getattr(event, 'type', None)!r}")
    flag = " (replayed)" if batch.replayed else ""
    return f"rank {batch.rank} seq {batch.seq}{flag}: " + ("; ".join(parts) or "no events")


def _hashes(hashes: Sequence[int | bytes], shown: int = 3) -> str:
    text = [h.hex()[:16] if isinstance(h, bytes) else f"{h:x}" for h in hashes[:shown]]
    more = f" +{len(hashes) - shown}" if len(hashes) > shown else ""
    return f"{len(hashes)} block{'s' if len(hashes) != 1 else ''} [{', '.join(text)}{more}]"


@kv_events.command("tail", epilog=EXIT_CODES_HELP)
@click.option("--endpoint", help="Rank 0's publisher (tcp://host:port). Default: ask the server (one --url).")
@click.option("--replay-endpoint", help="Rank 0's replay socket, with --endpoint.")
@click.option("--topic", default="", help="Topic, with --endpoint.")
@click.option("--data-parallel-size", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--count", type=click.IntRange(min=1), default=None, help="Stop after this many batches.")
@click.option(
    "--duration", type=click.FloatRange(min=0, min_open=True), default=None, help="Stop after S seconds."
)
@click.option(
    "--backlog/--no-backlog", default=True, show_default=True, help="Replay what is buffered first."
)
@_common_options(top=False)
def _kv_events_tail(
    endpoint: str | None,
    replay_endpoint: str | None,
    topic: str,
    data_parallel_size: int,
    count: int | None,
    duration: float | None,
    backlog: bool,
    **common: Any,
) -> None:
    """Print KV-cache event batches as they arrive (--json: one JSON object per line).

    Stops after --count batches, after --duration seconds, or at Ctrl-C (a normal end here). Exit 4 when
    --duration passed before --count batches arrived, 1 when batches were lost (not recoverable by replay).
    """
    ctx = click.get_current_context()
    settings = _settings(ctx, common)
    try:
        import msgspec

        from .kv_events import KVEventSourceError, KVEventSubscriber
    except ImportError as exc:
        raise Unavailable(
            f"KV events need pyzmq and msgspec ({exc}): pip install 'vllm-devclient[zmq]'"
        ) from exc
    if endpoint is not None:
        try:
            sub = KVEventSubscriber(
                endpoint,
                replay_endpoint=replay_endpoint,
                topic=topic,
                data_parallel_size=data_parallel_size,
                backlog=backlog,
            )
        except KVEventSourceError as exc:
            raise click.UsageError(str(exc), ctx) from exc
    else:
        if len(settings.urls) != 1:
            raise click.UsageError("kv-events tail follows one server: give one --url, or --endpoint", ctx)
        with DevClient(
            settings.urls[0],
            api_key=settings.api_key,
            timeout=settings.http_timeout,
            max_retries=settings.retries,
        ) as client:
            try:
                sub = KVEventSubscriber.from_client(client, backlog=backlog)
            except KVEventSourceError as exc:
                raise click.ClickException(f"{client.base_url}: {exc}") from exc
            except DevClientError as exc:
                click.secho(f"error: {client.base_url}: {type(exc).__name__}: {exc}", err=True, fg="red")
                ctx.exit(exit_code_for(exc))
    received = 0
    deadline = None if duration is None else time.monotonic() + duration
    encoder = msgspec.json.Encoder()
    with sub:
        try:
            while count is None or received < count:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                # Short slices: Ctrl-C is seen at once, not when the next batch arrives.
                batch = sub.poll(0.25 if left is None else min(0.25, left))
                if batch is None:
                    continue
                received += 1
                for lost in batch.losses:
                    click.secho(
                        f"lost: rank {lost.rank} batches {lost.first_seq}..{lost.last_seq} ({lost.reason})",
                        err=True,
                        fg="red",
                    )
                if batch.restart is not None:
                    click.secho(f"publisher of rank {batch.rank} restarted", err=True, fg="yellow")
                if settings.json:
                    click.echo(encoder.encode(batch).decode())
                else:
                    click.echo(_batch_line(batch))
        except KeyboardInterrupt:
            pass
        tally = sub.tally
    stored = ", ".join(f"{m or '-'} {n}" for m, n in tally.stored_blocks.items()) or "0"
    removed = ", ".join(f"{m or '-'} {n}" for m, n in tally.removed_blocks.items()) or "0"
    click.echo(
        f"{received} batches; blocks stored: {stored}; removed: {removed}; cleared: {tally.cleared}; "
        f"lost batches: {tally.lost_batches}",
        err=True,
    )
    if count is not None and received < count:
        ctx.exit(ExitCode.DEADLINE)
    ctx.exit(ExitCode.FAILED if tally.lost_batches else ExitCode.OK)


def main() -> None:
    """The console-script entry point."""
    cli(prog_name="vllm-devclient")


if __name__ == "__main__":  # pragma: no cover
    main()
