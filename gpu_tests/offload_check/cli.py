"""The offload check's command line, `python -m gpu_tests.offload_check` (the runner starts one per case).

:func:`check_options` declares every option once; :func:`run_from_options` runs the cases and prints each
case's summary.
"""

from __future__ import annotations

import importlib
import json
import shlex
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Literal, TypeVar

import click

from vllm_devclient import DevClientError, InvalidParameterError

from . import releases
from .case import Instruments, run_case
from .check import CheckStopped
from .profiles import PROFILES, CheckCase, connector_by_name
from .rates import failure_rates
from .report import OffloadCheckReport
from .server import FRONTENDS, Frontend

__all__ = ["check_options", "command", "load_instruments", "main", "run_from_options"]

F = TypeVar("F", bound=Callable[..., Any])
EXIT = {"passed": 0, "not_proven": 1, "failed": 1, "error": 2}


def _json(value: str | None) -> dict[str, Any]:
    if not value:
        return {}
    try:
        data = json.loads(value)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise click.BadParameter("must be a JSON object")
    return data


# Every option of the check, in the order of its help: both doors (the command, the runner's) take them.
_OPTIONS: tuple[Callable[[Any], Any], ...] = (
    click.option(
        "--profile",
        type=click.Choice(sorted(PROFILES)),
        default="small",
        show_choices=False,
        metavar="NAME",
        help="Profile (offload_check.profiles).  [small]",
    ),
    click.option("--model", default=None, metavar="ID", help="Model id or folder.  [the profile's]"),
    click.option("--served-model-name", default=None, metavar="NAME", help="[the profile's]"),
    click.option("--connector", default="offloading", help="offloading, simple, or both: offloading,simple."),
    click.option("--frontend", default="python", help="python, rust, or python,rust.  [python]"),
    click.option("--num-questions", type=click.IntRange(1), metavar="N", help="[the profile's]"),
    click.option(
        "--concurrency", type=click.IntRange(0), default=1, metavar="N", help="0: all at once.  [1]"
    ),
    click.option("--max-tokens", type=click.IntRange(1), metavar="N", help="[the profile's]"),
    click.option("--threshold", type=float, metavar="X", help="Accuracy threshold.  [the profile's]"),
    click.option("--cpu-gib", type=float, metavar="X", help="CPU tier size.  [the profile's]"),
    click.option("--offload-block-size", type=click.IntRange(1), metavar="N", help="Tokens per chunk."),
    click.option("--connector-extra", metavar="JSON", help="Merged into kv_connector_extra_config."),
    click.option("--label", default="", help="Suffix for the case id."),
    click.option("--server-arg", multiple=True, metavar="ARGS", help="vllm serve arguments; repeatable."),
    click.option("--env", "env_items", multiple=True, metavar="K=V", help="For the server; repeatable."),
    click.option("--iterations", type=click.IntRange(0), default=3, metavar="N", help="Clean passes.  [3]"),
    click.option("--instruments", metavar="MOD:ATTR", help="gpu_tests.kv_proof.instruments:INSTRUMENTS"),
    click.option("--mutations", default="", metavar="NAMES", help="Run after the passes; 'all' for all."),
    click.option("--boundary-probes", type=click.IntRange(0), default=4, metavar="N", help="Per size.  [4]"),
    click.option(
        "--boundary-sizes",
        default="",
        metavar="N,N",
        help="Prompt lengths the boundary probes end on (a run without --instruments has no layout to "
        "read them from).  [the layout's block and chunk sizes]",
    ),
    click.option(
        "--reset-under-load",
        type=click.IntRange(0),
        default=0,
        metavar="N",
        help="Each clean pass ends with N long prompts at once, full resets fired among them.  [0: off]",
    ),
    click.option("--mutation-questions", type=click.IntRange(1), default=4, metavar="N", help="[4]"),
    click.option(
        "--volume-blocks",
        type=click.IntRange(0),
        default=0,
        metavar="K",
        help="Each question after examples of its own, to K whole blocks (real size, volume).  [0: off]",
    ),
    click.option("--no-kv-events", is_flag=True, help="Do not subscribe to KV events."),
    click.option(
        "--kv-events-bind",
        type=click.Choice(["subscriber", "publisher"]),
        default="subscriber",
        help="Which end binds.  [subscriber]",
    ),
    click.option(
        "--report-dir", default="offload-check-reports", metavar="DIR", help="[offload-check-reports]"
    ),
    click.option("--gsm8k-dir", metavar="DIR", help="train.jsonl and test.jsonl (no download)."),
    click.option("--startup-timeout", type=float, metavar="S", help="[the profile's]"),
    click.option(
        "--vllm-release",
        default=None,
        metavar="X.Y.Z",
        help="Fit the profile's flags to this vLLM (offload_check.releases).  [the installed vLLM]",
    ),
)


def check_options(f: F) -> F:
    """Every option of the check, for both doors."""
    for option in reversed(_OPTIONS):
        f = option(f)
    return f


def _sizes(text: str) -> list[int]:
    """``--boundary-sizes 16,256`` -> [16, 256]."""
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        sizes = [0]
    if any(n < 1 for n in sizes):
        raise InvalidParameterError(f"--boundary-sizes {text!r}: give positive token counts, e.g. 16,256")
    return sizes


def load_instruments(spec: str | None) -> Instruments | None:
    """``MODULE:ATTR`` -> the :class:`Instruments` it names (None for none)."""
    if not spec:
        return None
    module, _, attr = spec.partition(":")
    try:
        value = getattr(importlib.import_module(module), attr or "INSTRUMENTS")
    except (ImportError, AttributeError) as exc:
        raise InvalidParameterError(f"--instruments {spec}: {exc}") from exc
    if not isinstance(value, Instruments):
        raise InvalidParameterError(f"--instruments {spec} is a {type(value).__name__}, not Instruments")
    return value


def _cases(opts: dict[str, Any]) -> list[CheckCase]:
    connectors = [connector_by_name(c) for c in opts["connector"].split(",") if c.strip()]
    frontends: list[Frontend] = []
    for f in opts["frontend"].split(","):
        name = f.strip()
        if name not in FRONTENDS:
            raise InvalidParameterError(f"unknown frontend {f!r}: use python, rust or python,rust")
        frontends.append(name)
    profile = PROFILES[opts["profile"]]
    if opts["model"]:
        profile = replace(profile, model=opts["model"])
    env: dict[str, str] = {}
    for item in opts["env_items"]:
        key, sep, value = item.partition("=")
        if not sep:
            raise InvalidParameterError(f"--env takes KEY=VALUE, not {item!r}")
        env[key] = value
    extra = _json(opts["connector_extra"])
    version = opts.get("vllm_release") or releases.installed_version()
    return [
        CheckCase(
            releases.adapt(profile, c, version), c, f, connector_extra=extra, label=opts["label"], env=env
        )
        for c in connectors
        for f in frontends
    ]


def run_from_options(
    echo: Callable[[str], None] = print, **opts: Any
) -> tuple[list[OffloadCheckReport], int]:
    """Run every requested case; the exit code is 0 when all passed, 1 when one failed, 2 on an error."""
    cases = _cases(opts)
    instruments = load_instruments(opts["instruments"])
    names = [m.strip() for m in opts["mutations"].split(",") if m.strip()]
    if names == ["all"]:
        names = list(instruments.mutations) if instruments is not None else []
    threshold: float | Literal["profile"] | None = (
        "profile" if opts["threshold"] is None else opts["threshold"]
    )
    overrides: dict[str, Any] = {
        "extra_args": [a for chunk in opts["server_arg"] for a in shlex.split(chunk)]
    }
    for key in ("served_model_name", "cpu_gib", "offload_block_size", "startup_timeout"):
        if opts[key] is not None:
            overrides[key] = opts[key]
    reports = []
    worst = 0
    for case in cases:
        report = run_case(
            case,
            report_dir=opts["report_dir"],
            num_questions=opts["num_questions"],
            concurrency=opts["concurrency"] or None,
            max_tokens=opts["max_tokens"],
            accuracy_threshold=threshold,
            iterations=opts["iterations"],
            mutations=names,
            instruments=instruments,
            boundary_probes=opts["boundary_probes"],
            boundary_sizes=_sizes(opts["boundary_sizes"]),
            mutation_questions=opts["mutation_questions"],
            volume_blocks=opts["volume_blocks"],
            reset_under_load=opts["reset_under_load"],
            use_kv_events=not opts["no_kv_events"],
            kv_events_bind=opts["kv_events_bind"],
            gsm8k_dir=opts["gsm8k_dir"],
            **overrides,
        )
        echo(report.summary())
        if len(report.clean()) > 1:  # a race fails some passes: its rate says more than one verdict
            failed = [str(r) for r in failure_rates(report).values() if r.failed]
            echo("  rates: " + ("; ".join(failed) or f"no assertion failed in {len(report.clean())} passes"))
        reports.append(report)
        worst = max(worst, EXIT[report.status])
    return reports, worst


def _stop(signum: int, frame: object) -> None:
    raise CheckStopped(f"stopped by {signal.Signals(signum).name} (a runner's deadline)")


def command(name: str = "offload-check") -> click.Command:
    @click.command(name)
    @check_options
    def offload_check(**opts: Any) -> None:
        """The offload-reload check on a GPU machine (starts its own vllm serve per case): clean passes
        of cold, warm, GPU-only reset and reload runs, then the armed mutations; exit 0 when every case
        passed, 1 when one failed, 2 on an error."""
        # A runner's deadline (SIGTERM) stops the check where it is, and the case still writes its report.
        previous = signal.signal(signal.SIGTERM, _stop)
        try:
            _, code = run_from_options(**opts)
        except DevClientError as exc:
            click.echo(f"error: {exc}", err=True)
            code = 2
        finally:
            signal.signal(signal.SIGTERM, previous)
        sys.exit(code)

    return offload_check


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpu_tests.offload_check``: the exit code."""
    try:
        command().main(
            args=list(argv) if argv is not None else None, prog_name="python -m gpu_tests.offload_check"
        )
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    return 0
