"""Whether NCCL builds a communicator whose ranks share one GPU: the question that decides where the NCCL
fleet GPU test (gpu_tests/test_nccl_fleet_gpu.py: a trainer and two TP1 servers, three ranks) can run.

Starts `--ranks` processes on CUDA device 0 with the device's own torch (no payload), each joining one NCCL
group and broadcasting a tensor from rank 0; writes what each rank saw, the torch and NCCL versions and the
GPUs visible to one JSON report. Measures only: the test's skip condition reads the committed report.

    python -m gpu_tests.runner.nccl_shared_gpu --ranks 3 --report OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _rank(rank: int, world: int, port: int, queue: Any) -> None:
    import torch
    import torch.distributed as dist

    try:
        torch.cuda.set_device(0)
        dist.init_process_group(
            "nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
            device_id=torch.device("cuda", 0),
        )  # fmt: skip
        value = torch.full((4,), float(rank == 0) * 7.0, device="cuda")
        dist.broadcast(value, src=0)
        torch.cuda.synchronize()
        queue.put({"rank": rank, "ok": True, "received": value.tolist()})
        dist.destroy_process_group()
    except Exception as exc:  # the report says what NCCL answered
        queue.put({"rank": rank, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]})


def probe(ranks: int, timeout_s: float) -> dict[str, Any]:
    import torch
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, ranks, port, queue)) for r in range(ranks)]
    start = time.monotonic()
    for p in procs:
        p.start()
    outcomes: list[dict[str, Any]] = []
    while len(outcomes) < ranks and time.monotonic() - start < timeout_s:
        try:
            outcomes.append(queue.get(timeout=1.0))
        except Exception:  # queue.Empty: keep waiting until the timeout
            continue
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
    gpus = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    return {
        "ranks": ranks,
        "gpu_list": gpus.strip().splitlines(),
        "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),  # type: ignore[no-untyped-call]
        "outcomes": sorted(outcomes, key=lambda o: o["rank"]),
        "answered": len(outcomes),
        "all_ok": len(outcomes) == ranks and all(o["ok"] for o in outcomes),
        "took_s": round(time.monotonic() - start, 1),
        "env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=120.0)
    parser.add_argument("--report", type=Path, required=True)
    args = parser.parse_args(argv)
    report = probe(args.ranks, args.timeout_s)
    args.report.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
