"""A scripted fake vLLM engine core that the real frontends can talk to.

Both vLLM frontends (the Python FastAPI server and the Rust ``vllm-rs`` binary) reach their
engine core over ZMQ with msgpack payloads. :class:`ScriptedEngine` speaks that protocol from a
background thread, with no vllm or torch import, so the real frontends can be driven on a
machine without a GPU: dev routes become scripted utility calls, and completions are answered
with generated tokens.

The parts: the actions a script answers with (``engine_actions``), the protocol's messages, finish
reasons and ready response (``engine_protocol``), the ZMQ connection and its thread (``engine_transport``),
and what vLLM's engine remembers between calls (``engine_state``); ``vllm_devclient.testing`` exports
them all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .engine_actions import Action, Delay, Hang, Raise, checked_script
from .engine_protocol import (
    _ABORT,
    _ADD,
    _UTILITY,
    EngineCall,
    FinishReason,
    build_ready_response,
    failed_call,
    token_outputs,
    utility_outputs,
)
from .engine_state import PARAMETERS, STATE_ANSWERS, EngineState
from .engine_transport import EngineTransport

__all__ = ["ScriptedEngine", "known_utilities"]


def _default_results() -> dict[str, Any]:
    # What the real engine answers when nothing is wrong; the Rust frontend checks result types
    # strictly, so bool methods must answer bools and string methods strings.
    return {
        "reset_prefix_cache": True,
        "is_sleeping": False,
        "is_scheduler_paused": False,
        "wake_up": True,
        "collective_rpc": [None],
        "get_supported_tasks": ["generate"],
        "get_weight_version": "default",
        "is_inference_ready": True,
        "checkpoint_state": ["running", None],
        "compute_weight_checksums": [{}],
        "list_loras": [],
        "add_lora": True,
        "remove_lora": True,
        "pin_lora": True,
    }


def known_utilities() -> frozenset[str]:
    """The engine utilities the kit answers knowingly (a value of its own, its state, or vLLM's names for
    the arguments); any other is answered nil, which a frontend may reject (the release train lists them)."""
    return frozenset(_default_results()) | STATE_ANSWERS | frozenset(PARAMETERS)


# collective_rpc answers per worker method: the Rust /weight_checker checks for maps.
_RPC_DEFAULTS: Final[Mapping[str, Any]] = {"compute_weight_checksums": [{}]}

# Methods whose "abort" mode ends in-flight requests in the real engine.
_PAUSING_METHODS: Final = frozenset({"pause_generation", "pause_scheduler", "sleep"})


@dataclass
class _Held:
    request_id: str
    client_index: int
    num_tokens: int


class ScriptedEngine(EngineTransport):
    """A fake engine core answering both vLLM frontends from per-method scripts.

    Use :meth:`start_handshake` (frontend waits for a headless engine: Python ``vllm serve
    --data-parallel-size-local 0``) or :meth:`start_direct` (``vllm-rs frontend`` with
    inherited listeners), then :meth:`wait_registered`. Everything else is safe to call from any
    thread while the engine runs.
    """

    def __init__(
        self,
        *,
        max_model_len: int = 128,
        num_gpu_blocks: int = 1024,
        block_size: int = 16,
        rank: int = 0,
        token_ids: Sequence[int] = (74, 71, 78, 78, 81),
        kv_events_config: Mapping[str, Any] | None = None,
        enable_sleep_mode: bool = True,
        weight_transfer_backend: str | None = None,
        ready_overrides: Mapping[str, Any] | None = None,
        stateful: bool = True,
    ) -> None:
        """Create an engine (not yet connected).

        ``token_ids`` are cycled to answer generation requests; they must exist in the
        tokenizer. ``ready_overrides`` replaces fields of the ready response.

        By default the engine keeps the state vLLM's engine keeps (:class:`EngineState`): ``sleep``,
        ``wake_up``, ``pause_generation`` and ``resume_scheduler`` change what ``is_sleeping`` and
        ``is_scheduler_paused`` answer; a weight update must be started before its batches and its
        finish (vLLM's errors otherwise); ``set_weight_version`` sets what ``get_weight_version``
        answers. A script (:meth:`script`) answers before the state does. ``stateful=False`` gives
        the fixed answers of an idle engine whatever came before.
        """
        if not token_ids:
            raise ValueError("token_ids must name at least one token id")
        ready = build_ready_response(
            max_model_len=max_model_len,
            num_gpu_blocks=num_gpu_blocks,
            block_size=block_size,
            rank=rank,
            kv_events_config=kv_events_config,
            enable_sleep_mode=enable_sleep_mode,
            weight_transfer_backend=weight_transfer_backend,
        )
        if ready_overrides:
            ready.update(ready_overrides)
        super().__init__(rank=rank, ready=ready)
        self.token_ids: tuple[int, ...] = tuple(token_ids)
        self.stateful = stateful
        self._call_cond = threading.Condition(self._lock)
        self._calls: list[EngineCall] = []
        self._scripts: dict[str, list[Action]] = {}
        self._held: dict[str, _Held] = {}
        self._hung: dict[int, tuple[int, str]] = {}  # call_id -> (client_index, method)
        self.hold_requests = False
        self._state = EngineState()

    # ------------------------------------------------------------------ lifecycle

    @property
    def ready_response(self) -> dict[str, Any]:
        """The registration map sent to the frontend (a copy)."""
        return dict(self._ready)

    def __enter__(self) -> ScriptedEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ scripting

    def script(self, method: str, actions: Action | Iterable[Action]) -> None:
        """Replace ``method``'s script: actions are used in order, the last one sticks.

        Safe while the engine runs; the next call of ``method`` uses the new script. ``"add_request"``
        scripts generation requests: ``Raise`` finishes a request with an error (both frontends answer
        500), ``Hang`` holds it, ``Delay`` answers it late, ``Return`` answers it normally.
        """
        items = checked_script(method, actions, self._encoder.encode)
        with self._lock:
            self._scripts[method] = items

    def reset(self) -> None:
        """Restore defaults: scripts, call log, counters; fail hung calls, finish held requests."""
        with self._lock:
            self._scripts.clear()
            self._calls.clear()
            self._state = EngineState()
            self.hold_requests = False
        self.release_requests()
        self.release_hung()

    @property
    def state(self) -> EngineState:
        """What the engine remembers now (a copy): paused, asleep tags, weight update, weight version."""
        with self._lock:
            return EngineState(**vars(self._state))

    def begin_weight_update(self) -> None:
        """Put the engine in a started weight update, as a ``start_weight_update`` would."""
        with self._lock:
            self._state.weight_update = True

    def declare_dead(self) -> None:
        """Tell the frontend the engine died (``ENGINE_CORE_DEAD``); later requests are ignored."""
        self._command(self._send_dead)

    @property
    def dead(self) -> bool:
        """Whether :meth:`declare_dead` was called."""
        return self._dead

    def release_hung(self, message: str = "released by ScriptedEngine") -> None:
        """Fail every call that a ``Hang()`` left unanswered, so no frontend handler stays stuck.

        The HTTP clients have usually given up already; this lets the frontend finish (and shut
        down) cleanly.
        """
        self._command(lambda: self._fail_hung(message))

    @property
    def hung_calls(self) -> int:
        """How many calls are waiting forever because of ``Hang()``."""
        with self._lock:
            return len(self._hung)

    def release_requests(self, finish_reason: int = FinishReason.LENGTH) -> None:
        """Finish every held generation request (see ``hold_requests``)."""
        self._command(lambda: self._finish_held(None, finish_reason))

    # ------------------------------------------------------------------ call log

    @property
    def calls(self) -> list[EngineCall]:
        """Every message received so far, oldest first (a copy)."""
        with self._lock:
            return list(self._calls)

    def calls_for(self, method: str) -> list[EngineCall]:
        """The received calls of one utility method (or ``add_request``/``abort_requests``)."""
        with self._lock:
            return [c for c in self._calls if c.method == method]

    def clear_calls(self) -> None:
        """Forget the call log (and so the added-request count)."""
        with self._lock:
            self._calls.clear()

    @property
    def requests_added(self) -> int:
        """How many ADD (generation) requests arrived since the last reset."""
        with self._lock:
            return sum(call.kind == "add" for call in self._calls)

    @property
    def held_request_ids(self) -> list[str]:
        """Generation requests kept open because ``hold_requests`` is set."""
        with self._lock:
            return list(self._held)

    def wait_for_call(self, method: str, deadline: float = 10.0, count: int = 1) -> EngineCall:
        """Block until ``count`` calls of ``method`` were logged (at most ``deadline`` s); the latest one."""
        end = time.monotonic() + deadline
        with self._call_cond:
            while True:
                found = [c for c in self._calls if c.method == method]
                if len(found) >= count:
                    return found[-1]
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"engine saw {len(found)} call(s) of {method!r} within {deadline} s, expected {count}"
                    )
                self._call_cond.wait(left)

    # ------------------------------------------------------------------ thread side

    def _log(self, call: EngineCall) -> None:
        with self._call_cond:
            self._calls.append(call)
            self._call_cond.notify_all()

    def _handle(self, frames: list[bytes]) -> None:
        if self._dead or len(frames) < 2:
            return
        kind, payload = frames[0], self._decoder.decode(frames[1])
        if kind == _UTILITY:
            client_index, call_id, method, args = payload
            self._log(EngineCall("utility", method, tuple(args), time.time(), call_id, client_index))
            self._utility(client_index, call_id, method, list(args))
        elif kind == _ADD:
            request_id, sampling = payload[0], payload[3] or {}
            client_index = payload[11] if len(payload) > 11 and payload[11] is not None else 0
            call = EngineCall("add", "add_request", (request_id, sampling), time.time(), None, client_index)
            self._log(call)
            self._add(request_id, client_index, sampling)
        elif kind == _ABORT:
            ids = list(payload)
            self._log(EngineCall("abort", "abort_requests", (ids,), time.time()))
            self._finish_held(ids, FinishReason.ABORT)
        # START_DP_WAVE and anything else: nothing to do with one engine.

    def _next_action(self, method: str) -> Action | None:
        with self._lock:
            script = self._scripts.get(method)
            if not script:
                return None
            return script.pop(0) if len(script) > 1 else script[0]

    def _default(self, method: str, args: list[Any]) -> Any:
        with self._lock:
            if self.stateful and method in STATE_ANSWERS:
                if not self._held:  # a drain (checkpoint_prepare's pause) ends with the last request
                    self._state.drained()
                return self._state.answer(method)
        if method == "collective_rpc" and args and args[0] in _RPC_DEFAULTS:
            return _RPC_DEFAULTS[args[0]]
        return _default_results().get(method)

    def _track_state(self, method: str, args: list[Any]) -> None:
        with self._lock:
            self._state.track(method, args)
        # Like the real engine, an "abort"-mode pause ends in-flight requests.
        if method in _PAUSING_METHODS:
            # sleep(level, mode); pause_generation/pause_scheduler(mode, clear_cache)
            index = 1 if method == "sleep" else 0
            mode = args[index] if len(args) > index else "abort"
            if mode == "abort":
                self._finish_held(None, FinishReason.ABORT)

    def _utility(self, client_index: int, call_id: int, method: str, args: list[Any]) -> None:
        action = self._next_action(method)
        if isinstance(action, Hang):
            with self._lock:
                self._hung[call_id] = (client_index, method)
            return
        refusal = None
        if action is None and self.stateful:
            with self._lock:
                refusal = self._state.refusal(method, args)
        if isinstance(action, Raise) or refusal is not None:
            message = action.message if isinstance(action, Raise) else refusal
            self._send(client_index, self._outputs_msg(utility=failed_call(call_id, method, str(message))))
            return
        self._track_state(method, args)
        value = self._default(method, args) if action is None else action.value
        payload = self._outputs_msg(utility=[call_id, None, [None, value]])
        if isinstance(action, Delay):
            self._send_at(time.monotonic() + action.seconds, client_index, payload)
        else:
            self._send(client_index, payload)

    def _add(self, request_id: str, client_index: int, sampling: Mapping[str, Any]) -> None:
        # SamplingParams omits defaults on the wire: a missing max_tokens is vLLM's 16.
        max_tokens = sampling.get("max_tokens")
        num = 16 if max_tokens is None else max(1, min(int(max_tokens), 4096))
        # A script for "add_request" decides per request: Raise finishes it with an error (the frontend
        # answers 500), Hang holds it, Delay answers late, Return (or no script) answers at once.
        action = self._next_action("add_request")
        if isinstance(action, Raise):
            self._send(client_index, self._token_msg(request_id, 0, FinishReason.ERROR))
            return
        if isinstance(action, Delay):
            payload = self._token_msg(request_id, num, FinishReason.LENGTH)
            self._send_at(time.monotonic() + action.seconds, client_index, payload)
            return
        if self.hold_requests or isinstance(action, Hang):
            with self._lock:
                self._held[request_id] = _Held(request_id, client_index, num)
            return
        self._send(client_index, self._token_msg(request_id, num, FinishReason.LENGTH))

    def _fail_hung(self, message: str) -> None:
        with self._lock:
            hung, self._hung = self._hung, {}
        for call_id, (client_index, method) in hung.items():
            self._send(client_index, self._outputs_msg(utility=failed_call(call_id, method, message)))

    def _finish_held(self, ids: list[str] | None, reason: int) -> None:
        with self._lock:
            chosen = list(self._held) if ids is None else [i for i in ids if i in self._held]
            items = [self._held.pop(i) for i in chosen]
        for held in items:
            num = held.num_tokens if reason == FinishReason.LENGTH else 0
            self._send(held.client_index, self._token_msg(held.request_id, num, reason))

    def _token_msg(self, request_id: str, num_tokens: int, reason: int) -> bytes:
        tokens = [self.token_ids[i % len(self.token_ids)] for i in range(num_tokens)]
        return self._encoder.encode(token_outputs(self.rank, request_id, tokens, reason))

    def _outputs_msg(self, *, utility: list[Any]) -> bytes:
        return self._encoder.encode(utility_outputs(self.rank, utility))
