"""vLLM 0.33's `HTTPVLLMWeightSyncClient` and our `WeightSync` side by side, on the same scenarios: the real
Python and Rust frontends on a scripted engine, and a misbehaving raw server for what no frontend does.

    .venv/bin/python scripts/weight_sync_compare.py \
        --json docs/weight_sync_compare.json --doc docs/weight-sync.md

writes the run (every cell: what the call raised or returned, how long it took, how many requests the
server read, whether an update was left open) and the table in the doc between its markers. The contract
test `contract_tests/test_weight_sync_compare.py` runs the same scenarios and checks our column.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata as md
import json
import os
import platform
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vllm.distributed.weight_transfer import HTTPVLLMWeightSyncClient, VLLMWeightSyncClient

from vllm_devclient import DevClient, Fleet, WeightSync
from vllm_devclient.testing.engine_actions import Hang, Raise, Return
from vllm_devclient.testing.frontends import Frontend, PythonFrontend, RustFrontend
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import Answer, Close, Trickle
from vllm_devclient.testing.model_dir import make_model_dir

KINDS = ("vllm", "ours")
HEADER = {"vllm": "vLLM `HTTPVLLMWeightSyncClient`", "ours": "vllm-devclient `WeightSync`"}
TIMEOUT = 1.0  # the per-call timeout both clients get where a scenario bounds the call
BATCH = {
    "names": ["w"],
    "dtype_names": ["bfloat16"],
    "shapes": [[2, 3]],
    "ipc_handles": [{"GPU-0": (2, b"h")}],
}
BEGIN, END = "<!-- weight-sync-compare:begin -->", "<!-- weight-sync-compare:end -->"


@dataclass
class Cell:
    outcome: str  # "ok", or the exception's type and the start of its message
    seconds: float
    requests: int | None = None  # what the server read on the scenario's route (None: not counted)
    left_open: list[str] | None = None  # servers left with a started, unfinished update

    def text(self) -> str:
        parts = [self.outcome, f"{self.seconds:.2f} s"]
        if self.requests is not None:
            parts.append(f"{self.requests} request{'s' if self.requests != 1 else ''} read")
        if self.left_open is not None:
            parts.append(
                f"update left open on {', '.join(self.left_open)}" if self.left_open else "no update open"
            )
        return "; ".join(parts)


def _outcome(fn: Callable[[], object]) -> tuple[str, float]:
    start = time.monotonic()
    try:
        fn()
    except Exception as exc:  # what each client raises is the finding
        # Every line (a fleet's error names its failed targets on the next ones), cut to one cell.
        text = " ".join(line.strip() for line in str(exc).splitlines())
        return f"{type(exc).__name__}: {text[:160]}", time.monotonic() - start
    return "ok", time.monotonic() - start


def client(kind: str, url: str, timeout: float | None = None) -> VLLMWeightSyncClient:
    if kind == "vllm":
        return HTTPVLLMWeightSyncClient(url, timeout=timeout if timeout is not None else 300)
    return WeightSync(DevClient(url)) if timeout is None else WeightSync(DevClient(url), timeout=timeout)


def _open(fe: Frontend) -> bool:
    steps = [c.args[0] for c in fe.engine.calls if c.kind == "utility" and c.method == "collective_rpc"]
    return steps.count("start_weight_update") > steps.count("finish_weight_update")


def _label(fe: Frontend) -> str:
    return fe.frontend


# ---- on the real frontends ----------------------------------------------------------------------------


def round_with_ipc_handles(kind: str, fe: Frontend) -> Cell:
    sync = client(kind, fe.base_url)

    def run() -> None:
        sync.start_weight_update()
        sync.update_weights(dict(BATCH))
        sync.finish_weight_update("step-1")

    outcome, seconds = _outcome(run)
    return Cell(outcome, seconds, None, [_label(fe)] if _open(fe) else [])


def engine_fails_a_batch(kind: str, fe: Frontend) -> Cell:
    fe.engine.script("collective_rpc", [Return([None]), Raise("shape mismatch for w"), Return([None])])
    sync = client(kind, fe.base_url)

    def run() -> None:
        sync.start_weight_update()
        sync.update_weights({"names": ["w"], "dtype_names": ["bfloat16"], "shapes": [[2, 3]]})

    outcome, seconds = _outcome(run)
    return Cell(outcome, seconds, None, [_label(fe)] if _open(fe) else [])


def engine_hangs_at_start(kind: str, fe: Frontend) -> Cell:
    fe.engine.script("collective_rpc", Hang())
    outcome, seconds = _outcome(client(kind, fe.base_url, TIMEOUT).start_weight_update)
    fe.engine.release_hung()
    return Cell(outcome, seconds)


def fleet_start_fails_on_one(kind: str, fes: Sequence[Frontend]) -> Cell:
    """vLLM ships no HTTP fleet: its column is one HTTPVLLMWeightSyncClient per server, called in turn."""
    fes[-1].engine.script("collective_rpc", Raise("no memory for the reload"))
    urls = [fe.base_url for fe in fes]
    if kind == "vllm":
        clients = [HTTPVLLMWeightSyncClient(u) for u in urls]

        def run() -> None:
            for c in clients:
                c.start_weight_update()

        outcome, seconds = _outcome(run)
    else:
        with Fleet(urls) as fleet:
            outcome, seconds = _outcome(WeightSync(fleet).start_weight_update)
    # The last target's start failed (its engine raised): only the others can hold an open update.
    return Cell(outcome, seconds, None, [_label(fe) for fe in fes[:-1] if _open(fe)])


# ---- on a misbehaving server --------------------------------------------------------------------------


def dropped_after_read(kind: str, server: MisbehavingServer) -> Cell:
    server.script("/update_weights", [Close(), Answer(200, json={"message": "ok"})])
    outcome, seconds = _outcome(lambda: client(kind, server.base_url).update_weights({"names": ["w"]}))
    return Cell(outcome, seconds, server.count("/update_weights"))


def nothing_listens(kind: str, server: MisbehavingServer) -> Cell:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    outcome, seconds = _outcome(client(kind, url).start_weight_update)
    return Cell(outcome, seconds)


def gateway_502(kind: str, server: MisbehavingServer) -> Cell:
    server.script(
        "/start_weight_update", [Answer(502, body=b"Bad Gateway"), Answer(200, json={"message": "ok"})]
    )
    outcome, seconds = _outcome(client(kind, server.base_url).start_weight_update)
    return Cell(outcome, seconds, server.count("/start_weight_update"))


def trickled_answer(kind: str, server: MisbehavingServer) -> Cell:
    answer = Answer(200, json={"message": "Weight update finished"})
    server.script("/finish_weight_update", Trickle(answer, part="body", interval=0.2))
    outcome, seconds = _outcome(lambda: client(kind, server.base_url, TIMEOUT).finish_weight_update("v1"))
    return Cell(outcome, seconds, server.count("/finish_weight_update"))


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    on: str  # "frontend" (each real frontend), "fleet" (both in one fleet) or "raw" (the misbehaving server)
    run: Callable[[str, Any], Cell]


def _scenario(name: str, what: str, on: str) -> Scenario:
    return Scenario(name, what, on, globals()[name])


SCENARIOS = (
    _scenario("round_with_ipc_handles", "a round whose batch carries CUDA IPC handles", "frontend"),
    _scenario("engine_fails_a_batch", "typed errors: the engine raises in update_weights", "frontend"),
    _scenario(
        "engine_hangs_at_start",
        f"deadline: the engine never answers start (timeout {TIMEOUT:g} s)",
        "frontend",
    ),
    _scenario(
        "fleet_start_fails_on_one", "partial fleet failure: start fails on the Rust frontend of two", "fleet"
    ),
    _scenario("dropped_after_read", "retries: the connection drops after the batch was read", "raw"),
    _scenario("nothing_listens", "retries: nothing listens on the server's port", "raw"),
    _scenario("gateway_502", "retries: a gateway answers 502 to start", "raw"),
    _scenario(
        "trickled_answer", f"deadline: the answer trickles 1 byte / 0.2 s (timeout {TIMEOUT:g} s)", "raw"
    ),
)


def run_scenario(
    scenario: Scenario, kind: str, frontends: Sequence[Frontend], server: MisbehavingServer
) -> dict[str, Cell]:
    """One scenario for one client: a cell per frontend ("python", "rust"), or one ("fleet", "raw")."""
    cells: dict[str, Cell] = {}
    if scenario.on == "frontend":
        for fe in frontends:
            fe.engine.reset()
            cells[fe.frontend] = scenario.run(kind, fe)
            fe.engine.reset()
    elif scenario.on == "fleet":
        for fe in frontends:
            fe.engine.reset()
        cells["fleet"] = scenario.run(kind, frontends)
        for fe in frontends:
            fe.engine.reset()
    else:
        server.reset()
        cells["raw"] = scenario.run(kind, server)
    return cells


def run_all(frontends: Sequence[Frontend], server: MisbehavingServer) -> list[dict[str, Any]]:
    rows = []
    for scenario in SCENARIOS:
        row: dict[str, Any] = {"name": scenario.name, "what": scenario.what, "on": scenario.on}
        for kind in KINDS:
            print(f"{scenario.name}: {kind}", file=sys.stderr, flush=True)
            row[kind] = {
                where: asdict(cell) for where, cell in run_scenario(scenario, kind, frontends, server).items()
            }
        rows.append(row)
    return rows


def table(run: dict[str, Any]) -> str:
    """The Markdown table of a run (what the doc holds between its markers)."""
    lines = [
        f"| scenario | where | {HEADER['vllm']} | {HEADER['ours']} |",
        "| --- | --- | --- | --- |",
    ]
    for row in run["rows"]:
        for where in row["ours"]:
            theirs, ours = Cell(**row["vllm"][where]), Cell(**row["ours"][where])
            lines.append(f"| {row['what']} | {where} | {theirs.text()} | {ours.text()} |")
    return "\n".join(lines)


def write_doc(doc: Path, run: dict[str, Any]) -> None:
    text = doc.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    note = f"\n<!-- generated by scripts/weight_sync_compare.py from {run['source']}; do not edit -->\n"
    doc.write_text(f"{head}{BEGIN}{note}{table(run)}\n{END}{tail}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", type=Path, required=True, help="where the run goes")
    parser.add_argument("--doc", type=Path, help="the doc whose table is written again from the run")
    args = parser.parse_args(argv)
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    model = make_model_dir()
    started: list[Frontend] = []
    try:
        for kind in (PythonFrontend, RustFrontend):
            started.append(kind(model_dir=model).start())
        with MisbehavingServer() as server:
            rows = run_all(started, server)
    finally:
        for fe in started:
            fe.stop()

    run = {
        "source": str(args.json),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]}",
        "vllm": md.version("vllm"),
        "timeout_s": TIMEOUT,
        "rows": rows,
    }
    args.json.write_text(json.dumps(run, indent=1) + "\n")
    if args.doc is not None:
        write_doc(args.doc, run)
    print(table(run))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
