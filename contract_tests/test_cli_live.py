"""The real `vllm-devclient` command line against real Rust frontends, scripted engines: in this process
(the console script's own `cli.main`), and as the installed console script (a subprocess, as a shell runs
it) for the fleet of eight, the API key and the README's embedded parity run.

One module-wide fleet of 8 targets: 6 healthy Rust frontends (the tests script some of their engines to fail),
one frontend with dev mode off, and one URL whose port is closed. Each test resets the engines first.

Every subcommand runs once with `-o json` and its document is checked against the documented schema
(`vllm_devclient/cli/schema.json`). `UPDATE_CLI_DOCS=1` also rewrites the examples in docs/cli.md from
those runs (URLs, ports and paths masked, long values shortened).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from vllm_devclient import errors
from vllm_devclient.cli._generate import shape
from vllm_devclient.records import Route
from vllm_devclient.routes import ROUTES
from vllm_devclient.testing.engine import ScriptedEngine
from vllm_devclient.testing.engine_actions import Hang, Raise, Return
from vllm_devclient.testing.frontends import Frontend, RustFrontend
from vllm_devclient.testing.pool import FrontendPool, lora_adapter_dir
from vllm_devclient.testing.processes import free_port
from vllm_devclient.testing.scenarios import SCENARIOS

pytestmark = pytest.mark.frontend

CLI = str(Path(sys.executable).with_name("vllm-devclient"))
ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "vllm_devclient" / "cli" / "schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.stdout)
        return data


def run(
    *args: str,
    urls: Sequence[str] = (),
    env: dict[str, str] | None = None,
    timeout: float = 60,
    console: bool = False,
) -> Run:
    """The command line with these arguments, the shell's VLLM_API_KEY and VLLM_DEVCLIENT_URL left out: in
    this process (the console script's own `cli.main`, through click's runner: the CLI's imports are paid
    once, not on each of this module's hundred runs) or, `console=True`, the installed console script
    exactly as a shell would run it (the tests of the entry point itself)."""
    argv = [*(a for url in urls for a in ("--url", url)), *args]
    if console:
        clean = {k: v for k, v in os.environ.items() if k not in ("VLLM_API_KEY", "VLLM_DEVCLIENT_URL")}
        cmd = [CLI, *argv]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env={**clean, **(env or {})}, timeout=timeout
        )
        return Run(proc.returncode, proc.stdout, proc.stderr)
    from vllm_devclient.cli import cli

    unset: dict[str, str | None] = {"VLLM_API_KEY": None, "VLLM_DEVCLIENT_URL": None}
    result = CliRunner().invoke(
        cli, argv, env={**unset, **(env or {})}, prog_name="vllm-devclient", catch_exceptions=False
    )
    return Run(result.exit_code, result.stdout, result.stderr)


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


@dataclass
class LiveFleet:
    healthy: list[Frontend]
    dev_off: Frontend
    closed: str

    @property
    def healthy_urls(self) -> list[str]:
        return [f.base_url for f in self.healthy]

    @property
    def urls(self) -> list[str]:
        return [*self.healthy_urls, self.dev_off.base_url, self.closed]


@pytest.fixture(scope="module")
def live() -> Iterator[LiveFleet]:
    frontends: list[Frontend] = []
    try:
        # Stateful engines: is_paused / is_sleeping follow the pause, sleep and resume calls they saw.
        for _ in range(6):
            # A long context: GSM8K's questions do not fit the default 128 tokens.
            engine = ScriptedEngine(max_model_len=4096)
            frontends.append(RustFrontend(engine=engine).start())
        frontends.append(RustFrontend(dev_mode=False).start())
        yield LiveFleet(healthy=frontends[:6], dev_off=frontends[6], closed=closed_port_url())
    finally:
        for frontend in frontends:
            frontend.stop()


@pytest.fixture
def fleet(live: LiveFleet) -> LiveFleet:
    for frontend in [*live.healthy, live.dev_off]:
        frontend.engine.reset()
    return live


def test_fleet_of_eight_reports_every_target_and_its_exit_code(fleet: LiveFleet) -> None:
    wedged, refusing = fleet.healthy[4], fleet.healthy[5]
    wedged.engine.script("reset_prefix_cache", Raise("cache is wedged"))
    refusing.engine.script("reset_prefix_cache", Return(False))
    result = run(
        "--json", "--retries", "0", "reset-prefix-cache", "--reset-external", urls=fleet.urls, console=True
    )
    # Failures of different kinds (engine error, success=false, dev mode off, unreachable): exit 1.
    assert result.code == 1, result.stderr
    doc = result.doc
    assert doc["command"] == "reset-prefix-cache" and doc["ok"] is False
    targets = doc["targets"]
    assert list(targets) == fleet.urls
    for frontend in fleet.healthy[:4]:
        entry = targets[frontend.base_url]
        assert (entry["ok"], entry["exit_code"], entry["result"]["success"]) == (True, 0, True)
        assert [c.args for c in frontend.engine.calls_for("reset_prefix_cache")] == [(False, True)]
    error = targets[wedged.base_url]["error"]
    assert targets[wedged.base_url]["exit_code"] == 1
    assert (error["type"], error["engine_method"], error["engine_message"], error["frontend"]) == (
        "EngineCallError",
        "reset_prefix_cache",
        "cache is wedged",
        "rust",
    )
    refused = targets[refusing.base_url]
    assert (refused["ok"], refused["exit_code"], refused["result"]["success"]) == (False, 1, False)
    off = targets[fleet.dev_off.base_url]
    assert (off["exit_code"], off["error"]["type"], off["error"]["status_code"]) == (
        5,
        "DevModeDisabledError",
        404,
    )
    assert fleet.dev_off.engine.calls == []
    closed = targets[fleet.closed]
    assert (closed["exit_code"], closed["error"]["type"]) == (3, "APIConnectionError")


def test_human_table_names_each_target(fleet: LiveFleet) -> None:
    result = run("--retries", "0", "is-paused", urls=fleet.urls)
    assert result.code == 1
    for url in fleet.urls:
        assert url in result.stdout
    assert result.stdout.count("FAIL") == 2
    assert "dev mode off: 404 on /is_paused" in result.stdout
    assert "6 of 8 targets ok" in result.stderr


@pytest.mark.parametrize(("extra", "code"), [("dev_off", 5), ("closed", 3), (None, 0)])
def test_exit_code_is_the_failure_kind_the_targets_share(
    fleet: LiveFleet, extra: str | None, code: int
) -> None:
    urls = fleet.healthy_urls + (
        [] if extra is None else [fleet.dev_off.base_url if extra == "dev_off" else fleet.closed]
    )
    result = run("--json", "--retries", "0", "is-paused", urls=urls)
    assert result.code == code
    assert [t["result"] for t in result.doc["targets"].values() if t["ok"]] == [False] * 6


def test_barrier_over_the_fleet(fleet: LiveFleet) -> None:
    slow = fleet.healthy[2]
    slow.engine.script("reset_prefix_cache", [Return(False), Return(False), Return(True)])
    result = run("--json", "barrier", "--deadline", "20", urls=fleet.healthy_urls)
    assert result.code == 0, result.stdout + result.stderr
    entry = result.doc["targets"][slow.base_url]["result"]
    assert (entry["attempts"], entry["engine_steps"]) == (3, 2)
    assert slow.engine.requests_added == 2  # the engine really ran two steps
    assert all(t["result"]["attempts"] == 1 for u, t in result.doc["targets"].items() if u != slow.base_url)

    stuck = fleet.healthy[3]
    stuck.engine.script("reset_prefix_cache", Return(False))
    late = run("--json", "barrier", "--deadline", "0.5", urls=fleet.healthy_urls)
    assert late.code == 4
    error = late.doc["targets"][stuck.base_url]["error"]
    assert error["type"] == "BarrierTimeoutError" and error["attempts"] >= 2
    assert sum(t["ok"] for t in late.doc["targets"].values()) == 5


def test_pause_rollback_resumes_only_what_it_paused(fleet: LiveFleet) -> None:
    result = run("--json", "--retries", "0", "pause", "--rollback", "--mode", "keep", urls=fleet.urls)
    assert result.code == 1  # dev mode off (5) and unreachable (3) together
    assert list(result.doc["rollback"]) == fleet.healthy_urls
    for frontend in fleet.healthy:
        assert [c.args for c in frontend.engine.calls_for("pause_generation")] == [("keep", True)]
        assert len(frontend.engine.calls_for("resume_scheduler")) == 1
    after = run("--json", "is-paused", urls=fleet.healthy_urls)
    assert [t["result"] for t in after.doc["targets"].values()] == [False] * 6

    # Without --rollback the targets that paused stay paused.
    kept = run("--json", "--retries", "0", "pause", urls=fleet.urls)
    assert kept.code == 1 and kept.doc["rollback"] is None
    assert run("is-paused", urls=fleet.healthy_urls[:1]).stdout.strip() == "true"
    assert run("resume", urls=fleet.healthy_urls).code == 0


def test_http_timeout_exits_three_and_wait_deadline_four(fleet: LiveFleet) -> None:
    hung = fleet.healthy[0]
    hung.engine.script("is_sleeping", Hang())
    result = run("--json", "--timeout", "0.5", "--retries", "0", "is-sleeping", urls=[hung.base_url])
    assert result.code == 3
    assert result.doc["targets"][hung.base_url]["error"]["type"] == "APITimeoutError"
    waited = run("wait-ready", "--deadline", "0.5", urls=[fleet.closed])
    assert waited.code == 4 and "WaitTimeoutError" in waited.stderr
    assert run("wait-ready", urls=fleet.healthy_urls).code == 0


def test_sleep_wake_and_info_commands(fleet: LiveFleet) -> None:
    url = fleet.healthy[1].base_url
    engine = fleet.healthy[1].engine
    assert run("sleep", "--level", "2", "--mode", "wait", urls=[url]).code == 0
    # (vLLM 0.34 adds reset_connector, true unless the command says --no-reset-connector.)
    assert [c.args[:2] for c in engine.calls_for("sleep")] == [(2, "wait")]
    assert run("wait-sleeping", "--deadline", "5", urls=[url]).code == 0
    assert run("wake-up", "--tag", "weights", urls=[url]).code == 0
    assert engine.calls_for("wake_up")[-1].args == (["weights"],)
    version = run("--json", "version", urls=fleet.healthy_urls)
    assert all(t["result"]["rust_frontend_version"] for t in version.doc["targets"].values())
    world = run("get-world-size", urls=[url])
    assert world.code == 0 and world.stdout.strip().isdigit()


def test_api_key_is_used_and_never_printed() -> None:
    with RustFrontend(api_key="sk-live-secret") as guarded:
        denied = run("models", urls=[guarded.base_url], console=True)
        assert denied.code == 6 and "AuthenticationError" in denied.stderr
        allowed = run(
            "--json", "models", urls=[guarded.base_url], env={"VLLM_API_KEY": "sk-live-secret"}, console=True
        )
        assert allowed.code == 0
        assert allowed.doc["targets"][guarded.base_url]["result"]["data"][0]["id"] == guarded.model
        flagged = run("--api-key", "sk-live-secret", "models", urls=[guarded.base_url], console=True)
        assert flagged.code == 0
        for output in (denied, allowed, flagged):
            assert "sk-live-secret" not in output.stdout + output.stderr


def test_parity_between_two_live_servers(fleet: LiveFleet) -> None:
    a, b = fleet.healthy_urls[:2]
    result = run("--json", "parity", "--url", a, "--url", b, "--report", os.devnull, timeout=120)
    assert result.code == 0, result.stdout + result.stderr
    report = result.doc["result"]
    assert report["mode"] == "live" and report["sdk_mismatches"] == [] and report["rows"]
    assert sorted(report["versions"].values()) == sorted([a, b])
    # Read-only scenarios only: neither engine saw a state-changing call.
    for frontend in fleet.healthy[:2]:
        assert not frontend.engine.calls_for("reset_prefix_cache")
        assert not frontend.engine.calls_for("pause_generation")


# Scenarios of the default setup: the embedded run starts one frontend of each kind. Every scenario on every
# setup's frontends is contract_tests/test_parity.py's (the same pool and report, once per session).
EMBEDDED = ("health", "version", "reset_prefix_cache", "sleep_level1_abort", "wake_up")


def test_parity_embedded_starts_both_real_frontends(tmp_path: Path) -> None:
    """The README's first command: no --url, the real Python and Rust frontends on scripted engines."""
    path = tmp_path / "parity.md"
    chosen = ",".join(EMBEDDED)
    result = run("--json", "parity", "--scenarios", chosen, "--report", str(path), timeout=290, console=True)
    assert result.code == 0, result.stdout[-3000:] + result.stderr[-3000:]
    VALIDATOR.validate(result.doc)
    report = result.doc["result"]
    assert report["mode"] == "harness" and report["sdk_mismatches"] == []
    assert [row["scenario"] for row in report["rows"]] == list(EMBEDDED)
    assert set(report["versions"]) == {"python", "rust"}
    markdown = path.read_text()
    assert markdown.startswith("# Parity report: python vs rust")
    assert "| scenario |" in markdown and "SDK mismatches: 0" in markdown


# ---- kv-events tail: vLLM's own publisher, found through a real frontend's /kv_event_sources -----------


@pytest.fixture(scope="module")
def vllm_kv_events() -> Any:
    """vllm.distributed.kv_events (imports torch: a few seconds, once per module)."""
    import vllm.distributed.kv_events as vkv

    return vkv


def test_kv_events_tail_discovers_the_publisher_through_the_server(vllm_kv_events: Any) -> None:
    vkv = vllm_kv_events
    port, replay = free_port(), free_port()
    config = {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": f"tcp://*:{port}",
        "replay_endpoint": f"tcp://*:{replay}",
        "topic": "kv",
        # The Rust frontend reads the whole config from the engine's handshake: every field is required.
        "buffer_steps": 10000,
        "hwm": 100000,
        "max_queue_size": 100000,
    }
    pub = vkv.ZmqEventPublisher(
        0, endpoint=config["endpoint"], replay_endpoint=config["replay_endpoint"], topic="kv"
    )
    try:
        for i in range(3):
            event = vkv.BlockStored(
                block_hashes=[100 + i], parent_block_hash=None, token_ids=[1, 2], block_size=16,
                lora_id=None, medium="CPU" if i else "GPU", lora_name=None,
            )  # fmt: skip
            pub.publish(vkv.KVEventBatch(ts=1000.0 + i, events=[event]))
        pub.publish(vkv.KVEventBatch(ts=1003.0, events=[vkv.AllBlocksCleared()]))
        with RustFrontend(engine=ScriptedEngine(kv_events_config=config)) as server:
            # Published before anyone subscribed: the tail gets them back by replay (--backlog).
            result = run(
                "--json", "kv-events", "tail", "--count", "4", "--deadline", "30", urls=[server.base_url]
            )
            assert result.code == 0, result.stderr
            *batches, envelope = [json.loads(line) for line in result.stdout.splitlines()]
            assert [b["seq"] for b in batches] == [0, 1, 2, 3]
            assert [b["events"][0]["block_hashes"] for b in batches[:3]] == [[100], [101], [102]]
            assert [b["events"][0]["medium"] for b in batches[:3]] == ["GPU", "CPU", "CPU"]
            assert batches[3]["events"][0]["type"] == "AllBlocksCleared"
            assert "4 batches; blocks stored: GPU 1, CPU 2" in result.stderr
            VALIDATOR.validate(envelope)
            assert envelope["result"]["batches"] == 4 and envelope["command"] == "kv-events tail"
            for batch in batches:
                jsonschema.validate(batch, {**SCHEMA["$defs"]["kv_batch"], "$defs": SCHEMA["$defs"]})
            EXAMPLES["kv-events tail"] = _example(result.stdout, [server.base_url], lines=True)
            human = run("kv-events", "tail", "--count", "6", "--deadline", "1", urls=[server.base_url])
            assert human.code == 4  # only 4 batches exist: the deadline ends the wait
            assert "rank 0 seq 1 (replayed): stored CPU 1 block [65]" in human.stdout
    finally:
        pub.shutdown()


def test_kv_events_tail_without_publisher_or_with_a_bad_endpoint(fleet: LiveFleet) -> None:
    none = run("kv-events", "tail", "--count", "1", urls=fleet.healthy_urls[:1])
    assert none.code == 1 and "reports no KV-event publishers" in none.stderr
    bad = run("kv-events", "tail", "--endpoint", "udp://x:1", "--count", "1")
    assert bad.code == 2
    two = run("kv-events", "tail", urls=fleet.healthy_urls[:2])
    assert two.code == 2 and "one --url" in two.stderr


# ---- every subcommand, -o json, against a real frontend, checked against the documented schema ------------


@dataclass(frozen=True)
class Case:
    """One subcommand's run: its arguments, where it goes and the exit code the real servers give."""

    command: str  # the command path, e.g. "kv-events tail"
    args: tuple[str, ...] = ()
    code: int = 0
    urls: str = "one"  # one: a healthy frontend; two: two of them; extras: the one with LoRA etc.; none


def _cases(tmp: Path) -> list[Case]:
    """In an order that keeps the stateful engine consistent (sleep before wait-sleeping, ...)."""
    gsm8k = ("--num-questions", "2", "--num-shots", "0", "--max-tokens", "8", "--sample")
    return [
        Case("health"),
        Case("version"),
        Case("models"),
        Case("metrics"),
        Case("metrics-text"),
        Case("server-info"),
        Case("get-world-size"),
        Case("kv-event-sources"),
        Case("load"),
        # The routes a server serves only when started for them (LoRA, the profiler, the tokenizer info).
        Case("load-lora-adapter", ("adapter-a", str(lora_adapter_dir())), urls="extras"),
        Case("unload-lora-adapter", ("adapter-a",), urls="extras"),
        Case("start-profile", urls="extras"),
        Case("stop-profile", urls="extras"),
        Case("tokenizer-info", code=1, urls="extras"),  # vllm-rs answers 501: not implemented yet
        Case("reset-prefix-cache", ("--reset-external",)),
        Case("barrier", ("--deadline", "10")),
        # The scripted engine reports no cached tokens and no prefix-cache stats: nothing shows the reset (1).
        Case("verified-reset", ("Hello", "--deadline", "0.5"), code=1),
        Case("reset-mm-cache"),
        Case("reset-encoder-cache"),
        Case("release-kv-cache-memory"),
        # A process-checkpoint cycle (vLLM 0.34's vllm-rs): prepared at once with nothing in flight.
        Case("checkpoint-prepare"),
        Case("wait-checkpoint-prepared", ("--deadline", "10")),
        Case("checkpoint-status"),
        Case("checkpoint-restore"),
        Case("sleep", ("--level", "1")),
        Case("wait-sleeping", ("--deadline", "10")),
        Case("is-sleeping"),
        Case("wake-up"),
        Case("wait-awake", ("--deadline", "10")),
        Case("pause", ("--mode", "keep")),
        Case("wait-paused", ("--deadline", "10")),
        Case("is-paused"),
        Case("resume"),
        Case("wait-resumed", ("--deadline", "10")),
        Case("abort-requests", ("--all",)),
        Case("wait-ready", ("--deadline", "10")),
        Case("init-weight-transfer-engine", ("--init-info", "{}")),
        Case("start-weight-update"),
        Case("update-weights", ("--update-info", "{}")),
        Case("finish-weight-update", ("--weight-version", "v2")),
        Case("update-weight-version", ("v3",)),
        Case("weight-info"),
        Case("weight-checker", ("checksum",)),
        Case("start-draft-weight-update"),
        Case("shutdown-weight-transfer-engine"),
        Case("completion", ("Hello", "--max-tokens", "4")),
        Case("step-engine"),
        Case("collective-rpc", ("ping",)),
        Case("request", ("GET", "/health")),
        Case("gsm8k", gsm8k),
        Case("parity", ("--report", str(tmp / "parity.md")), urls="two"),
        Case("support", ("--route", "/reset_prefix_cache"), urls="none"),
        # The scripted engine publishes no KV events: the server says so (exit 1).
        Case("kv-events tail", ("--count", "1", "--deadline", "2"), code=1),
    ]


def _cli_args(record: Route, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[str, ...]:
    """A client call as the command line gives it (the inverse of what the command builds from the record)."""
    positional = [p.name for p in record.params if p.positional][: len(args)]
    given = {**dict(zip(positional, args, strict=True)), **kwargs}
    out: list[str] = []
    for p in record.params:
        if p.name not in given:
            continue
        value, kind = given[p.name], shape(p.type)
        option = p.option or "--" + p.name.replace("_", "-")
        if value is None:
            out += [p.none_flag[0]] if p.none_flag else []
        elif p.argument or (p.positional and p.required and kind.kind in ("int", "float", "str", "choice")):
            out += [str(v) for v in value] if kind.kind == "multiple" else [str(value)]
        elif kind.kind == "bool":
            out += [option] if value else [f"--no-{option.removeprefix('--')}"]
        elif kind.kind == "multiple":
            out += [arg for v in value for arg in (option, str(v))]
        elif kind.kind == "json":
            out += [option, json.dumps(list(value) if isinstance(value, tuple) else value)]
        else:
            out += [option, str(value)]
    return tuple(out)


def _record_case(record: Route) -> Case:
    """The case of a route nobody wrote one for: its scenario's call, on the frontend its setup needs, with
    the exit code its expectation on the Rust frontend means."""
    from vllm_devclient.cli._exit import exit_code_for

    calling = [
        sc for sc in SCENARIOS if record.name in sc.methods_called() and sc.setup in ("default", "extras")
    ]
    scenario = min(calling, key=lambda sc: (sc.expect_for("rust").error, len(sc.methods_called())))
    calls: list[tuple[Sequence[Any], dict[str, Any]]] = []

    class Spy:
        def __getattr__(self, name: str) -> Any:
            def note(*args: Any, **kwargs: Any) -> None:
                if name == record.name:
                    calls.append((args, kwargs))

            return note

    scenario.call(Spy())  # type: ignore[arg-type]
    expect = scenario.expect_for("rust")
    error = getattr(errors, expect.type, None) if expect.error else None
    code = 0 if error is None else int(exit_code_for(error.__new__(error)))
    urls = "extras" if scenario.setup == "extras" else "one"
    return Case(record.command, _cli_args(record, *calls[0]), code=code, urls=urls)


def _command_paths() -> set[str]:
    from vllm_devclient.cli import cli

    paths = set()
    for name, command in cli.commands.items():
        sub = getattr(command, "commands", None)
        paths |= {f"{name} {s}" for s in sub} if sub else {name}
    return paths


EXAMPLES: dict[str, str] = {}


@pytest.fixture(scope="module")
def extras() -> Iterator[str]:
    """A Rust frontend started with LoRA, the profiler and the tokenizer-info route on (the pool's setup)."""
    with FrontendPool(frontends=("rust",)) as pool:
        yield pool.get("rust", "extras").base_url


def test_every_subcommand_prints_schema_json_against_a_real_frontend(
    fleet: LiveFleet, extras: str, tmp_path: Path
) -> None:
    cases = _cases(tmp_path)
    # A route nobody wrote a case for runs as its scenario calls it (a new route needs nothing here).
    cases += [_record_case(r) for r in ROUTES if r.command not in {c.command for c in cases}]
    assert {c.command for c in cases} == _command_paths(), "a subcommand has no case here"
    target, second = fleet.healthy_urls[:2]
    for case in cases:
        urls = {"one": [target], "two": [target, second], "extras": [extras], "none": []}[case.urls]
        result = run("-o", "json", *case.command.split(), *case.args, urls=urls, timeout=120)
        doc = json.loads(
            result.stdout.splitlines()[-1] if case.command == "kv-events tail" else result.stdout
        )
        VALIDATOR.validate(doc)
        assert (result.code, doc["exit_code"], doc["command"]) == (case.code, case.code, case.command), (
            result.stdout[-2000:] + result.stderr[-2000:]
        )
        for entry in doc["targets"].values():  # a result is null only when the call raised
            raised = entry["error"] is not None and entry["error"]["type"] != "UnsuccessfulResultError"
            assert (entry["result"] is None) == raised, (case.command, entry)
        if case.command != "kv-events tail" or case.command not in EXAMPLES:  # the publisher test's is better
            EXAMPLES[case.command] = _example(result.stdout, [*fleet.healthy_urls, extras], tmp_path)
    assert EXAMPLES["wait-ready"] and json.loads(EXAMPLES["barrier"])["targets"]
    if os.environ.get("UPDATE_CLI_DOCS"):
        _write_examples(EXAMPLES)


_MODEL_DIR = re.compile(r"/[^\s\"']*/tiny-llama-[0-9a-f]+")


def _example(stdout: str, urls: Sequence[str], tmp: Path | None = None, *, lines: bool = False) -> str:
    """A run's output as the docs show it: URLs and paths masked, long values shortened."""
    text = stdout
    for i, url in enumerate(urls):
        text = text.replace(url, f"http://127.0.0.1:{8000 + i}")
    if tmp is not None:
        text = text.replace(str(tmp), "out")
    text = _MODEL_DIR.sub("tiny-llama", text.replace(str(ROOT) + "/", ""))
    if lines:  # the batches (their events without the fields vLLM left null), then the envelope
        docs = [json.loads(line) for line in text.splitlines()]
        for batch in docs[:-1]:
            batch["events"] = [{k: v for k, v in e.items() if v is not None} for e in batch["events"]]
        return "\n".join(json.dumps(_abridge(doc)) for doc in docs)
    return _layout(_abridge(json.loads(text)))


def _layout(doc: dict[str, Any]) -> str:
    """The envelope on a few lines: its scalar fields, one line per target, then result/error/rollback."""
    one = json.dumps
    head = ", ".join(
        f"{one(k)}: {one(doc[k])}" for k in ("schema", "command", "ok", "exit_code", "elapsed_s")
    )
    targets = [f"    {one(url)}: {one(entry)}" for url, entry in doc["targets"].items()]
    body = ["{", f"  {head},"]
    body += ['  "targets": {', ",\n".join(targets), "  },"] if targets else ['  "targets": {},']
    body += [f'  "result": {one(doc["result"])},', f'  "error": {one(doc["error"])},']
    body += [f'  "rollback": {one(doc["rollback"])}', "}"]
    return "\n".join(body)


def _abridge(value: Any, depth: int = 0, *, inside: bool = False) -> Any:
    """Shorter values inside a `result`: lists to 2 items, strings to 60 characters, 5 keys, 3 levels."""
    if not inside:
        if isinstance(value, dict):
            return {k: _abridge(v, inside=k == "result") for k, v in value.items()}
        return value
    if isinstance(value, dict | list) and depth >= 3:
        return "..."
    if isinstance(value, dict):
        keep = list(value.items())
        if len(keep) > 5:
            keep = [*keep[:5], ("...", f"{len(value) - 5} more")]
        return {k: _abridge(v, depth + 1, inside=True) for k, v in keep}
    if isinstance(value, list):
        return [_abridge(v, depth + 1, inside=True) for v in value[:2]] + (["..."] if len(value) > 2 else [])
    if isinstance(value, str) and len(value) > 60:
        return value[:57] + "..."
    return value


START = "<!-- examples:start (contract_tests/test_cli_live.py writes this with UPDATE_CLI_DOCS=1) -->"
END = "<!-- examples:end -->"


def _write_examples(examples: dict[str, str]) -> None:
    path = ROOT / "docs" / "cli.md"
    text = path.read_text()
    blocks = []
    order = [case.command for case in _cases(Path())]
    for command, example in sorted(examples.items(), key=lambda item: order.index(item[0])):
        lang = "jsonl" if command == "kv-events tail" else "json"
        blocks.append(f"#### `{command}`\n\n```{lang}\n{example}\n```\n")
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    path.write_text(f"{head}{START}\n\n" + "\n".join(blocks) + f"\n{END}{tail}")
