"""Record the contract scenarios against real frontends as JSON fixtures, replay them, and check for drift.

    python -m vllm_devclient.testing.recording record --out rust_fixtures/
    python -m vllm_devclient.testing.recording drift          # exit 1: the installed vllm answers otherwise
    python -m vllm_devclient.testing.recording diff OLD NEW   # compare two fixture trees, no server

A fixture is one scenario on one frontend of one release,
`rust_fixtures/<version>/<frontend>/<scenario>.json`, holding the HTTP exchanges (request method, path,
query, body; response status, the headers the SDK reads, body), the engine calls they caused, and the SDK
outcome (typed result or error, reduced to the fields the scenario checks). Keys are sorted and run-specific
values (timestamps, random ids, call ids, ports, the model path, machine details in /server_info, metric
values) are masked, so recording an unchanged server twice gives the same bytes. `--python`/`--vllm-rs`
record an older release from its own install (see docs/releases.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .engine import Action, Delay, Hang, Raise, Return, ScriptedEngine
from .frontends import RustFrontend, _free_port, find_vllm_rs
from .parity import FRONTENDS, FrontendPool, collect_runs
from .scenarios import (
    SCENARIOS,
    LiveServer,
    Scenario,
    ScenarioRun,
    arun_scenario,
    get_scenario,
    mask_exchange,
    run_scenario,
    timing_independent,
)

__all__ = [
    "FORMAT",
    "Drift",
    "LegacyRustFrontend",
    "ReleaseProfile",
    "ReleaseScriptedEngine",
    "diff_fixture_trees",
    "fixture_from_run",
    "installed_vllm_version",
    "load_fixtures",
    "main",
    "record",
    "replay",
    "replay_async",
    "replay_transport",
    "summary",
    "write_fixtures",
]

FORMAT = 1
DEFAULT_OUT = Path("rust_fixtures")
REPLAY_URL = "http://vllm.replay"


# ---------------------------------------------------------------------------------------- releases


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


@dataclass(frozen=True)
class ReleaseProfile:
    """What differs in the engine protocol and the vllm-rs command line of an older release.

    From docs/releases.md: pause is the utility `pause_scheduler` before 0.33.0; the engine's `wake_up`
    returns nothing before 0.31.0 (the Rust router of those releases rejects a bool); `vllm-rs frontend`
    takes ZMQ addresses (it binds them) before 0.32.0, and `--data-parallel-size` from 0.28.0.
    """

    version: str

    @property
    def pause_method(self) -> str:
        return "pause_generation" if _version_tuple(self.version) >= (0, 33) else "pause_scheduler"

    @property
    def wake_up_returns_bool(self) -> bool:
        return _version_tuple(self.version) >= (0, 31)

    @property
    def rust_listener_fds(self) -> bool:
        return _version_tuple(self.version) >= (0, 32)

    @property
    def rust_has_dp_size_flag(self) -> bool:
        return _version_tuple(self.version) >= (0, 28)

    @property
    def renames(self) -> dict[str, str]:
        return {} if self.pause_method == "pause_generation" else {"pause_generation": self.pause_method}


class ReleaseScriptedEngine(ScriptedEngine):
    """A ScriptedEngine that answers like the engine of `profile`'s release.

    Scripts written for 0.33.0 method names are moved to the release's names, and methods that return
    nothing in that release answer nil whatever the script's value (a real engine could not do otherwise).
    """

    def __init__(self, profile: ReleaseProfile, **kwargs: Any) -> None:
        overrides = {"vllm_version": profile.version, **kwargs.pop("ready_overrides", {})}
        super().__init__(ready_overrides=overrides, **kwargs)
        self.profile = profile
        self._apply_release_defaults()

    def _apply_release_defaults(self) -> None:
        if not self.profile.wake_up_returns_bool:
            super().script("wake_up", [Return(None)])

    def script(self, method: str, actions: Action | Iterable[Action]) -> None:
        method = self.profile.renames.get(method, method)
        items: list[Action] = (
            [actions] if isinstance(actions, Return | Raise | Delay | Hang) else list(actions)
        )
        if method == "wake_up" and not self.profile.wake_up_returns_bool:
            items = [_as_unit(a) for a in items]
        super().script(method, items)

    def reset(self) -> None:
        super().reset()
        self._apply_release_defaults()


def _as_unit(action: Action) -> Action:
    if isinstance(action, Return):
        return Return(None)
    if isinstance(action, Delay):
        return Delay(action.seconds, None)
    return action


class LegacyRustFrontend(RustFrontend):
    """`vllm-rs frontend` of releases before 0.32.0: it binds the engine's ZMQ addresses itself.

    Only the launch differs from :class:`RustFrontend` (flags per docs/releases.md); the engine registers
    directly with ``start_direct`` as before.
    """

    profile: ReleaseProfile = ReleaseProfile("0.28.0")

    def _launch(self) -> None:
        binary = self.binary or find_vllm_rs()
        http = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            http.bind(("127.0.0.1", 0))
            http.listen(1024)
            self.port = http.getsockname()[1]
            self.base_url = f"http://127.0.0.1:{self.port}"
            input_addr = f"tcp://127.0.0.1:{_free_port()}"
            output_addr = f"tcp://127.0.0.1:{_free_port()}"
            args: dict[str, Any] = {"model_tag": self.model, "max_model_len": self.max_model_len}
            if self.api_key is not None:
                args["api_key"] = self.api_key
            args.update(self.extra_args)
            cmd = [
                str(binary), "frontend",
                "--listen-fd", str(http.fileno()),
                "--input-address", input_addr,
                "--output-address", output_addr,
                "--engine-start-index", str(self.engine.rank),
                "--engine-count", "1",
            ]  # fmt: skip
            if self.profile.rust_has_dp_size_flag:
                cmd += ["--data-parallel-size", "1"]
            cmd += ["--args-json", json.dumps(args)]
            self._spawn(cmd, self._env(), pass_fds=[http.fileno()])
        finally:
            http.close()
        self.engine.start_direct(input_addr, output_addr)


def installed_vllm_version(python: str | None = None) -> str:
    """The vllm version importable by `python` (default: this interpreter), without importing vllm."""
    code = "import importlib.metadata as m; print(m.version('vllm'))"
    exe = python or sys.executable
    done = subprocess.run([exe, "-c", code], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(
            f"{exe} has no vllm installed ({done.stderr.strip().splitlines()[-1:]}); "
            "install one (bash scripts/setup.sh, or docs/releases.md for older releases)"
        )
    return done.stdout.strip()


def _vllm_rs_of(python: str) -> str:
    code = "import importlib.metadata as m; print(m.distribution('vllm').locate_file('vllm/vllm-rs'))"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def release_pool(
    version: str, *, python: str | None, vllm_rs: str | None, frontends: Sequence[str]
) -> FrontendPool:
    """Frontends of one release, each on an engine that speaks that release's protocol."""
    profile = ReleaseProfile(version)
    rust_class: type[RustFrontend] = RustFrontend
    if not profile.rust_listener_fds:
        rust_class = type("LegacyRustFrontend", (LegacyRustFrontend,), {"profile": profile})
    return FrontendPool(
        python=python,
        vllm_rs=vllm_rs,
        frontends=frontends,
        engine_factory=lambda **kw: ReleaseScriptedEngine(profile, **kw),
        rust_class=rust_class,
    )


# ---------------------------------------------------------------------------------------- fixtures


def fixture_from_run(run: ScenarioRun, version: str, model: str | None) -> dict[str, Any]:
    """The fixture document of one scenario run (masked, deterministic)."""
    sc = run.scenario
    exchanges = [mask_exchange(e.as_json(), model) for e in run.exchanges]
    calls = run.engine_calls
    if sc.timing_dependent:
        exchanges, calls = timing_independent(exchanges, calls)
    expect = sc.expect_for(run.frontend)
    contract = [p for p in expect.problems(run.outcome) if not p.startswith("check failed")]
    return {
        "format": FORMAT,
        "scenario": sc.name,
        "description": sc.description,
        "vllm_version": version,
        "frontend": run.frontend,
        "setup": sc.setup,
        "timing_dependent": sc.timing_dependent,
        "client": {"api_key_sent": bool(sc.client_api_key()), "max_retries": sc.max_retries},
        "engine_script": sc.script_json(),
        "exchanges": exchanges,
        "engine_calls": calls,
        "outcome": expect.project(run.outcome, sc.compared_paths()),
        # Whether this release still meets the 0.33.0 contract of the scenario (value checks only).
        "meets_current_contract": not contract,
    }


def _dump(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_fixtures(runs: Sequence[ScenarioRun], out: str | Path, version: str, *, log: Any = None) -> Path:
    """One fixture file per run under `out/<version>/<frontend>/`; returns `out/<version>`."""
    base = Path(out) / version
    for run in runs:
        folder = base / run.frontend
        folder.mkdir(parents=True, exist_ok=True)
        doc = fixture_from_run(run, version, run.model)
        (folder / f"{run.scenario.name}.json").write_text(_dump(doc))
        if log is not None:
            print(f"recorded {version}/{run.frontend}/{run.scenario.name}", file=log)
    return base


def record(
    out: str | Path = DEFAULT_OUT,
    *,
    python: str | None = None,
    vllm_rs: str | None = None,
    frontends: Sequence[str] = FRONTENDS,
    scenarios: Sequence[Scenario] | None = None,
    pool: FrontendPool | None = None,
    version: str | None = None,
    runs: Sequence[ScenarioRun] | None = None,
    log: Any = None,
) -> Path:
    """Record every scenario on each frontend into `out/<version>/<frontend>/`; returns that version's dir.

    The release is the one `python` imports (default: this interpreter's vllm); its frontends are started
    here unless `pool` is given, and nothing is run when `runs` (from `parity.collect_runs`) are given (then
    `version` must name the release they ran on).
    """
    version = version or installed_vllm_version(python)
    if runs is not None:
        return write_fixtures(runs, out, version, log=log)
    if python is not None and vllm_rs is None and "rust" in frontends:
        vllm_rs = _vllm_rs_of(python)
    own = pool is None
    active = pool or release_pool(version, python=python, vllm_rs=vllm_rs, frontends=frontends)
    try:
        return write_fixtures(collect_runs(active, scenarios, frontends), out, version, log=log)
    finally:
        if own:
            active.close()


def load_fixtures(root: str | Path = DEFAULT_OUT) -> list[tuple[Path, dict[str, Any]]]:
    """Every fixture under `root` (sorted by path)."""
    out = []
    for path in sorted(Path(root).glob("*/*/*.json")):
        out.append((path, json.loads(path.read_text())))
    return out


# ---------------------------------------------------------------------------------------- replay


def _request_key(request: Mapping[str, Any]) -> str:
    return json.dumps(request, sort_keys=True)


def _recorded_request(request: httpx.Request) -> dict[str, Any]:
    from .scenarios import _request_json  # the same reduction the recorder applied

    data: dict[str, Any] = mask_exchange({"request": _request_json(request)})["request"]
    return data


def _response(exchange: Mapping[str, Any], request: httpx.Request) -> httpx.Response:
    if "error" in exchange:
        kind = getattr(httpx, str(exchange["error"]), None)
        if not (isinstance(kind, type) and issubclass(kind, httpx.TransportError)):
            kind = httpx.TransportError
        raise kind(f"replayed {exchange['error']}", request=request)
    resp = exchange["response"]
    if "json" in resp:
        content = json.dumps(resp["json"], separators=(",", ":"), ensure_ascii=False).encode()
    else:
        content = str(resp.get("text", "")).encode()
    return httpx.Response(resp["status"], headers=resp["headers"], content=content, request=request)


class ReplayError(AssertionError):
    """The SDK sent a request that the fixture did not record."""


def replay_transport(exchanges: Sequence[Mapping[str, Any]]) -> httpx.MockTransport:
    """A transport answering each request with the recorded answers to the same request, in order; the
    last one repeats (a timing-dependent run recorded each distinct exchange once)."""
    queues: dict[str, list[Mapping[str, Any]]] = {}
    for ex in exchanges:
        queues.setdefault(_request_key(ex["request"]), []).append(ex)

    def handle(request: httpx.Request) -> httpx.Response:
        sent = _recorded_request(request)
        queue = queues.get(_request_key(sent))
        if not queue:
            known = "\n  ".join(sorted(queues))
            raise ReplayError(
                f"no recorded answer for {json.dumps(sent, sort_keys=True)}; recorded:\n  {known}"
            )
        exchange = queue.pop(0) if len(queue) > 1 else queue[0]
        return _response(exchange, request)

    return httpx.MockTransport(handle)


def replay(doc: Mapping[str, Any]) -> ScenarioRun:
    """The fixture's scenario with a DevClient against its recorded exchanges (no server)."""
    sc = get_scenario(str(doc["scenario"]))
    return run_scenario(
        sc, LiveServer(REPLAY_URL, str(doc["frontend"])), transport=replay_transport(doc["exchanges"])
    )


async def replay_async(doc: Mapping[str, Any]) -> ScenarioRun:
    """The same with an AsyncDevClient."""
    sc = get_scenario(str(doc["scenario"]))
    target = LiveServer(REPLAY_URL, str(doc["frontend"]))
    return await arun_scenario(sc, target, transport=replay_transport(doc["exchanges"]))


# ---------------------------------------------------------------------------------------- drift


@dataclass(frozen=True)
class Drift:
    """One difference between a committed fixture and a fresh recording."""

    version: str
    frontend: str
    scenario: str
    field: str
    committed: Any
    now: Any

    def __str__(self) -> str:
        where = f"{self.version}/{self.frontend}/{self.scenario}"
        if self.field == "(file)":
            return f"{where}: {self.committed} -> {self.now}"
        return f"{where}: {self.field}: committed {_show(self.committed)}, now {_show(self.now)}"


_MISSING = object()


def _show(value: Any) -> str:
    if value is _MISSING:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 200 else text[:197] + "..."


def _walk(a: Any, b: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from _walk(a.get(key, _MISSING), b.get(key, _MISSING), f"{path}.{key}" if path else key)
    elif isinstance(a, list) and isinstance(b, list):
        # Item by item; a longer list shows its extra items as absent on the other side.
        for i in range(max(len(a), len(b))):
            x = a[i] if i < len(a) else _MISSING
            y = b[i] if i < len(b) else _MISSING
            yield from _walk(x, y, f"{path}[{i}]")
    elif a != b or type(a) is not type(b):
        yield path, a, b


def diff_fixture_trees(
    committed: str | Path, fresh: str | Path, *, only: Iterable[str] | None = None
) -> list[Drift]:
    """Every field that differs between two fixture trees (`<version>/<frontend>/<scenario>.json`).

    `only` limits the comparison to those `<version>/<frontend>` folders (what a fresh recording covers).
    """
    old_root, new_root = Path(committed), Path(fresh)
    for root in (old_root, new_root):
        if not root.is_dir():
            raise FileNotFoundError(f"no fixture tree at {root}")
    folders = set(only) if only is not None else None
    old = {p.relative_to(old_root): p for p in old_root.glob("*/*/*.json")}
    new = {p.relative_to(new_root): p for p in new_root.glob("*/*/*.json")}
    if folders is not None:
        old = {k: v for k, v in old.items() if str(k.parent) in folders}
        new = {k: v for k, v in new.items() if str(k.parent) in folders}
    drifts: list[Drift] = []
    for rel in sorted(set(old) | set(new)):
        version, frontend, name = rel.parts[0], rel.parts[1], rel.stem
        if rel not in new:
            drifts.append(Drift(version, frontend, name, "(file)", "recorded", "no longer recorded"))
            continue
        if rel not in old:
            drifts.append(Drift(version, frontend, name, "(file)", "absent", "newly recorded"))
            continue
        a, b = json.loads(old[rel].read_text()), json.loads(new[rel].read_text())
        drifts += [Drift(version, frontend, name, f, x, y) for f, x, y in _walk(a, b, "")]
    return drifts


def drift(
    fixtures: str | Path = DEFAULT_OUT,
    *,
    python: str | None = None,
    vllm_rs: str | None = None,
    frontends: Sequence[str] = FRONTENDS,
    pool: FrontendPool | None = None,
    version: str | None = None,
    runs: Sequence[ScenarioRun] | None = None,
    keep: str | Path | None = None,
) -> list[Drift]:
    """Re-record the installed release (or write `runs`) into a temporary tree and diff it against the
    committed fixtures of the same release and frontends."""
    tmp = Path(tempfile.mkdtemp(prefix="vllm-fixtures-"))
    try:
        base = record(
            tmp, python=python, vllm_rs=vllm_rs, frontends=frontends, pool=pool, version=version, runs=runs
        )
        if keep is not None:
            shutil.copytree(tmp, keep, dirs_exist_ok=True)
        only = [f"{base.name}/{fe}" for fe in frontends]
        return diff_fixture_trees(fixtures, tmp, only=only)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _report(drifts: Sequence[Drift], out: Any) -> int:
    if not drifts:
        print("no drift: the recordings match the committed fixtures", file=out)
        return 0
    scenarios = sorted({(d.version, d.frontend, d.scenario) for d in drifts})
    print(f"DRIFT in {len(scenarios)} fixture(s), {len(drifts)} field(s):", file=out)
    for d in drifts:
        print(f"  {d}", file=out)
    print("re-record with: python -m vllm_devclient.testing.recording record (and review the diff)", file=out)
    return 1


# ---------------------------------------------------------------------------------------- summary


def _cell(doc: Mapping[str, Any]) -> str:
    last = doc["exchanges"][-1] if doc["exchanges"] else {}
    raw = str(last.get("error", "")) or str(last.get("response", {}).get("status", "-"))
    resp = last.get("response", {})
    if resp and "json" not in resp and not resp.get("text") and raw == "200":
        raw += " empty"
    outcome = doc["outcome"]
    sdk = outcome["type"] if outcome["kind"] == "result" else f"**{outcome['type']}**"
    return f"{raw} → {sdk}" + ("" if doc["meets_current_contract"] else " ✗")


def summary(root: str | Path = DEFAULT_OUT) -> str:
    """A Markdown matrix: per scenario, what each recorded release and frontend answered (last exchange's
    status, the SDK's result type or **error**, ✗ where the current contract does not hold)."""
    docs = [doc for _, doc in load_fixtures(root)]
    columns = sorted(
        {(d["vllm_version"], d["frontend"]) for d in docs}, key=lambda c: (_version_tuple(c[0]), c[1])
    )
    cells = {(d["scenario"], d["vllm_version"], d["frontend"]): _cell(d) for d in docs}
    names = [sc.name for sc in SCENARIOS if any((sc.name, *c) in cells for c in columns)]
    lines = [
        "| scenario | " + " | ".join(f"{v} {fe}" for v, fe in columns) + " |",
        "|" + " --- |" * (len(columns) + 1),
    ]
    for name in names:
        row = [cells.get((name, *c), "not recorded") for c in columns]
        lines.append(f"| `{name}` | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m vllm_devclient.testing.recording", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def release_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--python", help="interpreter of the vllm install to record (default: this one)")
        p.add_argument("--vllm-rs", help="vllm-rs binary (default: the one in that install)")
        p.add_argument(
            "--frontends", default="python,rust", help="comma-separated: python,rust (default both)"
        )

    rec = sub.add_parser("record", help="record every scenario into OUT/<version>/<frontend>/")
    rec.add_argument("--out", default=str(DEFAULT_OUT))
    rec.add_argument("--scenarios", help="comma-separated scenario names (default: all)")
    release_args(rec)
    dr = sub.add_parser("drift", help="re-record and diff against the committed fixtures; exit 1 on drift")
    dr.add_argument("--fixtures", default=str(DEFAULT_OUT))
    dr.add_argument("--keep", help="also copy the fresh recording here")
    release_args(dr)
    sm = sub.add_parser("summary", help="print a Markdown matrix of the recorded answers")
    sm.add_argument("--fixtures", default=str(DEFAULT_OUT))
    df = sub.add_parser("diff", help="diff two fixture trees (no server); exit 1 when they differ")
    df.add_argument("committed")
    df.add_argument("fresh")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "diff":
        return _report(diff_fixture_trees(args.committed, args.fresh), sys.stdout)
    if args.command == "summary":
        print(summary(args.fixtures), end="")
        return 0
    frontends = [f.strip() for f in args.frontends.split(",") if f.strip()]
    python = os.path.abspath(args.python) if args.python else None
    if args.command == "record":
        chosen = [get_scenario(n.strip()) for n in args.scenarios.split(",")] if args.scenarios else None
        base = record(
            args.out,
            python=python,
            vllm_rs=args.vllm_rs,
            frontends=frontends,
            scenarios=chosen,
            log=sys.stderr,
        )
        print(f"fixtures written under {base}", file=sys.stderr)
        return 0
    drifts = drift(args.fixtures, python=python, vllm_rs=args.vllm_rs, frontends=frontends, keep=args.keep)
    return _report(drifts, sys.stdout)


if __name__ == "__main__":
    raise SystemExit(main())
