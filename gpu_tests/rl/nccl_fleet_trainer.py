"""The trainer process of the NCCL-over-a-fleet GPU test (gpu_tests/test_nccl_fleet_gpu.py): vLLM's own
`NCCLTrainerWeightTransferEngine` over `WeightSync(Fleet(urls))`, broadcasting the served architecture with
weights drawn from another seed to every server, one rank offset per server.

    python -m gpu_tests.rl.nccl_fleet_trainer --model DIR --url URL --url URL --report out.json
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def broadcast(model_dir: str, urls: Sequence[str], seed: int) -> dict[str, Any]:
    from vllm.distributed.weight_transfer import ModuleSource
    from vllm.distributed.weight_transfer.nccl_engine import (
        NCCLTrainerInitInfo,
        NCCLTrainerWeightTransferEngine,
    )

    from gpu_tests.rl.run_rl import load_example
    from vllm_devclient import Fleet, WeightSync
    from vllm_devclient.testing import free_port

    model = load_example().trainer_model(model_dir, seed)
    with Fleet(urls) as fleet:
        sizes = fleet.get_world_size().raise_for_errors().ok
        info = NCCLTrainerInitInfo(
            rank=0, master_address="127.0.0.1", master_port=free_port(), world_size=1 + sum(sizes.values())
        )
        sync = WeightSync(fleet, timeout=300.0)
        start = time.perf_counter()
        engine = NCCLTrainerWeightTransferEngine.trainer_init(info, client=sync, source=ModuleSource(model))
        init_s = time.perf_counter() - start
        start = time.perf_counter()
        engine.send_weights()
        send_s = time.perf_counter() - start
        sync.shutdown_weight_transfer_engine()
        engine.shutdown()
        sync.close()
    tensors = sum(1 for _ in model.parameters())
    return {"world_sizes": sizes, "world_size": info.world_size, "init_s": init_s, "send_s": send_s,
            "tensors": tensors}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", required=True)
    parser.add_argument("--url", action="append", required=True)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--report", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        report = broadcast(args.model, args.url, args.seed)
    except Exception as exc:  # the test reads the report: say what failed
        args.report.write_text(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        raise
    args.report.write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
