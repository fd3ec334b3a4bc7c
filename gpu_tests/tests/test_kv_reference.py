"""The reference instrument (``gpu_tests/kv_proof/digests.py``) on CPU tensors, driven the way vLLM's worker
drives it: scheduler outputs (new requests with their block tables and cached prefix, cached requests with
their new blocks) and KV tensors the test writes as a forward would. What it writes is what the check reads
(``probe_files.FirstUse``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from gpu_tests.offload_check.probe_files import ProbeFiles

if TYPE_CHECKING:
    from gpu_tests.kv_proof.digests import Proof

pytestmark = pytest.mark.needs("torch")

B = 4
PAGE = 32
BLOCKS = 16


@dataclass
class AttentionSpec:
    block_size: int = B
    page_size_bytes: int = PAGE


@dataclass
class MambaSpec:
    block_size: int = B
    page_size_bytes: int = PAGE
    mamba_cache_mode: str = "align"
    page_size_padded: int | None = None


@dataclass
class Engine:
    """KV tensors of two layers (attention) and one recurrent layer, and the scheduler outputs."""

    tmp: Path
    recurrent: bool = False
    mode: str = "align"
    kv: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        import torch

        from gpu_tests.kv_proof.digests import Proof

        self.kv = {name: torch.zeros((BLOCKS, PAGE), dtype=torch.int8) for name in ("l0", "l1")}
        groups = [SimpleNamespace(kv_cache_spec=AttentionSpec(), layer_names=["l0", "l1"])]
        if self.recurrent:
            self.kv["m0"] = [torch.zeros((BLOCKS, PAGE // 2), dtype=torch.int16)]
            groups.append(
                SimpleNamespace(kv_cache_spec=MambaSpec(mamba_cache_mode=self.mode), layer_names=["m0"])
            )
        config = SimpleNamespace(num_blocks=BLOCKS, kv_cache_tensors=[], kv_cache_groups=groups)
        context = {name: SimpleNamespace(kv_cache=kv) for name, kv in self.kv.items()}
        self.proof = Proof(config, context, self.tmp)

    def write(self, block: int, prompt: list[int], end: int, variant: int = 0) -> None:
        """What a forward leaves in a block that holds ``prompt[:end]``'s last block."""
        import torch

        gen = torch.Generator().manual_seed(hash((tuple(prompt[:end]), variant)) % 2**31)
        for name in ("l0", "l1"):
            self.kv[name][block] = torch.randint(-100, 100, (PAGE,), generator=gen, dtype=torch.int8)

    def state(self, block: int, prompt: list[int], end: int) -> None:
        """What a forward leaves in a recurrent block: the state after ``prompt[:end]``."""
        import torch

        gen = torch.Generator().manual_seed(hash(("state", tuple(prompt[:end]))) % 2**31)
        self.kv["m0"][0][block] = torch.randint(-100, 100, (PAGE // 2,), generator=gen, dtype=torch.int16)

    def step(
        self,
        new: list[tuple[str, list[int], tuple[list[int], ...], int]],
        scheduled: dict[str, int],
        forward: Any = None,
    ) -> None:
        out = SimpleNamespace(
            finished_req_ids=set(),
            scheduled_new_reqs=[
                SimpleNamespace(req_id=r, prompt_token_ids=p, block_ids=ids, num_computed_tokens=c)
                for r, p, ids, c in new
            ],
            scheduled_cached_reqs=SimpleNamespace(
                req_ids=[], resumed_req_ids=set(), new_block_ids=[], num_computed_tokens=[]
            ),
            num_scheduled_tokens=scheduled,
        )
        self.proof.before_forward(out)
        if forward is not None:
            forward()  # what the step's forward writes, between the two hooks
        self.proof.after_step(out)


PROMPT = list(range(1, 11))  # 10 tokens: two whole blocks of 4


def _compute(engine: Engine, rid: str, blocks: list[int], variant: int = 0) -> None:
    for k, block in enumerate(blocks[:2]):
        engine.write(block, PROMPT, (k + 1) * B, variant)
    engine.step([(rid, PROMPT, (blocks,), 0)], {rid: len(PROMPT)})


def test_blocks_a_request_starts_from_are_checked_against_what_the_model_computed(tmp_path: Path) -> None:
    engine = Engine(tmp_path)
    _compute(engine, "a", [1, 2, 3])
    _compute(engine, "b", [4, 5, 6], variant=1)  # the same prefix, other bytes (another batch)
    assert engine.proof.book.variants == 2 and engine.proof.book.recorded == 4
    # GPU prefix-cache hits on either computation: as computed.
    engine.step([("c", PROMPT, ([1, 2, 7],), 8), ("d", PROMPT, ([4, 5, 8],), 8)], {"c": 2, "d": 2})
    # A load into fresh blocks with the destinations exchanged: right bytes, wrong places.
    engine.kv["l0"][9], engine.kv["l1"][9] = engine.kv["l0"][2].clone(), engine.kv["l1"][2].clone()
    engine.kv["l0"][10], engine.kv["l1"][10] = engine.kv["l0"][1].clone(), engine.kv["l1"][1].clone()
    engine.step([("e", PROMPT, ([9, 10, 11],), 8)], {"e": 2})
    uses = {u.request_id: u for u in ProbeFiles(tmp_path).first_uses()}
    assert uses["c"].groups[0].verdicts == "vv" and uses["d"].groups[0].verdicts == "vv"
    assert uses["e"].groups[0].verdicts == "xx" and uses["e"].groups[0].regions == 2
    assert uses["e"].examples[0].holds == "the bytes of another prefix"
    assert uses["e"].examples[0].gpu_block == 9


def test_after_the_poison_a_block_nothing_was_copied_into_reads_as_poison(tmp_path: Path) -> None:
    engine = Engine(tmp_path)
    _compute(engine, "a", [1, 2, 3])
    assert engine.proof.poison() == {"blocks": BLOCKS - 1, "regions": 2}
    assert int(engine.kv["l0"][0].abs().sum()) == 0  # the null block is left alone
    engine.step([("b", PROMPT, ([4, 5, 6],), 8)], {"b": 2})  # a load that copied nothing into 4 and 5
    (use,) = ProbeFiles(tmp_path).first_uses()
    assert use.groups[0].verdicts == "pp" and use.bad() == 2


def test_a_recurrent_state_is_checked_only_where_a_snapshot_exists(tmp_path: Path) -> None:
    engine = Engine(tmp_path, recurrent=True)
    prompt = list(range(1, 9))  # 8 tokens: the step ends on a boundary, its state is kept in block 2
    engine.kv["m0"][0][2] = 7
    for k, block in enumerate([1, 2]):
        engine.write(block, prompt, (k + 1) * B)
    engine.step([("a", prompt, ([1, 2], [0, 2]), 0)], {"a": 8})
    blocks = ([1, 2, 3], [0, 2, 5])
    engine.step([("b", [*prompt, 9], blocks, 8), ("c", [*prompt, 9], blocks, 6)], {"b": 1, "c": 3})
    uses = {u.request_id: u for u in ProbeFiles(tmp_path).first_uses()}
    assert uses["b"].groups[1].verdicts == "v"  # the state at 8 tokens, as computed
    assert uses["c"].groups[1].verdicts == "s"  # 6 tokens: between snapshots, never counted as verified
    assert uses["c"].groups[0].verdicts == "v" and uses["c"].bad() == 0


def test_a_state_served_inside_a_block_is_checked_before_the_step_computes_over_it(tmp_path: Path) -> None:
    """``mamba_cache_mode=all`` (a state at every boundary): a request served ``prompt - 1`` tokens (vLLM
    #51094's load) starts inside its last block, whose state its first step overwrites in place. That state
    is digested before the step and checked against the block's end: the state as computed reads ``v``, one a
    stale CPU slot served from another prompt reads ``x``, where both read ``s`` (unchecked) before."""
    engine = Engine(tmp_path, recurrent=True, mode="all")
    prompt = list(range(1, 9))  # two blocks of 4
    other = list(range(50, 58))
    for rid, p, att, states in (("a", prompt, [1, 2], [3, 4]), ("z", other, [5, 6], [7, 8])):
        for k in range(2):
            engine.write(att[k], p, (k + 1) * B)
            engine.state(states[k], p, (k + 1) * B)
        engine.step([(rid, p, (att, states), 0)], {rid: 8})
    engine.kv["l0"][9], engine.kv["l1"][9] = engine.kv["l0"][1].clone(), engine.kv["l1"][1].clone()
    engine.kv["m0"][0][10] = engine.kv["m0"][0][4]  # the state at 8 tokens, loaded
    engine.kv["m0"][0][11] = engine.kv["m0"][0][8]  # another prompt's state at 8, from a reused slot

    def forward() -> None:  # each step computes token 8 again on top of its state, in place
        engine.state(10, [*prompt, 8], 9)
        engine.state(11, [*prompt, 8], 9)

    blocks_b, blocks_c = ([9, 12], [0, 10]), ([9, 13], [0, 11])
    engine.step([("b", prompt, blocks_b, 7), ("c", prompt, blocks_c, 7)], {"b": 1, "c": 1}, forward)
    uses = {u.request_id: u for u in ProbeFiles(tmp_path).first_uses() if u.request_id in ("b", "c")}
    assert uses["b"].groups[1].verdicts == "v" and uses["b"].bad() == 0
    assert uses["c"].groups[1].verdicts == "x" and uses["c"].groups[0].verdicts == "v"
    assert engine.proof.before == {}  # consumed at first use


def test_groups_that_share_memory_each_keep_their_regions(tmp_path: Path) -> None:
    """A hybrid model's groups own different blocks of the same tensors: every group digests its layers."""
    import torch

    from gpu_tests.kv_proof.digests import Proof

    shared = torch.zeros((BLOCKS, PAGE), dtype=torch.int8)
    groups = [
        SimpleNamespace(kv_cache_spec=AttentionSpec(), layer_names=["full.0"]),
        SimpleNamespace(kv_cache_spec=AttentionSpec(), layer_names=["sliding.0"]),
    ]
    config = SimpleNamespace(num_blocks=BLOCKS, kv_cache_tensors=[], kv_cache_groups=groups)
    context = {name: SimpleNamespace(kv_cache=shared) for name in ("full.0", "sliding.0")}
    proof = Proof(config, context, tmp_path)
    assert [len(g.regions) for g in proof.groups] == [1, 1]
    assert proof.poison() == {"blocks": BLOCKS - 1, "regions": 1}  # the memory is poisoned once


@dataclass
class PaddedSpec:
    """vLLM 0.25's attention spec in a hybrid: its page padded up to the recurrent page, no unpadded size."""

    block_size: int = B
    page_size_padded: int | None = PAGE
    real_page: int = PAGE // 2

    @property
    def page_size_bytes(self) -> int:
        return self.page_size_padded if self.page_size_padded is not None else self.real_page


def _first_step(proof: Proof, rid: str, blocks: list[int], cached: int) -> None:
    """A step in which request ``rid`` (PROMPT, one group) runs first, from ``cached`` cached tokens."""
    out = SimpleNamespace(
        finished_req_ids=set(),
        scheduled_new_reqs=[
            SimpleNamespace(
                req_id=rid, prompt_token_ids=PROMPT, block_ids=(blocks,), num_computed_tokens=cached
            )
        ],
        scheduled_cached_reqs=SimpleNamespace(
            req_ids=[], resumed_req_ids=set(), new_block_ids=[], num_computed_tokens=[]
        ),
        num_scheduled_tokens={rid: len(PROMPT) - cached},
    )
    proof.after_step(out)


def test_a_k_v_outermost_layer_is_read_as_a_k_region_and_a_v_region(tmp_path: Path) -> None:
    """vLLM 0.20-0.22's FLASH_ATTN lays every K block before every V block: a block is a row in each half.
    Read as one block-major region, a block's row would be two other blocks' K."""
    import torch

    from gpu_tests.kv_proof.digests import Proof

    kv = torch.zeros((2, BLOCKS, PAGE // 2), dtype=torch.int8)
    groups = [SimpleNamespace(kv_cache_spec=AttentionSpec(), layer_names=["l0"])]
    config = SimpleNamespace(num_blocks=BLOCKS, kv_cache_tensors=[], kv_cache_groups=groups)
    proof = Proof(config, {"l0": SimpleNamespace(kv_cache=kv)}, tmp_path)
    assert [r.width for r in proof.groups[0].regions] == [PAGE // 2, PAGE // 2]

    gen = torch.Generator().manual_seed(1)
    kv[:, 1:3] = torch.randint(-100, 100, (2, 2, PAGE // 2), generator=gen, dtype=torch.int8)
    _first_step(proof, "a", [1, 2, 3], 0)
    kv[:, 5:7] = kv[:, 1:3]  # a whole copy of both blocks
    kv[0, 9:11] = kv[0, 1:3]  # a copy of the K halves only
    _first_step(proof, "b", [5, 6, 7], 8)
    _first_step(proof, "c", [9, 10, 11], 8)
    uses = {u.request_id: u for u in ProbeFiles(tmp_path).first_uses()}
    assert uses["b"].groups[0].verdicts == "vv"
    assert uses["c"].groups[0].verdicts == "xx" and uses["c"].examples[0].regions_differ == 1


def test_a_padded_page_is_digested_without_its_padding(tmp_path: Path) -> None:
    """Before vLLM 0.26 an attention spec has no unpadded size: the padding (bytes no kernel writes) must not
    enter the digest, or a block copied whole but for its padding would read as corrupt."""
    import torch

    from gpu_tests.kv_proof.digests import Proof

    kv = torch.zeros((BLOCKS, PAGE), dtype=torch.int8)
    groups = [SimpleNamespace(kv_cache_spec=PaddedSpec(), layer_names=["l0"])]
    config = SimpleNamespace(num_blocks=BLOCKS, kv_cache_tensors=[], kv_cache_groups=groups)
    proof = Proof(config, {"l0": SimpleNamespace(kv_cache=kv)}, tmp_path)
    assert proof.groups[0].regions[0].width == PAGE // 2


def test_a_loaded_block_wiped_to_zeros_is_named_as_zeros(tmp_path: Path) -> None:
    engine = Engine(tmp_path)
    _compute(engine, "a", [1, 2, 3])
    # A load into 9 and 10, then the second block zeroed in both layers and the first in one of them.
    for name in ("l0", "l1"):
        engine.kv[name][9], engine.kv[name][10] = engine.kv[name][1].clone(), engine.kv[name][2].clone()
    engine.kv["l0"][10].zero_()
    engine.kv["l1"][10].zero_()
    engine.step([("b", PROMPT, ([9, 10, 11],), 8)], {"b": 2}, forward=lambda: engine.kv["l1"][9].zero_())
    (use,) = [u for u in ProbeFiles(tmp_path).first_uses() if u.request_id == "b"]
    assert use.groups[0].verdicts == "xx"
    holds = {e.block: e.holds for e in use.examples}
    # Block 0 was whole when the forward read it and wiped during the step: both are said.
    assert holds == {
        0: "zeros in 1 of 2 layer regions: wiped, or never written; "
        "as computed when the forward read it: changed during the step",
        1: "zeros in every layer region: wiped, or never written",
    }
    assert use.at_read == 2 and use.late == 0


def _read_back(tmp_path: Path, kv: Any, block: Any, outside: Any) -> tuple[Proof, dict[str, Any]]:
    """A layer whose KV is ``kv`` (``block(b)``: block b's logical elements): a computation into blocks 1
    and 2, a whole copy of them into 5 and 6 (then ``outside()`` writes the memory around the layer's
    elements), and a copy into 9 and 10 with one element of 10 changed."""
    import torch

    from gpu_tests.kv_proof.digests import Proof

    groups = [SimpleNamespace(kv_cache_spec=AttentionSpec(), layer_names=["l0"])]
    config = SimpleNamespace(num_blocks=BLOCKS, kv_cache_tensors=[], kv_cache_groups=groups)
    proof = Proof(config, {"l0": SimpleNamespace(kv_cache=kv)}, tmp_path)

    gen = torch.Generator().manual_seed(3)
    for b in (1, 2):
        values = torch.randint(-100, 100, block(b).shape, generator=gen, dtype=torch.int8)
        block(b).copy_(values.to(kv.dtype))
    _first_step(proof, "a", [1, 2, 3], 0)
    for src, dst in ((1, 5), (2, 6), (1, 9), (2, 10)):
        block(dst).copy_(block(src))
    changed = block(10)
    changed[(-1,) * changed.dim()] += 1
    outside()
    _first_step(proof, "b", [5, 6, 7], 8)
    _first_step(proof, "c", [9, 10, 11], 8)
    return proof, {u.request_id: u for u in ProbeFiles(tmp_path).first_uses()}


def test_a_layer_whose_block_is_not_one_dense_page_is_read_through_its_own_view(tmp_path: Path) -> None:
    """vLLM's cross-layer KV cache interleaves the layers' pages in a block (a layer's view strides over L
    pages) and under HND splits each page by head; before 0.23 a hybrid's attention layer leads its shape with
    K/V over block-major, padded memory, and may count several kernel blocks a block. Read as pages, each
    would digest other layers' bytes or padding: each is read through the layer's own view, so another layer's
    writes change nothing, and a changed element of its own shows."""
    import torch

    from gpu_tests.kv_proof.digests import POISON_BYTE

    heads, tokens, dim, layers = 2, B, PAGE // (2 * B * 2), 3
    nhd = torch.zeros((BLOCKS, layers, 2, tokens, heads, dim), dtype=torch.int8)
    hnd = torch.zeros((BLOCKS, heads, layers, 2, tokens, dim), dtype=torch.int8)
    # bfloat16, as a model's KV: read and poisoned as 16-bit integers
    padded = torch.zeros((BLOCKS, 2, 2 * tokens * heads * dim), dtype=torch.bfloat16)
    hybrid = padded[:, :, : tokens * heads * dim].unflatten(2, (tokens, heads, dim)).transpose(0, 1)
    # vLLM 0.22's Nemotron-H: a kernel block of a quarter of the group's block, K/V leading the shape
    kernel = torch.zeros((BLOCKS * 4, 2, tokens // 4 * heads * dim * 2), dtype=torch.int8)
    quarter = (
        kernel[:, :, : tokens // 4 * heads * dim].unflatten(2, (tokens // 4, heads, dim)).transpose(0, 1)
    )
    cases = {  # the layer's view (vLLM 0.22's logical (2, blocks, ...)), its memory, the bytes around it
        "cross-layer NHD": (nhd[:, 1].permute(1, 0, 2, 3, 4), nhd, nhd[:, 0]),
        "cross-layer HND": (hnd[:, :, 1].permute(2, 0, 3, 1, 4), hnd, hnd[:, :, 2]),
        "K-V first over padded block-major": (hybrid, padded, padded[:, :, tokens * heads * dim :]),
        "four kernel blocks a block": (quarter, kernel, kernel[:, :, tokens // 4 * heads * dim :]),
    }
    for name, (kv, memory, around) in cases.items():
        (tmp_path / name).mkdir()
        m = kv.shape[1] // BLOCKS  # kernel blocks a block

        def block(b: int, kv: Any = kv, m: int = m) -> Any:
            return kv[:, b * m : (b + 1) * m]

        proof, uses = _read_back(tmp_path / name, kv, block, lambda around=around: around.fill_(7))
        assert [r.gathered for r in proof.groups[0].regions] == [True, True], name
        assert uses["b"].groups[0].verdicts == "vv", name
        assert uses["c"].groups[0].verdicts == "vx", name
        # The poison fills every element of the view's blocks but the null block, and nothing else.
        before = memory.clone()
        memory.zero_()
        kv[:, m:].fill_(1)  # every block but the null block
        mask = memory == 1
        memory.copy_(before)
        proof.poison()
        ints = memory.view({1: torch.int8, 2: torch.int16}[memory.element_size()])
        pattern = int.from_bytes(bytes([POISON_BYTE]) * memory.element_size(), "little", signed=True)
        assert bool((ints[mask] == pattern).all()), name
        assert torch.equal(memory[~mask], before[~mask]), name


def test_block_major_layouts_stay_raw_rows_and_a_shape_without_blocks_is_refused(tmp_path: Path) -> None:
    import torch

    from gpu_tests.kv_proof.digests import Proof

    heads, tokens, dim = 2, B, PAGE // (2 * B * 2)

    def proof_of(kv: Any) -> Proof:
        groups = [SimpleNamespace(kv_cache_spec=AttentionSpec(), layer_names=["l0"])]
        config = SimpleNamespace(num_blocks=BLOCKS, kv_cache_tensors=[], kv_cache_groups=groups)
        return Proof(config, {"l0": SimpleNamespace(kv_cache=kv)}, tmp_path)

    plain = torch.zeros((BLOCKS, 2, tokens, heads, dim), dtype=torch.int8)
    hnd = torch.zeros((BLOCKS, 2, heads, tokens, dim), dtype=torch.int8).permute(0, 1, 3, 2, 4)
    for kv in (plain, hnd):
        (region,) = proof_of(kv).groups[0].regions
        assert not region.gathered and region.width == PAGE
    with pytest.raises(ValueError, match=r"layer l0: a KV cache of shape \(3, 5\) has no dimension of"):
        proof_of(torch.zeros((3, 5), dtype=torch.int8))


def test_a_block_wrong_when_the_forward_reads_it_and_right_after_the_step_fails(tmp_path: Path) -> None:
    """A load reported finished whose copy lands after the forward that reads it (vLLM #45704's and
    #47282's class): checked after the step only, it reads as computed; checked at the read, as the poison."""
    engine = Engine(tmp_path)
    _compute(engine, "a", [1, 2, 3])
    cpu = {name: engine.kv[name][1:3].clone() for name in ("l0", "l1")}  # what the CPU tier stored
    engine.proof.poison()

    def late_copy() -> None:  # the copy lands during the step, after the forward read the blocks
        for name in ("l0", "l1"):
            engine.kv[name][9:11] = cpu[name]

    engine.step([("b", PROMPT, ([9, 10, 11],), 8)], {"b": 2}, forward=late_copy)
    (use,) = [u for u in ProbeFiles(tmp_path).first_uses() if u.request_id == "b"]
    assert use.groups[0].verdicts == "pp" and use.bad() == 2
    assert use.at_read == 2 and use.late == 2
    assert all(e.holds.endswith("the copy landed after the forward read it") for e in use.examples)
    # The same blocks judged after the step alone (no read point ran): as computed.
    _first_step(engine.proof, "c", [9, 10, 12], 8)
    (after_only,) = [u for u in ProbeFiles(tmp_path).first_uses() if u.request_id == "c"]
    assert after_only.groups[0].verdicts == "vv" and after_only.at_read == 0


def test_a_block_another_request_completes_in_the_same_step_is_checked_after_it(tmp_path: Path) -> None:
    """vLLM caches a block when it is scheduled: a request may start from a block another request of the same
    step computes. Before the forward it holds nothing yet; it is checked after the step, as computed."""
    engine = Engine(tmp_path)
    engine.proof.poison()

    def forward() -> None:
        for k, block in enumerate([1, 2]):
            engine.write(block, PROMPT, (k + 1) * B)

    engine.step([("a", PROMPT, ([1, 2, 3],), 0), ("b", PROMPT, ([1, 2, 4],), 8)], {"a": 10, "b": 2}, forward)
    (use,) = [u for u in ProbeFiles(tmp_path).first_uses() if u.request_id == "b"]
    assert use.groups[0].verdicts == "vv" and use.at_read == 0


def test_the_read_point_runs_right_before_the_runner_s_forward_once_a_step(tmp_path: Path) -> None:
    """V1: the runner's ``_model_forward``; V2: after its KV connector's ``pre_forward``; neither: the worker.
    A forward with no step pending (warm-up, graph capture) reads nothing."""
    from gpu_tests.kv_proof.read_point import WORKER_POINT, install_read_point

    calls: list[str] = []

    class Reader:
        pending: Any = None

        def read(self) -> None:
            calls.append(f"read {self.pending}")
            self.pending = None

    class V1Runner:
        def _model_forward(self, **kwargs: Any) -> str:
            calls.append("forward")
            return "out"

    class Connector:
        def pre_forward(self, out: Any, batch: Any) -> None:
            calls.append("pre_forward")

    v1, v2, reader = SimpleNamespace(model_runner=V1Runner()), SimpleNamespace(), Reader()
    v2.model_runner = SimpleNamespace(kv_connector=Connector())
    assert install_read_point(v1, reader) == "model_runner._model_forward"
    reader.pending = "step-1"
    assert v1.model_runner._model_forward(input_ids=None) == "out"
    assert calls == ["read step-1", "forward"]
    calls.clear()
    assert install_read_point(v2, reader) == "model_runner.kv_connector.pre_forward"
    reader.pending = "step-2"
    v2.model_runner.kv_connector.pre_forward("out", "batch")
    assert calls == ["pre_forward", "read step-2"]
    assert install_read_point(SimpleNamespace(model_runner=object()), reader) == WORKER_POINT
    # Proof.read: once per pending step, and nothing without one.
    engine = Engine(tmp_path)
    _compute(engine, "a", [1, 2, 3])
    engine.proof.read()  # nothing pending: no request, no error
    assert engine.proof.before == {} and engine.proof.errors == []


@pytest.mark.parametrize("connector", ["OffloadingConnector", "SimpleCPUOffloadConnector"])
def test_a_load_that_lands_after_the_forward_reading_it_is_caught_by_the_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, connector: str
) -> None:
    """The catalogue's ``load_lands_late`` injected into stand-ins of vLLM's classes (the Offloading worker,
    the Simple connector's copy backend, the GPU worker), copying between CPU tensors: the load is reported
    finished with no copy, its copy lands after the forward of the step that reads it. The proof, reading
    before that forward, sees the poison; after the step the blocks are as computed."""
    import sys
    from types import ModuleType

    import torch

    from gpu_tests.kv_proof import defects
    from gpu_tests.kv_proof.catalogue import MUTATIONS, applicable
    from gpu_tests.kv_proof.digests import POISON_BYTE

    engine = Engine(tmp_path)
    layers = ("l0", "l1")
    cpu = {name: torch.zeros((4, PAGE), dtype=torch.int8) for name in layers}

    def copy(src: list[int], dst: list[int], store: bool) -> None:
        for name in layers:
            for s, d in zip(src, dst, strict=True):
                if store:
                    cpu[name][d] = engine.kv[name][s]
                else:
                    engine.kv[name][d] = cpu[name][s]

    class OffloadingWorker:
        def __init__(self) -> None:
            self.done: list[int] = []

        def submit_store(self, job_id: int, src: Any, dst: Any) -> bool:
            return True

        def submit_load(self, job_id: int, src: Any, dst: Any) -> bool:
            copy(list(src.block_ids), list(dst.block_ids), store=False)
            self.done.append(job_id)
            return True

        def get_finished(self) -> list[Any]:
            done, self.done = self.done, []
            return [SimpleNamespace(job_id=j, success=True) for j in done]

    class Event:
        def synchronize(self) -> None:
            pass

    class CopyBackend:
        def launch_copy(
            self, src: list[int], dst: list[int], is_store: bool, idx: int, events: list[Any]
        ) -> None:
            copy(src, dst, is_store)
            events.append((idx, Event()))

    class Worker:
        def execute_model(self, out: Any) -> None:
            engine.proof.before_forward(out)  # the read point, right before the forward (nothing to write)

    modules: dict[str, dict[str, Any]] = {
        "vllm.v1.kv_offload.base": {"TransferResult": SimpleNamespace},
        "vllm.v1.kv_offload.cpu.gpu_worker": {"CPUOffloadingWorker": OffloadingWorker},
        "vllm.v1.simple_kv_offload.copy_backend": {"DmaCopyBackend": CopyBackend},
        "vllm.v1.worker.gpu_worker": {"Worker": Worker},
    }
    for name, attrs in modules.items():
        module = ModuleType(name)
        for attr, value in attrs.items():
            setattr(module, attr, value)
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(defects, "_late", defects._Late())
    arm = defects._Arming(tmp_path)
    monkeypatch.setattr(arm, "armed", lambda name: name == "load_lands_late")
    defects._offloading_worker(arm)
    defects._simple(arm)
    defects._landing(arm)
    mutation = MUTATIONS["load_lands_late"]
    assert mutation.caught_by == ("kv_bytes_identical",) and applicable(mutation, [], connector) is None

    _compute(engine, "a", [1, 2, 3])
    copy([1, 2], [0, 1], store=True)  # the CPU tier holds both blocks
    engine.proof.poison()
    if connector == "OffloadingConnector":
        worker = OffloadingWorker()
        spec = SimpleNamespace
        assert worker.submit_load(7, spec(block_ids=[0, 1]), spec(block_ids=[9, 10]))
        assert [r.job_id for r in worker.get_finished()] == [7]  # reported finished, nothing copied
    else:
        events: list[Any] = []
        CopyBackend().launch_copy([0, 1], [9, 10], False, 3, events)
        assert [i for i, _ in events] == [3]  # its event says done, nothing copied
    assert bool((engine.kv["l0"][9] == POISON_BYTE).all())
    out = SimpleNamespace(
        finished_req_ids=set(),
        scheduled_new_reqs=[
            SimpleNamespace(
                req_id="b", prompt_token_ids=PROMPT, block_ids=([9, 10, 11],), num_computed_tokens=8
            )
        ],
        scheduled_cached_reqs=SimpleNamespace(
            req_ids=[], resumed_req_ids=set(), new_block_ids=[], num_computed_tokens=[]
        ),
        num_scheduled_tokens={"b": 2},
    )
    Worker().execute_model(out)  # the read, the forward, then the copy lands
    engine.proof.after_step(out)
    (use,) = [u for u in ProbeFiles(tmp_path).first_uses() if u.request_id == "b"]
    assert use.groups[0].verdicts == "pp" and use.late == 2  # caught by the bytes the forward read
    assert torch.equal(engine.kv["l0"][9:11], cpu["l0"][0:2])  # and right after the step
    if connector == "OffloadingConnector":
        assert worker.get_finished() == []  # the late copy's own job is not reported again
    assert json.loads(arm.path.read_text())["applied"] == {"load_lands_late": 1}


def test_the_byte_verdict_says_how_many_blocks_were_read_before_the_forward_and_landed_late(
    tmp_path: Path,
) -> None:
    """The first-use lines of a late copy, judged: ``kv_bytes_identical`` fails and says what the read saw."""
    from gpu_tests.offload_check.assertions import kv_bytes_identical
    from gpu_tests.offload_check.report import Iteration
    from gpu_tests.offload_check.settings import CheckSettings

    engine = Engine(tmp_path)
    _compute(engine, "a", [1, 2, 3])
    cpu = {name: engine.kv[name][1:3].clone() for name in ("l0", "l1")}
    engine.proof.poison()

    def late_copy() -> None:
        for name in ("l0", "l1"):
            engine.kv[name][9:11] = cpu[name]

    engine.step([("b", PROMPT, ([9, 10, 11],), 8)], {"b": 2}, forward=late_copy)
    it = Iteration(label="clean-1", first_use=ProbeFiles(tmp_path).first_uses())
    found = kv_bytes_identical(CheckSettings(reference_digests=True), it)
    assert not found.passed and found.evaluated
    said = "2 digested before the forward that read them, 2 wrong there and right after"
    assert found.message.endswith(said)
