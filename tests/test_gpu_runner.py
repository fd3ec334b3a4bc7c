"""gpu_tests/runner/run_matrix.py on the CPU: the plan, parallelism, the dummy-weights fallback, the deadline.

The launcher is replaced by small Python processes that write the report a case would write.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_tests.runner.run_matrix import Job, default_launcher, plan, run_jobs, summarize
from gpu_tests.runner.tables import matrix_table
from vllm_devclient.testing.processes import spawn

FAKE_CASE = """
import json, os, sys, time
out, case_id, status, sleep, dummy = sys.argv[1:6]
running = os.path.join(out, "running")
os.makedirs(running, exist_ok=True)
marker = os.path.join(running, case_id + str(os.getpid()))
open(marker, "w").close()
print("peak", len(os.listdir(running)), flush=True)
time.sleep(float(sleep))
os.unlink(marker)
if status == "loadfail" and dummy == "0":
    error = "ServerStartError: vllm serve exited with code 1 before it was ready"
    report = {"status": "error", "error": error}
    os.makedirs(os.path.join(out, "reports"), exist_ok=True)
    with open(os.path.join(out, "reports", case_id + ".server.log"), "w") as fh:
        fh.write("Traceback ... in load_weights\\nKeyError: 'model.layers.0.layer_scalar'\\n")
else:
    report = {"status": "passed" if status == "loadfail" else status, "timings": {"server_startup_s": 1.0}}
with open(os.path.join(out, "reports", case_id + ".json"), "w") as fh:
    json.dump(report, fh)
"""


def _launcher(tmp: Path, outcome: dict[str, tuple[str, float]]):  # type: ignore[no-untyped-def]
    script = tmp / "fake_case.py"
    script.write_text(FAKE_CASE)
    (tmp / "reports").mkdir(exist_ok=True)

    def launch(job: Job, log: Path) -> subprocess.Popen[bytes]:
        status, sleep = outcome[job.case_id]
        with log.open("ab") as fh:
            argv = [
                sys.executable,
                str(script),
                str(tmp),
                job.case_id,
                status,
                str(sleep),
                str(int(job.dummy)),
            ]
            return spawn(argv, stdout=fh)

    return launch


def test_plan_has_every_family_case_and_one_mutation_each(tmp_path: Path) -> None:
    jobs = plan(["llama", "nemotron-h"], report_dir=tmp_path, server_args="--x 1", study=["gemma3"])
    ids = [j.case_id for j in jobs]
    assert ids[:2] == [
        "tiny-gemma3-offloading-python-c8",
        "tiny-gemma3-offloading-python-c8-bi",
    ]  # longest first
    assert ids[2].startswith("tiny-nemotron-h")  # then slow (hybrid) families
    for fam in ("llama", "nemotron-h"):
        assert {f"tiny-{fam}-{c}-{f}" for c in ("offloading", "simple") for f in ("python", "rust")} <= set(
            ids
        )
        assert f"tiny-{fam}-offloading-python-mutation" in ids
    mutation = next(j for j in jobs if j.case_id == "tiny-llama-offloading-python-mutation")
    assert "CorruptingCPUOffloadingSpec" in " ".join(mutation.args)
    study = [j for j in jobs if j.kind == "study"]
    assert [j.case_id for j in study] == [
        "tiny-gemma3-offloading-python-c8",
        "tiny-gemma3-offloading-python-c8-bi",
        "tiny-gemma3-offloading-python-c8-mutation",
        "tiny-gemma3-offloading-python-c8-bi-mutation",
    ]
    assert ids[-2:] == [j.case_id for j in study[2:]]  # mutations of the study last
    bi = " ".join(study[1].args)
    assert "VLLM_BATCH_INVARIANT=1" in bi and "--concurrency 8" in bi and "--agreement 1,8,64" in bi
    assert "--num-questions 200" in bi
    with pytest.raises(SystemExit):
        plan(["no-such-family"], report_dir=tmp_path)


def _jobs(n: int) -> list[Job]:
    return [Job(f"case{i}", f"fam{i % 2}", "matrix", (), timeout_s=30) for i in range(n)]


def test_parallelism_is_bounded_and_reports_are_read(tmp_path: Path) -> None:
    jobs = _jobs(5)
    outcome = {j.case_id: ("passed" if i != 3 else "failed", 0.6) for i, j in enumerate(jobs)}
    results = run_jobs(
        jobs,
        out=tmp_path,
        parallel=2,
        deadline_s=60,
        launcher=_launcher(tmp_path, outcome),
        stagger_s=0,
        poll_s=0.05,
        expected_case_s=1,
    )
    assert [r.status for r in results] == ["passed", "passed", "passed", "failed", "passed"]
    peaks = [
        int(line.split()[1]) for p in (tmp_path / "logs").glob("*.log") for line in p.read_text().splitlines()
    ]
    assert max(peaks) <= 2 and len(peaks) == 5
    summary = summarize(results, 3.0)
    assert summary["counts"] == {"passed": 4, "failed": 1}
    assert summary["cases"][0]["startup_s"] == 1.0


def test_a_family_whose_weights_do_not_load_falls_back_to_dummy(tmp_path: Path) -> None:
    jobs = _jobs(4)
    outcome = {j.case_id: ("loadfail" if j.family == "fam0" else "passed", 0.2) for j in jobs}
    results = run_jobs(
        jobs,
        out=tmp_path,
        parallel=1,
        deadline_s=60,
        launcher=_launcher(tmp_path, outcome),
        stagger_s=0,
        poll_s=0.05,
        expected_case_s=1,
    )
    by_id = {r.job.case_id: r for r in results}
    assert by_id["case0"].attempts == ["safetensors: error", "dummy: passed"]
    assert by_id["case0"].status == "passed" and "--load-format dummy" in " ".join(by_id["case0"].job.args)
    # The family's later case starts with dummy weights right away; the other family is untouched.
    assert by_id["case2"].attempts == ["dummy: passed"]
    assert by_id["case1"].attempts == ["safetensors: passed"]
    rows = {row["case_id"]: row for row in summarize(results, 1.0)["cases"]}
    assert rows["case0"]["weights"] == "dummy" and rows["case1"]["weights"] == "safetensors"


def test_the_deadline_skips_late_cases_and_stops_running_ones(tmp_path: Path) -> None:
    jobs = _jobs(3)
    outcome = {"case0": ("passed", 30.0), "case1": ("passed", 0.1), "case2": ("passed", 0.1)}
    results = run_jobs(
        jobs,
        out=tmp_path,
        parallel=1,
        deadline_s=2.0,
        expected_case_s=1.0,
        launcher=_launcher(tmp_path, outcome),
        stagger_s=0,
        poll_s=0.05,
    )
    statuses = {r.job.case_id: r.status for r in results}
    assert statuses == {"case0": "killed", "case1": "not_run", "case2": "not_run"}
    assert json.loads(json.dumps(summarize(results, 2.0)))["counts"] == {"killed": 1, "not_run": 2}


def test_a_several_gpu_stand_in_is_planned_with_its_gpus(tmp_path: Path) -> None:
    jobs = plan(["llama", "deepseek-v2-tp2-ep"], report_dir=tmp_path)
    by_id = {j.case_id: j for j in jobs}
    tp2 = by_id["tiny-deepseek-v2-tp2-ep-offloading-python-mutation"]
    assert tp2.gpus == 2 and tp2.family == "deepseek-v2-tp2-ep"
    assert "--profile tiny-deepseek-v2-tp2-ep" in " ".join(tp2.args)
    assert {j.gpus for j in jobs if j.case_id.startswith("tiny-llama")} == {1}


def test_one_gpu_cases_take_the_gpus_in_turn(tmp_path: Path) -> None:
    show = "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES', 'all'))"
    launch = default_launcher({"PATH": "/usr/bin:/bin"}, 2, command=(sys.executable, "-c", show))
    jobs = [
        Job("one-a", "f", "matrix", (), 30),
        Job("two", "f", "matrix", (), 30, gpus=2),
        Job("one-b", "f", "matrix", (), 30),
        Job("one-c", "f", "matrix", (), 30),
    ]
    for job in jobs:
        launch(job, tmp_path / f"{job.case_id}.log").wait(timeout=30)
    seen = {j.case_id: (tmp_path / f"{j.case_id}.log").read_text().strip() for j in jobs}
    assert seen == {"one-a": "0", "two": "all", "one-b": "1", "one-c": "0"}
    single = default_launcher({"PATH": "/usr/bin:/bin"}, 1, command=(sys.executable, "-c", show))
    single(jobs[0], tmp_path / "single.log").wait(timeout=30)
    assert (tmp_path / "single.log").read_text().strip() == "all"  # one GPU: nothing to choose


def _report(case_id: str, profile: str, status: str, matches: int, gpus_used: int) -> dict[str, object]:
    return {
        "case_id": case_id,
        "profile": profile,
        "family": "deepseek-v2",
        "architectures": ["DeepseekV2ForCausalLM"],
        "connector": "OffloadingConnector",
        "frontend": "python",
        "status": status,
        "gpus_used": gpus_used,
        "reload_vs_cold": {"matches": matches, "total": 16},
        "noise_floor": {"matches": 16, "total": 16},
        "assertions": [{"name": "reload_proven", "passed": True}],
        "timings": {"case_s": 10.0},
    }


def test_the_table_pairs_each_case_with_its_own_profiles_mutation() -> None:
    reports = [
        _report("tiny-deepseek-v2-offloading-python", "tiny-deepseek-v2", "passed", 16, 1),
        _report("tiny-deepseek-v2-offloading-python-mutation", "tiny-deepseek-v2", "failed", 0, 1),
        _report("tiny-deepseek-v2-tp2-ep-offloading-python", "tiny-deepseek-v2-tp2-ep", "passed", 16, 2),
        _report(
            "tiny-deepseek-v2-tp2-ep-offloading-python-mutation", "tiny-deepseek-v2-tp2-ep", "failed", 3, 2
        ),
    ]
    rows = matrix_table(reports).splitlines()[2:]
    assert len(rows) == 2
    one, two = (
        next(r for r in rows if r.startswith(f"| {name} (")) for name in ("deepseek-v2", "deepseek-v2 tp2-ep")
    )
    assert "| 1 |" in one and "0/16 (failed), True" in one
    assert "| 2 |" in two and "3/16 (failed), True" in two
