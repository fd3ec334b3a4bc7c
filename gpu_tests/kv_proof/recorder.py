"""Test-only: vLLM's scheduler, recording how each request's prompt was served and the KV-cache layout.

Given to ``vllm serve`` with ``--scheduler-cls gpu_tests.kv_proof.recorder.RecordingScheduler`` and
``VLLM_DEVCLIENT_PROBE_DIR`` set. It is vLLM's own ``AsyncScheduler`` (the class vLLM 0.26 picks by default,
so nothing about scheduling changes) plus two writes:

- at start, ``layout.json``: each KV-cache group's index, kind, block size and layers;
- each time a request is first scheduled to compute, one line in ``splits-<pid>.jsonl``: its prompt tokens,
  the tokens the GPU prefix cache served (``local``), the tokens a connector loaded (``external``) and a hash
  of its prompt token ids (``probe_files.prompt_key``), read from the request's own prefill statistics
  before the scheduler hands them to the frontend. Works with every connector, and with none;
- with the OffloadingConnector, each load job it plans, one line in ``loads-<pid>.jsonl``: the request, the
  cached-token count it serves and per group the first logical block and the block count (where a restored
  recurrent state stands).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from vllm.v1.core.sched.async_scheduler import AsyncScheduler

from gpu_tests.offload_check.probe_files import LAYOUT_FILE, PROBE_DIR_ENV, prompt_key


def _kind(spec: Any) -> str:
    names = [c.__name__ for c in type(spec).__mro__]
    for cls, kind in (
        ("MambaSpec", "mamba"),
        ("SlidingWindowSpec", "sliding"),
        ("ChunkedLocalAttentionSpec", "sliding"),
        ("MLAAttentionSpec", "mla"),
        ("FullAttentionSpec", "full"),
    ):
        if cls in names:
            return kind
    return type(spec).__name__


class RecordingScheduler(AsyncScheduler):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        root = os.environ.get(PROBE_DIR_ENV)
        self._probe_path: Path | None = None
        self._probe_seq = 0
        if not root:
            return
        path = Path(root)
        path.mkdir(parents=True, exist_ok=True)
        self._probe_path = path / f"splits-{os.getpid()}.jsonl"
        groups = [
            {
                "index": i,
                "kind": _kind(g.kv_cache_spec),
                "spec": type(g.kv_cache_spec).__name__,
                "block_size": int(g.kv_cache_spec.block_size),
                "layers": list(g.layer_names),
                "cache_mode": getattr(g.kv_cache_spec, "mamba_cache_mode", None),
            }
            for i, g in enumerate(self.kv_cache_config.kv_cache_groups)
        ]
        (path / LAYOUT_FILE).write_text(json.dumps({"groups": groups}, indent=1))
        _log_load_plans(path)

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        output = super().schedule(*args, **kwargs)
        if self._probe_path is not None and output.scheduled_new_reqs:
            lines = []
            for new in output.scheduled_new_reqs:
                request = self.requests.get(new.req_id)
                stats = getattr(request, "prefill_stats", None)
                if request is None or stats is None or not stats.num_prompt_tokens:
                    continue
                lines.append(
                    {
                        "seq": self._probe_seq,
                        "pid": os.getpid(),
                        "request_id": str(new.req_id),
                        "key": prompt_key(request.prompt_token_ids or []),
                        "prompt": int(stats.num_prompt_tokens),
                        "local": int(stats.num_local_cached_tokens),
                        "external": int(stats.num_external_cached_tokens),
                    }
                )
                self._probe_seq += 1
            if lines:
                with self._probe_path.open("a") as fh:
                    fh.write("".join(json.dumps(line) + "\n" for line in lines))
        return output


_logged = False


def _load_jobs(sched: Any) -> dict[Any, Any]:
    """The load jobs the scheduler side holds, job id -> its GPU destination spec: vLLM 0.25+ keeps
    ``TransferJob.dst_spec``, 0.22-0.24 ``transfer_spec[1]``, 0.20 one ``(src, dst)`` per request id."""
    jobs = getattr(sched, "_current_batch_load_jobs", None)
    if jobs is None:
        return {rid: specs[1] for rid, specs in getattr(sched, "_reqs_to_load", {}).items()}
    return {k: j.dst_spec if hasattr(j, "dst_spec") else j.transfer_spec[1] for k, j in jobs.items()}


def _log_load_plans(root: Path) -> None:
    """Wrap the OffloadingConnector's scheduler side so that every load job it plans is logged."""
    global _logged
    if _logged:
        return
    _logged = True
    try:
        from vllm.distributed.kv_transfer.kv_connector.v1.offloading.scheduler import (
            OffloadingConnectorScheduler as Sched,
        )
    except ImportError:
        return
    path = root / f"loads-{os.getpid()}.jsonl"
    real_after_alloc = Sched.update_state_after_alloc
    seq = 0

    def update_state_after_alloc(self: Any, request: Any, blocks: Any, num_external_tokens: int) -> None:
        nonlocal seq
        before = _load_jobs(self)
        real_after_alloc(self, request, blocks, num_external_tokens)
        try:
            for job_id, dst in _load_jobs(self).items():
                if job_id in before and before[job_id] is dst:
                    continue
                status = self._req_status[request.request_id]
                groups = [
                    {
                        "group": int(cfg.group_idx),
                        "first_block": int(first),
                        "blocks": int(size),
                        # vLLM 0.26 renamed gpu_block_size to tokens_per_block
                        "tokens_per_block": int(getattr(cfg, "tokens_per_block", None) or cfg.gpu_block_size),
                    }
                    for cfg, size, first in zip(
                        self.config.kv_group_configs, dst.group_sizes, dst.block_indices, strict=False
                    )
                ]
                record = {
                    "seq": seq,
                    "pid": os.getpid(),
                    "request_id": str(request.request_id),
                    "job_id": job_id if isinstance(job_id, int) else -1,
                    "local": int(status.num_locally_computed_tokens),
                    "external": int(num_external_tokens),
                    "groups": groups,
                    "gpu_block_ids": [int(b) for b in dst.block_ids],
                }
                seq += 1
                with path.open("a") as fh:
                    fh.write(json.dumps(record) + "\n")
        except Exception as exc:  # the log must never stop the engine
            with path.open("a") as fh:
                fh.write(json.dumps({"error": repr(exc)}) + "\n")

    Sched.update_state_after_alloc = update_state_after_alloc
