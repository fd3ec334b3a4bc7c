"""gpu_tests/runner on the CPU: the measured plan and its split over device calls, parallelism, the
dummy-weights fallback, the deadline, the verdicts, the committed results and the README's tables.

The launcher is replaced by small Python processes that write the report a case would write.
"""

from __future__ import annotations

import json
import lzma
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpu_tests.offload_check.judge import rejudge
from gpu_tests.runner import collect, tables
from gpu_tests.runner.collect import device_verdicts, read_report, report_paths, run_verdicts
from gpu_tests.runner.jobs import (
    INSTRUMENTS,
    Cost,
    Job,
    compiled_families,
    expected_costs,
    make_case_id,
    makespan,
    mark_compiled,
    plan,
    recorded_boundary_sizes,
    split_parts,
    uninstrumented,
    unpoisoned,
    warm,
)
from gpu_tests.runner.launch import default_launcher, run_jobs, summarize, verdict
from vllm_devclient.testing import spawn

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


COSTS = {
    "llama": Cost(60.0, 8.0, "t", 70.0),
    "nemotron-h": Cost(60.0, 10.0, "t", 220.0),  # its first server compiles its kernels
    "gemma3": Cost(70.0, 19.0, "t"),
}


def test_plan_has_every_case_and_the_catalogue_per_family(tmp_path: Path) -> None:
    jobs = plan(["llama", "nemotron-h"], report_dir=tmp_path, server_args="--x 1", costs=COSTS)
    ids = [j.case_id for j in jobs]
    for fam in ("llama", "nemotron-h"):
        assert {f"tiny-{fam}-{c}-{f}" for c in ("offloading", "simple") for f in ("python", "rust")} <= set(
            ids
        )
        assert {f"tiny-{fam}-{c}-python-mutations" for c in ("offloading", "simple")} <= set(ids)
    assert len(ids) == 12 and ids[0].startswith("tiny-nemotron-h")  # the most expensive first
    assert [j.expected_s for j in jobs] == sorted((j.expected_s for j in jobs), reverse=True)
    mutations = next(j for j in jobs if j.case_id == "tiny-llama-offloading-python-mutations")
    args = " ".join(mutations.args)
    assert "--mutations all" in args and "--iterations 0" in args
    assert "--instruments gpu_tests.kv_proof.instruments:INSTRUMENTS" in args
    case = next(j for j in jobs if j.case_id == "tiny-llama-simple-rust")
    assert "--iterations 3" in " ".join(case.args) and case.timeout_s == 2 * case.expected_s
    # clean passes: 3 x (cold, warm, reload) + the first one's two references + half a run for each later one
    assert case.expected_s == pytest.approx(70.0 + 8.0 * (9 + 2 + 1) + 4.0 * 3)  # planned cold
    with pytest.raises(SystemExit):
        plan(["no-such-family"], report_dir=tmp_path, costs=COSTS)


def test_costs_are_read_from_the_committed_reports(tmp_path: Path) -> None:
    def write(name: str, report: dict[str, object]) -> None:
        (tmp_path / name).write_text(json.dumps(report))

    base = {
        "family": "llama",
        "profile": "tiny-llama",
        "num_questions": 16,
        "concurrency": 1,
        "status": "passed",
    }
    write(
        "tiny-llama-a.json", {**base, "timings": {"server_startup_s": 50, "cold_run_s": 4, "warm_run_s": 4}}
    )
    write(
        "tiny-llama-b.json",
        {
            **base,
            "format": 2,
            "timings": {"server_startup_s": 70},
            "iterations": [
                {
                    "label": "clean-1",
                    "mutation": None,
                    "runs": {"cold": {"latency_s": 10}, "cold2": {"latency_s": 10}},
                },
                {"label": "mutation-x", "mutation": "x", "runs": {"cold": {"latency_s": 1}}},
            ],
        },
    )
    write("tiny-llama-study.json", {**base, "num_questions": 200, "timings": {"server_startup_s": 900}})
    # The runs since the KV proof commit their reports compressed; their catalogue iterations are timed.
    catalogue = {
        **base,
        "format": 2,
        "timings": {"server_startup_s": 60, "mutation_x_s": 12, "mutation_y_s": 20},
    }
    (tmp_path / "tiny-llama-c.json.xz").write_bytes(lzma.compress(json.dumps(catalogue).encode()))
    cost = expected_costs(tmp_path, probe_scale=1.25)["llama"]
    # medians of 50, 60, 70 and of 5, 5 (format 1 scaled), 10, 10; the first server's (slowest) start: 70
    assert cost.startup_s == 60 and cost.run_s == 7.5 and cost.cold_s == 70
    assert "3 startups" in cost.source and cost.mutation_s == 16
    # the fastest start found its kernels compiled: what a compiled family saves is 70 - 50
    assert cost.warm_startup_s == 50 and cost.compile_s == 20
    # A catalogue of two defects: the cold start, no clean pass, the two measured iterations.
    assert cost.case_s(0, 2) == 70 + 2 * 16


def test_the_split_warms_the_compile_cache_in_the_first_call(tmp_path: Path) -> None:
    jobs = plan(["llama", "nemotron-h", "gemma3"], report_dir=tmp_path, costs=COSTS)
    first, last = split_parts(jobs, 2, parallel=4, first_offset_s=80.0, costs=COSTS)
    heavy_first = [j for j in first if j.family == "nemotron-h"]
    heavy_last = [j for j in last if j.family == "nemotron-h"]
    assert [j.kind for j in heavy_first] == ["mutations", "mutations"] and len(heavy_last) == 4
    planned = {j.case_id: j for j in jobs}
    assert all(j.expected_s == planned[j.case_id].expected_s - (220.0 - 60.0) for j in heavy_last)
    assert sorted(j.case_id for j in first + last) == sorted(planned)
    assert {j.family for j in first} & {j.family for j in last} == {"nemotron-h"}  # others stay whole
    assert makespan([Job("a", "f", "matrix", (), 1, 10.0)] * 3, 2, stagger_s=0) == 20.0
    (only,) = split_parts(jobs, 1, parallel=4, costs=COSTS)
    assert len(only) == len(jobs)  # one call: nothing is moved


def _jobs(n: int, expected_s: float = 1.0) -> list[Job]:
    return [
        Job(f"case{i}", f"fam{i % 2}", "matrix", (), timeout_s=30, expected_s=expected_s) for i in range(n)
    ]


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
    )
    assert [r.status for r in results] == ["passed", "passed", "passed", "failed", "passed"]
    peaks = [
        int(line.split()[1]) for p in (tmp_path / "logs").glob("*.log") for line in p.read_text().splitlines()
    ]
    assert max(peaks) <= 2 and len(peaks) == 5
    summary = summarize(results, 3.0)
    assert summary["counts"] == {"passed": 4, "failed": 1}  # no report of its own: a plain failure
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
    )
    by_id = {r.job.case_id: r for r in results}
    assert by_id["case0"].attempts == ["safetensors: error", "dummy: passed"]
    assert by_id["case0"].status == "passed" and "--load-format dummy" in " ".join(by_id["case0"].job.args)
    # The family's later case starts with dummy weights right away; the other family is untouched.
    assert by_id["case2"].attempts == ["dummy: passed"]
    assert by_id["case1"].attempts == ["safetensors: passed"]
    rows = {row["case_id"]: row for row in summarize(results, 1.0)["cases"]}
    assert rows["case0"]["weights"] == "dummy" and rows["case1"]["weights"] == "safetensors"


def test_the_deadline_starts_only_what_fits_and_stops_what_runs(tmp_path: Path) -> None:
    jobs = [Job("case0", "f", "matrix", (), 30, 1.5), Job("case1", "f", "matrix", (), 30, 5.0)]
    jobs.append(Job("case2", "f", "matrix", (), 30, 0.5))
    outcome = {"case0": ("passed", 30.0), "case1": ("passed", 0.1), "case2": ("passed", 0.1)}
    results = run_jobs(
        jobs,
        out=tmp_path,
        parallel=2,
        deadline_s=2.0,
        launcher=_launcher(tmp_path, outcome),
        stagger_s=0,
        poll_s=0.05,
    )
    statuses = {r.job.case_id: r.status for r in results}
    # case1 would end after the deadline, so it never starts; case2 fits beside case0 and passes.
    assert statuses == {"case0": "killed", "case1": "not_run", "case2": "passed"}
    assert json.loads(json.dumps(summarize(results, 2.0)))["counts"] == {
        "killed": 1,
        "not_run": 1,
        "passed": 1,
    }


def test_a_family_compiled_by_an_earlier_call_starts_warm_and_fits_where_a_cold_one_does_not(
    tmp_path: Path,
) -> None:
    """A case whose cold estimate (its family's kernels compiling) passes a call's deadline starts in a later
    call on the same machine: the runner marks in vLLM's cache root each family whose server ran, and
    takes the compile out of those families' estimates."""
    jobs = plan(["nemotron-h", "llama"], costs=COSTS, report_dir=tmp_path / "r")
    cold = next(j for j in jobs if j.case_id == "tiny-nemotron-h-offloading-python")
    assert cold.compile_s == 160.0  # a cold startup of 220 s against a warm one of 60 s
    root = tmp_path / "vllm-cache"
    assert compiled_families(root) == set() and warm(jobs, set()) == jobs
    mark_compiled(root, ["nemotron-h"])
    mark_compiled(root, ["nemotron-h"])  # a family is marked once
    assert compiled_families(root) == {"nemotron-h"}
    assert (root / "devclient-compiled-families").read_text() == "nemotron-h\n"
    warmed = {j.case_id: j for j in warm(jobs, compiled_families(root))}
    assert warmed[cold.case_id].expected_s == cold.expected_s - 160.0
    assert warmed[cold.case_id].timeout_s == cold.timeout_s  # the case's own limit stays
    llama = next(j for j in jobs if j.family == "llama")
    assert warmed[llama.case_id] == llama
    outcome = {cold.case_id: ("passed", 0.1)}
    deadline = cold.expected_s - 1.0
    for given, started in (([cold], "not_run"), ([warmed[cold.case_id]], "passed")):
        scaled = [replace(j, expected_s=j.expected_s / 100) for j in given]  # seconds as centiseconds
        (result,) = run_jobs(
            scaled,
            out=tmp_path,
            parallel=1,
            deadline_s=deadline / 100,
            launcher=_launcher(tmp_path, outcome),
            stagger_s=0,
            poll_s=0.05,
        )
        assert result.status == started


def test_a_control_runs_the_same_case_without_the_instruments_under_its_own_id(tmp_path: Path) -> None:
    """``--uninstrumented``: the case's control has no ``--instruments``, the id the check gives a case
    labelled ``uninstrumented`` (a catalogue's label kept), so its report never stands for the case's, and
    the boundary sizes of the case's newest committed report on its release: the same prompts."""
    results = tmp_path / "results"
    for run, version, created, boundary in (
        ("a", "0.20.2", "2026-12-04T10:00", 16),
        ("b", "0.20.2", "2026-12-04T12:00", 32),  # the newest on 0.20.2
        ("c", "0.22.0", "2026-12-04T13:00", 64),
    ):
        report = {
            "vllm_version": version,
            "created_at": created,
            "probes": [{"kind": "gsm8k", "boundary": None}, {"kind": "boundary", "boundary": boundary}],
        }
        (results / run).mkdir(parents=True)
        (results / run / "tiny-llama-offloading-python.json.xz").write_bytes(
            lzma.compress(json.dumps(report).encode())
        )
    assert recorded_boundary_sizes("tiny-llama-offloading-python", "0.20.2", results) == [32]
    assert recorded_boundary_sizes("tiny-llama-offloading-python", "0.23.0", results) == []
    jobs = {j.case_id: j for j in plan(["llama"], costs=COSTS, report_dir=tmp_path / "r")}
    clean = jobs["tiny-llama-offloading-python"]
    control = uninstrumented(clean, [32])
    assert "--instruments" in clean.args and "--instruments" not in control.args
    assert control.case_id == make_case_id("tiny-llama", "offloading", "python", "uninstrumented")
    assert control.args[-4:] == ("--label", "uninstrumented", "--boundary-sizes", "32")
    assert list(control.args[:-4]) == [a for a in clean.args if a not in ("--instruments", INSTRUMENTS)]
    catalogue = jobs["tiny-llama-offloading-python-mutations"]
    labelled = uninstrumented(catalogue)
    assert labelled.case_id == make_case_id("tiny-llama", "offloading", "python", "mutations-uninstrumented")
    assert labelled.args.count("--label") == 1 and "--boundary-sizes" not in labelled.args
    with pytest.raises(ValueError, match="no --instruments"):
        uninstrumented(control)
    # every instrument but the poison: the recorder reads the layout, so no sizes are given
    quiet = unpoisoned(clean)
    assert quiet.case_id == make_case_id("tiny-llama", "offloading", "python", "unpoisoned")
    assert quiet.args[quiet.args.index("--instruments") + 1] == "gpu_tests.kv_proof.instruments:UNPOISONED"
    assert len(quiet.args) == len(clean.args) + 2 and "--boundary-sizes" not in quiet.args


def test_the_unpoisoned_instruments_are_the_instruments_less_the_poison() -> None:
    from gpu_tests.kv_proof.instruments import INSTRUMENTS as FULL
    from gpu_tests.kv_proof.instruments import UNPOISONED

    assert FULL.poison_rpc and not UNPOISONED.poison_rpc
    assert UNPOISONED.reference_digests and UNPOISONED.server_args == FULL.server_args
    assert UNPOISONED.mutations == FULL.mutations


def test_run_matrix_runs_the_controls_of_the_cases_it_selects(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gpu_tests.runner import jobs, run_matrix
    from gpu_tests.runner.run_matrix import main

    argv = ["--out", "/tmp/unused", "--families", "llama", "--dry-run", "--uninstrumented"]
    assert main([*argv, "--vllm-version", "0.26.0", "--only", "tiny-llama-simple-python$"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("tiny-llama")]
    assert line.startswith("tiny-llama-simple-python-uninstrumented expected")
    assert "--instruments" not in line and "--label uninstrumented --boundary-sizes 16" in line
    assert (
        main([*argv[:-1], "--unpoisoned", "--vllm-version", "0.26.0", "--only", "tiny-llama-simple-python$"])
        == 0
    )
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("tiny-llama")]
    assert line.startswith("tiny-llama-simple-python-unpoisoned expected") and ":UNPOISONED" in line
    # no committed report of the case on that release: nothing to replay, and the runner says what to do
    monkeypatch.setattr(
        run_matrix,
        "recorded_boundary_sizes",
        lambda case, version: jobs.recorded_boundary_sizes(case, version, tmp_path),
    )
    with pytest.raises(SystemExit, match="run the instrumented case first"):
        main([*argv, "--vllm-version", "0.26.0", "--only", "tiny-llama-simple-python$"])


def test_verdicts_tell_a_named_defect_and_an_unsupported_case_from_a_failure() -> None:
    job = Job("c", "mamba", "matrix", (), 1)
    defect = {
        "defects": [{"id": "vllm#51094"}],
        "assertions": [],
        "iterations": [
            {"mutation": None, "assertions": [{"name": "recurrent_state_consistent", "passed": False}]}
        ],
    }
    assert verdict(job, defect, "failed") == "known_defect"
    other = {
        **defect,
        "iterations": [{"mutation": None, "assertions": [{"name": "kv_bytes_identical", "passed": False}]}],
    }
    assert verdict(job, other, "failed") == "failed"
    assert (
        verdict(job, {"error": "ServerStartError"}, "error", "AssertionError: assert 0 <= self.fa_gidx")
        == "unsupported"
    )
    assert verdict(job, {"error": "ServerStartError"}, "error") == "error"
    assert verdict(job, None, "killed") == "killed"


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


RESULTS = Path(__file__).resolve().parents[1] / "results"


# How a report begins (the model's first two fields, as write_report dumps it): collection reads no further.
REPORT_HEAD = re.compile(rb'\{\s*"format"\s*:\s*2\s*,\s*"case_id"\s*:')


def _head(path: Path) -> bytes:
    with lzma.open(path) if path.name.endswith(".xz") else path.open("rb") as f:
        return f.read(64)


def _committed_reports() -> list[Path]:
    """Every committed offload-check report under ``results/``: each folder with a ``run.json`` (the history's
    and the fault's nested calls included), another tool's run (``rl-*``) left out."""
    return [
        p
        for meta in sorted(RESULTS.rglob("run.json"))
        for p in report_paths(meta.parent)
        if REPORT_HEAD.match(_head(p))
    ]


COMMITTED = _committed_reports()


def test_every_results_folder_s_reports_are_covered() -> None:
    folders = {p.parent.relative_to(RESULTS) for p in COMMITTED}
    tops = {f.parts[0] for f in folders}
    assert {t.split("-")[0] for t in tops} >= {"kv", "real", "history", "fault"}
    runs = {p.parent.relative_to(RESULTS) for p in RESULTS.rglob("run.json")}
    assert runs - folders == {Path("rl-2026-12-01")}  # another tool's run: no offload-check report
    assert len(COMMITTED) >= 279


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.parent.relative_to(RESULTS) / p.name))
def test_a_committed_report_holds_the_verdict_its_run_records(path: Path) -> None:
    """The report's status is the one the device printed for its case (the runner's summary line in
    ``run.json``, which no report wrote), or one a later judge recorded moving to a failure."""
    report = read_report(path)
    meta = json.loads((path.parent / "run.json").read_text())
    device = collect.summary_verdicts(meta)
    assert report.case_id in device, "a committed report its device's summary never named"
    moved = collect.rejudged_statuses(meta)
    if report.case_id in moved:
        assert device[report.case_id] == "passed" and report.status in ("failed", "error")
    else:
        assert report.status == device[report.case_id], "a committed verdict differs from its device's"
    assert run_verdicts(meta).get(report.case_id, report.status) == report.status
    if report.status in ("failed", "error"):
        # Never a pass; an engine's death the device's judge called an error reads failed today.
        assert rejudge(report).status in ("failed", "error")


def test_the_readme_tables_are_the_committed_reports() -> None:
    text = tables.README.read_text()
    assert tables.render(text) == text, "run python -m gpu_tests.runner.tables"
    for name in tables.TABLES:
        assert f"<!-- figure:{name} -->" in text
    with pytest.raises(KeyError):
        tables.render("<!-- figure:gpu-nothing -->\nx\n<!-- /figure -->")


def test_rejudge_rewrites_only_the_reports_a_judge_change_moves_and_never_passes_a_failure(
    tmp_path: Path,
) -> None:
    """``collect --rejudge``: a report whose stored verdicts are not today's judge's is rewritten in its own
    format (xz stays xz), a committed failure stays a failure; one that agrees, and another tool's file, are
    left byte for byte."""
    from gpu_tests.runner.collect import rejudge_run, write_report

    from .offload_fake import FakeServer
    from .test_offload_check import FULL, _check

    fresh = _check(FakeServer(layout=FULL), FULL, iterations=1)
    current = rejudge(fresh.model_copy(update={"extra": {"reference_digests": True}, "frontend": "python"}))
    assert current.status == "passed"
    stale = tmp_path / "stale.json.xz"
    write_report(stale, current.model_copy(update={"status": "not_proven", "passed": False}))
    failure = tmp_path / "failure.json"
    write_report(
        failure, current.model_copy(update={"case_id": "failure", "status": "failed", "passed": False})
    )
    agreeing = tmp_path / "agreeing.json"
    write_report(agreeing, current.model_copy(update={"case_id": "agreeing"}))
    other = tmp_path / "call.json"
    other.write_text('{"status": 0}\n')
    device = {current.case_id: "not_proven", "failure": "failed", "agreeing": "passed"}
    (tmp_path / "run.json").write_text(json.dumps({"name": "r", "verdicts": device}))
    before = {p.name: p.read_bytes() for p in (agreeing, other)}
    assert sorted(rejudge_run(tmp_path, "abc123")) == ["failure.json", "stale.json.xz"]
    assert read_report(stale) == current
    kept = read_report(failure)
    assert kept.status == "failed" and kept.assertions[-1].name == "device_verdict_kept"
    assert {p.name: p.read_bytes() for p in (agreeing, other)} == before
    # run.json keeps the device's verdicts and records the moved one, with the judge that moved it.
    meta = json.loads((tmp_path / "run.json").read_text())
    assert device_verdicts(meta) == device
    assert run_verdicts(meta) == {**device, current.case_id: "passed"}
    assert meta["rejudged"] == [
        {
            "judge_commit": "abc123",
            "verdicts": {current.case_id: "passed"},
            "reports": ["failure.json", "stale.json.xz"],
        }
    ]
    # Judged again with nothing moved: the record stays as it is.
    assert rejudge_run(tmp_path, "def456") == []
    assert json.loads((tmp_path / "run.json").read_text()) == meta


def test_only_picks_cases_by_part_of_their_id_and_a_dollar_ends_it(tmp_path: Path) -> None:
    from gpu_tests.runner.run_matrix import _only

    jobs = plan(["llama"], report_dir=tmp_path, costs=COSTS)
    ids = {j.case_id for j in _only(jobs, "llama-simple-python")}
    assert ids == {"tiny-llama-simple-python", "tiny-llama-simple-python-mutations"}
    assert {j.case_id for j in _only(jobs, "llama-simple-python$,offloading-python-mutations")} == {
        "tiny-llama-simple-python",
        "tiny-llama-offloading-python-mutations",
    }
    assert len(_only(jobs, "")) == len(jobs)
