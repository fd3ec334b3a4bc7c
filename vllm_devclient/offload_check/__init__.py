"""The offload-reload GSM8K check: proves KV came back from the CPU tier, and came back intact.

One concept per module:

| module | what it holds |
| --- | --- |
| :mod:`.profiles` | profiles (upstream's real models per connector, the tiny families), cases, the matrix |
| :mod:`.upstream` | a recorded copy of vLLM's own offload matrix and CI steps, with its source commit |
| :mod:`.tiny` | the tiny seeded models per architecture family, and their builder |
| :mod:`.server` | a managed ``vllm serve`` (connector config, KV-events endpoints, readiness, shutdown) |
| :mod:`.gsm8k` | GSM8K data (download, cache, checksums), prompts, scoring, the concurrent evaluator |
| :mod:`.events` | KV-cache events accounted per cache group (stores, removes, kinds, reference counts) |
| :mod:`.judge` | the assertions, from what the runs measured |
| :mod:`.report` | the JSON report models |
| :mod:`.check` | the sequence on one server, the real server I/O, one case end to end |
| :mod:`.cli` | ``python -m vllm_devclient.offload_check`` |

Nothing here reads the environment or pins a setting at import: settings are read when a case runs.
"""

from .check import CheckIO, ServerIO, run_case, run_check, server_config_for, settle
from .cli import main
from .events import EventWatcher, GroupEventAccount, KVEventsSummary, open_event_watcher
from .judge import CheckSettings, compare_answers, judge
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
from .report import (
    AgreementRow,
    AnswerComparison,
    AssertionResult,
    Mismatch,
    OffloadCheckReport,
    RunSummary,
    SettleResult,
)
from .server import CONNECTORS, FRONTENDS, Connector, Frontend

# The old module's watcher names: the per-group event watcher replaces the CPU-block counter.
StoreWatcher = EventWatcher
open_store_watcher = open_event_watcher

__all__ = [
    "CONNECTORS",
    "FRONTENDS",
    "PROFILES",
    "AgreementRow",
    "AnswerComparison",
    "AssertionResult",
    "CheckCase",
    "CheckIO",
    "CheckSettings",
    "Connector",
    "ConnectorSettings",
    "EventWatcher",
    "Frontend",
    "GroupEventAccount",
    "KVEventsSummary",
    "Mismatch",
    "ModelProfile",
    "OffloadCheckReport",
    "RunSummary",
    "ServerIO",
    "SettleResult",
    "StoreWatcher",
    "case_skip_reason",
    "compare_answers",
    "connector_by_name",
    "gpu_count",
    "judge",
    "main",
    "matrix",
    "model_available",
    "open_event_watcher",
    "open_store_watcher",
    "resolve_model",
    "run_case",
    "run_check",
    "server_config_for",
    "settle",
]
