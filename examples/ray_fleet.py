"""An RL loop on Ray: rollout actors generate from a fleet of vLLM servers, a trainer actor updates the
weights on all of them at once.

    VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --port 8000 ...      # each server, in dev mode
    python examples/ray_fleet.py --url http://vllm-0.example:8000 --url http://vllm-1.example:8000 --steps 3

Every rollout actor holds a `DevClient` for one server; the trainer holds an `AsyncFleet` over all of them.
They are handed to the actors as arguments: Ray pickles them, and each actor rebuilds its own connection pool
on the other side (a client pickles by its configuration, never by its connections).

Each step, every rollout actor generates from its server; then the trainer runs one weight update over the
fleet: pause every server, start the update, send the batch, finish it with the step's version, resume every
server (`AsyncFleet.weight_update`). Here the batch is the weights' names, dtypes and shapes; on a real run
the tensors travel beside it over the weight-transfer backend (the trainer's NCCL broadcast after
`init_weight_transfer_engine`, or CUDA IPC on one GPU: examples/rl_weight_sync.py). When a server fails any
step of it, the update is closed without its version on every server where it started (vLLM puts back the
weights no batch replaced only at the finish), every server is resumed, and the loop goes on with the next
step.

Prints one JSON line per event (the actors, each rollout, each update) and a summary line last. With no
`--ray-address` it starts a local Ray cluster and shuts it down at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import ray

from vllm_devclient import AsyncFleet, DevClient, FleetError

# The model's weights as the update announces them (a real trainer lists its own parameters).
WEIGHTS = {
    "names": ["model.embed_tokens.weight", "lm_head.weight"],
    "dtype_names": ["bfloat16", "bfloat16"],
    "shapes": [[32000, 64], [32000, 64]],
}


@ray.remote(num_cpus=0)
class Rollout:
    """Generates from one server through the client it was given (rebuilt in this process)."""

    def __init__(self, client: DevClient) -> None:
        self.client = client

    def describe(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "url": self.client.base_url, "client": type(self.client).__name__}

    def generate(self, prompts: Sequence[str], max_tokens: int) -> list[str]:
        return [self.client.completion(p, max_tokens=max_tokens, temperature=0).text for p in prompts]


@ray.remote(num_cpus=0)
class Trainer:
    """Pushes each step's weights to every server (an async actor: the fleet runs on its event loop)."""

    def __init__(self, fleet: AsyncFleet) -> None:
        self.fleet = fleet

    async def describe(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "urls": list(self.fleet.urls), "fleet": type(self.fleet).__name__}

    async def sync_weights(self, version: str) -> dict[str, Any]:
        try:
            async with self.fleet.weight_update(weight_version=version) as update:
                await update.update(WEIGHTS)
        except FleetError as err:
            failed = {url: f"{type(e).__name__}: {e}" for url, e in err.errors.items()}
            return {"version": version, "ok": False, "operation": err.operation, "failed": failed}
        return {"version": version, "ok": True}

    async def close(self) -> None:
        await self.fleet.close()


def run(urls: Sequence[str], *, steps: int, prompts: Sequence[str], max_tokens: int) -> dict[str, Any]:
    """The loop, on the Ray cluster this process is connected to; returns the summary."""
    rollouts = [Rollout.remote(DevClient(url)) for url in urls]
    trainer = Trainer.remote(AsyncFleet(urls))
    for info in ray.get([r.describe.remote() for r in rollouts]):
        emit({"event": "actor", "role": "rollout", **info})
    emit({"event": "actor", "role": "trainer", **ray.get(trainer.describe.remote())})
    served: list[str] = []
    failed: list[str] = []
    for step in range(1, steps + 1):
        answers = ray.get([r.generate.remote(prompts, max_tokens) for r in rollouts])
        for url, texts in zip(urls, answers, strict=True):
            emit({"event": "rollout", "step": step, "url": url, "texts": texts})
        outcome = ray.get(trainer.sync_weights.remote(f"step-{step}"))
        emit({"event": "update", "step": step, **outcome})
        (served if outcome["ok"] else failed).append(outcome["version"])
    # The servers answer after the last update too (a failed one left them resumed).
    final = ray.get([r.generate.remote(prompts, max_tokens) for r in rollouts])
    ray.get(trainer.close.remote())
    return {
        "event": "done",
        "driver_pid": os.getpid(),
        "updated": served,
        "failed": failed,
        "served_after": all(len(texts) == len(prompts) for texts in final),
    }


def emit(event: dict[str, Any]) -> None:
    print(json.dumps(event), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", action="append", required=True, help="a vLLM server (repeat for a fleet)")
    parser.add_argument("--steps", type=int, default=3, help="rollout + weight-update steps")
    parser.add_argument("--prompt", action="append", help="a rollout prompt (repeat); two by default")
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--ray-address", help="a running Ray cluster (default: start a local one)")
    args = parser.parse_args(argv)
    ray.init(address=args.ray_address, include_dashboard=False, log_to_driver=False)
    try:
        summary = run(
            args.url,
            steps=args.steps,
            prompts=args.prompt or ["The capital of France is", "1 + 1 ="],
            max_tokens=args.max_tokens,
        )
    finally:
        ray.shutdown()
    emit(summary)
    return 0 if summary["served_after"] else 1


if __name__ == "__main__":
    sys.exit(main())
