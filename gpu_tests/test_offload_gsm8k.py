"""The offload-reload GSM8K check on real vLLM servers: the model matrix and the mutation test.

Each case starts `vllm serve` once (profile x connector x frontend), runs the check of
`vllm_devclient.offload_check` on it and writes its JSON report to VLLM_DEVCLIENT_REPORT_DIR. Case ids are
`<profile>-<offloading|simple>-<python|rust>`, so upstream's step selections work unchanged
(`-k "nemotron-h-8b or gemma-4-e4b-it"`, see gpu_tests/ci/). Cases the machine cannot run (too few GPUs,
model not available offline) are skipped with the reason. Without vllm or a GPU the module skips.
"""

from __future__ import annotations

import os

import pytest

from gpu_tests import MUTATION_EXTRA
from gpu_tests.conftest import (
    concurrency,
    environment_skip_reason,
    fast,
    num_questions,
    report_dir,
    server_args,
    server_env,
)

_reason = environment_skip_reason()
if _reason is not None:
    pytest.skip(_reason, allow_module_level=True)

from vllm_devclient.offload_check import (  # noqa: E402
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

_GPUS = gpu_count()
_SELECTED = [p.strip() for p in os.environ.get("VLLM_DEVCLIENT_GPU_PROFILES", "").split(",") if p.strip()]
if _SELECTED == ["tiny"]:
    _SELECTED = [n for n, p in PROFILES.items() if p.tiny]
_PROFILES = _SELECTED or None


def _param(case: CheckCase) -> object:
    reason = case_skip_reason(
        case, gpu_count=_GPUS, model_available=model_available(resolve_model(case.profile))
    )
    marks = [pytest.mark.timeout(int(case.profile.startup_timeout) + 2400)]
    if reason is not None:
        marks.append(pytest.mark.skip(reason=reason))
    return pytest.param(case, id=case.id, marks=marks)


def _run(case: CheckCase) -> OffloadCheckReport:
    report = run_case(
        case,
        report_dir=report_dir(),
        num_questions=num_questions(),
        concurrency=concurrency(),
        progress=False,
        warm_run=not fast(),
        second_cold_run=not fast(),
        extra_args=server_args(),
        env=server_env(),
    )
    print(report.summary())
    return report


@pytest.mark.parametrize("case", [_param(c) for c in matrix(_PROFILES)])
def test_offload_reload_gsm8k(case: CheckCase) -> None:
    report = _run(case)
    assert report.status == "passed", report.summary()


_MUTATION_PROFILE = "small" if _PROFILES is None or "small" in _PROFILES else _PROFILES[0]


@pytest.mark.parametrize(
    "case",
    [
        _param(
            CheckCase(
                PROFILES[_MUTATION_PROFILE],
                "OffloadingConnector",
                "python",
                connector_extra=MUTATION_EXTRA,
                label="mutation",
            )
        )
    ],
)
def test_mutation_corrupted_reload_is_caught(case: CheckCase) -> None:
    """KV zeroed on its way back from the CPU tier: the check must fail, and on answers_unchanged."""
    report = _run(case)
    log = report_dir() / f"{case.id}.server.log"
    assert "vllm-devclient mutation: zeroed" in log.read_text(errors="replace"), "the corruption never ran"
    # The reload itself still happened, so the failure is about the data that came back.
    assert report.assertion("reload_proven").passed, report.summary()
    assert not report.assertion("answers_unchanged").passed, report.summary()
    assert report.status == "failed"
