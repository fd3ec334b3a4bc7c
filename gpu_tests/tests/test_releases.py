"""Issue 35's release data: what each vLLM release can serve, the profiles fitted to it, the runner's plan
for it, and the known defect that one fingerprint names per Mamba cache mode and release."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpu_tests.offload_check import releases
from gpu_tests.offload_check.cli import _cases
from gpu_tests.offload_check.judge import rejudge
from gpu_tests.offload_check.profiles import ALIGN_FAMILIES, PROFILES, CheckCase
from gpu_tests.runner.collect import read_report, report_paths
from gpu_tests.runner.launch import verdict

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "gpu_tests" / "results"
NEMOTRON_ALL = RESULTS / "kv-proof-2026-12-02c" / "tiny-nemotron-h-offloading-python.json.xz"


def test_0_20_2_serves_no_rust_case_and_no_mamba_hybrid_on_the_offloading_connector() -> None:
    llama, qwen = PROFILES["tiny-llama"], PROFILES["tiny-qwen3-next"]
    assert "vllm-rs" in str(releases.skip_reason(CheckCase(llama, "OffloadingConnector", "rust"), "0.20.2"))
    reason = releases.skip_reason(CheckCase(qwen, "OffloadingConnector", "python"), "0.20.2")
    assert reason is not None and "HMA" in reason
    # The Simple connector is SupportsHMA there; attention-only families run on both connectors.
    assert releases.skip_reason(CheckCase(qwen, "SimpleCPUOffloadConnector", "python"), "0.20.2") is None
    assert releases.skip_reason(CheckCase(llama, "OffloadingConnector", "python"), "0.20.2") is None
    for version in ("0.22.0", "0.26.0", "0.26.0+cu130"):
        assert releases.skip_reason(CheckCase(qwen, "OffloadingConnector", "rust"), version) is None


def test_the_hma_flag_is_dropped_only_where_the_offloading_connector_lacks_hma() -> None:
    llama = PROFILES["tiny-llama"]
    assert releases.HMA_FLAG in llama.server_args
    assert releases.HMA_FLAG not in releases.adapt(llama, "OffloadingConnector", "0.20.2").server_args
    assert releases.adapt(llama, "SimpleCPUOffloadConnector", "0.20.2") is llama
    assert releases.adapt(llama, "OffloadingConnector", "0.22.0") is llama
    assert releases.adapt(llama, "OffloadingConnector", None) is llama


def test_a_release_not_listed_takes_the_newest_listed_before_it() -> None:
    assert releases.release("0.21.0").rust_frontend is False  # 0.20.2's
    assert releases.release("0.33.0").reset_answer == "success"  # 0.26.0's
    with pytest.raises(ValueError, match="older"):
        releases.release("0.19.0")


def test_the_check_fits_its_profile_to_the_release_it_is_told() -> None:
    opts = {
        "connector": "offloading,simple",
        "frontend": "python",
        "profile": "tiny-llama",
        "model": None,
        "env_items": (),
        "connector_extra": None,
        "label": "",
        "vllm_release": "0.20.2",
    }
    offloading, simple = _cases(opts)
    assert releases.HMA_FLAG not in offloading.profile.server_args
    assert releases.HMA_FLAG in simple.profile.server_args


def test_the_recurrent_families_are_those_whose_committed_reports_have_a_mamba_group() -> None:
    seen: dict[str, bool] = {}
    for run in ("kv-proof-2026-12-02d", "kv-proof-2026-12-02c"):
        for path in report_paths(RESULTS / run):
            r = read_report(path)
            if r.layout:
                seen[r.family] = seen.get(r.family, False) or any(g.recurrent for g in r.layout)
    assert {f for f, recurrent in seen.items() if recurrent} == releases.RECURRENT_FAMILIES & set(seen)
    assert len(seen) >= 6


def test_the_align_profiles_serve_their_family_in_align_mode() -> None:
    for family in ALIGN_FAMILIES:
        p = PROFILES[f"tiny-{family}-align"]
        args = list(p.server_args)
        assert p.family == family and args[args.index("--mamba-cache-mode") + 1] == "align"
        assert "--mamba-cache-mode" not in PROFILES[f"tiny-{family}"].server_args


def _with_mode(mode: str, version: str):  # type: ignore[no-untyped-def]
    report = read_report(NEMOTRON_ALL)
    layout = [g.model_copy(update={"cache_mode": mode}) if g.recurrent else g for g in report.layout]
    return rejudge(report.model_copy(update={"layout": layout, "vllm_version": version}))


def test_one_fingerprint_names_51094_in_all_mode_and_pr44599_in_align_mode_up_to_0_23() -> None:
    committed = read_report(NEMOTRON_ALL)
    assert [d.id for d in committed.defects] == ["vllm#51094"]
    assert [d.id for d in rejudge(committed).defects] == ["vllm#51094"]
    align = _with_mode("align", "0.23.0")
    assert [d.id for d in align.defects] == ["vllm-pr44599"] and align.defects[0].probes
    # Fixed in 0.24.0: the same shape there is no known defect, so nothing names it.
    assert _with_mode("align", "0.24.0").defects == []
    # A name never passes a failure: every one of them stays failed.
    for r in (committed, align, _with_mode("align", "0.24.0")):
        assert r.status == "failed"
    job_verdicts = [verdict(None, r.model_dump(), r.status) for r in (align, _with_mode("align", "0.24.0"))]  # type: ignore[arg-type]
    assert job_verdicts == ["known_defect", "failed"]


def test_run_matrix_lists_what_a_release_cannot_run_instead_of_running_it() -> None:
    argv = ["--out", "/tmp/x", "--vllm-version", "0.20.2", "--no-mutations", "--dry-run"]
    out = subprocess.run(
        [sys.executable, "-m", "gpu_tests.runner.run_matrix", *argv, "--families", "llama,qwen3-next"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    ).stdout
    planned = [line.split()[0] for line in out.splitlines() if " expected " in line]
    skipped = {line.split()[1].rstrip(":") for line in out.splitlines() if line.startswith("skip ")}
    assert skipped == {
        "tiny-llama-offloading-rust",
        "tiny-llama-simple-rust",
        "tiny-qwen3-next-offloading-python",
        "tiny-qwen3-next-offloading-rust",
        "tiny-qwen3-next-simple-rust",
    }
    assert sorted(planned) == [
        "tiny-llama-offloading-python",
        "tiny-llama-simple-python",
        "tiny-qwen3-next-simple-python",
    ]
    assert all("--vllm-release 0.20.2" in line for line in out.splitlines() if " expected " in line)


def _edited(path: Path, version: str, **update: object):  # type: ignore[no-untyped-def]
    return rejudge(read_report(path).model_copy(update={"vllm_version": version, **update}))


def test_a_tier_that_serves_after_a_full_reset_fails_reload_proven_and_is_named_only_on_0_20_2() -> None:
    path = RESULTS / "kv-proof-2026-12-02d" / "tiny-llama-offloading-python.json.xz"
    report = read_report(path)
    first = report.iterations[0]
    cold = first.windows["cold"].model_copy(update={"external_prefix_cache_hits": 64.0})
    its = [first.model_copy(update={"windows": {**first.windows, "cold": cold}}), *report.iterations[1:]]
    for version, named in (("0.20.2", ["vllm-pr41956"]), ("0.22.0", [])):
        judged = _edited(path, version, iterations=its)
        assert judged.status == "failed"
        assert not judged.iterations[0].assertion("reload_proven").passed
        assert [d.id for d in judged.defects] == named
    assert _edited(path, "0.20.2").defects == []  # the committed clean run: nothing to name


@pytest.mark.parametrize(
    ("case", "where", "text", "named_on", "not_on"),
    [
        (
            "tiny-llama-simple-python",
            "report",
            "reset_prefix_cache failed: SimpleCPUOffloadConnector does not support reset_cache()",
            "0.23.0",
            "0.24.0",
        ),
        (
            "tiny-qwen3-next-offloading-python",
            "iteration",
            "EngineDeadError: AssertionError: External KV connector is not verified yet",
            "0.22.0",
            "0.23.0",
        ),
    ],
)
def test_an_error_a_release_s_bug_explains_is_named_and_stays_an_error(
    case: str, where: str, text: str, named_on: str, not_on: str
) -> None:
    path = RESULTS / "kv-proof-2026-12-02d" / f"{case}.json.xz"
    report = read_report(path)
    if where == "report":
        update: dict[str, object] = {"error": text}
    else:
        update = {
            "iterations": [report.iterations[0].model_copy(update={"error": text}), *report.iterations[1:]]
        }
    named = _edited(path, named_on, **update)
    assert named.status == "error" and len(named.defects) == 1
    assert text.split(": ")[-1] in named.defects[0].evidence[0]
    assert _edited(path, not_on, **update).defects == []
