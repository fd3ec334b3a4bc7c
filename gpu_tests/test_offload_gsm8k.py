"""The offload-reload check on real vLLM servers: the model matrix, and per profile the mutation catalogue.

Each case starts `vllm serve` once (profile x connector x frontend) with the engine-side instruments of
`gpu_tests/kv_proof`, runs the check's clean passes on it and writes its JSON report to
VLLM_DEVCLIENT_REPORT_DIR. Case ids are `<profile>-<offloading|simple>-<python|rust>`, so upstream's step
selections work unchanged (`-k "nemotron-h-8b or gemma-4-e4b-it"`, see gpu_tests/ci/); the mutation test's
ids are `<profile>-offloading-python-mutations`, selected by the same words. Cases the machine cannot run
(no vLLM, no GPU, too few GPUs, model not available offline) are skipped with the reason.
"""

from __future__ import annotations

import os

import pytest

from gpu_tests.conftest import (
    concurrency,
    environment_skip_reason,
    iterations,
    num_questions,
    report_dir,
    server_args,
    server_env,
)
from gpu_tests.offload_check import (
    PROFILES,
    CheckCase,
    OffloadCheckReport,
    case_skip_reason,
    gpu_count,
    matrix,
    model_available,
    resolve_model,
    run_case,
)

pytestmark = pytest.mark.gpu

_SELECTED = [p.strip() for p in os.environ.get("VLLM_DEVCLIENT_GPU_PROFILES", "").split(",") if p.strip()]
if _SELECTED == ["tiny"]:
    _SELECTED = [n for n, p in PROFILES.items() if p.tiny and p.gpus == 1 and p.family != "deepseek-v4"]
_PROFILES = _SELECTED or None


def _param(case: CheckCase) -> object:
    marks = [pytest.mark.timeout(int(case.profile.startup_timeout) + 3600)]
    return pytest.param(case, id=case.id, marks=marks)


def _skip_if_impossible(case: CheckCase) -> None:
    reason = environment_skip_reason() or case_skip_reason(
        case, gpu_count=gpu_count(), model_available=model_available(resolve_model(case.profile))
    )
    if reason is not None:
        pytest.skip(reason)


def _run(case: CheckCase, *, passes: int, mutations: tuple[str, ...] = ()) -> OffloadCheckReport:
    from gpu_tests.kv_proof.instruments import INSTRUMENTS

    report = run_case(
        case,
        report_dir=report_dir(),
        num_questions=num_questions(),
        concurrency=concurrency(),
        iterations=passes,
        mutations=mutations,
        instruments=INSTRUMENTS,
        extra_args=server_args(),
        env=server_env(),
    )
    print(report.summary())
    return report


@pytest.mark.parametrize("case", [_param(c) for c in matrix(_PROFILES)])
def test_offload_reload_gsm8k(case: CheckCase) -> None:
    """Every clean pass holds: reload proven, same-split answers equal, reloaded bytes identical, recurrent
    state restored at the cached count, every boundary size reached."""
    _skip_if_impossible(case)
    report = _run(case, passes=iterations())
    assert report.status == "passed", report.summary()


def _mutation_cases() -> list[object]:
    names = _PROFILES or [n for n, p in PROFILES.items() if not p.tiny and p.real_size_of is None]
    return [
        _param(CheckCase(PROFILES[n], "OffloadingConnector", "python", label="mutations"))
        for n in names
        if "OffloadingConnector" in PROFILES[n].connectors
        and PROFILES[n].settings("OffloadingConnector").spec_name is None
    ]


@pytest.mark.parametrize("case", _mutation_cases())
def test_mutations_are_caught(case: CheckCase) -> None:
    """Every mutation of the catalogue that applies to the model runs, and the assertion the catalogue names
    for it fails while the reload is still proven."""
    from gpu_tests.kv_proof.catalogue import MUTATIONS

    _skip_if_impossible(case)
    report = _run(case, passes=0, mutations=tuple(MUTATIONS))
    verdicts = {it.mutation: it.mutation_verdict for it in report.mutations()}
    assert verdicts, report.summary()
    for name, verdict in verdicts.items():
        assert verdict is not None and verdict.applied > 0, f"{name} never ran: {report.summary()}"
        assert verdict.caught, f"{name} was not caught: {verdict.message}"
