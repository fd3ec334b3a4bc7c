"""The offload-reload GSM8K check: proves KV came back from the CPU tier, and came back intact.

One concept per module:

| module | what it holds |
| --- | --- |
| :mod:`.profiles` | profiles (upstream's real models per connector, the tiny families), cases, the matrix |
| :mod:`.upstream` | a recorded copy of vLLM's own offload matrix and CI steps, with its source commit |
| :mod:`.tiny` | the tiny seeded models per architecture family, and their builder |
| :mod:`.server` | a managed ``vllm serve`` (connector config, KV-events endpoints, readiness, shutdown) |
| :mod:`.probes` | the check's prompts in token ids: questions, boundary probes, failure-shape fingerprints |
| :mod:`.probe_files` | what the instruments write (splits, layout, first-use verdicts, load plans) |
| :mod:`.events` | KV-cache events accounted per cache group (stores, removes, kinds, reference counts) |
| :mod:`.settings` | what a case is checked with (:class:`CheckSettings`) |
| :mod:`.check` | measure: the sequence of iterations on one server, over a :class:`CheckIO`; never judges |
| :mod:`.resets` | a reset and what confirms it (``success``, else the stream's ``AllBlocksCleared``) |
| :mod:`.server_io` | the real :class:`CheckIO`: the client, the KV-events watcher, the probe folder |
| :mod:`.assertions` | the per-iteration assertions, pure functions of the measurements |
| :mod:`.defects` | vLLM's known defects, one shape (a reload answer's fingerprint, or the stream's) |
| :mod:`.judge` | judge: the verdicts from a measured report, no I/O (a stored one again: ``rejudge``) |
| :mod:`.rates` | "k of N clean iterations failed assertion X", read from a report |
| :mod:`.report` | the JSON report models: what each stage hands to the next |
| :mod:`.case` | one case end to end on a real server: measure, judge, write (:func:`run_case`) |
| :mod:`.cli` | the check's command line (``python -m gpu_tests.offload_check``) |

Nothing here reads the environment or pins a setting at import: settings are read when a case runs.
"""

from .case import Instruments, MutationSpec, measure_and_judge, run_case, server_config_for
from .check import CheckIO, MutationPlan, run_check, settle
from .cli import main
from .events import EventWatcher, GroupEventAccount, KVEventsSummary, open_event_watcher
from .judge import judge_case, rejudge
from .profiles import (
    PROFILES,
    CheckCase,
    ConnectorSettings,
    ModelProfile,
    case_skip_reason,
    connector_by_name,
    gpu_count,
    matrix,
    model_available,
    resolve_model,
)
from .rates import FailureRate, failure_rate, failure_rates
from .report import AssertionResult, Iteration, OffloadCheckReport, ResetResult, SettleResult
from .server import CONNECTORS, FRONTENDS, Connector, Frontend
from .server_io import ServerIO
from .settings import CheckSettings

__all__ = [
    "CONNECTORS",
    "FRONTENDS",
    "PROFILES",
    "AssertionResult",
    "CheckCase",
    "CheckIO",
    "CheckSettings",
    "Connector",
    "ConnectorSettings",
    "EventWatcher",
    "FailureRate",
    "Frontend",
    "GroupEventAccount",
    "Instruments",
    "Iteration",
    "KVEventsSummary",
    "ModelProfile",
    "MutationPlan",
    "MutationSpec",
    "OffloadCheckReport",
    "ResetResult",
    "ServerIO",
    "SettleResult",
    "case_skip_reason",
    "connector_by_name",
    "failure_rate",
    "failure_rates",
    "gpu_count",
    "judge_case",
    "main",
    "matrix",
    "measure_and_judge",
    "model_available",
    "open_event_watcher",
    "rejudge",
    "resolve_model",
    "run_case",
    "run_check",
    "server_config_for",
    "settle",
]
