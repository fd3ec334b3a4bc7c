"""The parity report: every scenario on the Python and the Rust frontend, raw answers side by side.

``run_parity()`` starts both real frontends on scripted engines (one per setup: default, API key, dev mode
off, dead engine), runs every scenario on each and builds a table: status, content type and body from each
frontend, what the SDK made of them, where the raw answers differ and whether the SDK outcome is the same.
``run_parity([url_a, url_b])`` compares two live servers with read-only calls only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ..errors import DevClientError
from ..models import VersionInfo
from .contract import (
    LiveServer,
    Scenario,
    ScenarioRun,
    make_client,
    mask_value,
    masked_run,
    run_scenario,
    summarize_outcome,
)
from .contract.outcome import type_name
from .pool import FRONTENDS, KV_EVENTS_CONFIG, FrontendPool
from .scenarios import SCENARIOS

__all__ = [
    "FRONTENDS",
    "KV_EVENTS_CONFIG",
    "FrontendPool",
    "ParityReport",
    "ParityRow",
    "Side",
    "collect_runs",
    "report_from_runs",
    "run_parity",
    "safe_scenarios",
    "summary_lines",
]

# ---------------------------------------------------------------------------------------- the report


@dataclass
class Side:
    """One frontend's run of a scenario, reduced to what the report shows and compares."""

    label: str
    exchanges: list[dict[str, Any]]
    sdk: dict[str, Any]
    projection: dict[str, Any]
    engine_calls: list[list[Any]] | None
    problems: list[str]

    @property
    def last(self) -> dict[str, Any] | None:
        return self.exchanges[-1] if self.exchanges else None

    def status(self) -> str:
        last = self.last
        if last is None:
            return "-"
        if "error" in last:
            return str(last["error"])
        return str(last["response"]["status"])

    def content_type(self) -> str:
        last = self.last
        if last is None or "response" not in last:
            return "-"
        return str(last["response"]["headers"].get("content-type", "(none)"))

    def body(self) -> str:
        last = self.last
        if last is None or "response" not in last:
            return ""
        resp = last["response"]
        if "json" in resp:
            return json.dumps(resp["json"], sort_keys=True, separators=(",", ":"))
        return str(resp.get("text", ""))


@dataclass
class ParityRow:
    scenario: str
    description: str
    sides: list[Side]
    raw_differences: list[str]
    sdk_same: bool
    sdk_difference: str | None = None

    @property
    def raw_differs(self) -> bool:
        return bool(self.raw_differences)


@dataclass
class ParityReport:
    """Per-scenario rows; `differences` and `sdk_mismatches` list scenario names."""

    mode: Literal["harness", "live"]
    labels: list[str]
    rows: list[ParityRow] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def differences(self) -> list[str]:
        """Scenarios whose raw answers (status, content type, body or exchange count) differ."""
        return [r.scenario for r in self.rows if r.raw_differs]

    @property
    def sdk_mismatches(self) -> list[str]:
        """Scenarios where the SDK outcome differs between the sides (other than documented by design)
        or breaks the scenario's contract on a side. Empty when the SDK hides every difference."""
        out = []
        for r in self.rows:
            broken = any(s.problems for s in r.sides)
            if broken or (not r.sdk_same and r.sdk_difference is None):
                out.append(r.scenario)
        return out

    @property
    def documented_sdk_differences(self) -> dict[str, str]:
        return {r.scenario: r.sdk_difference for r in self.rows if r.sdk_difference and not r.sdk_same}

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "labels": self.labels,
            "versions": self.versions,
            "differences": self.differences,
            "sdk_mismatches": self.sdk_mismatches,
            "documented_sdk_differences": self.documented_sdk_differences,
            "rows": [
                {
                    "scenario": r.scenario,
                    "description": r.description,
                    "raw_differences": r.raw_differences,
                    "sdk_same": r.sdk_same,
                    "sdk_difference": r.sdk_difference,
                    "sides": {
                        s.label: {
                            "exchanges": s.exchanges,
                            "sdk": s.sdk,
                            "engine_calls": s.engine_calls,
                            "problems": s.problems,
                        }
                        for s in r.sides
                    },
                }
                for r in self.rows
            ],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def summary(self) -> dict[str, Any]:
        """The report's figures (what `summary_lines` prints, and docs/parity.json keeps): no bodies, nothing
        that changes from run to run."""
        return {
            "labels": self.labels,
            "versions": self.versions,
            "scenarios": [r.scenario for r in self.rows],
            "raw_differences": self.differences,
            "sdk_differences_by_design": self.documented_sdk_differences,
            "sdk_mismatches": self.sdk_mismatches,
        }

    def to_markdown(self, body_width: int = 90) -> str:
        """The report: its figures, one table row per scenario (bodies cut to `body_width`), then what
        differs by design, the mismatches and the engine calls that differ."""
        a, b = self.labels
        lines = [f"# Parity report: {a} vs {b}", ""]
        if self.versions:
            lines.append("Versions: " + ", ".join(f"{k} `{v}`" for k, v in sorted(self.versions.items())))
            lines.append("")
        lines += [
            f"{len(self.rows)} scenarios; raw answers differ in {len(self.differences)}; "
            f"SDK outcome differs by design in {len(self.documented_sdk_differences)}; "
            f"SDK mismatches: {len(self.sdk_mismatches)}"
            + (
                " (none: the SDK gives the same typed result or error on both)"
                if not self.sdk_mismatches
                else ""
            ),
            "",
            *self._markdown_table(body_width),
            "",
        ]
        if self.documented_sdk_differences:
            lines += ["## SDK outcomes that differ by design", ""]
            for name, why in self.documented_sdk_differences.items():
                lines.append(f"- `{name}`: {why}")
            lines.append("")
        lines += ["## SDK mismatches and broken contracts", "", *self._markdown_mismatches(), ""]
        calls = [r for r in self.rows if _calls_differ(r)]
        if calls:
            lines += ["## Engine calls that differ", ""]
            for r in calls:
                per_side = "; ".join(f"{s.label}: `{json.dumps(s.engine_calls)}`" for s in r.sides)
                lines.append(f"- `{r.scenario}`: {per_side}")
            lines.append("")
        return "\n".join(lines)

    def _markdown_table(self, body_width: int) -> list[str]:
        a, b = self.labels
        lines = [
            "Each cell shows the last HTTP exchange of the scenario (the one the SDK's answer came from):",
            "status, content type, body (volatile parts masked). `=` in the last columns: the same on both.",
            "",
            f"| scenario | {a}: status | {a}: content type | {a}: body | {b}: status | {b}: content type "
            f"| {b}: body | SDK {a} | SDK {b} | raw | SDK |",
            "|" + " --- |" * 11,
        ]
        for r in self.rows:
            cells = [f"`{r.scenario}`"]
            for s in r.sides:
                cells += [s.status(), _md(s.content_type()), _md(_cut(s.body(), body_width))]
            cells += [_md(_sdk_text(s.sdk)) for s in r.sides]
            cells.append("**differs**: " + ", ".join(r.raw_differences) if r.raw_differs else "=")
            cells.append("=" if r.sdk_same else "by design" if r.sdk_difference else "**MISMATCH**")
            lines.append("| " + " | ".join(cells) + " |")
        return lines

    def _markdown_mismatches(self) -> list[str]:
        """Each mismatched scenario with what broke on each side (or, where nothing did, its SDK outcome)."""
        if not self.sdk_mismatches:
            return ["None."]
        lines = []
        by_name = {r.scenario: r for r in self.rows}
        for name in self.sdk_mismatches:
            lines.append(f"- `{name}`")
            for side in by_name[name].sides:
                lines += [f"  - {side.label}: {_md(problem)}" for problem in side.problems]
                if not side.problems:
                    lines.append(f"  - {side.label}: `{json.dumps(side.projection, sort_keys=True)}`")
        return lines

    def write(self, path: str | Path) -> Path:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(self.to_markdown())
        return out


def summary_lines(summary: Mapping[str, Any], report_path: str | Path) -> list[str]:
    """What `vllm-devclient parity` prints, from `ParityReport.summary()` (or docs/parity.json)."""
    by_design: Mapping[str, str] = summary["sdk_differences_by_design"]
    mismatches: list[str] = summary["sdk_mismatches"]
    designed = "; ".join(f"{name} ({why})" for name, why in by_design.items())
    return [
        f"{len(summary['scenarios'])} scenarios, {' vs '.join(summary['labels'])}",
        f"  raw answers differ: {len(summary['raw_differences'])} (what the SDK hides)",
        f"  SDK outcome differs by design: {len(by_design)}" + (f": {designed}" if designed else ""),
        f"  SDK mismatches: {len(mismatches)}" + (f": {', '.join(mismatches)}" if mismatches else ""),
        f"full table: {report_path}",
    ]


def _calls_differ(row: ParityRow) -> bool:
    calls = [s.engine_calls for s in row.sides]
    return all(c is not None for c in calls) and any(c != calls[0] for c in calls[1:])


def _cut(text: str, width: int) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= width else text[: width - 1] + "…"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") if text else " "


def _sdk_text(sdk: Mapping[str, Any]) -> str:
    if "raised" in sdk:
        attrs = ", ".join(f"{k}={v!r}" for k, v in sdk.items() if k != "raised")
        return _cut(f"{sdk['raised']}({attrs})", 90)
    value = json.dumps(sdk.get("value"), sort_keys=True, separators=(",", ":"))
    return _cut(f"{sdk['returned']} {value}", 90)


def _side(run: ScenarioRun, label: str, model: str | None, *, check: bool) -> Side:
    sc = run.scenario
    exchanges, calls = masked_run(run, model)
    expect = sc.expect_for(run.frontend) if check else None
    projection = (
        expect.project(run.outcome, sc.compared_paths())
        if expect is not None
        else {"type": type_name(run.outcome)}
    )
    return Side(
        label=label,
        exchanges=exchanges,
        sdk=_masked_sdk(run, model),
        projection=projection,
        engine_calls=calls,
        problems=run.problems() if check else [],
    )


def _masked_sdk(run: ScenarioRun, model: str | None) -> dict[str, Any]:
    summary: dict[str, Any] = mask_value(summarize_outcome(run.outcome), model)
    if run.scenario.name.startswith(("server_info", "api_key_server_info")) and "value" in summary:
        summary["value"] = {"config": "…", "vllm_env": "…", "system_env": "…"}
    if run.scenario.name == "metrics_text":
        summary["value"] = f"<{len(str(run.outcome))} characters of Prometheus text>"
    elif run.scenario.name == "metrics" and "value" in summary:
        summary["value"] = "<counter values (they change with every request)>"
    return summary


def _raw_differences(sides: Sequence[Side]) -> list[str]:
    first, *rest = sides
    found: list[str] = []
    for other in rest:
        if len(first.exchanges) != len(other.exchanges):
            found.append("exchange count")
        for ea, eb in zip(first.exchanges, other.exchanges, strict=False):
            ra, rb = ea.get("response"), eb.get("response")
            if (ra is None) != (rb is None) or ea.get("error") != eb.get("error"):
                found.append("transport")
                continue
            if ra is None or rb is None:
                continue
            if ra["status"] != rb["status"]:
                found.append("status")
            if ra["headers"].get("content-type") != rb["headers"].get("content-type"):
                found.append("content type")
            if _body_of(ra) != _body_of(rb):
                found.append("body")
    return list(dict.fromkeys(found))


def _body_of(response: Mapping[str, Any]) -> Any:
    return response["json"] if "json" in response else response.get("text", "")


def _row(scenario: Scenario, sides: list[Side], *, live: bool) -> ParityRow:
    projections = [s.projection for s in sides]
    same = all(p == projections[0] for p in projections[1:])
    return ParityRow(
        scenario=scenario.name,
        description=scenario.description,
        sides=sides,
        raw_differences=_raw_differences(sides),
        sdk_same=same,
        sdk_difference=None if live else scenario.sdk_difference,
    )


def safe_scenarios(*, allow_reset: bool = False) -> list[Scenario]:
    """The scenarios that only read (plus the idempotent prefix-cache reset when allowed)."""
    chosen = [s for s in SCENARIOS if s.safe]
    if allow_reset:
        chosen += [s for s in SCENARIOS if s.name == "reset_prefix_cache"]
    return chosen


def run_parity(
    urls: Sequence[str] | None = None,
    *,
    report_path: str | Path | None = None,
    pool: FrontendPool | None = None,
    scenarios: Sequence[Scenario] | None = None,
    allow_reset: bool = False,
    api_key: str | None = None,
    runs: Sequence[ScenarioRun] | None = None,
) -> ParityReport:
    """Build the parity report.

    Without `urls`: every scenario on the real Python and Rust frontends of the installed vllm, each on
    a scripted engine (frontends come from `pool`, or a pool started and stopped here; `runs` from
    :func:`collect_runs` are used instead of running again). With two `urls`:
    the read-only scenarios (and `reset_prefix_cache` with `allow_reset=True`) against two live servers;
    `api_key` is sent to both. The Markdown goes to `report_path` when given.
    """
    if urls:
        report = _run_live(urls, scenarios, allow_reset=allow_reset, api_key=api_key)
    else:
        report = _run_harness(pool, scenarios, runs)
    if report_path is not None:
        report.write(report_path)
    return report


def collect_runs(
    pool: FrontendPool, scenarios: Sequence[Scenario] | None = None, frontends: Sequence[str] = FRONTENDS
) -> list[ScenarioRun]:
    """Every scenario once on each frontend (sync client), scenario by scenario: the one pass that feeds
    both the parity report (:func:`report_from_runs`) and the fixtures (`recording.write_fixtures`)."""
    chosen = list(scenarios if scenarios is not None else SCENARIOS)
    # Start everything the scenarios need at once (Python startups overlap).
    pool.start(dict.fromkeys((fe, sc.setup) for sc in chosen for fe in frontends))
    return [run_scenario(sc, pool.get(fe, sc.setup)) for sc in chosen for fe in frontends]


def report_from_runs(runs: Sequence[ScenarioRun], versions: Mapping[str, str] | None = None) -> ParityReport:
    """The harness parity report of runs made by :func:`collect_runs` (both frontends of each scenario)."""
    by_scenario: dict[str, dict[str, ScenarioRun]] = {}
    for run in runs:
        by_scenario.setdefault(run.scenario.name, {})[run.frontend] = run
    if versions is None:
        # What the frontends said on /version, where a run asked.
        versions = {
            run.frontend: f"{run.frontend} {run.outcome.version}"
            for run in runs
            if isinstance(run.outcome, VersionInfo)
        }
    report = ParityReport(mode="harness", labels=list(FRONTENDS), versions=dict(versions))
    for per_frontend in by_scenario.values():
        missing = [fe for fe in FRONTENDS if fe not in per_frontend]
        if missing:
            raise ValueError(
                f"scenario {next(iter(per_frontend.values())).scenario.name!r} has no run on {missing}"
            )
        sides = [_side(per_frontend[fe], fe, per_frontend[fe].model, check=True) for fe in FRONTENDS]
        report.rows.append(_row(per_frontend[FRONTENDS[0]].scenario, sides, live=False))
    return report


def _run_harness(
    pool: FrontendPool | None, scenarios: Sequence[Scenario] | None, runs: Sequence[ScenarioRun] | None
) -> ParityReport:
    if runs is not None:
        return report_from_runs(runs)
    own = pool is None
    active = pool if pool is not None else FrontendPool()
    try:
        return report_from_runs(collect_runs(active, scenarios))
    finally:
        if own:
            active.close()


def _run_live(
    urls: Sequence[str], scenarios: Sequence[Scenario] | None, *, allow_reset: bool, api_key: str | None
) -> ParityReport:
    if len(urls) != 2:
        raise ValueError(f"give exactly two server URLs to compare, got {len(urls)}")
    chosen = list(scenarios if scenarios is not None else safe_scenarios(allow_reset=allow_reset))
    unsafe = [s.name for s in chosen if not s.safe and not (allow_reset and s.name == "reset_prefix_cache")]
    if unsafe:
        raise ValueError(f"these scenarios change server state or need a scripted engine: {unsafe}")
    versions = _versions({"A": urls[0], "B": urls[1]}, api_key)
    labels = [f"A ({versions['A']})", f"B ({versions['B']})"]
    report = ParityReport(mode="live", labels=labels, versions={labels[0]: urls[0], labels[1]: urls[1]})
    for sc in chosen:
        sc_live = sc if api_key is None else _with_key(sc, api_key)
        sides = []
        for label, url in zip(labels, urls, strict=True):
            run = run_scenario(sc_live, LiveServer(url.rstrip("/"), label))
            sides.append(_side(run, label, None, check=False))
        report.rows.append(_row(sc, sides, live=True))
    return report


def _with_key(sc: Scenario, key: str) -> Scenario:
    return replace(sc, api_key=key)


def _versions(urls: Mapping[str, str], api_key: str | None = None) -> dict[str, str]:
    """'python 0.33.0' / 'rust 0.33.0' per label, from /version (errors are reported, not raised)."""
    out: dict[str, str] = {}
    for label, url in urls.items():
        try:
            with make_client(url, kind="sync", api_key=api_key or "", timeout=5.0) as client:
                info = client.version()
            out[label] = f"{info.frontend} {info.version}"
        except DevClientError as exc:
            out[label] = f"unknown ({type(exc).__name__})"
    return out
