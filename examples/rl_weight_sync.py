"""Colocated RL weight sync: a trainer on the same GPU as vLLM pushes new weights over CUDA IPC, and the SDK
carries the control plane (pause, start, send, finish with a version, resume).

vLLM 0.26's IPC weight-transfer engine (`vllm/distributed/weight_transfer/ipc_engine.py`; later releases
moved the trainer side into `IPCTrainerWeightTransferEngine`) takes the send step as a callable:
`trainer_send_weights(params, {"send_mode": send})` turns the trainer's tensors into CUDA IPC handles and
calls `send(update_info)`. Here `send` posts that batch through the SDK's
`update.update(...)` inside `client.weight_update(...)`, in the form vLLM's own "http" mode posts (the handles
pickled and base64-encoded, which the server reads only with VLLM_ALLOW_INSECURE_SERIALIZATION=1).

The server, on a GPU, in dev mode with the IPC backend (the worker extension is optional; `compare` uses it):

    VLLM_SERVER_DEV_MODE=1 VLLM_ALLOW_INSECURE_SERIALIZATION=1 vllm serve MODEL \\
        --weight-transfer-config '{"backend": "ipc"}' \\
        --worker-extension-cls gpu_tests.rl.worker_extension.RLWorkerExtension

The trainer, on the same GPU: the served architecture with weights drawn from another seed, synced:

    python examples/rl_weight_sync.py sync --url http://127.0.0.1:8000 --model MODEL --seed 7 \\
        --save-dir /tmp/new-weights --report sync.json            # --fail-send: a send that fails

Then, against a second server started from /tmp/new-weights, the same answers and the same weights:

    python examples/rl_weight_sync.py compare --url http://127.0.0.1:8000 --url http://127.0.0.1:8001

Issue 26's GPU runner (`gpu_tests/rl/run_rl.py`) runs both commands on the H200, on both frontends.

The report is JSON: the bytes sent and the time the send took, the greedy answers before and after, the
weights' checksums (from /weight_checker where the release has it, else from the worker extension through
/collective_rpc), the weight version where /weight_info exists (vLLM 0.26 has neither route: the SDK raises
RouteNotServedError, and the report says so).
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import pickle
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from vllm_devclient import DevClient, RouteNotServedError
from vllm_devclient.client import WeightUpdate

PROMPTS = ("The capital of France is", "1, 2, 3, 4,", "def fibonacci(n):", "Once upon a time")
CHECKSUM_RPC = "weight_checksums"  # gpu_tests/rl/worker_extension.py

SendWeights = Callable[[Iterator[tuple[str, Any]], Mapping[str, Any]], None]


def http_update_info(info: Any) -> dict[str, Any]:
    """The update_info that vLLM's "http" send mode posts, from the `IPCWeightTransferUpdateInfo` the engine
    hands the send callable: every field it has (they differ between releases), the IPC handles pickled and
    base64-encoded under `ipc_handles_pickled`."""
    fields = {f.name: getattr(info, f.name) for f in dataclasses.fields(info)}
    handles = fields.pop("ipc_handles")
    fields.pop("ipc_handles_pickled", None)
    payload = {name: value for name, value in fields.items() if value is not None}
    payload["ipc_handles_pickled"] = base64.b64encode(pickle.dumps(handles)).decode("ascii")
    return payload


class SdkSend:
    """The send callable: each batch the engine builds goes to the server through `update.update(...)`."""

    def __init__(self, update: WeightUpdate, *, fail: bool = False) -> None:
        self.update = update
        self.fail = fail
        self.batches = 0
        self.post_s = 0.0

    def __call__(self, info: Any) -> None:
        if self.fail:
            raise RuntimeError("the trainer's send failed (--fail-send)")
        start = time.perf_counter()
        self.update.update(http_update_info(info))
        self.post_s += time.perf_counter() - start
        self.batches += 1


class Counted:
    """The trainer's (name, tensor) pairs, counting the tensors and their bytes as they are sent."""

    def __init__(self, params: Iterable[tuple[str, Any]]) -> None:
        self._params = iter(params)
        self.tensors = 0
        self.bytes = 0

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        for name, tensor in self._params:
            self.tensors += 1
            self.bytes += tensor.numel() * tensor.element_size()
            yield name, tensor


def answers(client: DevClient, max_tokens: int) -> list[str]:
    return [client.completion(p, max_tokens=max_tokens, temperature=0).text for p in PROMPTS]


def checksums(client: DevClient) -> dict[str, Any]:
    """The served weights' checksums: /weight_checker, or the worker extension where the release lacks it."""
    try:
        return {"source": "weight_checker", "checksums": client.weight_checker("checksum").model_dump()}
    except RouteNotServedError as missing:
        try:
            per_rank = client.collective_rpc(CHECKSUM_RPC)
        except Exception as exc:  # no worker extension on this server: say so
            return {"source": None, "weight_checker": str(missing), "collective_rpc": repr(exc)}
        return {"source": f"collective_rpc({CHECKSUM_RPC})", "checksums": per_rank}


def or_error(call: Callable[[], Any]) -> Any:
    """What `call` returns, or its error as `{"error": ...}`: a server that went down mid-run still leaves a
    report that says so."""
    try:
        return call()
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def weight_version(client: DevClient) -> str | None:
    try:
        return client.weight_info().weight_version
    except RouteNotServedError:
        return None


def sync(
    client: DevClient,
    params: Iterable[tuple[str, Any]],
    send_weights: SendWeights,
    *,
    version: str,
    packed: bool = False,
    fail_send: bool = False,
    max_tokens: int = 16,
) -> dict[str, Any]:
    """Answers, one weight update through the SDK, answers again; what happened as a report."""
    report: dict[str, Any] = {"version": version, "answers_before": answers(client, max_tokens)}
    counted = Counted(params)
    send: SdkSend | None = None
    start = time.perf_counter()
    try:
        with client.weight_update(weight_version=version) as update:
            send = SdkSend(update, fail=fail_send)
            send_start = time.perf_counter()
            send_weights(iter(counted), {"send_mode": send, "packed": packed})
            report["send_s"] = time.perf_counter() - send_start
    except Exception as exc:  # a failed send: the flow finished the update without its version and resumed
        report["failed"] = f"{type(exc).__name__}: {exc}"
    report.update(
        flow_s=time.perf_counter() - start,
        tensors=counted.tensors,
        bytes=counted.bytes,
        batches=send.batches if send else 0,
        post_s=send.post_s if send else 0.0,
        paused_after=or_error(client.is_paused),
        answers_after=or_error(lambda: answers(client, max_tokens)),
        weight_version=or_error(lambda: weight_version(client)),
    )
    after = report["answers_after"]
    report["answers_changed"] = (
        sum(a != b for a, b in zip(report["answers_before"], after, strict=True))
        if isinstance(after, list)
        else None
    )
    return report


def trainer_model(model_dir: str, seed: int) -> Any:
    """The served architecture with every weight drawn again from `seed`, in the served dtype, on this
    process's GPU (the trainer's copy: same names and shapes, other values)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_dir)
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or "bfloat16"
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    return model.to(device="cuda", dtype=getattr(torch, str(dtype).removeprefix("torch.")))


def save(model: Any, model_dir: str, out: str) -> None:
    """The new weights as a model folder a server can start from: the weights and config, and the served
    folder's other files (tokenizer, generation config)."""
    import shutil

    model.save_pretrained(out)
    for f in Path(model_dir).iterdir():
        target = Path(out) / f.name
        if f.is_file() and not target.exists() and f.suffix not in (".safetensors", ".bin", ".pt", ".gguf"):
            shutil.copy2(f, target)


def compare(urls: Sequence[str], max_tokens: int) -> dict[str, Any]:
    """The same greedy answers and the same weight checksums on every server?"""
    seen: dict[str, dict[str, Any]] = {}
    for url in urls:
        with DevClient(url) as client:
            seen[url] = {"answers": answers(client, max_tokens), "weights": checksums(client)}
    first = seen[urls[0]]
    return {
        "servers": seen,
        "answers_equal": all(s["answers"] == first["answers"] for s in seen.values()),
        "weights_equal": first["weights"].get("checksums") is not None
        and all(s["weights"].get("checksums") == first["weights"]["checksums"] for s in seen.values()),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("sync", help="push weights of another seed into the server, report what changed")
    one.add_argument("--url", required=True)
    one.add_argument("--model", required=True, help="the served model's folder (its config is used)")
    one.add_argument("--seed", type=int, default=7)
    one.add_argument("--version", help="the weight version to finish with (default: seed-SEED)")
    one.add_argument("--packed", action="store_true", help="chunked transfer (bounded GPU memory)")
    one.add_argument("--fail-send", action="store_true", help="a send that fails: the server must resume")
    one.add_argument("--save-dir", help="also save the new weights there (to start a server from them)")
    many = sub.add_parser("compare", help="the same answers and weights on every server?")
    many.add_argument("--url", action="append", required=True)
    for p in (one, many):
        p.add_argument("--max-tokens", type=int, default=16)
        p.add_argument("--report", help="write the JSON report there too")
    args = parser.parse_args(argv)

    if args.command == "compare":
        report = compare(args.url, args.max_tokens)
        ok = report["answers_equal"] and report["weights_equal"]
    else:
        from vllm.distributed.weight_transfer.ipc_engine import IPCWeightTransferEngine

        model = trainer_model(args.model, args.seed)
        with DevClient(args.url) as client:
            report = {
                "server": client.version().model_dump(),
                "weights_before": checksums(client),
                **sync(
                    client,
                    model.named_parameters(),
                    IPCWeightTransferEngine.trainer_send_weights,
                    version=args.version or f"seed-{args.seed}",
                    packed=args.packed,
                    fail_send=args.fail_send,
                    max_tokens=args.max_tokens,
                ),
                "weights_after": or_error(lambda: checksums(client)),
            }
        if args.save_dir:
            save(model, args.model, args.save_dir)
            report["saved_to"] = args.save_dir
        ok = ("failed" in report) == args.fail_send and report["paused_after"] is False
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.report:
        Path(args.report).write_text(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
