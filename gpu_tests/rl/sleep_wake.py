"""Point 2 of issue 26: sleep and wake on the real engine, per level, with the GPU memory each step frees.

Per level (the server runs with `--enable-sleep-mode`):

1. greedy answers and the server's GPU memory (its process tree, `gpu_memory.py`);
2. `sleep(level)` then `wait_until_sleeping()`; memory again: freed = awake - asleep;
3. a partial wake, `wake_up(tags=["weights"])`: what it answers, whether `/is_sleeping` still says true
   (the KV cache sleeps on), memory; where the server refuses the tags (vllm-rs 0.26 answers 400: it cannot
   read `tags` from the query), a whole wake instead, recorded, before anything touches the weights;
4. level 2 only: the weights were discarded, so they are loaded again (`reload`: vLLM 0.26 offers the
   worker's `reload_weights` through `collective_rpc`, from disk);
5. the whole wake, `wake_up(tags=["kv_cache"])`, `wait_until_awake()`, memory, answers: equal to step 1's.

A step that fails is recorded and the level goes on: whatever happens, the server is woken at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vllm_devclient import DevClient

from .gpu_memory import freed
from .steps import Steps

LEVELS = (1, 2)
PARTIAL_TAGS = ("weights",)
REST_TAGS = ("kv_cache",)


def sleep_level(
    client: DevClient,
    steps: Steps,
    level: int,
    *,
    answers: Callable[[], list[str]],
    memory: Callable[[], dict[str, Any]],
    reload: Callable[[], Any] | None = None,
    log_lines: Callable[[], list[str]] = list,
) -> dict[str, Any]:
    """One level, as the module docstring says; the report of what each step saw."""
    p = f"sleep{level}"
    out: dict[str, Any] = {"level": level}
    out["answers_before"] = steps.run(f"{p}.answers_before", answers)
    out["memory_awake"] = steps.run(f"{p}.memory_awake", memory)
    seen = len(log_lines())
    out["sleep"] = steps.run(f"{p}.sleep", lambda: _dump(client.sleep(level)))
    out["sleeping"] = steps.run(
        f"{p}.wait_until_sleeping", lambda: _done(client.wait_until_sleeping, deadline=120)
    )
    out["memory_asleep"] = steps.run(f"{p}.memory_asleep", memory)
    out["engine_log"] = [line for line in log_lines()[seen:] if "Sleep mode freed" in line]
    partial = steps.run(f"{p}.wake_up_weights", lambda: _dump(client.wake_up(tags=PARTIAL_TAGS)))
    out["wake_weights"] = partial
    if partial is None:
        # Refused (vllm-rs 0.26 cannot read `tags`): wake wholly, never load weights into sleeping memory.
        out["wake_all_instead"] = steps.run(f"{p}.wake_up_all_instead", lambda: _dump(client.wake_up()))
    else:
        out["is_sleeping_after_partial_wake"] = steps.run(f"{p}.is_sleeping_partial", client.is_sleeping)
        out["memory_weights_awake"] = steps.run(f"{p}.memory_weights_awake", memory)
    if reload is not None:
        out["reload"] = steps.run(f"{p}.reload_weights", reload)
    if partial is not None:
        out["wake_rest"] = steps.run(f"{p}.wake_up_kv_cache", lambda: _dump(client.wake_up(tags=REST_TAGS)))
    if steps.run(f"{p}.wait_until_awake", lambda: _done(client.wait_until_awake, deadline=120)) is None:
        steps.run(f"{p}.wake_up_all", lambda: _dump(client.wake_up()))
    out["memory_woken"] = steps.run(f"{p}.memory_woken", memory)
    out["answers_after"] = steps.run(f"{p}.answers_after", answers)
    out.update(summary(out))
    return out


def summary(level: dict[str, Any]) -> dict[str, Any]:
    """The level's figures: MiB freed asleep and given back by each wake, and whether the answers held."""
    awake, asleep = level.get("memory_awake"), level.get("memory_asleep")
    weights, woken = level.get("memory_weights_awake"), level.get("memory_woken")
    before, after = level.get("answers_before"), level.get("answers_after")
    return {
        "freed": freed(awake, asleep) if awake and asleep else None,
        "retaken_by_weights": freed(weights, asleep) if weights and asleep else None,
        "retaken_by_wake": freed(woken, asleep) if woken and asleep else None,
        "answers_equal": before == after if before is not None and after is not None else None,
    }


def _done(wait: Callable[..., None], **kwargs: Any) -> bool:
    """True once `wait` returned (a step's None means it failed)."""
    wait(**kwargs)
    return True


def _dump(value: Any) -> Any:
    return value.model_dump() if hasattr(value, "model_dump") else value
