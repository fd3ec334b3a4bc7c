"""``python -m vllm_devclient.offload_check``: run the check for the requested cases, one server per case."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from vllm_devclient.errors import DevClientError, InvalidParameterError

from . import check
from .profiles import PROFILES, CheckCase, connector_by_name
from .server import FRONTENDS, Frontend

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m vllm_devclient.offload_check",
        description="Offload-reload GSM8K check: cold (and warm) runs, GPU-only reset, reload run, "
        "full reset, second cold run; one server per case.",
    )
    p.add_argument(
        "--profile", default="small", choices=sorted(PROFILES), help="model profile (default small)"
    )
    p.add_argument("--model", help="model id or folder (default: the profile's)")
    p.add_argument("--served-model-name")
    p.add_argument(
        "--connector",
        default="OffloadingConnector",
        help="OffloadingConnector, SimpleCPUOffloadConnector (or offloading, simple); comma-separated",
    )
    p.add_argument("--frontend", default="python", help="python, rust, or python,rust")
    p.add_argument("--num-questions", type=int, help="GSM8K questions per run (default: the profile's)")
    p.add_argument(
        "--concurrency", type=int, default=1, help="requests in flight (default 1; 0: all at once)"
    )
    p.add_argument("--max-tokens", type=int, help="default: the profile's")
    p.add_argument("--threshold", type=float, help="accuracy threshold (default: the profile's)")
    p.add_argument("--cpu-gib", type=float, help="CPU tier size (default: the profile's for the connector)")
    p.add_argument("--offload-block-size", type=int, help="OffloadingConnector block_size in tokens")
    p.add_argument(
        "--connector-extra", type=json.loads, default={}, help="JSON merged into kv_connector_extra_config"
    )
    p.add_argument("--label", default="", help="suffix for the case id (for example 'mutation')")
    p.add_argument(
        "--server-arg", action="append", default=[], help="extra vllm serve argument(s); repeatable"
    )
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server; repeatable")
    p.add_argument("--no-kv-events", action="store_true", help="do not subscribe to KV events")
    p.add_argument("--kv-events-bind", choices=("subscriber", "publisher"), default="subscriber")
    p.add_argument("--report-dir", default="offload-check-reports")
    p.add_argument("--gsm8k-dir", help="folder with train.jsonl/test.jsonl (no download)")
    p.add_argument("--startup-timeout", type=float)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-warm-run", action="store_true", help="skip the warm reference run")
    p.add_argument("--no-second-cold-run", action="store_true", help="skip the noise-floor run")
    p.add_argument("--fast", action="store_true", help="both of the above: cold, reset, reload only")
    p.add_argument(
        "--agreement",
        default="",
        help="after the check, measure cold-vs-cold agreement at these concurrencies",
    )
    return p


def _cases(args: argparse.Namespace) -> list[CheckCase]:
    connectors = [connector_by_name(c) for c in args.connector.split(",") if c.strip()]
    frontends: list[Frontend] = []
    for f in args.frontend.split(","):
        name = f.strip()
        if name not in FRONTENDS:
            raise InvalidParameterError(f"unknown frontend {f!r}: use python, rust or python,rust")
        frontends.append(name)
    profile = PROFILES[args.profile]
    if args.model:
        profile = replace(profile, model=args.model)
    env: dict[str, str] = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep:
            raise InvalidParameterError(f"--env takes KEY=VALUE, not {item!r}")
        env[key] = value
    return [
        CheckCase(profile, c, f, connector_extra=args.connector_extra, label=args.label, env=env)
        for c in connectors
        for f in frontends
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check for each requested case; exit 0 when all passed, 1 when one failed, 2 on an error."""
    args = _parser().parse_args(argv)
    try:
        cases = _cases(args)
        extra_args = [a for chunk in args.server_arg for a in shlex.split(chunk)]
        threshold: float | Literal["profile"] | None = "profile" if args.threshold is None else args.threshold
        agreement = [int(c) for c in args.agreement.split(",") if c.strip()]
        worst = 0
        for case in cases:
            overrides: dict[str, Any] = {"extra_args": extra_args}
            for key, value in (
                ("served_model_name", args.served_model_name),
                ("cpu_gib", args.cpu_gib),
                ("offload_block_size", args.offload_block_size),
                ("startup_timeout", args.startup_timeout),
            ):
                if value is not None:
                    overrides[key] = value
            report = check.run_case(
                case,
                report_dir=args.report_dir,
                num_questions=args.num_questions,
                concurrency=args.concurrency or None,
                max_tokens=args.max_tokens,
                accuracy_threshold=threshold,
                use_kv_events=not args.no_kv_events,
                kv_events_bind=args.kv_events_bind,
                gsm8k_dir=args.gsm8k_dir,
                progress=False if args.no_progress else None,
                warm_run=not (args.no_warm_run or args.fast),
                second_cold_run=not (args.no_second_cold_run or args.fast),
                agreement_concurrencies=agreement,
                **overrides,
            )
            print(report.summary(), flush=True)
            worst = max(worst, {"passed": 0, "failed": 1, "error": 2}[report.status])
    except DevClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return worst
