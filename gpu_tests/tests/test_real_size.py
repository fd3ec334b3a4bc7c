"""Upstream's models at real size, on the CPU: the committed configs, their offline changes, the real-size
profiles and the runner's plan for them (gpu_tests/real_configs, gpu_tests/runner/real_models.py,
gpu_tests/runner/real_plan.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_tests.offload_check import upstream
from gpu_tests.offload_check.case import server_config_for
from gpu_tests.offload_check.profiles import (
    CONNECTOR_SHORT,
    PROFILES,
    REAL_SIZE_ARGS,
    CheckCase,
    matrix,
    model_available,
    resolve_model,
)
from gpu_tests.offload_check.server import build_command
from gpu_tests.runner import real_models, real_plan
from gpu_tests.runner.jobs import Job
from gpu_tests.runner.launch import run_jobs

REPO = Path(__file__).resolve().parents[2]
NAMES = list(REAL_SIZE_ARGS)
# Published parameter counts (model cards), text model only, billions.
PUBLISHED_B = {
    "nemotron-h-8b": 8.1,
    "gemma-4-e4b-it": 7.5,  # 8B with the vision and audio towers
    "qwen3.5-35b": 34.7,  # 35B with the vision tower
    "deepseek-v2-lite-tiering-tp2": 15.7,
}


def _real(name: str):  # type: ignore[no-untyped-def]
    return next(p for p in PROFILES.values() if p.real_size_of == name)


def _text_params(config: dict) -> int:  # type: ignore[type-arg]
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    data = json.loads(json.dumps(config))
    data.pop("auto_map", None)
    cfg = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(getattr(cfg, "text_config", cfg))
    return sum(p.numel() for p in model.parameters())


def test_every_upstream_one_gpu_profile_has_a_committed_config() -> None:
    one_gpu_or_tp1 = {
        p.name for p in PROFILES.values() if p.ci_step in ("kv-offload-small", "kv-offload-medium")
    }
    assert set(NAMES) == set(real_models.OFFLINE_CHANGES) == one_gpu_or_tp1
    for name in NAMES:
        assert (real_models.REAL_CONFIGS / name / "config.json").exists()
        assert PROFILES[name].architectures == tuple(real_models.published_config(name)["architectures"])


@pytest.mark.parametrize("name", NAMES)
def test_the_published_config_parses_and_has_the_published_size(name: str) -> None:
    published = real_models.published_config(name)
    count = _text_params(published) / 1e9
    assert abs(count - PUBLISHED_B[name]) / PUBLISHED_B[name] < 0.03, count
    offline = real_models.offline_config(name)
    text = offline.get("text_config", offline)
    assert text["vocab_size"] == real_models.STAND_IN_VOCAB == 49152
    # The planner's weights are these configs' parameter counts in bf16 (stand-in vocabulary).
    weights = _text_params(offline) * 2 / real_plan.GIB
    assert abs(weights - real_plan.ESTIMATES[name].weights_gib) < 0.2, weights


def test_offline_changes_touch_only_the_vocabulary_and_are_listed() -> None:
    readme = (real_models.REAL_CONFIGS / "README.md").read_text()
    for name, changes in real_models.OFFLINE_CHANGES.items():
        published, offline = real_models.published_config(name), real_models.offline_config(name)
        for key in ("hidden_size", "num_hidden_layers", "num_key_value_heads"):
            src = published.get("text_config", published)
            assert offline.get("text_config", offline)[key] == src[key]
        block = readme.split(f"### {name}", 1)[1].split("\n### ", 1)[0]
        for change in changes:
            assert f"`{change.describe()}`" in block, (name, change.describe())
        for flag in REAL_SIZE_ARGS[name]:
            if flag.startswith("--"):
                assert f"`{flag}" in block, (name, flag)
    assert "auto_map" not in real_models.offline_config("deepseek-v2-lite-tiering-tp2")
    with pytest.raises(KeyError, match="not in the published config"):
        real_models.offline_config("nemotron-h-8b", {"model_type": "nemotron_h"})


def test_the_builder_writes_a_servable_folder(tmp_path: Path) -> None:
    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "tokenizer.json").write_text("{}")
    code = real_models.main(
        ["--out", str(tmp_path / "real"), "--tokenizer", str(tok), "--profiles", "qwen3.5-35b"]
    )
    out = tmp_path / "real" / "qwen3.5-35b"
    assert code == 0 and (out / "tokenizer.json").exists()
    assert json.loads((out / "config.json").read_text())["text_config"]["eos_token_id"] == 2
    manifest = json.loads((out / "real_manifest.json").read_text())
    assert manifest["changes"][0]["change"] == "text_config.vocab_size = 49152"
    assert resolve_model(_real("qwen3.5-35b"), {"VLLM_DEVCLIENT_REAL_DIR": str(tmp_path / "real")}) == str(
        out
    )
    assert not model_available("real:qwen3.5-35b")


@pytest.mark.parametrize("name", NAMES)
def test_the_real_size_profile_keeps_upstreams_cases_and_records_the_tp_override(name: str) -> None:
    base, real = PROFILES[name], _real(name)
    assert real.gpus == 1 and real.name.endswith("-tp1") == (base.gpus != 1)
    assert real.num_questions == upstream.NUM_QUESTIONS and real.max_tokens == base.max_tokens
    assert real.concurrency == 0 and real.ci_step is None
    for connector, settings in base.connectors.items():
        mine = real.connectors[connector]
        assert (mine.cpu_gib, mine.spec_name, mine.threshold) == (settings.cpu_gib, settings.spec_name, None)
    case = CheckCase(real, "OffloadingConnector", "python")
    cmd = build_command(server_config_for(case, model="/m"), 8000)
    for flag in base.server_args:  # upstream's flags stay, only the TP value changes
        assert flag in cmd or flag == str(base.gpus)
    assert "--load-format" in cmd and cmd[cmd.index("--load-format") + 1] == "dummy"
    if "--tensor-parallel-size" in cmd:
        assert cmd[cmd.index("--tensor-parallel-size") + 1] == "1"
    transfer = json.loads(cmd[cmd.index("--kv-transfer-config") + 1])["kv_connector_extra_config"]
    assert transfer["cpu_bytes_to_use"] == int(base.connectors["OffloadingConnector"].cpu_gib) << 30
    assert transfer.get("spec_name", "CPUOffloadingSpec") == (
        base.connectors["OffloadingConnector"].spec_name or "CPUOffloadingSpec"
    )
    assert real.name not in {c.profile.name for c in matrix()}  # upstream's matrix is unchanged


def test_vllm_knows_every_architecture() -> None:
    registry = pytest.importorskip("vllm.model_executor.models.registry")
    names = set(registry.ModelRegistry.get_supported_archs())
    for name in NAMES:
        assert set(PROFILES[name].architectures) <= names


def test_the_dry_run_deals_two_calls_and_labels_its_estimates(tmp_path: Path) -> None:
    argv = ["--out", str(tmp_path), "--families", "real", "--parts", "2", "--setup-s", "90", "--dry-run"]
    out = subprocess.run(
        [sys.executable, "-m", "gpu_tests.runner.run_matrix", *argv],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    assert "ESTIMATED" in out.splitlines()[0]
    jobs = real_plan.plan_real(report_dir=tmp_path)
    slots, left = real_plan.best_deal(jobs, calls=2, setup_s=90)
    assert len(jobs) == 21 and len(slots) + len(left) == 21  # 14 cases, a catalogue per model and connector
    for call in (1, 2):
        mine = [s for s in slots if s.call == call]
        assert mine and max(s.end_s for s in mine) <= 575.0
        for t in {s.start_s for s in mine} | {s.end_s - 1e-6 for s in mine}:
            live = [s for s in mine if s.start_s <= t < s.end_s]
            assert sum(s.job.mem_gib for s in live) <= real_plan.H200_GIB
    # Every model has a case; a model's Offloading/python case and its catalogue come before its repeats.
    assert {s.job.family for s in slots} == {_real(n).name for n in NAMES}
    plain, _ = real_plan.deal(jobs, calls=2, setup_s=90)
    essential = [s for s in slots if real_plan.essential(s.job)]
    assert len(essential) >= sum(real_plan.essential(s.job) for s in plain)
    # The tiering spec's primary tier is the CPU manager the defects act in: it gets its catalogue too.
    catalogues = {(j.family, j.case_id.split("-")[-3]) for j in jobs if j.kind == "mutations"}
    assert catalogues == {
        (_real(n).name, CONNECTOR_SHORT[c]) for n in NAMES for c in PROFILES[_real(n).name].connectors
    }
    assert f"does not fit: {len(left)} cases" in out
    args = jobs[0].args
    assert args[args.index("--concurrency") + 1] == "0" and args[args.index("--iterations") + 1] == "1"
    # A catalogue is a case of its own: its server, no clean pass, every mutation.
    catalogue = next(j for j in jobs if j.kind == "mutations")
    args = catalogue.args
    assert args[args.index("--iterations") + 1] == "0" and args[args.index("--mutations") + 1] == "all"
    assert catalogue.case_id.endswith("-mutations")
    # A catalogue's CPU tier holds what its iterations store; a clean pass keeps upstream's.
    for job in jobs:
        given = job.args[job.args.index("--cpu-gib") + 1] if "--cpu-gib" in job.args else None
        assert (given is not None and float(given) >= real_plan.CATALOGUE_CPU_GIB) == (
            job.kind == "mutations"
        )
    # Any case may be the first of its model on the machine (--only): its timeout allows the cold startup.
    for job in jobs:
        est = real_plan.ESTIMATES[PROFILES[job.family].real_size_of or ""]
        defects = real_plan.catalogue_size(job.args[job.args.index("--connector") + 1])
        cold = real_plan.case_s(est, cold=True, kind=job.kind, defects=defects)
        assert job.timeout_s >= 2 * cold >= 2 * job.expected_s - 1e-6, job.case_id


def test_the_search_deals_at_least_the_priority_order_and_the_runner_can_replay_it(tmp_path: Path) -> None:
    jobs = real_plan.plan_real(report_dir=tmp_path)
    plain, _ = real_plan.deal(jobs, calls=2, setup_s=90)
    slots, left = real_plan.best_deal(jobs, calls=2, setup_s=90)
    # The order: every model's essential cases before more cases (today's estimates: the search
    # deals all 7 essentials in 7 cases where the priority order deals 6 in 8).
    assert real_plan._score(slots, 2) >= real_plan._score(plain, 2)
    essentials = sum(real_plan.essential(s.job) for s in slots)
    assert essentials >= sum(real_plan.essential(s.job) for s in plain)
    assert essentials > sum(real_plan.essential(s.job) for s in plain) or len(slots) >= len(plain)
    # The runner is given each call's cases in their start order (then the rest): list scheduling in that
    # order starts the same cases at the same times.
    replay, _ = real_plan.deal([s.job for s in slots] + left, calls=2, setup_s=90)
    assert [(s.job.case_id, s.call, s.start_s) for s in replay] == [
        (s.job.case_id, s.call, s.start_s) for s in slots
    ]


def test_servers_of_a_model_started_together_all_compile(tmp_path: Path) -> None:
    jobs = [j for j in real_plan.plan_real(report_dir=tmp_path) if j.family.startswith("gemma")]
    est = real_plan.ESTIMATES["gemma-4-e4b-it"]
    slots, _ = real_plan.deal(jobs, calls=1, setup_s=0, call_s=2000)
    together = [s for s in slots if s.start_s == 0]
    assert len(together) == 4  # 4 x 28.9 GiB fit at once

    def size(s: real_plan.Slot) -> int:
        return real_plan.catalogue_size("simple" if "-simple-" in s.job.case_id else "offloading")

    for s in together:
        assert s.end_s == real_plan.case_s(est, cold=True, kind=s.job.kind, defects=size(s))
    slots, _ = real_plan.deal(jobs, calls=1, setup_s=0, call_s=2000, parallel=1)
    warm = [s.end_s - s.start_s for s in slots[1:]]
    assert warm == pytest.approx(
        [real_plan.case_s(est, cold=False, kind=s.job.kind, defects=size(s)) for s in slots[1:]]
    )
    # A catalogue's time follows its defects: the Simple connector's three cost less than the Offloading's.
    assert real_plan.catalogue_size("simple") < real_plan.catalogue_size("offloading")


FAKE = (
    "import sys, time, os; open(os.path.join(sys.argv[1], 'start-' + sys.argv[2]), 'w').close(); "
    "time.sleep(0.4)"
)


def test_run_jobs_keeps_the_cases_within_the_gpu_memory(tmp_path: Path) -> None:
    from vllm_devclient.testing import spawn

    jobs = [
        Job(f"c{i}", "f", "matrix", (), 30, 0.4, mem_gib=m) for i, m in enumerate((80.0, 50.0, 80.0, 10.0))
    ]

    def launch(job: Job, log: Path) -> subprocess.Popen[bytes]:
        (tmp_path / "reports").mkdir(exist_ok=True)
        return spawn([sys.executable, "-c", FAKE, str(tmp_path), job.case_id])

    results = run_jobs(
        jobs,
        out=tmp_path,
        parallel=4,
        deadline_s=30,
        launcher=launch,
        stagger_s=0,
        poll_s=0.02,
        gpu_mem_gib=139,
    )
    assert len(results) == 4
    starts = {p.name[6:]: p.stat().st_mtime for p in tmp_path.glob("start-*")}
    # c0 and c1 (130 GiB) run together; c2 (80) and c3 (10) wait for room: 140 GiB would not fit.
    assert starts["c2"] > starts["c1"] + 0.3 and starts["c3"] > starts["c1"] + 0.3
