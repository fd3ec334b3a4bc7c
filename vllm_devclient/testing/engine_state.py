"""What vLLM's engine remembers between calls, as the scripted engine keeps it, and the names vLLM gives
the arguments of the engine methods the frontends call.

From `vllm.v1.engine.core.EngineCore` and the GPU worker's weight-update session (vLLM 0.33 and 0.34):
`sleep` pauses the scheduler and, at level >= 1, puts the executor's memory to sleep; `wake_up` wakes the
tags given (or all) and resumes scheduling once nothing sleeps; `is_sleeping` is paused or asleep; a weight
update's batches and finish need its start, and a start needs the last one finished. From 0.34:
`is_inference_ready` is not sleeping and no weight update left incomplete; the process-checkpoint cycle
(`checkpoint_prepare` drains with a pause and releases the KV cache, PREPARING until no request is in
flight, then PREPARED; `checkpoint_restore` wakes the KV cache and serves again; `checkpoint_state` answers
`[state, error]`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["PARAMETERS", "STATE_ANSWERS", "EngineState", "named_arguments"]

# vLLM's parameter names (and defaults) of the engine methods the frontends call with arguments;
# `add_request`/`abort_requests` as the ADD and ABORT messages carry them.
PARAMETERS: Final[Mapping[str, tuple[tuple[str, Any], ...]]] = {
    "reset_prefix_cache": (("reset_running_requests", False), ("reset_connector", False)),
    "sleep": (("level", 1), ("mode", "abort"), ("reset_connector", True)),
    "release_kv_cache_memory": (("reset_connector", True),),
    "checkpoint_prepare": (("mode", "wait"),),
    "checkpoint_restore": (),
    "wake_up": (("tags", None),),
    "pause_generation": (("mode", "abort"), ("clear_cache", True)),
    "pause_scheduler": (("mode", "abort"), ("clear_cache", True)),
    "collective_rpc": (("method", None), ("timeout", None), ("args", ()), ("kwargs", None)),
    "set_weight_version": (("weight_version", None),),
    "add_lora": (("lora_request", None),),
    "remove_lora": (("lora_id", None),),
    "pin_lora": (("lora_id", None),),
    "profile": (
        ("is_start", True),
        ("profile_prefix", None),
        ("delay_iterations", None),
        ("max_iterations", None),
        ("profiler_kwargs", None),
    ),
    "add_request": (("request_id", None), ("sampling_params", None)),
    "abort_requests": (("request_ids", None),),
}

# The engine methods whose unscripted answer comes from the state.
STATE_ANSWERS: Final = frozenset(
    {
        "is_sleeping",
        "is_scheduler_paused",
        "wake_up",
        "get_weight_version",
        "is_inference_ready",
        "checkpoint_state",
        "checkpoint_prepare",
    }
)

# What an executor put to sleep at level >= 1 holds offloaded or discarded (vLLM's sleep tags).
_SLEEP_TAGS: Final = frozenset({"weights", "kv_cache"})
_STARTS: Final = frozenset({"start_weight_update", "start_draft_weight_update"})
# vLLM's CheckpointState values; only RUNNING and RESTORING let memory wake.
_RESTORED: Final = frozenset({"running", "restoring"})


def named_arguments(method: str, args: Sequence[Any]) -> dict[str, Any]:
    """`args` by vLLM's parameter names, its defaults filled in for those not sent; a method with no
    names here gives `{"arg0": ..., ...}`."""
    names = PARAMETERS.get(method, ())
    out = {name: default for name, default in names}
    out.update(zip((name for name, _ in names), args, strict=False))
    out.update({f"arg{i}": value for i, value in enumerate(args) if i >= len(names)})
    return out


@dataclass
class EngineState:
    """What the engine remembers (``engine.state`` gives a copy).

    ``paused``: the scheduler is paused (``pause_generation``, ``sleep`` at any level); ``asleep``: the
    executor's sleeping tags (``sleep`` level >= 1 puts ``weights`` and ``kv_cache`` to sleep, ``wake_up``
    wakes the tags given, or all); ``weight_update``: a weight update was started and not finished;
    ``weight_version``: what ``set_weight_version`` set (``"default"`` at start); ``checkpoint``: the
    process-checkpoint state (``"running"``, ``"preparing"``, ``"prepared"``, ``"restoring"``, ``"failed"``)
    and ``prepare_refusal`` what the last ``checkpoint_prepare`` answered.
    """

    paused: bool = False
    asleep: frozenset[str] = frozenset()
    weight_update: bool = False
    weight_version: str = "default"
    checkpoint: str = "running"
    prepare_refusal: str | None = None

    @property
    def sleeping(self) -> bool:
        """``is_sleeping`` as vLLM answers it: paused, or any executor memory asleep."""
        return self.paused or bool(self.asleep)

    def answer(self, method: str) -> Any:
        """The unscripted answer of a method in `STATE_ANSWERS`."""
        if method == "is_sleeping":
            return self.sleeping
        if method == "is_scheduler_paused":
            return self.paused
        if method == "wake_up":
            return not self.asleep  # fully awake
        if method == "is_inference_ready":
            return not self.sleeping and not self.weight_update
        if method == "checkpoint_state":
            return [self.checkpoint, None]
        if method == "checkpoint_prepare":
            return self.prepare_refusal
        return self.weight_version

    def drained(self) -> None:
        """No request is in flight any more: a checkpoint being prepared is prepared."""
        if self.checkpoint == "preparing":
            self.checkpoint = "prepared"
            self.asleep = self.asleep | {"kv_cache"}  # preparing releases the KV cache

    def refusal(self, method: str, args: Sequence[Any]) -> str | None:
        """vLLM's error for a call the engine refuses in its state (a weight-update step out of order, a
        wake or restore amid a checkpoint cycle), else None."""
        if method == "wake_up" and self.checkpoint not in _RESTORED:
            return f"Cannot wake up while the checkpoint state is {self.checkpoint}"
        if method == "checkpoint_restore" and self.checkpoint not in (*_RESTORED, "prepared"):
            return f"Cannot restore while the checkpoint state is {self.checkpoint}"
        if method != "collective_rpc" or not args:
            return None
        worker_method = args[0]
        if worker_method in _STARTS and self.weight_update:
            return (
                "start_weight_update called while a weight update is already active. "
                "Call finish_weight_update first."
            )
        if worker_method == "update_weights" and not self.weight_update:
            return "start_weight_update must be called before update_weights."
        if worker_method == "finish_weight_update" and not self.weight_update:
            return "finish_weight_update called without a matching start_weight_update."
        return None

    def track(self, method: str, args: Sequence[Any]) -> None:
        """Change as vLLM's engine does when `method` succeeds."""
        named = named_arguments(method, args)
        if method == "sleep":
            self.paused = True
            if named["level"] >= 1:
                self.asleep = _SLEEP_TAGS
        elif method in ("pause_generation", "pause_scheduler"):
            self.paused = True
        elif method == "resume_scheduler":
            self.paused = False
        elif method == "wake_up":
            tags = named["tags"]
            self.asleep = frozenset() if tags is None else self.asleep - set(tags)
            if not self.asleep:  # vLLM resumes scheduling once all memory is resident
                self.paused = False
        elif method == "checkpoint_prepare":
            self._prepare()
        elif method == "checkpoint_restore" and self.checkpoint == "prepared":
            self.checkpoint, self.paused = "running", False
            self.asleep = self.asleep - {"kv_cache"}
        elif method == "set_weight_version":
            self.weight_version = named["weight_version"]
        elif method == "collective_rpc":
            if named["method"] in _STARTS:
                self.weight_update = True
            elif named["method"] == "finish_weight_update":
                self.weight_update = False

    def _prepare(self) -> None:
        # vLLM's checkpoint_prepare: a refusal is its answer, with nothing changed.
        self.prepare_refusal = None
        if self.checkpoint in ("preparing", "prepared"):
            return
        if self.checkpoint != "running":
            self.prepare_refusal = f"Cannot prepare while the checkpoint state is {self.checkpoint}"
        elif self.asleep:
            self.prepare_refusal = "Preparing for a checkpoint requires an awake engine"
        else:
            self.checkpoint, self.paused = "preparing", True
