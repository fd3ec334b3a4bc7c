"""Issue 53, real size by volume: questions long enough that every reload request loads blocks of its own
from the CPU tier, counted in tokens against the block size (one token a character: no tokenizer needed),
and the plan per real-size model."""

from __future__ import annotations

from pathlib import Path

from gpu_tests.kv_proof.book import chain_keys
from gpu_tests.offload_check.volume import MIN_LOADED_BLOCKS, plan_volume, volume_questions
from vllm_devclient.gsm8k import load_gsm8k

from .conftest import GSM8K_DIR


def _encode(text: str) -> list[int]:
    return [ord(c) for c in text]


def test_each_question_holds_its_blocks_and_shares_none_with_another() -> None:
    train, test = load_gsm8k(data_dir=GSM8K_DIR)
    for block, blocks, room in ((544, 5, None), (1280, 5, 4096 - 256)):
        probes = volume_questions(
            train,
            test,
            _encode,
            num_questions=40,
            block_size=block,
            blocks=blocks,
            max_tokens=256,
            max_length=room,
        )
        whole = (room - 1) // block if room is not None else blocks  # 2 of 1,280 tokens in 4,096 less 256
        assert whole == (2 if block == 1280 else 5)
        for p in probes:
            # one token past the blocks (the last is always computed), within the room left for the answer
            assert (p.length - 1) // block >= min(blocks, whole), (block, p.id, p.length)
            assert room is None or p.length <= room
            assert p.label is not None and p.kind == "gsm8k"
        # No two prompts share a block: each first block (hence each later one) is its own.
        firsts = [chain_keys(p.token_ids, block, 1)[0] for p in probes]
        assert len(set(firsts)) == len(probes)
        total = sum(min(blocks, (p.length - 1) // block) for p in probes)
        assert total >= 40 * min(blocks, whole)


def test_a_short_block_needs_no_example_and_a_full_context_stops_adding_them() -> None:
    train, test = load_gsm8k(data_dir=GSM8K_DIR)
    (short,) = volume_questions(train, test, _encode, num_questions=1, block_size=16, blocks=1, max_tokens=8)
    assert "Question:" in "".join(map(chr, short.token_ids)) and short.length < 16 * 40
    (capped,) = volume_questions(
        train, test, _encode, num_questions=1, block_size=1280, blocks=8, max_tokens=8, max_length=3000
    )
    assert 1280 * 2 < capped.length <= 3000  # two whole blocks fit; the next example would not


def test_the_plan_reaches_the_target_within_the_context_and_sizes_the_cpu_tier() -> None:
    nemotron = plan_volume(
        "nemotron-h-8b",
        block_size=1280,
        context=4096,
        answer_room=512,
        cpu_block_bytes=21 << 20,
        min_questions=200,
    )
    assert nemotron.blocks_per_prompt == 2  # (4096 - 512) // 1280
    assert nemotron.loaded_blocks >= MIN_LOADED_BLOCKS and nemotron.questions == 625
    assert nemotron.cpu_gib == 52  # 2 x 1,250 blocks x 21 MiB, rounded up
    qwen = plan_volume(
        "qwen3.5-35b",
        block_size=544,
        context=8192,
        answer_room=512,
        cpu_block_bytes=4 << 20,
        min_questions=200,
    )
    assert qwen.blocks_per_prompt == 8 and qwen.questions == 200 and qwen.loaded_blocks == 1600


def test_the_newest_real_size_passes_are_read_by_volume_and_the_plan_reaches_the_target() -> None:
    """The committed clean passes, counted as ``kv_bytes_identical`` counts (issue 53's figures: Nemotron-H
    loaded from the CPU tier on 1 of 208 reload requests, 8 connector-loaded blocks), and a plan per model
    whose questions and blocks reach the target within its context."""
    from gpu_tests.runner import real_volume, tables

    reports, _ = tables.load(tables.REAL_PROOF_H_RUN)
    (nemotron,) = [r for r in reports if r.profile == "nemotron-h-8b-real"]
    v = real_volume.pass_volume(nemotron.clean()[0])
    assert (v.from_cpu, v.requests, v.loaded_blocks) == (1, 208, 8) and not v.meets()
    assert real_volume.Volume(208, 104, 1000).meets() and not real_volume.Volume(208, 103, 5000).meets()
    rows = tables.newest_real([(run, *tables.load(run)) for run in tables.REAL_PROOF_RUNS])
    plans = real_volume.volume_plans(rows)
    assert set(plans) == {r.clean.report.profile for r in rows} and len(plans) == 4
    for p in plans.values():
        assert p.loaded_blocks >= MIN_LOADED_BLOCKS and p.blocks_per_prompt >= 1
        assert p.cpu_gib * 2**30 >= 2 * p.loaded_blocks * p.cpu_block_bytes > 0
    assert plans["nemotron-h-8b-real"].block_size == 1280 and plans["qwen3.5-35b-real-tp1"].block_size == 544


def test_the_real_plan_runs_each_clean_case_by_volume(tmp_path: Path) -> None:
    from gpu_tests.runner import real_plan, real_volume, tables

    rows = tables.newest_real([(run, *tables.load(run)) for run in tables.REAL_PROOF_RUNS])
    plans = real_volume.volume_plans(rows)
    jobs = real_plan.plan_real(report_dir=tmp_path, volume=plans, mutations=False)
    by_volume = {j.case_id: j for j in jobs if j.case_id.endswith("-offloading-python-volume")}
    assert len(by_volume) == 4
    job = by_volume["nemotron-h-8b-real-offloading-python-volume"]
    args = list(job.args)
    plan = plans["nemotron-h-8b-real"]
    assert args[args.index("--num-questions") + 1] == str(plan.questions)
    assert args[args.index("--volume-blocks") + 1] == str(plan.blocks_per_prompt)
    assert float(args[args.index("--cpu-gib") + 1]) >= plan.cpu_gib and args.count("--label") == 1
    est = real_plan.ESTIMATES["nemotron-h-8b"]
    assert job.expected_s == real_plan.volume_s(est, plan, cold=True) > est.cold_startup_s
