"""How often a case failed, read from its report: "k of N clean iterations failed assertion X".

A race (the Simple connector's store without a barrier, a zeroed block landing on a load) fails some
iterations and not others, so one report's verdict says less than its rate over many iterations
(``--iterations N``). N counts the clean iterations where the assertion was evaluated; an iteration that
ended in an error (the engine died, a request limit was passed) has no verdicts and is counted apart.
No I/O: it reads a judged :class:`~.report.OffloadCheckReport` (a committed one too).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from .report import OffloadCheckReport

__all__ = ["FailureRate", "failure_rate", "failure_rates"]


class FailureRate(BaseModel):
    """One assertion over the clean iterations of a report."""

    model_config = ConfigDict(frozen=True)

    assertion: str
    failed: int  # k: iterations where it was evaluated and failed
    evaluated: int  # N: iterations where it was evaluated
    iterations: int  # clean iterations in the report
    errored: int  # of those, ended in an error (no verdicts)
    failed_in: list[str]  # the labels of the k iterations

    @property
    def rate(self) -> float | None:
        return self.failed / self.evaluated if self.evaluated else None

    def __str__(self) -> str:
        text = f"{self.assertion}: {self.failed} of {self.evaluated} iterations failed"
        if self.errored:
            text += f" ({self.errored} of {self.iterations} ended in an error)"
        return text


def failure_rate(report: OffloadCheckReport, assertion: str) -> FailureRate:
    """How many of the report's clean iterations failed ``assertion``, of those that evaluated it."""
    clean = report.clean()
    failed: list[str] = []
    evaluated = 0
    for it in clean:
        found = next((a for a in it.assertions if a.name == assertion), None)
        if found is None or not found.evaluated:
            continue
        evaluated += 1
        if not found.passed:
            failed.append(it.label)
    return FailureRate(
        assertion=assertion,
        failed=len(failed),
        evaluated=evaluated,
        iterations=len(clean),
        errored=sum(it.status == "error" for it in clean),
        failed_in=failed,
    )


def failure_rates(report: OffloadCheckReport) -> dict[str, FailureRate]:
    """Every assertion any clean iteration evaluated, in the order first met."""
    names = dict.fromkeys(a.name for it in report.clean() for a in it.assertions if a.evaluated)
    return {name: failure_rate(report, name) for name in names}
