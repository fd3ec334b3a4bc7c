"""The JSON schema of the command line (`cli/schema.json`): `$defs.results`, each command's `result` schema,
from the records' answer types (pydantic's serialization schema); the rest of the file is written by hand."""

from __future__ import annotations

import json
from typing import Any

from vllm_devclient.calls import CALLS
from vllm_devclient.routes import ROUTES

from . import PKG, GenerateError

SCHEMA = PKG / "cli" / "schema.json"


def _tidy(node: Any) -> Any:
    """No titles; a float may be null (non-finite floats are written as null, see docs/cli.md)."""
    if isinstance(node, dict):
        out = {k: _tidy(v) for k, v in node.items() if k != "title"}
        if out.get("type") == "number":
            out["type"] = ["number", "null"]
        return out
    if isinstance(node, list):
        return [_tidy(v) for v in node]
    return node


def result_schemas() -> dict[str, Any]:
    from pydantic import TypeAdapter

    defs: dict[str, Any] = {}
    rules = []
    for method in (*ROUTES, *CALLS):
        kind = method.cli.result_type or method.answer
        if kind is None:
            schema: dict[str, Any] = {"type": "object", "maxProperties": 0, "description": "done: no answer"}
        else:
            schema = TypeAdapter(kind).json_schema(
                mode="serialization", ref_template="#/$defs/results/$defs/{model}"
            )
            defs.update(schema.pop("$defs", {}))
        result = {"anyOf": [{"type": "null"}, _tidy(schema)]}
        targets = {"additionalProperties": {"properties": {"result": result}}}
        rules.append(
            {
                "if": {"properties": {"command": {"const": method.command}}, "required": ["command"]},
                "then": {"properties": {"targets": targets}},
            }
        )
    return {
        "description": "Each command's target result, from the records' answer types (scripts/generate.py).",
        "allOf": rules,
        "$defs": {name: _tidy(d) for name, d in sorted(defs.items())},
    }


_RESULTS = ',\n    "results": '


def schema_text() -> str:
    """schema.json with `$defs.results` (its last member) written anew, one rule or model per line; the rest
    of the file is written by hand and kept as it is."""
    text = SCHEMA.read_text()
    head = text[: text.index(_RESULTS)] if _RESULTS in text else text[: text.rindex("\n  }\n}")]
    results = result_schemas()
    rules = ",\n".join(f"        {json.dumps(rule)}" for rule in results["allOf"])
    defs = ",\n".join(f"        {json.dumps(name)}: {json.dumps(d)}" for name, d in results["$defs"].items())
    block = (
        f'{{\n      "description": {json.dumps(results["description"])},\n'
        f'      "allOf": [\n{rules}\n      ],\n      "$defs": {{\n{defs}\n      }}\n    }}'
    )
    out = f"{head}{_RESULTS}{block}\n  }}\n}}\n"
    if json.loads(out)["$defs"]["results"] != results:
        raise GenerateError("schema.json: $defs.results must be the last member of $defs")
    return out
