"""The subcommands that are not one client call: `parity` and `gsm8k`. Each imports what it needs when it
runs, and a missing extra exits 7 with the pip command that installs it."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console

from ..errors import DevClientError
from ..fleet import AsyncFleet, FleetResult
from ._envelope import dumps, envelope, target_entry
from ._exit import ExitCode, UnsuccessfulResultError, combine, exit_code_for
from ._generate import SUBCOMMAND_EPILOG
from ._output import tsv_cell
from ._run import CommandError, Unavailable
from ._settings import Number, Settings, global_options, settings_of, split_globals

__all__ = ["COMMANDS"]


def _settings(common: dict[str, Any]) -> tuple[click.Context, Settings]:
    ctx = click.get_current_context()
    return ctx, settings_of(ctx, split_globals(common))


def _finish(
    ctx: click.Context,
    settings: Settings,
    command: str,
    start: float,
    *,
    result: Any,
    code: int,
    error: BaseException | None = None,
    human: Callable[[], None],
    targets: dict[str, Any] | None = None,
) -> NoReturn:
    """Print the tool's outcome (the envelope under -o json, else `human()`) and exit with `code`."""
    if settings.json:
        doc = envelope(
            command,
            elapsed_s=time.perf_counter() - start,
            targets=targets,
            result=result,
            error=error,
            exit_code=code,
        )
        click.echo(dumps(doc))
    else:
        human()
    ctx.exit(code)


def _status(settings: Settings, what: str) -> contextlib.AbstractContextManager[Any]:
    console = Console(stderr=True)
    if settings.progress and console.is_terminal:
        return console.status(what)
    return contextlib.nullcontext()


# ---- parity ------------------------------------------------------------------------------------------------


def selection_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Which scenarios run: `--scenarios` (by name) among the built-in ones and `--scenarios-from`'s (the
    fixture tools' commands take them too)."""
    fn = click.option(
        "--scenarios-from",
        "sources",
        multiple=True,
        metavar="MODULE",
        help="A module or .py file with SCENARIOS of your own, run beside the built-in ones; repeatable.",
    )(fn)
    return click.option("--scenarios", default=None, help="Comma-separated scenario names.  [default: all]")(
        fn
    )


def selection(scenarios: str | None, sources: tuple[str, ...]) -> Any:
    """The scenarios chosen (None: the built-in ones), or a usage error naming the option at fault."""
    try:
        from ..testing.own_scenarios import ScenarioSourceError, select
    except ImportError as exc:
        raise Unavailable(exc, "testing") from exc
    try:
        return select(scenarios, sources)
    except ScenarioSourceError as exc:
        raise click.BadParameter(str(exc), param_hint=exc.option) from exc


@click.command("parity", epilog=SUBCOMMAND_EPILOG)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("parity.md"),
    show_default=True,
    help="Where the full Markdown table goes.",
)
@click.option(
    "--allow-reset",
    is_flag=True,
    help="With two --url: also compare reset_prefix_cache (idempotent, but it drops the prefix cache).",
)
@selection_options
@global_options(top=False)
def parity(
    report_path: Path, allow_reset: bool, scenarios: str | None, sources: tuple[str, ...], **common: Any
) -> None:
    """Compare the frontends: what each answered, and what the SDK made of it.

    With no --url: starts the real Python and Rust frontends here, each on a scripted engine (no GPU, no
    weights), and runs every scenario. With --url A --url B: compares two live servers, read-only calls
    only (only --url on the command line counts, not $VLLM_DEVCLIENT_URL). Prints a summary, writes the
    full table to --report. Exit 1 when the SDK's result differs between the two (a mismatch).
    """
    ctx, settings = _settings(common)
    if settings.verify is not True or settings.cert is not None:
        raise click.UsageError(
            "parity takes no --cacert, --cert or --insecure (it honours $SSL_CERT_FILE)", ctx
        )
    start = time.perf_counter()
    urls = list(settings.urls) if settings.urls_given else None
    if urls is not None and len(urls) != 2:
        raise click.UsageError(f"parity compares two servers: give --url twice, or none (got {len(urls)})")
    try:
        from ..testing.frontends import FrontendStartupError, VllmNotInstalledError
        from ..testing.parity import run_parity
    except ImportError as exc:
        raise Unavailable(exc, "testing") from exc
    chosen = _parity_scenarios(scenarios, sources, live=bool(urls), allow_reset=allow_reset)
    what = (
        "comparing the two servers" if urls else "starting the Python and Rust frontends, running scenarios"
    )
    try:
        with _status(settings, what):
            report = run_parity(
                urls,
                report_path=report_path,
                api_key=settings.api_key if urls else None,
                allow_reset=allow_reset,
                scenarios=chosen,
            )
    except VllmNotInstalledError as exc:
        raise CommandError(str(exc), exit_code=ExitCode.UNAVAILABLE, error=exc) from exc
    except FrontendStartupError as exc:
        raise CommandError(f"a frontend did not start: {exc}", error=exc) from exc
    mismatches = list(report.sdk_mismatches)
    error = UnsuccessfulResultError(f"SDK mismatches: {', '.join(mismatches)}") if mismatches else None
    code = ExitCode.FAILED if mismatches else ExitCode.OK
    _finish(
        ctx, settings, "parity", start, result=report.to_dict(), code=code, error=error,
        human=lambda: _print_parity(settings, report, report_path),
    )  # fmt: skip


def _parity_scenarios(
    scenarios: str | None, sources: tuple[str, ...], *, live: bool, allow_reset: bool
) -> Any:
    """The scenarios chosen (`selection`); against live servers the built-in ones stay the read-only ones,
    yours run as you wrote them."""
    chosen = selection(scenarios, sources)
    if live and chosen is not None and scenarios is None:
        from ..testing.parity import safe_scenarios
        from ..testing.scenarios import SCENARIOS as BUILT_IN

        built_in = {s.name for s in BUILT_IN}
        chosen = safe_scenarios(allow_reset=allow_reset) + [s for s in chosen if s.name not in built_in]
    return chosen


def _print_parity(settings: Settings, report: Any, report_path: Path) -> None:
    """The parity outcome for a reader: one row per scenario under -o tsv, else the summary."""
    from ..testing.parity import summary_lines

    if settings.output == "tsv":
        for row in report.rows:
            raw = "differs" if row.raw_differs else "="
            sdk = "=" if row.sdk_same else ("by design" if row.sdk_difference else "MISMATCH")
            click.echo(f"{row.scenario}\t{raw}\t{sdk}")
        return
    for line in summary_lines(report.summary(), report_path):
        click.echo(line)


# ---- gsm8k -------------------------------------------------------------------------------------------------


def _gsm8k() -> Any:
    try:
        return importlib.import_module("vllm_devclient.gsm8k")
    except ImportError as exc:
        raise Unavailable(exc, "gsm8k") from exc


@click.command("gsm8k", epilog=SUBCOMMAND_EPILOG)
@click.option(
    "--num-questions", type=Number(int, 1), default=200, show_default=True, help="Test questions to ask."
)
@click.option(
    "--concurrency",
    type=Number(int, 1),
    default=None,
    help="Requests in flight on each server.  [default: all at once]",
)
@click.option("--num-shots", type=Number(int, 0), default=5, show_default=True, help="Examples per prompt.")
@click.option("--max-tokens", type=Number(int, 1), default=256, show_default=True, help="Tokens per answer.")
@click.option("--model", default=None, help="Model name.  [default: the first on /v1/models]")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder holding train.jsonl and test.jsonl (nothing is downloaded).",
)
@click.option(
    "--sample",
    is_flag=True,
    help="Use the 60-question sample shipped with the package (nothing is downloaded).",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the JSON here.",
)
@global_options(top=False, exclude=("concurrency",))
def gsm8k(
    num_questions: int,
    concurrency: int | None,
    num_shots: int,
    max_tokens: int,
    model: str | None,
    data_dir: Path | None,
    sample: bool,
    report: Path | None,
    **common: Any,
) -> None:
    """GSM8K through /v1/completions, the way vLLM's CI runs it: accuracy, invalid answers, throughput.

    On every --url at once; the envelope's per-target result holds every answer. --timeout, when given,
    bounds each completion (default: 600 s).
    """
    ctx, settings = _settings(common)
    start = time.perf_counter()
    gsm8k = _gsm8k()
    # The questions are read once; every server gets the same prompts.
    try:
        train, test = gsm8k.load_gsm8k(data_dir=data_dir, sample=sample)
        prompts = gsm8k.build_prompts(train, test, num_questions, num_shots)
    except DevClientError as exc:
        raise CommandError(str(exc), exit_code=exit_code_for(exc), error=exc) from exc
    kwargs: dict[str, Any] = {
        "prompts": prompts,
        "num_shots": num_shots,  # what the report says the prompts were built with
        "concurrency": concurrency,
        "max_tokens": max_tokens,
        "model": model,
        # The evaluator's own bar (tqdm, when installed) only on a terminal.
        "progress": None if settings.progress and Console(stderr=True).is_terminal else False,
    }
    if settings.timeout_given:
        kwargs["request_timeout"] = settings.timeout
    try:
        outcomes = asyncio.run(
            _on_every_server(settings, lambda c: gsm8k.evaluate_gsm8k_async(client=c, **kwargs))
        )
    except ImportError as exc:
        raise Unavailable(exc, "gsm8k") from exc
    targets = {url: target_entry(o.value, o.error, o.elapsed_s) for url, o in outcomes.items()}
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(targets, indent=2) + "\n")
    code = combine([int(t["exit_code"]) for t in targets.values()])
    _finish(
        ctx, settings, "gsm8k", start, result=None, code=code, targets=targets,
        human=lambda: _print_gsm8k(settings, outcomes, targets),
    )  # fmt: skip


async def _on_every_server(settings: Settings, run: Callable[[Any], Awaitable[Any]]) -> FleetResult[Any]:
    """`run(client)` on every server at once (the command's --concurrency is requests per server)."""
    fleet = AsyncFleet(
        settings.urls,
        api_key=settings.api_key,
        timeout=settings.http_timeout,
        max_retries=settings.retries,
        max_concurrency=len(settings.urls),
        verify=settings.verify,
        cert=settings.cert,
        total_timeout=settings.total_timeout,
        raise_on_error=False,  # each server's outcome is reported
    )
    async with fleet:
        return await fleet.map(run)


def _print_gsm8k(settings: Settings, outcomes: FleetResult[Any], targets: dict[str, Any]) -> None:
    """One line per server: tab-separated under -o tsv, else its result (a failure on stderr)."""
    for url, o in outcomes.items():
        line = _gsm8k_line(o.value, o.error)
        if settings.output == "tsv":
            click.echo(
                f"{url}\t{'ok' if o.error is None else 'FAIL'}\t{targets[url]['exit_code']}\t"
                f"{round(o.elapsed_s, 3)}\t{tsv_cell(line)}"
            )
        else:
            click.echo(f"{url}: {line}", err=o.error is not None)


def _gsm8k_line(value: Any, error: BaseException | None) -> str:
    if error is not None:
        return f"{type(error).__name__}: {error}"
    correct = round(value.accuracy * value.num_questions)
    return (
        f"accuracy {value.accuracy:.3f} ({correct}/{value.num_questions}), invalid {value.invalid_rate:.1%}, "
        f"{value.latency_s:.1f} s, {value.questions_per_s:.1f} questions/s"
    )


COMMANDS: tuple[click.Command, ...] = (parity, gsm8k)
