"""The instruments' CPU-side logic: which bytes a transfer copies, the byte ledger's verdict, the folder the
instruments share with the check, the mutation catalogue, and the probes the check sends.

`plan_ops` is checked against an independent simulation of vLLM 0.26's copy (`_copy`: GPU blocks of a group
land in consecutive GPU-sized slots of CPU blocks, the first one at `block_index % blocks_per_chunk`), on
numpy memory, so a wrong offset shows as a wrong byte.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpu_tests.kv_proof.catalogue import MUTATIONS, applicable, target_group
from gpu_tests.kv_proof.ledger import Ledger, Op, Ref, digest, plan_ops
from vllm_devclient.offload_check.gsm8k import load_gsm8k
from vllm_devclient.offload_check.probe_files import (
    GroupLayout,
    LedgerSnapshot,
    MutationOrder,
    ProbeFiles,
    SplitRecord,
    match_splits,
    prompt_key,
    read_order,
)
from vllm_devclient.offload_check.probes import (
    CONTROL_OFFSET,
    Probe,
    boundary_sizes,
    build_probes,
    fingerprint,
)

from .conftest import GSM8K_DIR

PAGE = 8


def _copy(
    gpu: np.ndarray, cpu: np.ndarray, gpu_ids, sizes, indices, cpu_ids, bpc, refs, to_cpu: bool
) -> None:
    """What the handler does, written from its description, one group and one layer tensor at a time."""
    g_off = c_off = 0
    for g, (n, first) in enumerate(zip(sizes, indices, strict=True)):
        if n == 0:
            continue
        skip = first % bpc
        cpu_blocks = cpu_ids[c_off : c_off + -(-(n + skip) // bpc)]
        for ref in refs[g]:
            for i in range(n):
                slot = skip + i
                row, col = cpu_blocks[slot // bpc], (slot % bpc) * PAGE
                if to_cpu:
                    cpu[ref.tensor, row, col : col + ref.size] = gpu[
                        ref.tensor, gpu_ids[g_off + i], : ref.size
                    ]
                else:
                    gpu[ref.tensor, gpu_ids[g_off + i], : ref.size] = cpu[
                        ref.tensor, row, col : col + ref.size
                    ]
        g_off += n
        c_off += len(cpu_blocks)


@pytest.mark.parametrize("bpc", [1, 2, 3])
def test_the_ledger_plans_exactly_the_bytes_a_transfer_copies(bpc: int) -> None:
    rng = np.random.default_rng(bpc)
    refs = [[Ref(0, PAGE, "layers.0"), Ref(1, PAGE, "layers.1")], [Ref(2, PAGE - 2, "layers.2")]]
    gpu = rng.integers(-128, 127, size=(3, 32, PAGE), dtype=np.int8)
    cpu = np.zeros((3, 16, PAGE * bpc), dtype=np.int8)
    # group 0: 5 blocks from logical block 3 (a partial first chunk when bpc > 1); group 1: 2 blocks from 0
    sizes, indices, gpu_ids = [5, 2], [3, 0], [7, 8, 9, 10, 11, 20, 21]
    cpu_ids = list(range(1, 1 + -(-(5 + 3 % bpc) // bpc))) + list(range(9, 9 + -(-2 // bpc)))
    _copy(gpu, cpu, gpu_ids, sizes, indices, cpu_ids, bpc, refs, to_cpu=True)
    ops = plan_ops(
        gpu_block_ids=gpu_ids,
        group_sizes=sizes,
        block_indices=indices,
        cpu_block_ids=cpu_ids,
        blocks_per_chunk=bpc,
        group_refs=refs,
    )
    assert len(ops) == 5 * 2 + 2 * 1 and {op.layer for op in ops} == {"layers.0", "layers.1", "layers.2"}
    for op in ops:
        stored = cpu[op.tensor, op.cpu_block, op.sub * PAGE : op.sub * PAGE + op.size]
        assert (stored == gpu[op.tensor, op.gpu_block, : op.size]).all(), op
    with pytest.raises(ValueError, match="do not sum"):
        plan_ops(
            gpu_block_ids=gpu_ids[:-1],
            group_sizes=sizes,
            block_indices=indices,
            cpu_block_ids=cpu_ids,
            blocks_per_chunk=bpc,
            group_refs=refs,
        )
    with pytest.raises(ValueError, match="CPU blocks"):
        plan_ops(
            gpu_block_ids=gpu_ids,
            group_sizes=sizes,
            block_indices=indices,
            cpu_block_ids=[*cpu_ids, 15],
            blocks_per_chunk=bpc,
            group_refs=refs,
        )


class _Memory:
    """GPU and CPU tensors as numpy arrays, read the way the proving spec reads them."""

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.gpu = rng.integers(-128, 127, size=(1, 16, PAGE), dtype=np.int8)
        self.cpu = np.zeros((1, 8, PAGE), dtype=np.int8)

    def read_cpu(self, ops: list[Op]) -> list[str]:
        return [digest(self.cpu[o.tensor, o.cpu_block, : o.size].tobytes()) for o in ops]

    def read_gpu(self, ops: list[Op]) -> list[str]:
        return [digest(self.gpu[o.tensor, o.gpu_block, : o.size].tobytes()) for o in ops]


def _ops(gpu_ids: list[int], cpu_ids: list[int]) -> list[Op]:
    return plan_ops(
        gpu_block_ids=gpu_ids,
        group_sizes=[len(gpu_ids)],
        block_indices=[0],
        cpu_block_ids=cpu_ids,
        blocks_per_chunk=1,
        group_refs=[[Ref(0, PAGE, "layers.0")]],
    )


def test_the_ledger_tells_identical_reloads_from_wrong_ones() -> None:
    mem, ledger = _Memory(), Ledger(pid=7)
    store = _ops([1, 2, 3], [4, 5, 6])
    ledger.submitted(10, "store", store)
    mem.cpu[0, [4, 5, 6]] = mem.gpu[0, [1, 2, 3]]
    assert ledger.finished(10, read_cpu=mem.read_cpu, read_gpu=mem.read_gpu)
    assert not ledger.finished(10, read_cpu=mem.read_cpu, read_gpu=mem.read_gpu)  # once only
    # A faithful reload into blocks 11, 12; then one whose second block is off by one; then unseen blocks.
    for job, gpu_ids, cpu_ids in ((11, [11, 12], [4, 5]), (12, [13, 14], [4, 6]), (13, [15], [7])):
        ops = _ops(gpu_ids, cpu_ids)
        ledger.submitted(job, "load", ops)
        mem.gpu[0, gpu_ids] = mem.cpu[0, [4, 5][: len(gpu_ids)]]  # what actually landed
        ledger.finished(job, read_cpu=mem.read_cpu, read_gpu=mem.read_gpu)
    snap = LedgerSnapshot.model_validate_json(json.dumps(ledger.snapshot()))
    assert snap.verified == 3 and snap.mismatched == 1 and snap.unverified == 1
    assert snap.loads.jobs == 3 and snap.loaded_blocks == 5 and snap.layers == ["layers.0"]
    wrong = [e for e in snap.mismatch_examples if e.stored is not None]
    assert [(e.gpu_block, e.cpu_block) for e in wrong] == [(14, 6)]
    before = snap
    ledger.applied("zero_fill", "job 14: zeroed 1 CPU rows")
    delta = LedgerSnapshot.model_validate(ledger.snapshot()).since(before)
    assert (
        delta.mutations_applied == {"zero_fill": 1}
        and delta.loads.jobs == 0
        and delta.mismatch_examples == []
    )
    both = LedgerSnapshot.combine([before, before])
    assert both is not None and both.verified == 6 and both.loaded_blocks == 10
    assert LedgerSnapshot.combine([]) is None


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
    files.order(MutationOrder(name="zero_fill", group=1, token=3))
    assert read_order(files.root) == MutationOrder(name="zero_fill", group=1, token=3)
    files.order(None)
    assert read_order(files.root) is None
    (files.root / "layout.json").write_text(
        json.dumps({"groups": [{"index": 0, "kind": "mamba", "block_size": 16}]})
    )
    layout = files.layout()
    assert layout is not None and layout[0].recurrent


def test_the_catalogue_says_where_each_mutation_applies() -> None:
    full = [GroupLayout(index=0, kind="full", block_size=16)]
    hybrid = [
        GroupLayout(index=0, kind="full", block_size=16),
        GroupLayout(index=1, kind="mamba", block_size=16),
    ]
    mamba = [GroupLayout(index=0, kind="mamba", block_size=16)]
    where = {
        name: {
            name_: applicable(m, layout) is None
            for name_, layout in (("full", full), ("hybrid", hybrid), ("mamba", mamba))
        }
        for name, m in MUTATIONS.items()
    }
    assert where["zero_fill"] == {"full": True, "hybrid": True, "mamba": True}
    assert where["one_group"] == {"full": False, "hybrid": True, "mamba": False}
    assert where["state_ahead"] == {"full": False, "hybrid": True, "mamba": True}
    assert where["swap_blocks"] == {"full": True, "hybrid": True, "mamba": False}
    assert target_group(hybrid) == 1 and target_group(full) == 0
    assert all(m.caught_by for m in MUTATIONS.values())


def test_boundary_probes_end_on_the_boundary_and_share_no_block() -> None:
    train, test = load_gsm8k(data_dir=GSM8K_DIR)
    probes = build_probes(
        train,
        test,
        lambda s: [ord(c) for c in s],
        num_questions=3,
        num_shots=2,
        max_tokens=9,
        sizes=boundary_sizes([16, 64]),
        per_size=2,
    )
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


def test_a_block_longer_than_a_few_shot_prompt_gets_probes_of_two_blocks_within_the_context() -> None:
    """A real hybrid's block (1280 tokens) is longer than a few-shot prompt: a probe of one block could
    load nothing (its last token is always computed), so it takes examples until two blocks fit."""
    train, test = load_gsm8k(data_dir=GSM8K_DIR)
    size = 1280

    def probes(questions: int, per_size: int, room: int) -> list[Probe]:
        return build_probes(
            train,
            test,
            lambda s: [ord(c) for c in s],
            num_questions=questions,
            num_shots=1,
            max_tokens=9,
            sizes=[size],
            per_size=per_size,
            max_length=room,
        )

    cut = [p for p in probes(1, 2, 3 * size + 10) if p.kind != "gsm8k"]
    assert [p.kind for p in cut] == ["boundary", "boundary", "control", "control"]
    for p in cut:
        assert 2 * size <= p.length + (CONTROL_OFFSET if p.kind == "control" else 0) <= 3 * size
    assert len({p.token_ids[:size] for p in cut}) == len(cut)  # still no block shared
    # No room for two blocks: no probe of that size, rather than one that can load nothing.
    assert probes(0, 1, 2 * size - 1) == []
