"""The real :class:`.check.CheckIO`: the client for a running server, its KV-events watcher, and the probe
folder the engine-side instruments write (``probe_files.py``). ``case.py`` starts the server and builds it.

Runs go through the SDK's GSM8K evaluator (token-id prompts, greedy); resets through the SDK's barrier where
the release answers ``success``, else through the check's own (``resets.py``), confirmed by the stream.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Sequence
from typing import Any

import httpx

from vllm_devclient import (
    DEFAULT_MAX_CONNECTIONS,
    APIConnectionError,
    APIStatusError,
    BarrierTimeoutError,
    BarrierUnreachableError,
    BarrierUnsupportedError,
    EngineCallError,
    EngineDeadError,
    TLSError,
    VersionInfo,
)
from vllm_devclient.gsm8k import evaluate_gsm8k_async
from vllm_devclient.metrics import MetricsSnapshot

from .check import settle
from .events import EventWatcher, GroupEventAccount
from .probe_files import FirstUse, LoadPlan, MutationOrder, ProbeFiles, match_splits
from .probes import Probe
from .report import Answer, ResetResult, Run, SettleResult, Split
from .resets import GATEWAY_STATUSES, Answered, NotYet, Outcome, Refused, confirm_reset, drive

__all__ = ["LOAD_RESETS", "LOAD_RESET_GAP_S", "ServerIO", "in_flight"]

# The reset under load: full resets fired while the long prompts run, this far apart, at most this many; the
# first once the stream shows their blocks (or after LOAD_START_WAIT_S without a stream).
LOAD_RESETS = 4
LOAD_RESET_GAP_S = 0.05
LOAD_START_WAIT_S = 0.5


def in_flight(concurrency: int | None, requests: int) -> int:
    """Requests in flight at once: all of them (``concurrency`` None) or at most ``concurrency``."""
    return requests if concurrency is None else min(concurrency, requests)


def _one_reset(outcome: Outcome, seconds: float) -> ResetResult:
    """One reset fired under load, as answered: nothing here confirms it (blocks are held by design)."""
    said = {
        True: "success=true",
        False: "success=false (blocks held)",
        None: "a bare 200",
    }
    if isinstance(outcome, Refused):
        return ResetResult(
            attempts=1,
            engine_steps=0,
            elapsed_s=round(seconds, 3),
            external=True,
            outcome="refused",
            confirmed_by=None,
            http_status=outcome.status,
            message=outcome.message,
        )
    confirmed = isinstance(outcome, Answered) and outcome.success is True
    message = said[outcome.success] if isinstance(outcome, Answered) else outcome.reason
    return ResetResult(
        attempts=1,
        engine_steps=0,
        elapsed_s=round(seconds, 3),
        external=True,
        outcome="confirmed" if confirmed else "unconfirmed",
        confirmed_by="success" if confirmed else None,
        message=message,
    )


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class ServerIO:
    """:class:`.check.CheckIO` over the client for a running server and its probe folder."""

    def __init__(
        self,
        base_url: str,
        *,
        concurrency: int | None = 1,
        num_shots: int,
        model: str | None = None,
        watcher: EventWatcher | None = None,
        store_events: bool = True,
        files: ProbeFiles | None = None,
        settle_timeout: float = 180.0,
        barrier_timeout: float = 60.0,
        request_timeout: float = 600.0,
        poison_rpc: str = "",
    ) -> None:
        from vllm_devclient import DevClient

        self.base_url = base_url
        self.concurrency = concurrency
        self.num_shots = num_shots
        self.model = model
        self.watcher = watcher
        # Settle on KV events only where the connector announces its CPU stores (vLLM 0.26's Simple one
        # does not): otherwise on /metrics, or a few engine steps when nothing is exported.
        self.store_events = store_events and watcher is not None
        self.files = files
        self.settle_timeout = settle_timeout
        self.barrier_timeout = barrier_timeout
        self.request_timeout = request_timeout
        self.poison_rpc = poison_rpc
        self.client = DevClient(base_url, timeout=120.0, model=model)
        self.texts: dict[str, str] = {}
        self._store_mark: float | None = None
        self.bare_200 = False  # the release answers /reset_prefix_cache with a bare 200 (before vLLM 0.26)

    def close(self) -> None:
        self.client.close()

    def version(self) -> VersionInfo:
        return self.client.version()

    def metrics(self) -> MetricsSnapshot:
        return self.client.metrics()

    def run(self, label: str, probes: Sequence[Probe], spread_s: float = 0.0) -> Run:
        before = len(self.files.splits()) if self.files is not None else 0
        t0 = time.perf_counter()
        result = asyncio.run(self._evaluate(probes, spread_s, self.concurrency))
        return self._as_run(label, probes, result, time.perf_counter() - t0, before, self.concurrency)

    def run_resetting(self, label: str, probes: Sequence[Probe]) -> tuple[Run, list[ResetResult]]:
        """Send ``probes`` all at once and fire full resets while they run (the reset under load): the
        first once the stream shows the engine storing their blocks (else after a pause), then one every
        :data:`LOAD_RESET_GAP_S` until they finish or :data:`LOAD_RESETS` went out."""
        before = len(self.files.splits()) if self.files is not None else 0
        t0 = time.perf_counter()
        result, fired = asyncio.run(self._evaluate_resetting(probes))
        return self._as_run(label, probes, result, time.perf_counter() - t0, before, None), fired

    async def _evaluate_resetting(self, probes: Sequence[Probe]) -> tuple[Any, list[ResetResult]]:
        from vllm_devclient import AsyncDevClient

        stored0 = self._gpu_stored()
        task = asyncio.create_task(self._evaluate(probes, 0.0, None))
        fired: list[ResetResult] = []
        started = time.monotonic()
        # Wait for the engine to hold them (their first blocks on the stream), so a reset meets running
        # requests and the stores their prefill keeps issuing, not a queue of waiting ones.
        while not task.done() and time.monotonic() - started < LOAD_START_WAIT_S:
            now = self._gpu_stored()
            if stored0 is not None and now is not None and now > stored0:
                break
            await asyncio.sleep(0.005)
        async with AsyncDevClient(self.base_url, timeout=self.barrier_timeout, model=self.model) as client:
            while not task.done() and len(fired) < LOAD_RESETS:
                t = time.monotonic()
                try:
                    answer = await client.reset_prefix_cache(reset_external=True)
                    outcome: Outcome = Answered(answer.success)
                except EngineDeadError:
                    raise
                except APIStatusError as exc:
                    outcome = NotYet(str(exc)) if exc.status_code in GATEWAY_STATUSES else _refused(exc)
                except APIConnectionError as exc:
                    outcome = NotYet(str(exc))
                fired.append(_one_reset(outcome, time.monotonic() - t))
                await asyncio.sleep(LOAD_RESET_GAP_S)
        return await task, fired

    def _gpu_stored(self) -> int | None:
        return None if self.watcher is None else self.watcher.drain().stored_blocks("GPU")

    def _as_run(
        self,
        label: str,
        probes: Sequence[Probe],
        result: Any,
        latency: float,
        before: int,
        concurrency: int | None,
    ) -> Run:
        records = self.files.splits() if self.files is not None else []
        matched = match_splits([p.key for p in probes], records, after=before)
        answers = []
        correct = graded = 0
        for q in result.questions:
            probe, rec = probes[q.index], matched[q.index]
            text = None
            if q.error is None:
                text = _digest(q.text)
                self.texts[text] = q.text
            if probe.kind == "gsm8k":
                graded += 1
                correct += q.prediction is not None and q.prediction == probe.label
            answers.append(
                Answer(
                    probe=probe.id,
                    text=text,
                    output_tokens=q.output_tokens,
                    finish_reason=q.finish_reason,
                    prediction=q.prediction if probe.kind == "gsm8k" else None,
                    error=q.error,
                    split=Split(prompt=rec.prompt, local=rec.local, external=rec.external) if rec else None,
                    usage_cached=q.cached_tokens,
                    request_id=rec.request_id if rec else None,
                )
            )
        return Run(
            label=label,
            concurrency=concurrency,
            latency_s=round(latency, 3),
            answers=answers,
            accuracy=correct / graded if graded else None,
            failed_requests=result.failed_requests,
        )

    async def _evaluate(self, probes: Sequence[Probe], spread_s: float, concurrency: int | None) -> Any:
        from vllm_devclient import AsyncDevClient

        # The client's own pool holds DEFAULT_MAX_CONNECTIONS: more requests in flight need a pool that size.
        wide = in_flight(concurrency, len(probes))
        http = (
            httpx.AsyncClient(limits=httpx.Limits(max_connections=wide, max_keepalive_connections=wide))
            if wide > DEFAULT_MAX_CONNECTIONS
            else None
        )
        try:
            async with AsyncDevClient(
                self.base_url, timeout=self.request_timeout, model=self.model, http_client=http
            ) as client:
                return await evaluate_gsm8k_async(
                    client=client,
                    prompts=[p.as_prompt(i) for i, p in enumerate(probes)],
                    concurrency=concurrency,
                    max_tokens=max((p.max_tokens for p in probes), default=1),
                    num_shots=self.num_shots,
                    model=self.model,
                    request_timeout=self.request_timeout,
                    progress=False,
                    spread_s=spread_s,
                )
        finally:
            if http is not None:
                await http.aclose()

    def step_engine(self) -> None:
        self.client.step_engine()

    def cpu_blocks_stored(self) -> int | None:
        return None if self.watcher is None else self.watcher.cpu_blocks()

    def events(self) -> GroupEventAccount | None:
        return None if self.watcher is None else self.watcher.drain()

    def _store_progress(self) -> float | None:
        if self.store_events and self.watcher is not None:
            return float(self.watcher.cpu_blocks())
        return self.metrics().gpu_to_cpu_bytes

    def mark_stores(self) -> None:
        self._store_mark = self._store_progress()

    def settle_stores(self) -> SettleResult:
        return settle(
            self._store_progress,
            self.step_engine,
            method="kv_events" if self.store_events else "metrics",
            timeout=self.settle_timeout,
            baseline=self._store_mark,
        )

    def _cleared(self) -> int | None:
        return None if self.watcher is None else self.watcher.drain().cleared

    def _post_reset(self, external: bool) -> Outcome:
        try:
            answer = self.client.reset_prefix_cache(reset_external=external)
        except EngineDeadError:
            raise
        except APIStatusError as exc:
            return NotYet(str(exc)) if exc.status_code in GATEWAY_STATUSES else _refused(exc)
        except APIConnectionError as exc:
            if isinstance(exc, TLSError):
                raise
            return NotYet(str(exc))
        return Answered(answer.success)

    def reset_prefix_cache(self, reset_external: bool) -> ResetResult:
        """The SDK's barrier where the release answers ``success``; else (``BarrierUnsupportedError``: a
        bare 200, its one reset sent) the stream's ``AllBlocksCleared`` confirms it (``resets.py``)."""
        if self.bare_200 and self.watcher is not None:
            # An earlier reset (one fired under load) publishes its AllBlocksCleared with the next step: let
            # it go out before the count this reset is confirmed against, never as this reset's.
            self.step_engine()
        before = self._cleared()
        sent = 0
        if not self.bare_200:
            try:
                done = self.client.reset_prefix_cache_until_success(
                    deadline=self.barrier_timeout, reset_external=reset_external
                )
            except BarrierUnsupportedError:
                self.bare_200, sent = True, 1
            except BarrierUnreachableError:
                raise  # the server is gone: the iteration's error
            except BarrierTimeoutError as exc:
                return ResetResult(
                    attempts=exc.attempts,
                    engine_steps=exc.engine_steps,
                    elapsed_s=round(exc.waited_s, 3),
                    external=reset_external,
                    outcome="unconfirmed",
                    confirmed_by=None,
                    message=str(exc)[:1000],
                )
            except EngineDeadError:
                raise
            except APIStatusError as exc:  # the barrier lets only a status of the server's own through
                refused = _refused(exc)
                return ResetResult(
                    attempts=1,
                    engine_steps=0,
                    elapsed_s=0.0,
                    external=reset_external,
                    outcome="refused",
                    confirmed_by=None,
                    http_status=refused.status,
                    message=refused.message,
                )
            else:
                return ResetResult(
                    attempts=done.attempts,
                    engine_steps=done.engine_steps,
                    elapsed_s=round(done.elapsed_s, 3),
                    external=reset_external,
                    outcome="confirmed",
                    confirmed_by="success",
                )
        op = confirm_reset(
            external=reset_external, deadline=self.barrier_timeout, sent=sent, cleared_before=before
        )
        return drive(op, post=self._post_reset, step=self.step_engine, cleared=self._cleared)

    def first_uses(self) -> list[FirstUse]:
        return self.files.first_uses() if self.files is not None else []

    def poison(self) -> int | None:
        if not self.poison_rpc:
            return None
        answers = self.client.collective_rpc(self.poison_rpc, timeout=120.0)
        return sum(int(a.get("blocks", 0)) for a in answers if isinstance(a, dict))

    def loads(self) -> list[LoadPlan]:
        return self.files.loads() if self.files is not None else []

    def defects_applied(self) -> dict[str, int]:
        return self.files.defects_applied() if self.files is not None else {}

    def arm(self, order: MutationOrder | None) -> None:
        if self.files is not None:
            self.files.order(order)


def _refused(exc: APIStatusError) -> Refused:
    """A reset the server answered with an error of its own: its status and its words."""
    words = exc.engine_message if isinstance(exc, EngineCallError) else exc.message
    return Refused(status=exc.status_code, message=str(words)[:1000])
