"""Timing helpers shared by the benchmarks: interleaved repetitions, median/p95, ratios, result rows.

Every benchmark module exposes ``run(quick: bool = False) -> dict`` and returns ``result(...)``: a name, a
one-paragraph method note and a list of ``row(...)`` dicts. A row compares a baseline with the SDK measured
in the same run (``compare(...)``) or reports one number (``value(...)``). The runner (``__main__``) prints
every row in one table and writes the same dicts as JSON.

Interleaving: the variants of one comparison take turns in small blocks, in a shuffled order each round, so
a slow phase of a noisy machine (another process, frequency scaling, a GC pause) hits all of them alike.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import random
import select
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from vllm_devclient.testing.engine import ScriptedEngine

__all__ = [
    "ChildServer",
    "RustServer",
    "Stats",
    "ainterleave",
    "compare",
    "interleave",
    "median",
    "p95",
    "percentile",
    "ratio",
    "result",
    "row",
    "rust_available",
    "value",
]


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples) if samples else math.nan


def p95(samples: Sequence[float]) -> float:
    return percentile(samples, 95.0)


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator; nan when the denominator is 0 or not a number (never raises)."""
    if not denominator or math.isnan(denominator):
        return math.nan
    return numerator / denominator


@dataclass(frozen=True)
class Stats:
    """Summary of one variant's samples, in the samples' unit (seconds unless told otherwise)."""

    n: int
    median: float
    p95: float
    mean: float
    min: float
    max: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stats:
        if not samples:
            return cls(0, math.nan, math.nan, math.nan, math.nan, math.nan)
        return cls(
            n=len(samples),
            median=median(samples),
            p95=p95(samples),
            mean=statistics.fmean(samples),
            min=min(samples),
            max=max(samples),
        )

    def scaled(self, factor: float) -> Stats:
        """The same summary in another unit (e.g. factor=1e6 for seconds -> microseconds)."""
        return Stats(
            self.n,
            self.median * factor,
            self.p95 * factor,
            self.mean * factor,
            self.min * factor,
            self.max * factor,
        )

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


MIN_ROUNDS = 3


def _out_of_time(done_rounds: int, began: float, max_seconds: float | None) -> bool:
    return max_seconds is not None and done_rounds >= MIN_ROUNDS and time.perf_counter() - began > max_seconds


def _order(names: list[str], rng: random.Random, shuffle: bool) -> list[str]:
    if shuffle:
        rng.shuffle(names)
    return names


def _blocks(
    variants: Mapping[str, Any],
    *,
    rounds: int,
    shuffle: bool,
    seed: int,
    max_seconds: float | None,
    samples: dict[str, list[float]],
) -> Iterator[tuple[Any, list[float]]]:
    """The interleaving schedule, shared by `interleave` and `ainterleave`: (variant, its sample list) per
    block, variants in a shuffled order each round, the young GC generation collected before each block."""
    rng = random.Random(seed)
    names = list(variants)
    began = time.perf_counter()
    for n in range(rounds):
        if _out_of_time(n, began, max_seconds):
            return
        for name in _order(names, rng, shuffle):
            gc.collect(0)
            yield variants[name], samples[name]


def interleave(
    variants: Mapping[str, Callable[[], object]],
    *,
    rounds: int,
    per_round: int = 1,
    warmup: int = 0,
    shuffle: bool = True,
    seed: int = 0,
    max_seconds: float | None = None,
) -> dict[str, list[float]]:
    """Time each call of each variant (seconds); variants take turns, `per_round` calls at a time.

    `warmup` calls of each variant run first and are not recorded (connection setup, caches, first-call
    costs). `max_seconds` caps the wall time: no new round starts after it (at least 3 rounds run), so a
    loaded machine gets fewer samples rather than a run that never ends. The young GC generation is
    collected between blocks, not disabled: allocation cost is part of what a client costs, but a collection
    triggered by another variant's garbage should not land in this one's block.
    """
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    clock = time.perf_counter
    for fn, out in _blocks(
        variants, rounds=rounds, shuffle=shuffle, seed=seed, max_seconds=max_seconds, samples=samples
    ):
        for _ in range(per_round):
            start = clock()
            fn()
            out.append(clock() - start)
    return samples


async def ainterleave(
    variants: Mapping[str, Callable[[], Awaitable[object]]],
    *,
    rounds: int,
    per_round: int = 1,
    warmup: int = 0,
    shuffle: bool = True,
    seed: int = 0,
    max_seconds: float | None = None,
) -> dict[str, list[float]]:
    """`interleave` for coroutine functions, awaited one at a time on the running loop."""
    for fn in variants.values():
        for _ in range(warmup):
            await fn()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    clock = time.perf_counter
    for fn, out in _blocks(
        variants, rounds=rounds, shuffle=shuffle, seed=seed, max_seconds=max_seconds, samples=samples
    ):
        for _ in range(per_round):
            start = clock()
            await fn()
            out.append(clock() - start)
        await asyncio.sleep(0)
    return samples


def row(metric: str, **fields: Any) -> dict[str, Any]:
    """A free-form table row: `metric` plus any JSON-able fields."""
    return {"metric": metric, **fields}


def compare(
    metric: str,
    *,
    baseline_name: str,
    baseline: Stats,
    sdk: Stats,
    unit: str = "us",
    goal: str | None = None,
    ok: bool | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A row comparing SDK and baseline (both already in `unit`); ratio = SDK median / baseline median."""
    return row(
        metric,
        kind="compare",
        baseline_name=baseline_name,
        unit=unit,
        baseline=baseline.as_dict(),
        sdk=sdk.as_dict(),
        ratio=ratio(sdk.median, baseline.median),
        ratio_p95=ratio(sdk.p95, baseline.p95),
        delta=sdk.median - baseline.median,
        goal=goal,
        ok=ok,
        **extra,
    )


def value(
    metric: str,
    measured: float | int | str,
    *,
    unit: str = "",
    goal: str | None = None,
    ok: bool | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A row reporting one number (a count, a throughput, a list) with an optional goal."""
    return row(metric, kind="value", value=measured, unit=unit, goal=goal, ok=ok, **extra)


def result(name: str, *, method: str, rows: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """What `run()` returns: the benchmark's name, how it measured, and its rows."""
    return {"name": name, "method": method, "rows": rows, **extra}


# ---- the real Rust frontend + scripted engine, in a child process ------------------------------------
#
# The scripted engine is a Python thread; in the benchmark's own process it would compete with the client
# for the GIL and blur what the client costs. So a child process runs RustFrontend + ScriptedEngine (the
# engine, like a real one, lives in another process than the client) and takes JSON-line commands on stdin.
# Times cross the process boundary as time.monotonic() values: CLOCK_MONOTONIC is system-wide on Linux.


_Server = TypeVar("_Server", bound="ChildServer")


class ChildServer:
    """Servers run by a child process (`python -c code`) driven by JSON lines on stdin.

    The child prints one JSON hello line once it is up (or {"error": ...}); every command gets one JSON
    answer line. Closing stdin makes the child stop its servers and exit. Keeping the servers in another
    process keeps their threads off the GIL the measured client uses.
    """

    what = "benchmark server"
    stop_timeout = 15.0

    def __init__(self, code: str, startup_timeout: float) -> None:
        from vllm_devclient.testing.processes import spawn

        # Its own process group, SIGTERM when this process dies; stderr stays the terminal's.
        self._proc = spawn(
            [sys.executable, "-c", code],
            cwd=Path(__file__).resolve().parents[1],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            merge_stderr=False,
        )
        try:
            self.hello = self._read(startup_timeout)
        except BaseException:
            self.close()
            raise
        if "error" in self.hello:
            self.close()
            raise RuntimeError(f"the {self.what} did not start: {self.hello['error']}")

    def _read(self, timeout: float) -> dict[str, Any]:
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
        line = self._proc.stdout.readline() if ready else b""
        if not line:
            raise RuntimeError(f"the {self.what} process gave no answer (exit code {self._proc.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def command(self, op: str, **args: Any) -> dict[str, Any]:
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps({"op": op, **args}) + "\n").encode())
        self._proc.stdin.flush()
        answer = self._read(30.0)
        if "error" in answer:
            raise RuntimeError(f"{self.what} command {op!r} failed: {answer['error']}")
        return answer

    @property
    def pid(self) -> int:
        return self._proc.pid

    def close(self) -> None:
        """Close stdin (the child stops its servers and exits); past `stop_timeout`, stop its whole tree."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        try:
            self._proc.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            from vllm_devclient.testing.processes import stop_group

            stop_group(self._proc, grace=5.0)
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def __enter__(self: _Server) -> _Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RustServer(ChildServer):
    """`vllm-rs` with the scripted engine in a child process; `.base_url`, `.model`, `.command(op, ...)`.
    With `tls=True` it serves https (certificates made in the child; `.ca` is the CA to trust).

    Commands (answered with one JSON line): script(method, values), switch_after(method, before, after,
    delay), switched -> {"at"}, calls(method) -> {"times"}, clear, reset. Closing stdin stops everything.
    """

    what = "Rust frontend"

    def __init__(self, startup_timeout: float = 60.0, *, tls: bool = False) -> None:
        super().__init__(f"from benchmarks._common import _serve_rust; _serve_rust({tls})", startup_timeout)
        self.base_url: str = self.hello["base_url"]
        self.ca: str | None = self.hello["ca"]
        self.model: str = self.hello["model"]
        self.startup_s: float = self.hello["startup_s"]
        self.frontend_pid: int = self.hello["frontend_pid"]


def rust_available() -> str | None:
    """None when the Rust frontend harness can run here, else why not."""
    try:
        from vllm_devclient.testing.frontends import find_vllm_rs
    except ImportError as exc:
        return f"vllm_devclient.testing.frontends is not importable ({exc})"
    try:
        find_vllm_rs()
    except Exception as exc:
        return str(exc).splitlines()[0]
    return None


def _serve_rust(tls: bool = False) -> None:
    """The child process: start the frontend, then obey JSON-line commands until stdin closes."""
    import tempfile

    from vllm_devclient.testing.frontends import RustFrontend

    try:
        certs = None
        if tls:
            from vllm_devclient.testing.certificates import make_certificates

            certs = make_certificates(tempfile.mkdtemp(prefix="bench-tls-"))
        frontend = RustFrontend(tls=certs).start()
    except Exception as exc:
        _say({"error": f"{type(exc).__name__}: {exc}"})
        return
    commands = _EngineCommands(frontend.engine)
    try:
        _say(
            {
                "base_url": frontend.base_url,
                "model": frontend.model,
                "startup_s": frontend.startup_seconds,
                "frontend_pid": frontend.pid,
                "ca": None if certs is None else str(certs.ca),
            }
        )
        for line in sys.stdin:
            _say(commands.answer(line))
    finally:
        commands.stop.set()
        frontend.stop()
        if certs is not None:
            shutil.rmtree(certs.ca.parent, ignore_errors=True)


def _say(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class _EngineCommands:
    """The child's commands to its scripted engine (`RustServer`'s docstring): one method per op, each
    answering one JSON object."""

    def __init__(self, engine: ScriptedEngine) -> None:
        self.engine = engine
        self.switched_at: float | None = None
        self.stop = threading.Event()
        self.wall_offset = time.time() - time.monotonic()

    def answer(self, line: str) -> dict[str, Any]:
        try:
            cmd = json.loads(line)
            op = cmd["op"]
            do = self.OPS.get(op)
            return do(self, cmd) if do is not None else {"error": f"unknown op {op!r}"}
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}

    def script(self, cmd: dict[str, Any]) -> dict[str, Any]:
        from vllm_devclient.testing.engine_actions import Return

        self.engine.script(cmd["method"], [Return(v) for v in cmd["values"]])
        return {"ok": True}

    def switch_after(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Answer `before` now, and `after` from `delay` s after the next first call on."""
        from vllm_devclient.testing.engine_actions import Return

        self.engine.clear_calls()
        self.engine.script(cmd["method"], Return(cmd["before"]))
        self.switched_at = None
        args = (cmd["method"], cmd["after"], cmd["delay"])
        threading.Thread(target=self._switch_later, args=args, daemon=True).start()
        return {"ok": True}

    def _switch_later(self, method: str, result: Any, delay: float) -> None:
        # The delay counts from the first call of `method` the engine receives (the barrier's first poll),
        # so T never falls before the barrier started, whatever the client's start-up costs.
        from vllm_devclient.testing.engine_actions import Return

        try:
            self.engine.wait_for_call(method, deadline=60.0)
        except TimeoutError:
            return
        if not self.stop.wait(delay):
            self.engine.script(method, Return(result))
            self.switched_at = time.monotonic()

    def switched(self, cmd: dict[str, Any]) -> dict[str, Any]:
        return {"at": self.switched_at}

    def calls(self, cmd: dict[str, Any]) -> dict[str, Any]:
        # Engine call times are wall-clock: map them onto the shared monotonic clock.
        return {"times": [c.time - self.wall_offset for c in self.engine.calls_for(cmd["method"])]}

    def clear(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self.engine.clear_calls()
        return {"ok": True}

    def reset(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self.engine.reset()
        return {"ok": True}

    OPS: ClassVar[dict[str, Callable[[_EngineCommands, dict[str, Any]], dict[str, Any]]]] = {
        "script": script,
        "switch_after": switch_after,
        "switched": switched,
        "calls": calls,
        "clear": clear,
        "reset": reset,
    }
