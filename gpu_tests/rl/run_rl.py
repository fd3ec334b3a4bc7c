"""Issue 26's GPU run, points 1-4 on both frontends, in one device call (gpu_tests/rl/README.md).

    python3 -m gpu_tests.rl.run_rl --out DIR --deadline-s N      # gpu_tests/runner/h200_rl.sh runs it

Servers (tiny-llama, `--enforce-eager`, dev mode, the IPC weight-transfer backend, sleep mode, the worker
extension), started through the offload check's launcher (`VllmServer`): the Python and the Rust frontend
side by side from the start, and a third (Python) from the synced weights for point 1's comparison. Per
frontend, in a thread of its own:

- point 4: `collective_rpc("rank_info")`, one dict per rank;
- point 1: `examples/rl_weight_sync.py sync` (run in this process: this process is the trainer on the same
  GPU), then on Python the comparison with the server started from the new weights; on Rust the sync ends at
  the missing weight-transfer routes (vllm-rs 0.26), which is recorded;
- point 3: pause under load for every pause mode (`pause_load.py`);
- point 2: sleep levels 1 and 2 with the GPU memory of the server's process tree (`sleep_wake.py`);
- point 1's failure case last on Python (it may take the engine down): a send that fails, then the finish
  that puts the served weights back; then the example's own `--fail-send` as a user runs it.

Every step is timed and recorded (`steps.py`); a failing step is recorded and the run goes on; a step that
cannot fit before the deadline is skipped and says so. Reports: OUT/rl/<frontend>/<point>.json,
OUT/rl/run.json, the servers' logs under OUT/rl/logs/. Every server is stopped; leftovers are listed.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib.util
import json
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

from gpu_tests.offload_check.case import _gpu_name
from gpu_tests.offload_check.profiles import PROFILES, resolve_model
from gpu_tests.offload_check.server import Frontend, ServerConfig, VllmServer
from vllm_devclient import DevClient
from vllm_devclient.testing import is_running

from . import gpu_memory
from .pause_load import MODES, pause_modes
from .sleep_wake import LEVELS, sleep_level
from .steps import Deadline, Steps, error_text

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "rl_weight_sync.py"
PROFILE = "tiny-llama"
EXTENSION = "gpu_tests.rl.worker_extension.RLWorkerExtension"
FRONTENDS: tuple[Frontend, ...] = ("python", "rust")
# A fixed KV cache skips the memory profiling that a neighbouring server would disturb (run_matrix's flags).
SERVER_ARGS = "--gpu-memory-utilization 0.05 --kv-cache-memory-bytes 1073741824"
TRANSFER_ARGS = ("--weight-transfer-config", json.dumps({"backend": "ipc"}))
SLEEP_ARGS = ("--enable-sleep-mode",)
# The server reads the pickled IPC handles of an HTTP-posted batch only with this.
RL_ENV = {"VLLM_ALLOW_INSECURE_SERIALIZATION": "1"}
MAX_TOKENS = 16


def load_example(path: Path = EXAMPLE) -> ModuleType:
    """The user's example, run as a module of this process (it is not a package)."""
    spec = importlib.util.spec_from_file_location("rl_weight_sync", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def server_config(
    model: str,
    frontend: Frontend,
    *,
    server_args: Sequence[str],
    log_path: Path,
    transfer: bool = True,
    sleep: bool = True,
) -> ServerConfig:
    """tiny-llama's profile flags (which already hold --enforce-eager), the run's, the RL ones: the IPC weight
    transfer (`transfer`), sleep mode (`sleep`), the worker extension (always)."""
    profile = PROFILES[PROFILE]
    return ServerConfig(
        model=model,
        served_model_name=profile.served_model_name,
        frontend=frontend,
        enforce_eager=False,
        max_model_len=None,
        enable_prefix_caching=False,
        extra_args=(
            *profile.server_args,
            *server_args,
            *(TRANSFER_ARGS if transfer else ()),
            *(SLEEP_ARGS if sleep else ()),
            "--worker-extension-cls",
            EXTENSION,
        ),
        env={**profile.env, **RL_ENV},
        startup_timeout=300.0,
        shutdown_grace=15.0,
        log_path=log_path,
    )


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")


def rank_info(client: DevClient) -> dict[str, Any]:
    """Point 4: the per-rank answers and their types (what both frontends must agree on)."""
    results = client.collective_rpc("rank_info")
    return {"results": results, "types": answer_types(results)}


def answer_types(results: Any) -> Any:
    """The shape of an answer as type names: a list of {key: type} per rank."""
    if isinstance(results, list):
        return [answer_types(r) for r in results]
    if isinstance(results, dict):
        return {k: type(v).__name__ for k, v in sorted(results.items())}
    return type(results).__name__


class Run:
    """One device call: the servers it started, the trainer's lock, the run-wide steps."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out) / "rl"
        self.deadline = Deadline(args.deadline_s)
        self.steps = Steps(self.deadline, log=lambda line: print(f"run {line}", flush=True))
        self.model = args.model or resolve_model(PROFILES[PROFILE])
        self.server_args = shlex.split(args.server_args)
        self.servers: dict[str, VllmServer] = {}
        self.pause_options: dict[str, Any] = {"requests": args.requests, "max_tokens": args.max_tokens}
        self.trainer = threading.Lock()  # one trainer on the GPU at a time (the example seeds torch globally)
        self._example: ModuleType | None = None

    @property
    def example(self) -> ModuleType:
        if self._example is None:
            self._example = load_example()
        return self._example

    def start(
        self, name: str, model: str, frontend: Frontend, *, transfer: bool = True, sleep: bool = True
    ) -> VllmServer:
        log = self.out / "logs" / f"{name}.log"
        config = server_config(
            model, frontend, server_args=self.server_args, log_path=log, transfer=transfer, sleep=sleep
        )
        server = VllmServer(config)
        self.servers[name] = server
        return server.start(wait=False)

    def example_main(self, argv: list[str], report: Path) -> dict[str, Any]:
        """`examples/rl_weight_sync.py ARGV --report REPORT` in this process; its exit code and report."""
        report.unlink(missing_ok=True)
        with self.trainer:
            code = self.example.main([*argv, "--report", str(report)])
        data = json.loads(report.read_text()) if report.exists() else None
        return {"exit_code": code, "argv": argv, "report": data}


def _log_lines(server: VllmServer) -> Callable[[], list[str]]:
    def lines() -> list[str]:
        path = server.log_path
        return path.read_text(errors="replace").splitlines() if path and path.exists() else []

    return lines


def failed_send_then_finish(run: Run, client: DevClient) -> dict[str, Any]:
    """A send that fails inside `weight_update()`, then `finish_weight_update()`: on vLLM 0.26 the IPC engine
    starts a layerwise reload at the start, and only the finish puts the served weights back in place."""
    ex = run.example
    before = ex.answers(client, MAX_TOKENS)
    from vllm.distributed.weight_transfer.ipc_engine import IPCWeightTransferEngine

    out: dict[str, Any] = {"answers_before": before}
    with run.trainer:
        model = ex.trainer_model(run.model, 8)
        try:
            with client.weight_update(weight_version="seed-8") as update:
                send = ex.SdkSend(update, fail=True)
                # vLLM 0.26's (the payload's); later releases moved it to IPCTrainerWeightTransferEngine.
                send_weights = IPCWeightTransferEngine.trainer_send_weights  # type: ignore[attr-defined]
                send_weights(model.named_parameters(), {"send_mode": send})
        except Exception as exc:
            out["failed"] = error_text(exc)
    out["paused_after"] = client.is_paused()
    out["finish"] = client.finish_weight_update().model_dump()
    out["answers_after"] = ex.answers(client, MAX_TOKENS)
    out["answers_equal"] = out["answers_after"] == before
    return out


def alive(server: VllmServer, client: DevClient) -> dict[str, Any]:
    running = server.process is not None and server.process.poll() is None
    healthy: bool | str
    try:
        healthy = client.health()
    except Exception as exc:
        healthy = error_text(exc)
    return {"process_running": running, "health": healthy}


def fallbacks(log: str) -> list[dict[str, bool]]:
    """What to start again with after a failed start, in order: without sleep mode (its allocator needs CUDA's
    virtual memory API, which a sandboxed runtime may lack), or first without the IPC weight transfer when the
    log shows that it failed (vLLM 0.26 imports ray for it), then without both."""
    # A traceback through vLLM's IPC engine (the startup log names the flag itself, so that would not do).
    transfer_failed = re.search(r"ipc_engine\.py|No module named 'ray", log) is not None
    first = {"transfer": False, "sleep": True} if transfer_failed else {"transfer": True, "sleep": False}
    return [first, {"transfer": False, "sleep": False}]


@dataclass
class _OnFrontend:
    """One frontend's run, handed from point to point: its server (the one that started, after any
    fallback), its steps and report, its folder of reports."""

    run: Run
    frontend: Frontend
    server: VllmServer
    steps: Steps
    report: dict[str, Any]
    folder: Path


def _ready(on: _OnFrontend) -> bool:
    """Wait for the server; one that does not start is tried again with less (see `fallbacks`). Whether
    one became ready; the report says with which of sleep mode and the weight transfer."""
    ready = on.steps.run("server_ready", on.server.wait_ready) is not None
    flags = {"transfer": True, "sleep": True}
    for attempt in [] if ready else fallbacks(on.server.log_tail(200)):
        on.report.setdefault("server_log_tails", []).append(on.server.log_tail(80))
        on.steps.run("server_stop", on.server.stop)
        name = f"{on.frontend}-" + "-".join(f"no-{k}" for k, enabled in attempt.items() if not enabled)
        again = on.steps.run(
            f"server_start_{name}",
            functools.partial(on.run.start, name, on.run.model, on.frontend, **attempt),
        )
        if again is None:
            break
        on.server, flags = again, attempt
        if on.steps.run(f"server_ready_{name}", on.server.wait_ready) is not None:
            ready = True
            break
    on.report.update(sleep_mode=flags["sleep"], weight_transfer=flags["transfer"])
    return ready


def _point1_sync(on: _OnFrontend, new_dir: Path) -> tuple[bool, VllmServer | None]:
    """Point 1: the example's sync (on Python, saving the new weights); whether it synced, and on Python the
    comparison server started from the new weights."""
    sync_argv = ["sync", "--url", on.server.base_url, "--model", on.run.model, "--seed", "7"]
    if on.frontend == "python":
        sync_argv += ["--save-dir", str(new_dir)]
    point1 = None
    if not on.report["weight_transfer"]:
        on.steps.skip(
            "point1.sync", "the server started only without the IPC weight transfer (see steps.json)"
        )
    else:
        point1 = on.steps.run(
            "point1.sync",
            lambda: on.run.example_main(sync_argv, on.folder / "point1_sync_example.json"),
            need_s=60,
        )
    synced = bool(point1 and point1["exit_code"] == 0 and new_dir.is_dir())
    compare: VllmServer | None = None
    if on.frontend == "python" and synced:
        compare = on.steps.run(
            "point1.start_compare_server",
            lambda: on.run.start("python-compare", str(new_dir), "python", transfer=False, sleep=False),
        )
    write(on.folder / "point1_sync.json", {"frontend": on.frontend, "sync": point1})
    return synced, compare


def _point1_compare(on: _OnFrontend, compare: VllmServer) -> None:
    """Point 1's comparison of the synced server with the one started from the new weights; then stop it."""
    result = on.steps.run("point1.compare_server_ready", compare.wait_ready, need_s=30)
    if result is not None:
        argv = ["compare", "--url", on.server.base_url, "--url", compare.base_url]
        cmp = on.steps.run(
            "point1.compare", lambda: on.run.example_main(argv, on.folder / "point1_compare_example.json")
        )
        write(on.folder / "point1_compare.json", {"frontend": on.frontend, "compare": cmp})
    on.steps.run("point1.stop_compare_server", compare.stop)


def _point2(on: _OnFrontend, client: DevClient, weights: Path | None) -> None:
    """Point 2: sleep levels 1 and 2 with the server tree's GPU memory; level 2 reloads ``weights`` (the
    synced ones, on Python) or the served ones."""
    server = on.server

    def memory() -> dict[str, Any]:
        return gpu_memory.measure(server.pid or 0)

    def answers() -> list[str]:
        return list(on.run.example.answers(client, MAX_TOKENS))

    reload_kwargs = {"weights_path": str(weights)} if weights is not None else None

    def reload() -> list[Any]:  # from the synced weights on Python (the served ones since point 1)
        return client.collective_rpc("reload_weights", kwargs=reload_kwargs)

    levels: dict[int, Any] = {}
    if not on.report["sleep_mode"]:
        on.steps.skip("point2", "the server started only without --enable-sleep-mode (see steps.json)")
    for level in LEVELS if on.report["sleep_mode"] else ():
        levels[level] = on.steps.run(
            f"point2.sleep_level_{level}",
            functools.partial(
                sleep_level,
                client,
                on.steps,
                level,
                answers=answers,
                memory=memory,
                reload=reload if level == 2 else None,
                log_lines=_log_lines(server),
            ),
            need_s=40,
        )
    point2: dict[str, Any] = {"frontend": on.frontend, "levels": levels, "reload_kwargs": reload_kwargs}
    if not on.report["sleep_mode"]:
        point2["skipped"] = "the server started only without --enable-sleep-mode (see steps.json)"
    write(on.folder / "point2_sleep.json", point2)


def _point1_failure(on: _OnFrontend, client: DevClient) -> None:
    """Point 1's failure case (it may take the engine down): a send that fails, then the finish; then the
    example's own `--fail-send`; then whether the server still lives."""
    failure: dict[str, Any] = {"frontend": on.frontend}
    failure["then_finish"] = on.steps.run(
        "point1.failed_send_then_finish", lambda: failed_send_then_finish(on.run, client), need_s=30
    )
    argv = ["sync", "--url", on.server.base_url, "--model", on.run.model, "--seed", "8", "--fail-send"]
    failure["example"] = on.steps.run(
        "point1.failed_send_example",
        lambda: on.run.example_main(argv, on.folder / "point1_failed_send_example.json"),
        need_s=30,
    )
    failure["server_after"] = alive(on.server, client)
    write(on.folder / "point1_failed_send.json", failure)


def frontend_run(run: Run, frontend: Frontend, server: VllmServer) -> dict[str, Any]:
    """Points 4, 1, 3, 2 (and 1's failure case) on one frontend's server; the report of each goes to disk."""
    steps = Steps(run.deadline, log=lambda line: print(f"{frontend} {line}", flush=True))
    report: dict[str, Any] = {"frontend": frontend, "steps": steps.records}
    on = _OnFrontend(run, frontend, server, steps, report, run.out / frontend)
    if not _ready(on):
        report.setdefault("server_log_tails", []).append(on.server.log_tail(80))
        write(on.folder / "steps.json", report)
        return report
    report["ready_after_s"] = on.server.ready_after_s
    client = DevClient(on.server.base_url, timeout=120.0)
    report["version"] = steps.run("version", lambda: client.version().model_dump())
    report["answered_by"] = steps.run("answered_by", lambda: client.version().frontend)

    point4 = steps.run("point4.rank_info", lambda: rank_info(client))
    write(on.folder / "point4_rpc.json", {"frontend": frontend, "rank_info": point4})

    new_dir = Path(run.args.work) / "new-weights"
    synced, compare = _point1_sync(on, new_dir)
    point3 = steps.run(
        "point3.pause_modes",
        lambda: asyncio.run(pause_modes(on.server.base_url, MODES, **run.pause_options)),
        need_s=45,
    )
    write(on.folder / "point3_pause.json", {"frontend": frontend, "modes": point3})
    if compare is not None:
        _point1_compare(on, compare)
    _point2(on, client, new_dir if synced else None)
    if frontend == "python" and report["weight_transfer"]:
        _point1_failure(on, client)
    client.close()
    report["server_command"] = on.server.command
    write(on.folder / "steps.json", report)
    return report


def stop_all(run: Run) -> dict[str, Any]:
    """Stop every server at once; their exit codes and any process of theirs still alive after."""
    trees = {name: sorted(gpu_memory.tree_pids(s.pid)) for name, s in run.servers.items() if s.pid}
    codes: dict[str, Any] = {}

    def stop(name: str, server: VllmServer) -> None:
        try:
            codes[name] = server.stop()
        except Exception as exc:
            codes[name] = error_text(exc)

    threads = [threading.Thread(target=stop, args=item, daemon=True) for item in run.servers.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    leftover = {name: [p for p in pids if is_running(p)] for name, pids in trees.items()}
    return {"exit_codes": codes, "leftover_pids": {k: v for k, v in leftover.items() if v}, "trees": trees}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gpu_tests.rl.run_rl", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument(
        "--deadline-s", type=float, default=450.0, help="seconds before the run stops starting work"
    )
    p.add_argument("--frontends", default="python,rust")
    p.add_argument("--model", help=f"the served model (default: {PROFILE}'s folder)")
    p.add_argument("--work", default="/tmp/rl-work", help="where the synced weights are saved (not reported)")
    p.add_argument("--server-args", default=SERVER_ARGS)
    p.add_argument("--requests", type=int, default=16, help="point 3: completions in flight at the pause")
    p.add_argument("--max-tokens", type=int, default=512, help="point 3: their length")
    return p


def _run_frontends(run: Run, frontends: Sequence[Frontend], reports: dict[str, dict[str, Any]]) -> list[str]:
    """Start every frontend's server, then run each one's points in a thread of its own (into ``reports``)
    until the deadline; the frontends whose thread still runs then."""
    for f in frontends:
        run.steps.run(f"start_{f}", functools.partial(run.start, f, run.model, f))

    def one(frontend: Frontend) -> None:
        try:
            reports[frontend] = frontend_run(run, frontend, run.servers[frontend])
        except (Exception, SystemExit) as exc:  # frontend_run records its steps: a bug of the runner
            reports[frontend] = {"frontend": frontend, "crashed": error_text(exc)}

    # Daemons: a thread stuck past the deadline (in CUDA, say) must not keep the process from exiting.
    launched = [f for f in frontends if f in run.servers]
    threads = {f: threading.Thread(target=one, args=(f,), name=f, daemon=True) for f in launched}
    for t in threads.values():
        t.start()
    for t in threads.values():
        t.join(max(1.0, run.deadline.left() + 20))
    return [f for f, t in threads.items() if t.is_alive()]


def _finish(run: Run, reports: dict[str, dict[str, Any]], meta: dict[str, Any]) -> None:
    """Stop every server and complete ``meta`` with the servers, the steps that failed and the versions."""
    meta["servers"] = {
        name: {
            "command": s.command,
            "pid": s.pid,
            "ready_after_s": s.ready_after_s,
            "log": str(s.log_path),
        }
        for name, s in run.servers.items()
    }
    meta["stop"] = stop_all(run)
    meta["run_steps"] = run.steps.records
    meta["failed_steps"] = {
        f: [r["step"] for r in rep.get("steps", []) if not r.get("ok")] for f, rep in reports.items()
    }
    meta["versions"] = {f: rep.get("version") for f, rep in reports.items()}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    run = Run(args)
    started = time.monotonic()
    meta: dict[str, Any] = {
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": _gpu_name(),
        "model": run.model,
        "deadline_s": args.deadline_s,
        "argv": sys.argv,
    }
    frontends = [f for f in FRONTENDS if f in args.frontends.split(",")]
    reports: dict[str, dict[str, Any]] = {}
    try:
        meta["threads_still_running"] = _run_frontends(run, frontends, reports)
    finally:
        _finish(run, reports, meta)
        meta["wall_s"] = time.monotonic() - started
        write(run.out / "run.json", meta)
    print(json.dumps({k: meta[k] for k in ("failed_steps", "wall_s", "stop")}, default=str, indent=1))
    return 0 if not meta["stop"]["leftover_pids"] else 1


if __name__ == "__main__":
    sys.exit(main())
