"""Whether a cell of issue 35's grade stands (issue 53), read from its report and the checkout alone.

A cell stands when three things hold:

- **its judge is today's**: the judge code (``JUDGE_PATHS``: the check and the engine-side instruments) at
  the commit the report names (``judge_commit``, the one its run's ``run.json`` records) is the code of this
  checkout (``git diff`` between them is empty). A report from an older judge is shown with its judge and
  does not stand until its case runs again;
- **its path was exercised**: the scenario reached the code the bug is in. A reset under load the server
  refused every time (``success=false``, an HTTP error) never reached the stale transfer jobs of vllm#48102;
- **a catch that rests on an engine death has its control**: a control of the same case without the
  engine-side instruments (``run_matrix.py --uninstrumented``, committed anywhere under ``results/``) died
  with the same error. Without one, the death may be the instruments' (the project's recording scheduler
  runs in the engine), and the cell says so.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpu_tests.history.bugs import Scenario
from gpu_tests.offload_check.report import OffloadCheckReport, ResetResult

__all__ = ["JUDGE_PATHS", "Standing", "engine_error", "judge_is_today", "path_reached", "standing"]

ROOT = Path(__file__).resolve().parents[2]
JUDGE_PATHS = ("gpu_tests/offload_check", "gpu_tests/kv_proof")
DIED = "died"


@functools.cache
def judge_is_today(commit: str, root: Path = ROOT) -> bool:
    """Whether the judge code at ``commit`` is this checkout's (its working tree, so a generated table reads
    the same before and after the commit that holds it). An unknown commit is not today's."""
    if not commit or commit == "unknown":
        return False
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "diff", "--quiet", commit, "--", *JUDGE_PATHS],
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def engine_error(report: OffloadCheckReport) -> str:
    """The first error line of the engine's death (empty when it did not die, ``died`` when no line says)."""
    if not report.engine_fault:
        return ""
    lines = [x.split("Error: ", 1)[1] for x in report.engine_fault.splitlines() if "Error: " in x]
    return lines[0] if lines else DIED


def _refused(reset: ResetResult) -> bool:
    status = reset.http_status
    failed = status is not None and status >= 400
    return reset.outcome == "refused" or failed or reset.message.startswith("success=false")


def path_reached(report: OffloadCheckReport, scenario: Scenario) -> str:
    """Empty when the scenario reached the bug's path in ``report``; else why not."""
    if "--reset-under-load" not in scenario.check_args:
        return ""
    resets = [r for it in report.clean() for r in it.load_resets]
    if resets and not all(_refused(r) for r in resets):
        return ""
    said = resets[0].message or f"HTTP {resets[0].http_status}" if resets else "none was fired"
    return f"path not exercised: the server refused all {len(resets)} resets under load ({said})"


def _death_control(report: OffloadCheckReport, controls: Sequence[OffloadCheckReport]) -> tuple[str, bool]:
    """For a case whose engine died: what its uninstrumented controls say, and whether the death stands."""
    error = engine_error(report)
    if not error:
        return "", True
    if not controls:
        return "rests on an engine death with no uninstrumented control beside it", False
    alike = [c for c in controls if engine_error(c) == error]
    if alike:
        return f"{len(alike)} of {len(controls)} uninstrumented controls died the same way", True
    return (
        f"none of {len(controls)} uninstrumented controls died so: the death may be the instruments'",
        False,
    )


@dataclass(frozen=True)
class Standing:
    judge: str  # the report's judge commit, short
    today: bool
    notes: tuple[str, ...] = field(default_factory=tuple)
    stands: bool = True

    def words(self) -> str:
        age = "today's judge" if self.today else "older than today's judge: does not stand until re-run"
        return "; ".join((f"judge {self.judge}, {age}", *self.notes))


def standing(
    report: OffloadCheckReport,
    scenario: Scenario,
    controls: Sequence[OffloadCheckReport],
    *,
    caught: bool,
    root: Path = ROOT,
) -> Standing:
    """Whether ``report``'s cell stands (the module docstring); ``caught``: the cell reads a catch."""
    commit = report.judge_commit or "unknown"
    today = judge_is_today(commit, root)
    notes: list[str] = []
    stands = today
    if path := path_reached(report, scenario):
        notes.append(path)
        stands = False
    if caught:
        said, held = _death_control(report, controls)
        if said:
            notes.append(said)
        stands = stands and held
    return Standing(commit[:7], today, tuple(notes), stands)
