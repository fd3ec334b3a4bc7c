"""The instruments' CPU-side logic: the reference book's keys and verdicts, the folder the instruments share
with the check, the defect catalogue, and the probes the check sends.

The book is graded on a small offload tier simulated on numpy memory (:class:`_Tier`): GPU blocks, CPU slots,
an index from prefix to slot, and the defects that broke the old byte ledger, which was keyed by CPU slot and
planned from the scheduler's own specs. For each, the slot-keyed comparison (what the ledger did) accepts the
reload, and the book, keyed by what the block must hold, does not.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpu_tests.kv_proof.book import Book, chain_keys, differing_regions
from gpu_tests.kv_proof.catalogue import MUTATIONS, applicable, target_group
from gpu_tests.offload_check.probe_files import (
    FirstUse,
    GroupLayout,
    MutationOrder,
    ProbeFiles,
    SplitRecord,
    match_splits,
    prompt_key,
    read_order,
)
from gpu_tests.offload_check.probes import (
    CONTROL_OFFSET,
    PROBE_BLOCKS,
    PROBE_MAX_TOKENS,
    Probe,
    boundary_sizes,
    build_probes,
    fingerprint,
)
from vllm_devclient.gsm8k import load_gsm8k

from .conftest import GSM8K_DIR

B = 4  # tokens per block
REGIONS = 3  # layer regions per block


def _digest(block: np.ndarray) -> bytes:
    """Stands in for the GPU digest: one 8-byte value per layer region."""
    return b"".join(hashlib.blake2b(row.tobytes(), digest_size=8).digest() for row in block)


class _Tier:
    """GPU blocks and CPU slots of one group; ``compute`` writes what a forward would, with references."""

    def __init__(self) -> None:
        self.gpu = np.zeros((32, REGIONS, 16), dtype=np.int8)
        self.cpu = np.zeros((8, REGIONS, 16), dtype=np.int8)
        self.index: dict[bytes, int] = {}  # prefix key -> CPU slot
        self.ledger: dict[int, bytes] = {}  # the old ledger: CPU slot -> digest at store time
        self.book = Book()
        self.next_gpu = 1

    def compute(self, prompt: list[int], variant: int = 0) -> list[tuple[bytes, int]]:
        """Compute every whole block of ``prompt`` into fresh GPU blocks; the references are recorded."""
        out = []
        for key in chain_keys(prompt, B, len(prompt) // B):
            gpu = self.next_gpu
            self.next_gpu += 1
            seed = int.from_bytes(key[:4], "little") + variant
            self.gpu[gpu] = np.random.default_rng(seed).integers(-100, 100, (REGIONS, 16))
            self.book.record(0, key, _digest(self.gpu[gpu]))
            out.append((key, gpu))
        return out

    def store(self, key: bytes, gpu: int, slot: int) -> None:
        self.cpu[slot] = self.gpu[gpu]
        self.index[key] = slot
        self.ledger[slot] = _digest(self.cpu[slot])

    def load(self, key: bytes, slot: int | None = None) -> tuple[bool, str]:
        """Load ``key`` (from ``slot`` when a defect picks it) into a fresh GPU block: (the old ledger's
        verdict, the book's verdict at first use)."""
        src = self.index[key] if slot is None else slot
        gpu = self.next_gpu
        self.next_gpu += 1
        self.gpu[gpu] = self.cpu[src]
        ledger_ok = self.ledger.get(src) == _digest(self.gpu[gpu])
        return ledger_ok, self.book.check(0, key, _digest(self.gpu[gpu])).verdict


def test_block_keys_name_the_prefix_not_the_place() -> None:
    a = chain_keys([1, 2, 3, 4, 5, 6, 7, 8, 9], B, 2)
    assert a == chain_keys([1, 2, 3, 4, 5, 6, 7, 8], B, 2)  # later tokens do not matter
    b = chain_keys([0, 2, 3, 4, 5, 6, 7, 8], B, 2)
    assert a[0] != b[0] and a[1] != b[1]  # an earlier token changes every later key
    assert chain_keys([1, 2, 3, 4, 5, 6, 7, 8], B, 2, prior=a[:1]) == a  # the chain goes on from a prefix


def test_one_prefix_computed_twice_to_different_bytes_is_verified_either_way() -> None:
    tier = _Tier()
    ((key, first),) = tier.compute([1, 2, 3, 4])
    ((_, second),) = tier.compute([1, 2, 3, 4], variant=1)  # another batch, other rounding
    d1, d2 = _digest(tier.gpu[first]), _digest(tier.gpu[second])
    assert d1 != d2 and tier.book.variants == 1
    assert tier.book.check(0, key, d1).verdict == tier.book.check(0, key, d2).verdict == "v"
    changed = tier.gpu[first].copy()
    changed[1, 3] ^= 1  # one byte of one layer region
    found = tier.book.check(0, key, _digest(changed))
    assert found.verdict == "x" and found.regions_differ == 1
    assert differing_regions(d1, _digest(changed)) == 1


def test_a_store_from_the_wrong_gpu_block_is_caught_where_the_ledger_accepted_it() -> None:
    tier = _Tier()
    (ka, _), (kb, gb) = tier.compute([1, 2, 3, 4, 5, 6, 7, 8])
    tier.store(ka, gb, slot=0)  # block A stored from block B's GPU block
    tier.store(kb, gb, slot=1)
    ledger_ok, verdict = tier.load(ka)
    assert ledger_ok and verdict == "x"
    assert tier.book.check(0, ka, _digest(tier.cpu[0])).holds == "the bytes of another prefix"


def test_a_block_served_from_another_prefix_through_a_permuted_plan_is_caught() -> None:
    tier = _Tier()
    (ka, ga), (kb, gb) = tier.compute([1, 2, 3, 4, 5, 6, 7, 8])
    tier.store(ka, ga, slot=0)
    tier.store(kb, gb, slot=1)
    # The load plan lists destinations in the wrong order: A's key gets B's slot, right bytes, wrong place.
    ledger_ok, verdict = tier.load(ka, slot=tier.index[kb])
    assert ledger_ok and verdict == "x"


def test_a_stale_slot_handed_out_again_is_caught() -> None:
    tier = _Tier()
    ((ka, ga),) = tier.compute([1, 2, 3, 4])
    tier.store(ka, ga, slot=0)
    ((kc, gc),) = tier.compute([9, 9, 9, 9])
    tier.store(kc, gc, slot=0)  # a reset freed slot 0 and forgot nothing: A's entry still names it
    tier.index[ka] = 0
    ledger_ok, verdict = tier.load(ka)
    assert ledger_ok and verdict == "x"


def test_a_load_that_copies_nothing_passes_on_stale_memory_without_the_poison_and_not_with_it() -> None:
    tier = _Tier()
    ((ka, ga),) = tier.compute([1, 2, 3, 4])
    stale = _digest(tier.gpu[ga])  # the GPU block still holds A's bytes after a GPU-only reset
    assert tier.book.check(0, ka, stale).verdict == "v"  # unpoisoned: a copy of nothing reads as verified
    poisoned = np.full((REGIONS, 16), 0x41, dtype=np.int8)
    tier.book.poison[0] = _digest(poisoned)
    found = tier.book.check(0, ka, _digest(poisoned))
    assert found.verdict == "p" and "nothing was copied" in found.holds
    half = tier.gpu[ga].copy()
    half[0] = 0x41  # one layer region left poisoned: a partial copy
    found = tier.book.check(0, ka, _digest(half))
    assert found.verdict == "x" and "partial copy" in found.holds
    never = chain_keys([7, 7, 7, 7], B, 1)[0]
    assert (
        tier.book.check(0, never, stale).verdict == "x"
    )  # another prefix's bytes under a key never computed
    assert tier.book.check(0, never, _digest(np.ones((REGIONS, 16), dtype=np.int8))).verdict == "u"


def test_the_probe_folder_carries_splits_orders_and_errors(tmp_path: Path) -> None:
    files = ProbeFiles(tmp_path / "case.probe")
    files.prepare()
    ids = [[1, 2, 3], [4, 5], [1, 2, 3]]
    lines = [
        {
            "seq": i,
            "pid": 9,
            "request_id": f"r{i}",
            "key": prompt_key(t),
            "prompt": len(t),
            "local": 0,
            "external": i,
        }
        for i, t in enumerate(ids)
    ]
    (files.root / "splits-9.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines) + '{"seq": 3, "pid"'
    )
    records = files.splits()  # the line being written is skipped
    assert [r.request_id for r in records] == ["r0", "r1", "r2"]
    matched = match_splits([prompt_key(t) for t in ids[::-1]], records)
    assert [m.request_id if m else None for m in matched] == ["r0", "r1", "r2"]  # repeats claim in order
    assert match_splits([prompt_key([9])], records) == [None]
    assert match_splits([prompt_key([4, 5])], records, after=2) == [None]
    assert isinstance(records[1], SplitRecord) and records[1].cached == 1 and records[1].computed == 1
    (files.root / "loads-9.jsonl").write_text('{"error": "KeyError(\'x\')"}\n')
    assert files.loads() == [] and files.instrument_errors() == ["KeyError('x')"]
    use = {
        "seq": 1,
        "pid": 9,
        "request_id": "r2",
        "cached": 32,
        "groups": [{"group": 0, "block_size": 16, "regions": 4, "verdicts": "vx"}],
        "examples": [
            {"group": 0, "block": 1, "gpu_block": 7, "verdict": "x", "holds": "the bytes of another prefix"}
        ],
    }
    (files.root / "firstuse-9.jsonl").write_text(json.dumps(use) + "\n" + '{"seq": 2')
    (first,) = files.first_uses()
    assert isinstance(first, FirstUse) and first.bad() == 1 and first.groups[0].count("v") == 1
    (files.root / "defects-9.json").write_text(json.dumps({"applied": {"cpu_slot_shared": 2}}))
    (files.root / "defects-10.json").write_text(json.dumps({"applied": {"cpu_slot_shared": 1}}))
    assert files.defects_applied() == {"cpu_slot_shared": 3}
    assert not any("could not act" in e for e in files.instrument_errors())
    # An armed defect another release's internals refuse is an instrument error, not a silent miss.
    failed = {
        "applied": {},
        "failed": {"load_plan_permuted": "AttributeError('TransferJob has no dst_spec')"},
    }
    (files.root / "defects-11.json").write_text(json.dumps(failed))
    assert "defect load_plan_permuted could not act: AttributeError" in " ".join(files.instrument_errors())
    files.order(MutationOrder(name="zero_fill", group=1, token=3))
    assert read_order(files.root) == MutationOrder(name="zero_fill", group=1, token=3)
    files.order(None)
    assert read_order(files.root) is None
    (files.root / "layout.json").write_text(
        json.dumps({"groups": [{"index": 0, "kind": "mamba", "block_size": 16}]})
    )
    layout = files.layout()
    assert layout is not None and layout[0].recurrent


def test_the_catalogue_says_where_each_defect_applies() -> None:
    full = [GroupLayout(index=0, kind="full", block_size=16)]
    hybrid = [
        GroupLayout(index=0, kind="full", block_size=16),
        GroupLayout(index=1, kind="mamba", block_size=16),
    ]
    mamba = [GroupLayout(index=0, kind="mamba", block_size=16)]
    off, simple = "OffloadingConnector", "SimpleCPUOffloadConnector"
    where = {
        name: {
            name_: applicable(m, layout, connector) is None
            for name_, layout, connector in (
                ("full", full, off),
                ("hybrid", hybrid, off),
                ("mamba", mamba, off),
                ("simple", full, simple),
            )
        }
        for name, m in MUTATIONS.items()
    }
    assert where["store_wrong_block"] == {"full": True, "hybrid": True, "mamba": True, "simple": False}
    assert where["state_ahead"] == {"full": False, "hybrid": True, "mamba": True, "simple": False}
    assert where["load_plan_permuted"] == {"full": True, "hybrid": True, "mamba": False, "simple": False}
    assert where["simple_load_wrong_place"] == {
        "full": False,
        "hybrid": False,
        "mamba": False,
        "simple": True,
    }
    assert target_group(hybrid) == 1 and target_group(full) == 0
    # Seven or more defects below the proof, caught by the bytes; each connector has its own.
    by_bytes = [m for m in MUTATIONS.values() if m.caught_by == ("kv_bytes_identical",)]
    assert len(by_bytes) >= 7 and {c for m in by_bytes for c in m.connectors} == {off, simple}
    assert all(m.where and m.bug for m in MUTATIONS.values())


def _probes(
    sizes: list[int], *, questions: int, shots: int, per_size: int, room: int | None = None
) -> list[Probe]:
    """GSM8K probes with one token a character (no tokenizer needed)."""
    train, test = load_gsm8k(data_dir=GSM8K_DIR)
    return build_probes(
        train,
        test,
        lambda s: [ord(c) for c in s],
        num_questions=questions,
        num_shots=shots,
        max_tokens=9,
        sizes=sizes,
        per_size=per_size,
        max_length=room,
    )


def test_boundary_probes_end_on_the_boundary_and_share_no_block() -> None:
    probes = _probes(boundary_sizes([16, 64]), questions=3, shots=2, per_size=2)
    assert [p.kind for p in probes[:3]] == ["gsm8k"] * 3 and all(p.label is not None for p in probes[:3])
    cut = [p for p in probes if p.kind != "gsm8k"]
    assert {(p.kind, p.boundary) for p in cut} == {(k, b) for k in ("boundary", "control") for b in (16, 64)}
    for p in cut:
        expected = 0 if p.kind == "boundary" else p.boundary - CONTROL_OFFSET
        assert p.length % p.boundary == expected and p.max_tokens == 32 and p.label is None
    # Own question, own few-shot examples: no probe's first block is another's.
    firsts = [p.token_ids[:16] for p in probes]
    assert len({p.question for p in probes}) == len(probes)
    assert len(set(firsts[3:])) == len(firsts[3:]) and not set(firsts[3:]) & {firsts[0]}
    assert boundary_sizes([16, 32, 16], blocks_per_chunk=2) == [16, 32, 64]


def test_fingerprints_compute_the_tokens_a_state_ahead_holds_twice() -> None:
    p = Probe("b4-q09", "boundary", tuple(range(100, 112)), 9, None, 5, 4)
    doubled = fingerprint(p, 11, "last_token_doubled", 4)
    assert doubled is not None and doubled.token_ids == (*range(100, 112), 111) and doubled.state_at == 12
    later = fingerprint(p, 4, "later_block_state", 4)
    assert (
        later is not None and later.token_ids == (*range(100, 108), *range(104, 112)) and later.state_at == 8
    )
    assert fingerprint(p, 12, "last_token_doubled", 4) is None  # nothing left to compute
    assert fingerprint(p, 10, "later_block_state", 4) is None  # the state would lie past the prompt
    assert doubled.id == "fp-last_token_doubled-b4-q09-s12" and doubled.base == "b4-q09"


def test_a_fingerprint_longer_than_the_server_takes_is_not_built() -> None:
    """Nemotron-H 8B at real size (issue 33's fifth run): a probe of three 1280-token blocks made a
    later-block fingerprint of 5,120 tokens against a 4,096-token context, and every such request failed."""
    p = Probe("b4-q09", "boundary", tuple(range(100, 112)), 9, None, 5, 4)
    assert fingerprint(p, 4, "later_block_state", 4, max_length=15) is None  # 16 tokens
    fits = fingerprint(p, 4, "later_block_state", 4, max_length=16)
    assert fits is not None and fits.length == 16
    assert fingerprint(p, 11, "last_token_doubled", 4, max_length=13) is not None


def test_a_block_longer_than_a_few_shot_prompt_gets_probes_of_two_blocks_within_the_context() -> None:
    """A real hybrid's block (1280 tokens) is longer than a few-shot prompt: a probe of one block could
    load nothing (its last token is always computed), so it takes examples until two blocks fit."""
    size = 1280

    def probes(questions: int, per_size: int, room: int) -> list[Probe]:
        return _probes([size], questions=questions, shots=1, per_size=per_size, room=room)

    cut = [p for p in probes(1, 2, 3 * size + 10) if p.kind != "gsm8k"]
    assert [p.kind for p in cut] == ["boundary", "boundary", "control", "control"]
    for p in cut:
        assert 2 * size <= p.length + (CONTROL_OFFSET if p.kind == "control" else 0) <= 3 * size
    assert len({p.token_ids[:size] for p in cut}) == len(cut)  # still no block shared
    # No room for two blocks: no probe of that size, rather than one that can load nothing.
    assert probes(0, 1, 2 * size - 1) == []


def test_a_probe_spans_several_blocks_where_the_context_has_room_so_a_reload_loads_several() -> None:
    """Real size, 544-token blocks (Qwen3.5): probes of two blocks reload one block a group from one CPU
    slot, where a permuted load plan or a shared slot cannot act (issue 33's fourth run: load_plan_permuted
    never acted on Qwen3.5). With room, each probe spans PROBE_BLOCKS blocks; without, as many as fit."""

    def cut(size: int, room: int) -> list[Probe]:
        return [p for p in _probes([size], questions=0, shots=1, per_size=2, room=room) if p.kind != "gsm8k"]

    for p in cut(544, 4096 - PROBE_MAX_TOKENS):
        blocks = (p.length + (CONTROL_OFFSET if p.kind == "control" else 0)) // 544
        assert PROBE_BLOCKS <= blocks and p.length <= 4096 - PROBE_MAX_TOKENS, (p.id, p.length)
    # 1280-token blocks in a 4096-token context: three blocks fit, and every probe takes three.
    assert {p.length + (CONTROL_OFFSET if p.kind == "control" else 0) for p in cut(1280, 4064)} == {3840}


def test_the_load_plan_log_reads_each_release_s_load_jobs() -> None:
    """vLLM 0.25+ holds ``TransferJob.dst_spec``, 0.22-0.24 ``transfer_spec``, 0.20 ``(src, dst)`` per
    request: the recorder finds each load's GPU destinations in all three (issue 35 serves them all)."""
    from types import SimpleNamespace

    recorder = pytest.importorskip("gpu_tests.kv_proof.recorder")
    dst = SimpleNamespace(block_ids=[7, 8], group_sizes=[2], block_indices=[0])
    new = SimpleNamespace(_current_batch_load_jobs={3: SimpleNamespace(dst_spec=dst)})
    mid = SimpleNamespace(_current_batch_load_jobs={3: SimpleNamespace(transfer_spec=("cpu", dst))})
    old = SimpleNamespace(_reqs_to_load={"req-1": ("cpu", dst)})
    assert recorder._load_jobs(new) == {3: dst} and recorder._load_jobs(mid) == {3: dst}
    assert recorder._load_jobs(old) == {"req-1": dst}
    assert recorder._load_jobs(SimpleNamespace()) == {}


def test_a_stale_slot_on_a_release_without_the_evictable_count_acts_on_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM before 0.24 has no ``_num_evictable_cache_blocks``: the defect must not put entries back half-way,
    and says it could not act; with the count it keeps every other ready entry."""
    import sys
    from types import ModuleType, SimpleNamespace

    from gpu_tests.kv_proof import defects

    class Policy:
        def __init__(self) -> None:
            self.blocks: dict[str, Any] = {}

        def insert(self, key: str, block: Any) -> None:
            self.blocks[key] = block

    class Manager:
        def __init__(self, counted: bool) -> None:
            self._policy = Policy()
            for k in range(4):
                self._policy.blocks[f"k{k}"] = SimpleNamespace(block_id=k, is_ready=True)
            if counted:
                self._num_evictable_cache_blocks = 0

        def reset_cache(self) -> None:
            self._policy.blocks = {}

        def _allocate_blocks(self, keys: list[Any]) -> list[Any]:
            return []

    manager_module, policies_module = ModuleType("manager"), ModuleType("base")
    manager_module.CPUOffloadingManager = Manager  # type: ignore[attr-defined]
    policies_module.BlockStatus = SimpleNamespace  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm.v1.kv_offload.cpu.manager", manager_module)
    monkeypatch.setitem(sys.modules, "vllm.v1.kv_offload.cpu.policies.base", policies_module)
    arm = defects._Arming(tmp_path)
    monkeypatch.setattr(arm, "armed", lambda name: name == "stale_slot_after_reset")
    defects._offloading_manager(arm)
    older = Manager(counted=False)
    older.reset_cache()
    assert older._policy.blocks == {}  # nothing put back
    record = json.loads(arm.path.read_text())
    assert (
        record["applied"] == {}
        and "_num_evictable_cache_blocks" in record["failed"]["stale_slot_after_reset"]
    )
    newer = Manager(counted=True)
    newer.reset_cache()
    assert sorted(newer._policy.blocks) == ["k0", "k2"] and newer._num_evictable_cache_blocks == 2
    assert json.loads(arm.path.read_text())["applied"] == {"stale_slot_after_reset": 1}
