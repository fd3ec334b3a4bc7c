"""The weight routes: the transfer engine, updates, versions and the checker."""

from __future__ import annotations

import base64
import pickle
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .. import arguments as check
from ..answers import model_reader
from ..errors import InvalidParameterError
from ..models import MessageResult, WeightCheckResult, WeightInfo, WeightVersionResult
from ..records import Cli, Param, Route, When

__all__ = ["ROUTES"]


def _action(value: object, name: str) -> str:
    if value not in ("checksum", "reset", "compare"):
        raise InvalidParameterError(f"{name} must be 'checksum', 'reset' or 'compare', got {value!r}")
    return str(value)


def _baseline(value: object, name: str) -> dict[str, str]:
    return {
        check.text(k, f"{name} key"): check.text(v, f"{name}[{k!r}]", allow_empty=True)
        for k, v in check.json_mapping(value, name).items()
    }


def _compare_needs_baseline(checked: Mapping[str, Any]) -> None:
    if checked["action"] == "compare" and checked["baseline"] is None:
        raise InvalidParameterError(
            "action='compare' needs baseline= (the checksums from an earlier action='checksum')"
        )


def _ipc_pickled(info: object, name: str) -> object:
    """CUDA IPC handles (`reduce_tensor`'s rebuild arguments: types, devices, bytes) cannot travel as JSON:
    sent as vLLM's own HTTP client sends them (`HTTPVLLMWeightSyncClient`), pickled and base64-encoded
    under `ipc_handles_pickled`, which the server reads with VLLM_ALLOW_INSECURE_SERIALIZATION=1."""
    if not isinstance(info, Mapping) or info.get("ipc_handles") is None:
        return info
    if info.get("ipc_handles_pickled") is not None:
        raise InvalidParameterError(
            f"{name} has both ipc_handles and ipc_handles_pickled: give the handles once, under ipc_handles "
            "(the client pickles them)"
        )
    try:
        pickled = pickle.dumps(info["ipc_handles"])
    except Exception as exc:
        raise InvalidParameterError(f"{name}.ipc_handles cannot be pickled for HTTP: {exc}") from None
    out = {k: v for k, v in info.items() if k != "ipc_handles"}
    out["ipc_handles_pickled"] = base64.b64encode(pickled).decode("ascii")
    return out


def _update_info(value: object, name: str) -> Any:
    if isinstance(value, Mapping):
        return check.json_mapping(_ipc_pickled(value, name), name)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [check.json_mapping(_ipc_pickled(item, f"{name}[]"), f"{name}[]") for item in value]
    raise InvalidParameterError(
        f"{name} must be a dict, or a list of per-worker dicts, got {type(value).__name__}"
    )


def _version_refused(value: WeightVersionResult, given: Mapping[str, Any]) -> str | None:
    return "success=false" if value.success is False else None


ROUTES: tuple[Route, ...] = (
    Route(
        name="init_weight_transfer_engine",
        method="POST",
        path="/init_weight_transfer_engine",
        reader=model_reader(MessageResult),
        long_running=True,
        doc="POST /init_weight_transfer_engine (never resent; no HTTP timeout by default).",
        answer=MessageResult,
        params=(
            Param(
                name="init_info",
                send="body",
                check=check.json_mapping,
                type=Mapping[str, Any],
                positional=True,
                help="The transfer backend's settings (JSON), e.g. NCCL master address and ranks.",
            ),
        ),
        cli=Cli(topic="weights"),
    ),
    Route(
        name="start_weight_update",
        method="POST",
        path="/start_weight_update",
        reader=model_reader(MessageResult),
        long_running=True,
        doc="POST /start_weight_update (never resent); see also the weight_update() flow.",
        answer=MessageResult,
        cli=Cli(topic="weights"),
    ),
    Route(
        name="start_draft_weight_update",
        method="POST",
        path="/start_draft_weight_update",
        reader=model_reader(MessageResult),
        long_running=True,
        doc="POST /start_draft_weight_update: begin updating the draft (speculative) model's weights.",
        answer=MessageResult,
        cli=Cli(topic="weights"),
    ),
    Route(
        name="update_weights",
        method="POST",
        path="/update_weights",
        reader=model_reader(MessageResult),
        long_running=True,
        doc="POST /update_weights: receive one batch of weights (never resent; no HTTP timeout by default).",
        answer=MessageResult,
        params=(
            Param(
                name="update_info",
                send="body",
                check=_update_info,
                type=Mapping[str, Any] | Sequence[Mapping[str, Any]],
                positional=True,
                help="Names, dtypes and shapes of the tensors (JSON), or one such object per worker; CUDA "
                "IPC handles under ipc_handles travel pickled, as vLLM's HTTP client sends them.",
            ),
        ),
        cli=Cli(topic="weights"),
    ),
    Route(
        name="finish_weight_update",
        method="POST",
        path="/finish_weight_update",
        reader=model_reader(MessageResult),
        long_running=True,
        doc="POST /finish_weight_update (never resent).",
        answer=MessageResult,
        params=(
            Param(
                name="weight_version",
                send="body",
                check=check.text,
                type=str | None,
                default=None,
                help="The version the new weights carry.",
            ),
        ),
        cli=Cli(topic="weights"),
    ),
    Route(
        name="update_weight_version",
        method="POST",
        path="/update_weight_version",
        reader=model_reader(WeightVersionResult),
        idempotent=True,
        doc="POST /update_weight_version.",
        answer=WeightVersionResult,
        params=(
            Param(
                name="new_version",
                send="body",
                check=check.text,
                type=str,
                positional=True,
                help="The version string to set.",
            ),
        ),
        cli=Cli(topic="weights", verdict=_version_refused),
    ),
    Route(
        name="weight_info",
        method="GET",
        path="/weight_info",
        reader=model_reader(WeightInfo),
        idempotent=True,
        doc="GET /weight_info: the weight version the server holds.",
        answer=WeightInfo,
        cli=Cli(topic="weights"),
    ),
    Route(
        name="weight_checker",
        method="POST",
        path="/weight_checker",
        reader=model_reader(WeightCheckResult),
        long_running=True,
        # "reset" changes weights; "checksum" and "compare" only read them.
        idempotent=When("unless action is 'reset'", lambda a: a["action"] != "reset"),
        rule=_compare_needs_baseline,
        doc="POST /weight_checker: checksum the weights, compare them with a baseline, or reset them.",
        answer=WeightCheckResult,
        params=(
            Param(
                name="action",
                send="body",
                check=_action,
                type=Literal["checksum", "reset", "compare"],
                positional=True,
                help='"checksum", "compare" (needs baseline) or "reset" (never resent).',
            ),
            Param(
                name="baseline",
                send="body",
                check=_baseline,
                type=Mapping[str, str] | None,
                default=None,
                help='The checksums of an earlier "checksum", for "compare".',
            ),
        ),
        cli=Cli(topic="weights"),
    ),
    Route(
        name="shutdown_weight_transfer_engine",
        method="POST",
        path="/shutdown_weight_transfer_engine",
        reader=model_reader(MessageResult),
        long_running=True,
        doc="POST /shutdown_weight_transfer_engine (never resent).",
        answer=MessageResult,
        cli=Cli(topic="weights"),
    ),
)
