"""What the engine-side instruments write for the check, and what the check writes for them. No I/O at import.

The instruments (``gpu_tests/kv_proof/``: a recording scheduler given with ``--scheduler-cls`` and a reference
instrument given with ``--worker-extension-cls``) and the defect catalogue (a vLLM plugin) run inside vLLM's
engine processes. They meet the check in one folder per server, named by the environment variable
:data:`PROBE_DIR_ENV`:

- ``layout.json``: the KV-cache groups (index, kind, block size, layers), written by the scheduler at start.
- ``splits-<pid>.jsonl``: one line per request when its prefill is scheduled: prompt tokens (``prompt``),
  tokens from the GPU prefix cache (``local``), tokens loaded by the connector (``external``); plus a hash of
  the prompt token ids, which is how the check finds its request (:func:`prompt_key`).
- ``loads-<pid>.jsonl``: one line per OffloadingConnector load job, written where the scheduler plans it: the
  request, the cached-token count it serves, and per group the first logical GPU block and the block count.
- ``firstuse-<pid>.jsonl``: one line per request at the first step it runs with a cached prefix, written by
  the reference instrument in the worker: a verdict per block of that prefix (:class:`FirstUse`).
- ``reference-<pid>.json``: that instrument's cumulative counts (:class:`ReferenceSnapshot`).
- ``defects-<pid>.json``: how often each armed defect of the catalogue acted, by name, per process.
- ``ledger-<pid>.json``: the byte ledger of earlier runs (read from their committed reports only).
- ``mutation.json``: written by the check, read by the catalogue's defects (never by an instrument) at each
  place they act: the defect armed now (absent or ``{}``: none).

Every model here is the JSON the instruments write, so a change on one side fails the other's tests.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "LAYOUT_FILE",
    "MUTATION_FILE",
    "PROBE_DIR_ENV",
    "RECURRENT_KINDS",
    "FirstUse",
    "FirstUseGroup",
    "GroupLayout",
    "LedgerCounts",
    "LedgerSnapshot",
    "LoadPlan",
    "Mismatch",
    "MutationOrder",
    "ProbeFiles",
    "ReferenceSnapshot",
    "Split",
    "SplitRecord",
    "prompt_key",
]

PROBE_DIR_ENV = "VLLM_DEVCLIENT_PROBE_DIR"
LAYOUT_FILE = "layout.json"
MUTATION_FILE = "mutation.json"
# Groups whose cache holds a recurrent state (one state per block boundary), not per-token KV.
RECURRENT_KINDS = frozenset({"mamba"})


def prompt_key(token_ids: Iterable[int]) -> str:
    """The hash both sides compute over a prompt's token ids (the scheduler writes, the check looks up)."""
    return hashlib.sha1(",".join(str(int(t)) for t in token_ids).encode()).hexdigest()[:16]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class GroupLayout(_Model):
    """One KV-cache group: ``kind`` is ``full``, ``sliding``, ``mamba``, ``mla`` or the spec's class name."""

    index: int
    kind: str
    block_size: int
    spec: str = ""
    layers: list[str] = Field(default_factory=list)
    cache_mode: str | None = None  # a recurrent group's mamba_cache_mode (``all``: one state per block)

    @property
    def recurrent(self) -> bool:
        return self.kind in RECURRENT_KINDS


class Split(_Model):
    """How the engine served a prompt: from the GPU prefix cache, loaded by the connector, computed."""

    prompt: int
    local: int
    external: int

    @property
    def cached(self) -> int:
        return self.local + self.external

    @property
    def computed(self) -> int:
        return self.prompt - self.cached


class SplitRecord(Split):
    """A request's split as the recording scheduler wrote it, when its prefill was first scheduled."""

    seq: int
    pid: int
    request_id: str
    key: str


class LoadGroup(_Model):
    group: int
    first_block: int  # logical index of the first GPU block loaded, within the request
    blocks: int
    tokens_per_block: int

    @property
    def end_token(self) -> int:
        """The token position the loaded blocks reach: where a restored recurrent state stands."""
        return (self.first_block + self.blocks) * self.tokens_per_block


class LoadPlan(_Model):
    """One OffloadingConnector load job as the scheduler planned it."""

    seq: int
    pid: int
    request_id: str
    job_id: int
    local: int
    external: int
    groups: list[LoadGroup]
    gpu_block_ids: list[int] = Field(default_factory=list)
    mutation: str | None = None

    @property
    def cached(self) -> int:
        return self.local + self.external


class Mismatch(_Model):
    """A reloaded block whose bytes differ from what was stored (or that was never stored)."""

    job_id: int
    group: int
    layer: str
    tensor: int
    gpu_block: int
    cpu_block: int
    sub_block: int
    stored: str | None
    landed: str


class FirstUseGroup(_Model):
    """One KV-cache group of a request's cached prefix at its first step: a verdict per block, in order.

    ``v`` equals a computation of its prefix; ``x`` matches none; ``u`` its prefix was never computed here;
    ``p`` still holds the poison; ``n`` a null block (outside a sliding window); ``s`` a recurrent state
    between two snapshots (no reference can exist: left to the restored-state check)."""

    group: int
    block_size: int
    regions: int  # layer regions digested per block
    verdicts: str

    def count(self, verdict: str, *, start: int = 0) -> int:
        return self.verdicts[start:].count(verdict)


class FirstUseExample(_Model):
    group: int
    block: int  # the block's index within the request
    gpu_block: int
    verdict: str
    holds: str = ""
    regions_differ: int = 0


class FirstUse(_Model):
    """A request at the first step it ran from a cached prefix (GPU prefix-cache hits and loads alike)."""

    seq: int
    pid: int
    request_id: str
    cached: int  # tokens of the prefix the request started from
    groups: list[FirstUseGroup]
    examples: list[FirstUseExample] = Field(default_factory=list)
    # blocks digested before the forward that read them (0 in reports before the read point); of those, the
    # ones wrong at the read and as computed after the step (a copy that landed after the forward)
    at_read: int = 0
    late: int = 0

    def bad(self) -> int:
        return sum(g.count(v) for g in self.groups for v in "xup")


class ReferenceSnapshot(_Model):
    """The reference instrument of one worker (cumulative since it started)."""

    pid: int = 0
    blocks_recorded: int = 0
    keys: int = 0
    variants: int = 0
    regions_by_group: dict[str, int] = Field(default_factory=dict)
    layers_by_group: dict[str, list[str]] = Field(default_factory=dict)
    poisoned: int = 0  # poison calls
    poisoned_blocks: int = 0
    errors: list[str] = Field(default_factory=list)
    read_point: str = ""  # where the first-use blocks are digested before the forward ("": before it existed)


class LedgerCounts(_Model):
    jobs: int = 0
    ops: int = 0  # one op = one block of one layer tensor
    bytes: int = 0


class LedgerSnapshot(_Model):
    """The byte ledger of the runs before the reference digests (read from their committed reports only)."""

    pid: int = 0
    stores: LedgerCounts = Field(default_factory=LedgerCounts)
    loads: LedgerCounts = Field(default_factory=LedgerCounts)
    # loads compared with the digest taken when the block was stored
    verified: int = 0
    mismatched: int = 0
    unverified: int = 0  # loaded from a CPU location this ledger never saw stored
    # stores whose CPU copy differs from the GPU source at completion (source changed, or a wrong copy)
    store_copy_mismatched: int = 0
    groups: list[int] = Field(default_factory=list)
    tensors: list[int] = Field(default_factory=list)
    layers: list[str] = Field(default_factory=list)
    loaded_blocks_by_group: dict[str, int] = Field(default_factory=dict)
    mismatch_examples: list[Mismatch] = Field(default_factory=list)
    mutations_applied: dict[str, int] = Field(default_factory=dict)
    mutation_notes: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)

    @property
    def loaded_blocks(self) -> int:
        return sum(self.loaded_blocks_by_group.values())


class MutationOrder(_Model):
    """What the check asks the instruments to do to the next loads (``name`` empty: nothing)."""

    name: str = ""
    group: int | None = None  # the group a one-group / one-layer mutation aims at
    token: int = 0  # an identifier the check picks, echoed in the instruments' notes


class ProbeFiles:
    """The check's side of the folder: read what the instruments wrote, write the mutation order."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def prepare(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for path in self.root.glob("*"):
            if path.is_file():
                path.unlink()

    def layout(self) -> list[GroupLayout] | None:
        path = self.root / LAYOUT_FILE
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        return [GroupLayout.model_validate(g) for g in data.get("groups", [])]

    def _lines(self, prefix: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for path in sorted(self.root.glob(f"{prefix}-*.jsonl")):
            for line in path.read_text().splitlines():
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except ValueError:  # a line being written right now
                        continue
        return rows

    def splits(self) -> list[SplitRecord]:
        return sorted(
            (SplitRecord.model_validate(r) for r in self._lines("splits")), key=lambda r: (r.pid, r.seq)
        )

    def loads(self) -> list[LoadPlan]:
        rows = [r for r in self._lines("loads") if "job_id" in r]
        return sorted((LoadPlan.model_validate(r) for r in rows), key=lambda r: (r.pid, r.seq))

    def first_uses(self) -> list[FirstUse]:
        rows = [r for r in self._lines("firstuse") if "request_id" in r]
        return sorted((FirstUse.model_validate(r) for r in rows), key=lambda r: (r.pid, r.seq))

    def references(self) -> list[ReferenceSnapshot]:
        out = []
        for path in sorted(self.root.glob("reference-*.json")):
            try:
                out.append(ReferenceSnapshot.model_validate_json(path.read_text()))
            except ValueError:  # being rewritten: the next read gets it
                continue
        return out

    def instrument_errors(self) -> list[str]:
        """What the instruments could not do (a load-plan line that failed, a reference error, an armed defect
        that could not act on this release's internals)."""
        errors = [str(r["error"]) for r in self._lines("loads") if "error" in r]
        errors += [str(r["error"]) for r in self._lines("firstuse") if "error" in r]
        for ref in self.references():
            errors += ref.errors
        for data in self._defect_files():
            errors += [
                f"defect {name} could not act: {why}" for name, why in (data.get("failed") or {}).items()
            ]
        return errors

    def _defect_files(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted(self.root.glob("defects-*.json")):
            try:
                out.append(json.loads(path.read_text()))
            except (OSError, ValueError):  # being rewritten: the next read gets it
                continue
        return out

    def defects_applied(self) -> dict[str, int]:
        """How often each armed defect acted, by name, over every process."""
        counts: dict[str, int] = {}
        for data in self._defect_files():
            for name, n in (data.get("applied") or {}).items():
                counts[name] = counts.get(name, 0) + int(n)
        return counts

    def order(self, order: MutationOrder | None) -> None:
        """Arm (with None: disarm) a defect: written atomically, read by the defects where they act."""
        path = self.root / MUTATION_FILE
        if order is None or not order.name:
            path.unlink(missing_ok=True)
            return
        tmp = path.with_suffix(".tmp")
        tmp.write_text(order.model_dump_json())
        os.replace(tmp, path)


def read_order(root: str | os.PathLike[str]) -> MutationOrder | None:
    """The defects' side: the one armed now, or None."""
    path = Path(root) / MUTATION_FILE
    try:
        order = MutationOrder.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None
    return order if order.name else None


def match_splits(
    keys: Sequence[str], records: Sequence[SplitRecord], *, after: int = 0
) -> list[SplitRecord | None]:
    """For each prompt key (in the order the requests were sent), the first unclaimed record with that key
    among ``records[after:]``; None where there is none. Repeated prompts claim records in order."""
    pool: dict[str, list[SplitRecord]] = {}
    for rec in records[after:]:
        pool.setdefault(rec.key, []).append(rec)
    return [pool[k].pop(0) if pool.get(k) else None for k in keys]
