"""The profile table against upstream's matrix, the tiny families, the CI steps.

The profiles are built from `gpu_tests/offload_check/upstream.py`, a hand copy of vLLM's test; they are
checked against `gpu_tests/upstream/test_gsm8k_offloading.json`, the values parsed from that test's file
(`gpu_tests/upstream/parse.py`, with the file's address and digest). A wrong value in the copy or in the
profiles fails here, and so does a re-parsed upstream that the profiles do not follow.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_tests.offload_check import upstream
from gpu_tests.offload_check.case import server_config_for
from gpu_tests.offload_check.profiles import (
    PROFILES,
    TINY_PARALLEL,
    CheckCase,
    case_skip_reason,
    matrix,
    resolve_model,
)
from gpu_tests.offload_check.server import build_command
from gpu_tests.offload_check.tiny import TINY_FAMILIES, tiny_config_kwargs
from gpu_tests.upstream.parse import RECORD, parse

REPO = Path(__file__).resolve().parents[2]
REAL = {name: p for name, p in PROFILES.items() if not p.tiny and name != "small" and p.real_size_of is None}


UPSTREAM = json.loads(RECORD.read_text())  # parsed from upstream's file, not from offload_check/upstream.py


def test_every_upstream_case_is_a_profile_case_with_the_same_values() -> None:
    # The profiles are built from offload_check/upstream.py (a hand copy); this compares them with the values
    # parsed from upstream's file itself, so a wrong copy or a wrong profile fails here.
    constants, defaults = UPSTREAM["constants"], UPSTREAM["defaults"]
    kv_config = UPSTREAM["server_args"].index("--kv-transfer-config")
    common = tuple(a for i, a in enumerate(UPSTREAM["server_args"]) if i not in (kv_config, kv_config + 1))
    assert common[-1] == "*cfg.extra_server_args"
    seen = set()
    for written in UPSTREAM["models"]:
        case = {**defaults, **written}
        (profile,) = [p for p in REAL.values() if p.model == case["model"]]
        settings = profile.connectors[case["connector"]]
        assert settings.upstream_id == case["id"]
        assert settings.threshold == case["accuracy_threshold"], case["id"]
        assert settings.cpu_gib == case["cpu_offload_gib"], case["id"]
        assert (settings.spec_name or "CPUOffloadingSpec") == case["spec_name"], case["id"]
        assert profile.tolerance == case["tolerance"]
        assert profile.startup_timeout == case["startup_timeout"]
        assert profile.server_args == (*common[:-1], *case["extra_server_args"])
        assert profile.num_questions == constants["NUM_QUESTIONS"]
        assert profile.num_shots == constants["NUM_FEWSHOT"]
        assert not case["env_dict"]  # the profiles set no environment of their own
        seen.add((profile.name, case["connector"]))
    # ...and no profile case that upstream does not have.
    assert seen == {(p.name, c) for p in REAL.values() for c in p.connectors}
    assert upstream.OFFLOAD_SYNC_TIMEOUT == constants["_OFFLOAD_SYNC_TIMEOUT"]


def test_the_record_names_the_file_it_was_parsed_from() -> None:
    source = UPSTREAM["source"]
    assert (source["repo"], source["commit"], source["path"]) == (
        upstream.SOURCE.repo,
        upstream.SOURCE.commit,
        upstream.SOURCE.test_path,
    )
    assert source["url"].endswith(f"/{source['commit']}/{source['path']}") and len(source["sha256"]) == 64


def test_the_parser_reads_what_upstream_writes() -> None:
    # The shapes parse.py relies on: keyword configs, field(default_factory=...), a starred server_args tail.
    text = """
NUM_QUESTIONS = 7
NUM_FEWSHOT = 2
_OFFLOAD_SYNC_TIMEOUT = 5

@dataclass
class OffloadingModelConfig:
    id: str
    tolerance: float = 0.1
    extra_server_args: list[str] = field(default_factory=list)

MODELS = [OffloadingModelConfig(id="a", accuracy_threshold=0.5, extra_server_args=["--x", "1"])]

def test_it(cfg):
    server_args = ["--y", _cfg(cfg.connector), *cfg.extra_server_args]
"""
    data = parse(text)
    assert data["constants"] == {"NUM_QUESTIONS": 7, "NUM_FEWSHOT": 2, "_OFFLOAD_SYNC_TIMEOUT": 5}
    assert data["defaults"] == {"tolerance": 0.1, "extra_server_args": []}
    assert data["models"] == [{"id": "a", "accuracy_threshold": 0.5, "extra_server_args": ["--x", "1"]}]
    assert data["server_args"] == ["--y", "<_cfg(...)>", "*cfg.extra_server_args"]
    with pytest.raises(ValueError, match="models"):
        parse(text.replace("MODELS", "OTHER"))


def test_upstream_thresholds_and_cpu_sizes_as_read() -> None:
    # The values of SOURCE, spelled out: a drift in the recorded copy must be a visible, deliberate edit.
    table = {(c.id, c.accuracy_threshold, c.cpu_offload_gib, c.spec_name) for c in upstream.UPSTREAM_CASES}
    assert table == {
        ("offloading-nemotron-h-8b", 0.39, 1, "CPUOffloadingSpec"),
        ("offloading-gemma-4-e4b-it", 0.55, 1, "CPUOffloadingSpec"),
        ("offloading-qwen3.5-35b", 0.75, 4, "CPUOffloadingSpec"),
        ("offloading-deepseek-v4-flash", 0.90, 16, "CPUOffloadingSpec"),
        ("offloading-deepseek-v2-lite-tiering-tp2", 0.35, 8, "TieringOffloadingSpec"),
        ("simple-nemotron-h-8b", 0.45, 4, "CPUOffloadingSpec"),
        ("simple-gemma-4-e4b-it", 0.55, 4, "CPUOffloadingSpec"),
        ("simple-qwen3.5-35b", 0.75, 4, "CPUOffloadingSpec"),
        ("simple-deepseek-v4-flash", 0.90, 16, "CPUOffloadingSpec"),
    }
    assert len(upstream.SOURCE.commit) == 40 and upstream.SOURCE.test_path.endswith(
        "test_gsm8k_offloading.py"
    )


def test_python_c_shows_thresholds_and_cpu_sizes_per_connector() -> None:
    code = "from gpu_tests.offload_check.profiles import PROFILES; print(PROFILES['nemotron-h-8b'])"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    assert "OffloadingConnector': ConnectorSettings(threshold=0.39, cpu_gib=1.0" in out
    assert "SimpleCPUOffloadConnector': ConnectorSettings(threshold=0.45, cpu_gib=4.0" in out


def test_server_flags_per_case_are_upstreams() -> None:
    case = CheckCase(PROFILES["deepseek-v2-lite-tiering-tp2"], "OffloadingConnector", "python")
    cmd = build_command(server_config_for(case), 8000)
    transfer = json.loads(cmd[cmd.index("--kv-transfer-config") + 1])
    assert transfer["kv_connector_extra_config"] == {
        "spec_name": "TieringOffloadingSpec",
        "cpu_bytes_to_use": 8 << 30,
        "eviction_policy": "lru",
    }
    assert cmd.count("--enforce-eager") == 1 and cmd.count("--max-model-len") == 1
    assert (
        cmd[cmd.index("--tensor-parallel-size") + 1] == "2" and "--no-disable-hybrid-kv-cache-manager" in cmd
    )
    simple = CheckCase(PROFILES["nemotron-h-8b"], "SimpleCPUOffloadConnector", "rust")
    cmd = build_command(server_config_for(simple), 8000)
    transfer = json.loads(cmd[cmd.index("--kv-transfer-config") + 1])
    assert transfer == {
        "kv_connector": "SimpleCPUOffloadConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"cpu_bytes_to_use": 4 << 30},
    }


@pytest.mark.parametrize("step", upstream.STEPS, ids=lambda s: s.key)
def test_each_ci_step_selects_its_profiles(step: upstream.UpstreamStep) -> None:
    words = [w.strip() for w in step.k.split(" or ")]
    ids = [c.id for c in matrix()]
    selected = {c.profile.name for c in matrix() if any(w in c.id for w in words)}
    assert selected == {p.name for p in REAL.values() if p.ci_step == step.key}
    assert all(any(w in i for i in ids) for w in words)
    assert max(PROFILES[n].gpus for n in selected) == step.num_devices


def test_pipeline_file_mirrors_the_upstream_steps() -> None:
    text = (REPO / "gpu_tests" / "ci" / "kv_offload.yaml").read_text()
    for step in upstream.STEPS:
        block = text.split(f"key: devclient-{step.key}", 1)[1].split("- label:", 1)[0]
        assert f"timeout_in_minutes: {step.timeout_in_minutes}" in block
        assert f"num_devices: {step.num_devices}" in block
        assert f'-k "{step.k}"' in block


def test_tiny_families_cover_the_matrix_families() -> None:
    families = {p.family for p in REAL.values()}
    assert families <= set(TINY_FAMILIES)  # every real model has a tiny stand-in
    for name, fam in TINY_FAMILIES.items():
        profile = PROFILES[f"tiny-{name}"]
        assert profile.architectures == fam.architectures and profile.tiny
        assert all(s.threshold is None for s in profile.connectors.values())
        kwargs = tiny_config_kwargs(fam)
        assert kwargs["vocab_size"] == 49152 and kwargs["architectures"] == list(fam.architectures)
    assert resolve_model(PROFILES["tiny-gemma3"], {"VLLM_DEVCLIENT_TINY_DIR": "/m"}) == "/m/gemma3"
    assert resolve_model(PROFILES["small"], {"VLLM_DEVCLIENT_SMALL_MODEL": "/s"}) == "/s"
    assert resolve_model(PROFILES["nemotron-h-8b"], {}) == "nvidia/Nemotron-H-8B-Base-8K"


def test_several_gpu_stand_ins_carry_the_large_steps_flags() -> None:
    large = PROFILES["deepseek-v4-flash"].server_args
    kv = large[large.index("--kv-cache-dtype") : large.index("--kv-cache-dtype") + 2]
    block = large[large.index("--block-size") : large.index("--block-size") + 2]
    for family, tp in TINY_PARALLEL:
        p = PROFILES[f"tiny-{family}-tp{tp}-ep"]
        args = " ".join(p.server_args)
        assert p.gpus == tp and p.tiny and p.model == f"tiny:{family}"
        assert f"--tensor-parallel-size {tp} --enable-expert-parallel" in args
        assert " ".join(kv) in args and " ".join(block) in args and args.count("--kv-cache-dtype") == 1
        case = CheckCase(p, "OffloadingConnector", "python")
        assert case_skip_reason(case, gpu_count=1, model_available=True) == (
            f"tiny:{family} ({family}) needs {tp} GPUs, this machine has 1"
        )
        assert case_skip_reason(case, gpu_count=tp, model_available=True) is None


def test_nothing_reads_the_environment_at_import() -> None:
    code = (
        "import os; os.environ.clear(); import gpu_tests.offload_check as oc; "
        "os.environ['VLLM_DEVCLIENT_SMALL_MODEL'] = '/late'; "
        "print(oc.resolve_model(oc.PROFILES['small']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    assert out.strip() == "/late"


def test_tiny_builder_is_deterministic(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from gpu_tests.offload_check.tiny import build_tiny_model

    small = {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2}
    a = build_tiny_model("llama", tmp_path / "a", tokenizer_dir=None, seed=3, overrides=small)
    b = build_tiny_model("llama", tmp_path / "b", tokenizer_dir=None, seed=3, overrides=small)
    c = build_tiny_model("llama", tmp_path / "c", tokenizer_dir=None, seed=4, overrides=small)
    assert a["files"] == b["files"] and a["files"] != c["files"]
    assert a["weights"] == "safetensors" and a["parameters"] > 0
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["hidden_size"] == 64
    # Gemma 4 keeps the flat global_head_dim that vLLM reads, whatever transformers folds it into.
    build_tiny_model(
        "gemma4",
        tmp_path / "g",
        tokenizer_dir=None,
        weights=False,
        overrides={"vocab_size": 256, "vocab_size_per_layer_input": 256},
    )
    assert json.loads((tmp_path / "g" / "config.json").read_text())["global_head_dim"] == 128
