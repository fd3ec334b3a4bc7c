"""A pool of real frontends by (frontend, setup), started on first use or ahead of it, all at once.

Used by the parity report, the recorder and the contract suite: each setup (default, API key, dev mode off,
dead engine) of each frontend (Python, Rust) runs on a scripted engine of its own.
"""

from __future__ import annotations

import concurrent.futures
import json
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from .contract import API_KEY, Setup

__all__ = ["FRONTENDS", "KV_EVENTS_CONFIG", "FrontendPool"]

FRONTENDS: tuple[str, ...] = ("python", "rust")
PROFILER_CONFIG = {
    "profiler": "torch",
    "torch_profiler_dir": str(Path(tempfile.gettempdir()) / "vllm-profile"),
}


def lora_adapter_dir() -> Path:
    """A LoRA adapter directory the extras setup may load (the frontends check that the path exists)."""
    root = Path(tempfile.gettempdir()) / "vllm-devclient-lora" / "adapter"
    root.mkdir(parents=True, exist_ok=True)
    config = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj"], "peft_type": "LORA"}
    (root / "adapter_config.json").write_text(json.dumps(config))
    return root


# The api_key setup's engine also announces a KV-events publisher, so /kv_event_sources has something to
# report (one more frontend pair would cost another Python startup).
KV_EVENTS_CONFIG: dict[str, Any] = {
    "enable_kv_cache_events": True,
    "publisher": "zmq",
    "endpoint": "tcp://*:5557",
    "replay_endpoint": "tcp://*:5558",
    "buffer_steps": 10000,
    "hwm": 100000,
    "max_queue_size": 100000,
    "topic": "kv-events",
}


@dataclass
class _Slot:
    frontend: Any
    ready: concurrent.futures.Future[None]
    handed_out: bool = False


class FrontendPool(AbstractContextManager["FrontendPool"]):
    """Real frontends by (frontend, setup), started on first use (or ahead, in the background) and stopped
    by :meth:`close`.

    ``python`` is the interpreter of the vllm install to run (default: this one), ``vllm_rs`` the binary
    (default: the installed wheel's). Frontends handed in with :meth:`adopt` are used but never stopped.
    A dead-engine frontend serves one scenario run only (the Python frontend exits soon after its engine
    dies), so each :meth:`get` of that setup hands out a fresh one; start spares ahead with :meth:`start`.
    """

    def __init__(
        self,
        *,
        python: str | None = None,
        vllm_rs: str | None = None,
        model_dir: str | Path | None = None,
        frontends: Sequence[str] = FRONTENDS,
        engine_factory: Callable[..., Any] | None = None,
        rust_class: type[Any] | None = None,
    ) -> None:
        unknown = set(frontends) - set(FRONTENDS)
        if unknown:
            raise ValueError(f"unknown frontend(s) {sorted(unknown)}: use 'python' and/or 'rust'")
        self.python = python
        self.vllm_rs = vllm_rs
        self.model_dir = model_dir
        self.frontends = tuple(frontends)
        # How to build each frontend's engine (keyword arguments of ScriptedEngine) and which class runs
        # vllm-rs: older releases need another engine profile and other vllm-rs flags (fixtures/releases.py).
        self.engine_factory = engine_factory
        self.rust_class = rust_class
        self._slots: dict[tuple[str, Setup], list[_Slot]] = {}
        self._adopted: dict[tuple[str, Setup], Any] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._keepers: list[threading.Thread] = []

    def adopt(self, frontend: str, setup: Setup, fe: Any) -> None:
        """Use an already running frontend (e.g. a pytest fixture's) for this (frontend, setup)."""
        self._adopted[(frontend, setup)] = fe

    def _make(self, frontend: str, setup: Setup) -> Any:
        from .engine import ScriptedEngine
        from .frontends import PythonFrontend, RustFrontend

        kw: dict[str, Any] = {"model_dir": self.model_dir}
        engine_kw: dict[str, Any] = {}
        if setup == "api_key":
            kw["api_key"] = API_KEY
            engine_kw["kv_events_config"] = KV_EVENTS_CONFIG
        elif setup == "dev_mode_off":
            kw["dev_mode"] = False
        elif setup == "extras":
            adapter = lora_adapter_dir()
            kw["env"] = {
                "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1",
                "VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES": str(adapter.parent),
            }
            engine_kw["ready_overrides"] = {"supports_lora": True, "max_loras": 2}
        kw["engine"] = (self.engine_factory or ScriptedEngine)(**engine_kw)
        if frontend == "rust":
            if setup == "extras":
                kw["args"] = {
                    "enable_lora": True,
                    "max_lora_rank": 16,
                    "profiler_config": PROFILER_CONFIG,
                    "enable_tokenizer_info_endpoint": True,
                }
            return (self.rust_class or RustFrontend)(binary=self.vllm_rs, **kw)
        if setup == "extras":
            kw["extra_args"] = [
                "--enable-lora",
                "--enable-tokenizer-info-endpoint",
                "--profiler-config",
                json.dumps(PROFILER_CONFIG),
            ]
        return PythonFrontend(python=self.python, **kw)

    def get(self, frontend: str, setup: Setup = "default") -> Any:
        """The running frontend for (frontend, setup), started now (or awaited) if needed."""
        key = (frontend, setup)
        if key in self._adopted:
            return self._adopted[key]
        single_use = setup == "dead_engine"
        with self._lock:
            slots = self._slots.setdefault(key, [])
            usable = [s for s in slots if not (single_use and s.handed_out)]
            slot = usable[0] if usable else self._launch(key)
            slot.handed_out = True
        slot.ready.result()
        return slot.frontend

    def start(self, keys: Iterable[tuple[str, Setup]], *, wait: bool = True) -> None:
        """Start frontends ahead of use, all at once (Python startups overlap: they mostly wait).

        A key given n times gets n frontends in all (useful for single-use dead-engine ones). With
        ``wait=False`` this returns at once and :meth:`get` waits for each.
        """
        from .frontends import _install_safety_nets

        if threading.current_thread() is threading.main_thread():
            # Signal handlers can only be installed from the main thread: do it before the keepers start.
            _install_safety_nets()
        wanted: dict[tuple[str, Setup], int] = {}
        for key in keys:
            if key[0] not in self.frontends:
                raise ValueError(f"this pool runs only {self.frontends}, not {key}")
            wanted[key] = wanted.get(key, 0) + 1
        started: list[_Slot] = []
        with self._lock:
            for key, count in wanted.items():
                if key in self._adopted:
                    continue
                slots = self._slots.setdefault(key, [])
                started += [self._launch(key) for _ in range(count - len(slots))]
        if wait:
            for slot in started:
                slot.ready.result()

    def _launch(self, key: tuple[str, Setup]) -> _Slot:
        # Every frontend is started from a thread that lives until close(): the harness ties a frontend's
        # life to the thread that spawned it (PR_SET_PDEATHSIG), so a short-lived thread would take it along.
        slot = _Slot(self._make(*key), concurrent.futures.Future())
        self._slots.setdefault(key, []).append(slot)  # registered first: close() stops it whatever happens
        keeper = threading.Thread(
            target=self._keep, args=(slot,), name=f"keep-{key[0]}-{key[1]}", daemon=True
        )
        keeper.start()
        self._keepers.append(keeper)
        return slot

    def _keep(self, slot: _Slot) -> None:
        try:
            slot.frontend.start()
        except BaseException as exc:
            slot.ready.set_exception(exc)
            return
        slot.ready.set_result(None)
        self._closing.wait()

    def running(self) -> Iterator[Any]:
        """Every frontend this pool started or uses."""
        for slots in list(self._slots.values()):
            yield from (s.frontend for s in slots)
        yield from self._adopted.values()

    def close(self) -> None:
        """Stop every frontend the pool started (adopted ones are left to their owner)."""
        with self._lock:
            owned = [s.frontend for slots in self._slots.values() for s in slots]
            self._slots = {}
            keepers, self._keepers = self._keepers, []
        for fe in owned:
            fe.stop()
        self._closing.set()
        for keeper in keepers:
            keeper.join(10.0)
        self._closing = threading.Event()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
