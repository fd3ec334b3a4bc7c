"""The record `docs/rl_frameworks.json`: a run's observations with the transcription and the run's provenance,
and what may differ between two runs of the same code (`PROVENANCE_ONLY`)."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tools.fixtures.provenance import recorder_commit

from .spec import to_json
from .transcription import FRAMEWORKS, VALUES

__all__ = ["COMMAND", "PROVENANCE_ONLY", "RECORD", "comparable", "dumps", "record"]

RECORD = Path(__file__).resolve().parents[2] / "docs" / "rl_frameworks.json"
COMMAND = "python -m tools.rl_frameworks --out docs/rl_frameworks.json"
# The run's own facts: two runs of the same code on the same vLLM differ in these alone.
PROVENANCE_ONLY = ("date", "commit")


def record(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The record of a run whose observations are `steps` (`runner.observe`)."""
    run = {
        "vllm": importlib.metadata.version("vllm"),
        "frontends": {"python": "vllm serve", "rust": "vllm-rs"},
        "engine": "the kit's scripted engine (its extras setup: LoRA enabled)",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": recorder_commit(),
    }
    return {
        "command": COMMAND,
        "run": run,
        "frameworks": {key: vars(fw).copy() for key, fw in FRAMEWORKS.items()},
        "values": to_json(VALUES),
        "steps": steps,
    }


def comparable(data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` without its provenance-only facts, for comparing two runs."""
    out = dict(data)
    out["run"] = {k: v for k, v in data.get("run", {}).items() if k not in PROVENANCE_ONLY}
    return out


_LINE = 110


def dumps(data: Any, indent: str = "") -> str:
    """JSON, indented, with every object or array that fits on a line of its own written on one line."""
    flat = json.dumps(data, ensure_ascii=False)
    if len(indent) + len(flat) <= _LINE or not isinstance(data, dict | list) or not data:
        return flat
    inner = indent + "  "
    if isinstance(data, dict):
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {dumps(v, inner)}" for k, v in data.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    return "[\n" + ",\n".join(f"{inner}{dumps(v, inner)}" for v in data) + f"\n{indent}]"
