#!/usr/bin/env python3
"""Write every figure in the docs from the committed artifact it comes from, or check that they agree.

    python scripts/figures.py            # write them (`make figures`; `make bench` runs it too)
    python scripts/figures.py --check    # exit 1, naming each figure that differs from its artifact
    python scripts/figures.py --parity   # run the parity report (both real frontends), write docs/parity.json

A figure sits between markers in a doc, inline in a sentence or a table cell or as a block of lines:
`<!-- figure:NAME -->...<!-- /figure -->`. NAME says what renders it (`FIGURES`) and from what:

| figures | artifact | written by |
| --- | --- | --- |
| `bench.*` | `benchmarks/results.json` | `make bench` |
| `parity.*` | `docs/parity.json` | `--parity` here (contract_tests/test_parity.py checks it) |
| `fixtures.*` | `rust_fixtures/summary.json` | this script, from the fixture tree |
| `support.*` | `vllm_devclient/route_support.json` | this script, from the fixture tree |
| `history.*`, `bounds.*`, `default.*` | the code: fixtures.history, testing.bounds, defaults | - |
| `rl.*` | `docs/rl_frameworks.json` | `python -m tools.rl_frameworks` (test_rl_frameworks_run.py checks it) |

A marker naming no figure and a figure that no doc uses are both errors (a rule that applies nowhere is a
bug, as in httpcore's unasync). A figure that is an estimate is not generated: the doc says "estimate"
beside it, and tests/test_doc_figures.py fails on any other number with a unit in the docs' prose.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import inspect
import json
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DOCS = (
    "README.md",
    "docs/cli.md",
    "docs/frontends.md",
    "docs/releases.md",
    "rust_fixtures/README.md",
    "benchmarks/README.md",
    "docs/support.md",
    "docs/weight-sync.md",
)
BENCH = "benchmarks/results.json"
PARITY = "docs/parity.json"
FIXTURES = "rust_fixtures/summary.json"
SUPPORT = "vllm_devclient/route_support.json"
RL_FRAMEWORKS = "docs/rl_frameworks.json"
MARKER = re.compile(r"<!-- figure:(?P<name>[\w.:-]+) -->(?P<body>.*?)<!-- /figure -->", re.S)

Render = Callable[[str], str]
FIGURES: dict[str, Render] = {}


def figure(name: str) -> Callable[[Render], Render]:
    def register(render: Render) -> Render:
        FIGURES[name] = render
        return render

    return register


class FigureError(Exception):
    """A marker names no figure, an artifact lacks what a figure needs, or a figure is used nowhere."""


# ---- the artifacts -----------------------------------------------------------------------------------------


@functools.cache
def _json(relative: str) -> Any:
    return json.loads((ROOT / relative).read_text())


@functools.cache
def fixture_summary() -> dict[str, Any]:
    """What rust_fixtures/summary.json must hold (and the fixtures.* figures show): the summary of the
    fixture tree as it is."""
    from tools.fixtures.summary import summary_data

    return summary_data(ROOT / "rust_fixtures")


@functools.cache
def support_summary() -> dict[str, Any]:
    """What vllm_devclient/route_support.json must hold (and the support.* figures show): the support
    matrix of the fixture tree as it is."""
    from tools.fixtures.support import support_data

    return support_data(ROOT / "rust_fixtures")


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# ---- numbers as the docs write them ------------------------------------------------------------------------


def _x(r: float) -> str:
    return f"{r:.2f}x" if r < 10 else f"{r:.1f}x"


def _span(values: list[float], fmt: Callable[[float], str]) -> str:
    low, high = min(values), max(values)
    return fmt(low) if fmt(low) == fmt(high) else f"{fmt(low).rstrip('x')}\u2013{fmt(high)}"


def _us(v: float) -> str:
    return f"{v:+.0f} µs"


def _seconds(v: float) -> str:
    return f"{v:g} s"


# ---- bench.*: benchmarks/results.json ----------------------------------------------------------------------


def _rows(bench: str) -> list[dict[str, Any]]:
    result = _json(BENCH)["benchmarks"].get(bench)
    if result is None or result.get("status") != "ok":
        raise FigureError(f"{BENCH}: benchmark {bench!r} did not run ({(result or {}).get('error')})")
    rows: list[dict[str, Any]] = result["rows"]
    return rows


def _row(bench: str, metric: str) -> dict[str, Any]:
    for row in _rows(bench):
        if row["metric"] == metric:
            return row
    raise FigureError(f"{BENCH}: no row {metric!r} in {bench!r} (renamed? run `make bench`)")


def _ratio(bench: str, metric: str) -> float:
    return float(_row(bench, metric)["ratio"])


def _gain(bench: str, metric: str) -> float:
    """How many times less the SDK took than its baseline."""
    return 1.0 / _ratio(bench, metric)


def _met(row: Mapping[str, Any]) -> str:
    return "met" if row["ok"] else "NOT met"


def _goal(row: Mapping[str, Any]) -> str:
    goal = str(row["goal"]).replace("<=", "≤").replace(">=", "≥")
    return f"goal{' ' if goal[:1] in '≤≥' else ': '}{goal}, {_met(row)}"


_OWN_COST = "rust {mode} {route}: SDK on {t} vs bare {t}"
_GAIN = "rust {mode} {route}: transport gain, SDK on {pool} vs SDK on httpx"
_POOLS = (("sync", "h11"), ("async", "aiohttp"))
_ROUTES3 = ("reset_prefix_cache", "is_paused", "version")
_ROUTES2 = ("version", "reset_prefix_cache")


@figure("bench.transport-gain")
def _transport_gain(_: str) -> str:
    gains = [_gain("transport", _GAIN.format(mode=m, route=r, pool=p)) for m, p in _POOLS for r in _ROUTES2]
    return _span(gains, _x)


@figure("bench.reset-check")
def _reset_check(_: str) -> str:
    row = _row("reset_check", "verified reset vs its requests by hand")
    sent = _row("reset_check", "requests of one verified reset")["value"]
    plain = "the same requests sent by hand"
    return f"{sent} requests, {row['ratio']:.2f}x {plain} ({_goal(row)})"


@figure("bench.run")
def _run(_: str) -> str:
    data = _json(BENCH)
    m = data["machine"]
    load = (data.get("loadavg") or {}).get("start")
    run = f"{data['date'][:10]}, commit {data['commit']}, {m['cpus']} CPUs ({m['cpu']}), Python {m['python']}"
    return run + (f", load average {load[0]:g} at the start" if load else "")


def _own_cost_line() -> str:
    rows = [
        _row("overhead", _OWN_COST.format(mode=m, route=r, t=t))
        for m, pool in _POOLS
        for t in ("httpx", pool)
        for r in _ROUTES3
    ]
    met = sum(1 for r in rows if r["ok"])
    in_process = [
        _row("overhead", f"in-process {m} {r}: SDK on httpx vs bare httpx")["delta"]
        for m in ("sync", "async")
        for r in _ROUTES3
    ]
    return (
        f"- **The SDK's own cost per call**, over the same transport as its bare baseline (the SDK on httpx, "
        f"h11 or aiohttp against the same request by hand with that library, on the real Rust frontend): "
        f"{_span([r['ratio'] for r in rows], _x)} the bare call, {_span([r['delta'] for r in rows], _us)}; "
        f"goal ≤ 1.10x, met in {met} of {len(rows)} rows. With no socket (httpx in-process): "
        f"{_span(in_process, _us)}."
    )


def _peers_line() -> str:
    floor = _row("transport", "rust sync version vs http.client")
    aio = [_row("transport", f"rust async {r} vs aiohttp") for r in _ROUTES2]
    return (
        f"- **The transport**: the default pools (h11 sync, aiohttp async) make a call "
        f"{_transport_gain('')} faster than the same SDK on httpx. End to end, the sync SDK takes "
        f"{_x(floor['ratio'])} the time of bare `http.client` on `/version` ({_goal(floor)}); the async SDK "
        f"{_x(aio[0]['ratio'])} the time of bare aiohttp on `/version` ({_goal(aio[0])}) and "
        f"{_x(aio[1]['ratio'])} on the reset ({_met(aio[1])})."
    )


def _fan_out_line() -> str:
    prefix = "fleet fan-out 256 instant targets, client CPU per request: "
    former = next(r for r in _rows("transport") if r["metric"].startswith(prefix + "transport gain"))
    by_hand = next(r for r in _rows("transport") if r["metric"].startswith(prefix + "AsyncFleet vs aiohttp"))
    burst = _row(
        "transport",
        "1000 vs 100 concurrent calls on one AsyncDevClient on its default pool (wall time ratio)",
    )
    on_httpx = _row(
        "transport", "1000 vs 100 concurrent calls on one AsyncDevClient on httpx (wall time ratio)"
    )
    return (
        f"- **Fan-out over 256 instant targets**: {former['sdk']['median']:.0f} µs of client CPU per "
        f"request, {_x(1 / former['ratio'])} less than the fleet's former layout, an AsyncDevClient on httpx "
        f"per target ({_goal(former)}), and {_x(by_hand['ratio'])} the CPU of a hand-written aiohttp "
        f"gather. 1,000 concurrent calls on one AsyncDevClient take {_x(burst['value'])} the time of 100 "
        f"({_goal(burst)}; on httpx {_x(on_httpx['value'])})."
    )


def _fleet_line() -> str:
    one_now = _row("fleet", "fleet of 32 vs 1 call, asyncio, instant, async")
    hand_now = _row("fleet", "fleet of 32 vs hand-written aiohttp gather, asyncio, instant, async")
    one_busy = _row("fleet", "fleet of 32 vs 1 call, asyncio, 50 ms, async")
    hand_busy = _row("fleet", "fleet of 32 vs hand-written aiohttp gather, asyncio, 50 ms, async")
    return (
        f"- **A fleet call over 32 targets**: with servers that answer at once, {_x(one_now['ratio'])} the "
        f"time of one call and {_x(hand_now['ratio'])} a hand-written aiohttp gather ({_goal(hand_now)}); "
        f"with 50 ms of server time, {_x(one_busy['ratio'])} one call ({_goal(one_busy)}) and "
        f"{_x(hand_busy['ratio'])} the gather ({_goal(hand_busy)})."
    )


def _barrier_line() -> str:
    what = "sync barrier, stepping"
    bound = _row("barrier", f"{what}: return after the engine's first accepted reset vs one round trip")
    latency = _row(
        "barrier", f"{what}: latency after the engine turns resettable vs a hand-written 20 ms poll loop"
    )
    polls = _row("barrier", "polls during a long wait vs a hand-written 20 ms poll loop")
    wait = f"{polls['wait_s']:g}"
    return (
        f"- **The barrier** (stepping) returns within one round trip of the engine's first accepted reset in "
        f"{bound['within']} trials ({_goal(bound)}). Once the engine can be reset it returns after "
        f"{latency['sdk']['median']:.0f} ms (median; p95 {latency['sdk']['p95']:.0f} ms), where a "
        f"hand-written 20 ms poll loop takes {latency['baseline']['median']:.0f} ms: the price of backing "
        f"off, which makes {polls['sdk']['median']:.0f} polls in a {wait} s wait where the loop makes "
        f"{polls['baseline']['median']:.0f}."
    )


def _small_lines() -> str:
    imp = _row("import", "import vllm_devclient vs httpx + one pydantic model")
    kv = _row("kv_events", "kv_events.decode.seconds_per_stream")
    return (
        f"- **Import**: `import vllm_devclient` takes {_x(imp['ratio'])} the time of httpx + one pydantic "
        f"model ({_goal(imp)}).\n"
        f"- **KV events**: the subscriber decodes at {100 / kv['ratio']:.0f}% of a bare msgspec loop's "
        f"events per second ({_goal(kv)})."
    )


@figure("bench.headline")
def _headline(_: str) -> str:
    judged = [
        r for b in _json(BENCH)["benchmarks"].values() for r in b.get("rows", []) if r.get("ok") is not None
    ]
    return "\n".join(
        [
            _own_cost_line(),
            _peers_line(),
            _fan_out_line(),
            _fleet_line(),
            _barrier_line(),
            _small_lines(),
            "",
            f"Goals met: {sum(1 for r in judged if r['ok'])} of {len(judged)}. The run: {_run('')}.",
        ]
    )


@figure("bench.table")
def _table(_: str) -> str:
    from benchmarks.__main__ import table_rows

    results = list(_json(BENCH)["benchmarks"].values())
    head, *body = table_rows(results)
    cells = [[c.replace("|", "\\|") for c in line] for line in body]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(line) + " |" for line in cells])


@figure("bench.methods")
def _methods(_: str) -> str:
    out = []
    for name, res in _json(BENCH)["benchmarks"].items():
        text = " ".join(str(res.get("method", "")).split())
        out.append(f"- **{name}** (`benchmarks/bench_{name}.py`): {text}")
    return "\n".join(out)


# ---- parity.*: docs/parity.json ----------------------------------------------------------------------------


@figure("parity.summary")
def _parity_summary(_: str) -> str:
    from vllm_devclient.testing.parity import summary_lines

    data = _json(PARITY)
    lines = summary_lines(data["summary"], "parity.md")
    return "```text\n" + "\n".join(lines) + "\n```"


@figure("parity.run")
def _parity_run(_: str) -> str:
    data = _json(PARITY)
    return f"vLLM {data['vllm']}, {data['date'][:10]}"


# ---- fixtures.* and history.*: rust_fixtures/summary.json, testing.fixtures.history ------------------------


@figure("fixtures.coverage")
def _fixture_coverage(_: str) -> str:
    counts: dict[str, dict[str, int]] = {}
    for r in fixture_summary()["recorded"]:
        counts.setdefault(r["release"], {})[r["frontend"]] = r["fixtures"]
    lines = ["| release | Python fixtures | Rust fixtures |", "| --- | --- | --- |"]
    for release, per in counts.items():
        if set(per) != {"python", "rust"}:
            raise FigureError(f"{FIXTURES}: release {release!r} is not recorded on both frontends")
        lines.append(f"| `{release}` | {per['python']} | {per['rust']} |")
    return "\n".join(lines)


@figure("fixtures.count")
def _fixture_count(_: str) -> str:
    return f"{fixture_summary()['fixtures']:,}"


@figure("fixtures.exchanges")
def _fixture_exchanges(_: str) -> str:
    return f"{fixture_summary()['exchanges']:,}"


@figure("fixtures.miss")
def _fixture_miss(_: str) -> str:
    return f"{fixture_summary()['miss_current_contract']:,}"


@figure("fixtures.matrix")
def _fixture_matrix(frontend: str) -> str:
    from tools.fixtures.summary import matrix

    return matrix(fixture_summary(), frontend).rstrip("\n")


@figure("history.changes")
def _history(_: str) -> str:
    from tools.fixtures.history import CHANGES

    lines = [
        "| releases | frontends | scenarios | what the SDK gives | why |",
        "| --- | --- | --- | --- | --- |",
    ]
    for change in CHANGES:
        gives = sorted(
            {e.type + ("" if not e.fields else " " + _fields(e.fields)) for e in change.expect.values()}
        )
        span = change.through if change.since == change.through else f"{change.since} to {change.through}"
        cells = [span, ", ".join(change.frontends), ", ".join(f"`{n}`" for n in change.expect)]
        lines.append("| " + " | ".join([*cells, "; ".join(gives), change.why]) + " |")
    return "\n".join(lines)


def _fields(fields: Mapping[str, Any]) -> str:
    return "(" + ", ".join(f"{k}={json.dumps(v)}" for k, v in fields.items()) + ")"


# ---- support.*: vllm_devclient/route_support.json ---------------------------------------------------------


@figure("support.matrix")
def _support_matrix(frontend: str) -> str:
    from vllm_devclient.support import markdown, parse

    matrix = parse(support_summary())
    if frontend not in matrix.frontends:
        raise FigureError(f"{SUPPORT}: no frontend {frontend!r}")
    return markdown(matrix, frontend)


@figure("support.releases")
def _support_releases(_: str) -> str:
    releases = support_summary()["releases"]
    return f"{len(releases)} releases, {releases[0]} to {releases[-1]}"


@figure("support.changes")
def _support_changes(_: str) -> str:
    from tools.fixtures.support import release_changes

    lines = [
        "| from | to | frontend | routes that changed | answers that changed |",
        "| --- | --- | --- | --- | --- |",
    ]
    for pair in release_changes(support_summary(), ROOT / "rust_fixtures"):
        routes = "; ".join(f"`{m['route']}` {_moved(m['from'], m['to'])}" for m in pair["routes"])
        parts: dict[str, list[str]] = {}
        for a in pair["answers"]:
            parts.setdefault(a["route"], []).append(a["part"])
        answers = "; ".join(f"`{route}` ({', '.join(p)})" for route, p in parts.items())
        lines.append(
            f"| {pair['from']} | {pair['to']} | {pair['frontend']} | {routes or '-'} | {answers or '-'} |"
        )
    return "\n".join(lines)


@figure("support.parity")
def _support_parity(_: str) -> str:
    from tools.fixtures.support import parity_by_release

    lines = [
        "| release | alike on both frontends | the SDK's outcome differs |",
        "| --- | --- | --- |",
    ]
    for row in parity_by_release(ROOT / "rust_fixtures"):
        differ = ", ".join(f"`{name}`" for name in row["differ"]) or "-"
        lines.append(f"| {row['release']} | {row['alike']} | {differ} |")
    return "\n".join(lines)


def _moved(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    if old["status"] == new["status"] == "differs":
        gone = [h for h in old["how"] if h not in new["how"]]
        came = [h for h in new["how"] if h not in old["how"]]
        said = [f"no longer: {'; '.join(gone)}"] if gone else []
        said += [f"now: {'; '.join(came)}"] if came else []
        return f"still differs ({'; '.join(said)})"
    return f"{_shown(old)} → {_shown(new)}"


def _shown(cell: Mapping[str, Any]) -> str:
    return f"absent ({cell['http']})" if cell["status"] == "absent" else str(cell["status"])


# ---- bounds.* and default.*: the code ----------------------------------------------------------------------


@figure("bounds.last-try")
def _last_try(_: str) -> str:
    from vllm_devclient.testing.bounds import LAST_TRY_S

    return _seconds(LAST_TRY_S)


@figure("bounds.allowance")
def _allowance(_: str) -> str:
    from vllm_devclient.testing.bounds import SCHEDULING_ALLOWANCE_S

    return _seconds(SCHEDULING_ALLOWANCE_S)


@figure("bounds.error-text")
def _error_text(_: str) -> str:
    from vllm_devclient.testing.bounds import ERROR_TEXT_LIMIT

    return f"{ERROR_TEXT_LIMIT:,}"


@figure("bounds.huge-page")
def _huge_page(_: str) -> str:
    from vllm_devclient.testing.misbehaving_behaviours import HugeBody

    return f"{HugeBody.size // (1024 * 1024)} MB"


def _default(function: Callable[..., Any], parameter: str) -> Any:
    return inspect.signature(function).parameters[parameter].default


@figure("default.progress-delay")
def _progress_delay(_: str) -> str:
    from vllm_devclient.cli._progress import FleetProgress

    return _seconds(_default(FleetProgress.__init__, "delay"))


@figure("default.gsm8k-timeout")
def _gsm8k_timeout(_: str) -> str:
    from vllm_devclient.gsm8k import evaluate_gsm8k_async

    return _seconds(_default(evaluate_gsm8k_async, "request_timeout"))


# ---- rl.*: docs/rl_frameworks.json ------------------------------------------------------------------------


@figure("rl.frameworks")
def _rl_frameworks(_: str) -> str:
    from tools.rl_frameworks.render import table

    return table(_json(RL_FRAMEWORKS))


@figure("rl.run")
def _rl_run(_: str) -> str:
    from tools.rl_frameworks.render import run_line

    return run_line(_json(RL_FRAMEWORKS))


# ---- writing and checking ----------------------------------------------------------------------------------


def render(name: str) -> str:
    key, _, arg = name.partition(":")
    if key not in FIGURES:
        raise FigureError(f"no figure {key!r} (known: {', '.join(sorted(FIGURES))})")
    try:
        return FIGURES[key](arg)
    except FigureError:
        raise
    except Exception as exc:  # an artifact without what the figure reads, most often
        raise FigureError(f"figure {name!r}: {type(exc).__name__}: {exc}") from exc


def rewrite(text: str, used: set[str] | None = None) -> str:
    """`text` with every figure between its markers rendered again (a block figure on lines of its own)."""

    def one(match: re.Match[str]) -> str:
        name = match["name"]
        if used is not None:
            used.add(name.partition(":")[0])
        value = render(name)
        if "\n" in value or match["body"].startswith("\n"):
            value = f"\n{value}\n"
        return f"<!-- figure:{name} -->{value}<!-- /figure -->"

    return MARKER.sub(one, text)


def stale() -> dict[str, str]:
    """Path -> what it should hold, for every doc (and the fixture summary) that differs from it."""
    used: set[str] = set()
    out: dict[str, str] = {}
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        fresh = rewrite(text, used)
        if fresh != text:
            out[doc] = fresh
    unused = sorted(set(FIGURES) - used)
    if unused:
        raise FigureError(f"figures no doc uses: {', '.join(unused)}")
    for artifact, data in ((FIXTURES, fixture_summary()), (SUPPORT, support_summary())):
        text = _dump(data)
        if not (ROOT / artifact).is_file() or (ROOT / artifact).read_text() != text:
            out[artifact] = text
    return out


def write_parity() -> Path:
    """Run the parity report on the installed vLLM's real frontends and keep its figures."""
    import importlib.metadata

    from vllm_devclient.testing.parity import run_parity

    report = run_parity()
    data = {
        "command": "python scripts/figures.py --parity",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "vllm": importlib.metadata.version("vllm"),
        "summary": report.summary(),
    }
    (ROOT / PARITY).write_text(_dump(data))
    return ROOT / PARITY


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a figure differs")
    parser.add_argument("--parity", action="store_true", help=f"run the parity report first, into {PARITY}")
    args = parser.parse_args(argv)
    if args.parity:
        print(f"wrote {write_parity().relative_to(ROOT)}")
    try:
        changes = stale()
    except (FigureError, OSError, KeyError) as exc:
        print(f"figures: {exc}", file=sys.stderr)
        return 1
    for path, text in changes.items():
        if args.check:
            print(f"{path}: differs from its artifact (run `python scripts/figures.py`)", file=sys.stderr)
        else:
            (ROOT / path).write_text(text)
            print(f"wrote {path}")
    return 1 if args.check and changes else 0


if __name__ == "__main__":
    sys.exit(main())
