"""The record as Markdown (scripts/figures.py's `rl.*` figures): the table, what differs, the sources,
the run.

A framework's cell lists the requests that reached the server as `METHOD /path?query {body}` and the status
(per frontend where they differ; per server where the requests differ), or the engine calls it makes in its
own process; then ✓ when the SDK's call covered it on every server, ≠ and the kinds of difference when not
(the differences are listed under the table). The SDK's cell shows its calls and the requests they sent. A
body's value that is one of the record's named values is shown by its name (`{update_info}`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from .compare import engine_text, request_text

__all__ = ["run_line", "table"]

Names = Mapping[str, Any]


def table(data: Mapping[str, Any]) -> str:
    """The table, its legend, the differences, the values and the sources, as Markdown."""
    names = _plain_values(data["values"])
    frameworks = data["frameworks"]
    lines = [
        "| step | " + " | ".join(fw["name"] for fw in frameworks.values()) + " | vllm-devclient |",
        "|" + " --- |" * (len(frameworks) + 2),
    ]
    for step in data["steps"]:
        cells = [_step_cell(step)]
        cells += [_framework_cell(step["frameworks"][key], names) for key in frameworks]
        cells.append(_sdk_cell(step["sdk"], names))
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += ["", _LEGEND, "", *_difference_lines(data), "", _values_line(data["values"]), ""]
    lines += list(_source_lines(data))
    return "\n".join(lines)


_LEGEND = (
    "✓: the SDK's call sent each of these requests' routes, got the same status, and made the engine do what "
    "they made it do (same calls, same arguments), on each server. ≠: it did not; what differs, by kind "
    "(route, status, engine):"
)


def run_line(data: Mapping[str, Any]) -> str:
    """vLLM's version, the frontends, the date and the commit of the run."""
    run = data["run"]
    frontends = " and ".join(f"{name.capitalize()} (`{what}`)" for name, what in run["frontends"].items())
    when = f"{run['date'][:10]}, commit {run['commit'][:12]}"
    return f"vLLM {run['vllm']}, its {frontends} frontends on {run['engine']}, {when}"


def _step_cell(step: Mapping[str, Any]) -> str:
    text = f"**{step['step']}**"
    if step["servers"] == "fleet":
        text += "<br>(both frontends, one fleet)"
    if step.get("not_exercised"):
        text += f"<br>_not exercised: {step['not_exercised']}_"
    return text


def _framework_cell(part: Mapping[str, Any] | None, names: Names) -> str:
    if part is None:
        return "-"
    if "in_process" in part:
        lines = ["in process:", *(f"`{engine_text(c)}`" for c in part["in_process"])]
    else:
        lines = _request_lines(part["observed"], names)
    kinds = sorted(
        {reason.split()[0] for servers in part["differs"].values() for r in servers.values() for reason in r}
    )
    lines[-1] += f" **≠** ({', '.join(kinds)})" if kinds else " ✓"
    if part.get("note"):
        lines.append(f"_{part['note']}_")
    return "<br>".join(lines)


def _sdk_cell(sdk: Mapping[str, Any], names: Names) -> str:
    lines = [f"`{call}`" for call in sdk["calls"]]
    observed = {run: seen["servers"] for run, seen in sdk["observed"].items()}
    sent = {
        run: {server: got["requests"] for server, got in servers.items()} for run, servers in observed.items()
    }
    lines.append("sent: " + "<br>".join(_request_lines(sent, names)))
    lines += [f"{run}: raised {seen['error']}" for run, seen in sdk["observed"].items() if seen["error"]]
    return "<br>".join(lines)


def _request_lines(observed: Mapping[str, Mapping[str, Any]], names: Names) -> list[str]:
    """One line per request, merged across servers where they sent the same."""
    per_server = [(server, records) for servers in observed.values() for server, records in servers.items()]
    if len({len(records) for _, records in per_server}) != 1:
        return [
            f"{server}: `{_request(r, names)}` {_status(r)}"
            for server, records in per_server
            for r in records
        ]
    lines = []
    for j in range(len(per_server[0][1])):
        shown = {server: _request(records[j], names) for server, records in per_server}
        statuses = {server: _status(records[j]) for server, records in per_server}
        if len(set(shown.values())) == 1:
            lines.append(f"`{next(iter(shown.values()))}` {_merged(statuses)}")
        else:
            lines += [f"{server}: `{text}` {statuses[server]}" for server, text in shown.items()]
    return lines or ["(nothing)"]


def _merged(statuses: Mapping[str, str]) -> str:
    if len(set(statuses.values())) == 1:
        return next(iter(statuses.values()))
    return ", ".join(f"{server} {status}" for server, status in statuses.items())


def _status(record: Mapping[str, Any]) -> str:
    return "no answer" if record.get("status") is None else str(record["status"])


def _request(record: Mapping[str, Any], names: Names) -> str:
    body = record.get("body")
    return request_text(record) + ("" if body is None else f" {_compact(body, names)}")


def _compact(value: Any, names: Names) -> str:
    if isinstance(value, dict):
        parts = []
        for key, item in value.items():
            name = _named(item, names)
            parts.append(key if name == key else f"{key}: {name or _compact(item, names)}")
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_compact(v, names) for v in value) + "]"
    return json.dumps(value)


def _named(value: Any, names: Names) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    return next((name for name, known in names.items() if known == value), None)


def _plain_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The record's named values that hold no per-server arithmetic, references resolved."""

    def plain(v: Any) -> Any:
        if isinstance(v, dict) and set(v) == {"$"}:
            return plain(values[v["$"]])
        if isinstance(v, dict) and set(v) == {"="}:
            raise LookupError(v["="])
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return [plain(x) for x in v] if isinstance(v, list) else v

    out = {}
    for name, v in values.items():
        try:
            out[name] = plain(v)
        except LookupError:
            continue
    return out


def _difference_lines(data: Mapping[str, Any]) -> list[str]:
    lines = []
    for step in data["steps"]:
        for key, part in step["frameworks"].items():
            if part is None:
                continue
            where: dict[str, list[str]] = {}
            servers = [s for by_server in part["differs"].values() for s in by_server]
            for by_server in part["differs"].values():
                for server, reasons in by_server.items():
                    for reason in reasons:
                        where.setdefault(reason, []).append(server)
            for reason, found in where.items():
                on = "" if len(found) == len(servers) else f" (on {', '.join(found)})"
                lines.append(f"- {step['step']}, {data['frameworks'][key]['name']}: {reason}{on}")
    return lines or ["- nothing"]


def _values_line(values: Mapping[str, Any]) -> str:
    shown = ", ".join(f"`{name}` = `{_template(v)}`" for name, v in values.items())
    return f"The named values (examples, the same for every framework and the SDK): {shown}."


def _template(value: Any) -> str:
    """A value as the transcription writes it: references by name, arithmetic as its text."""
    if isinstance(value, dict) and set(value) == {"$"}:
        return str(value["$"])
    if isinstance(value, dict) and set(value) == {"="}:
        return str(value["="])
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_template(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_template(v) for v in value) + "]"
    return json.dumps(value)


def _source_lines(data: Mapping[str, Any]) -> Iterator[str]:
    yield "Where each framework does it (the files and functions the requests were transcribed from):"
    yield ""
    for key, fw in data["frameworks"].items():
        by_file: dict[str, list[str]] = {}
        for step in data["steps"]:
            for source in (step["frameworks"][key] or {}).get("source", []):
                path = source["path"] + (f" at {source['commit'][:7]}" if source.get("commit") else "")
                if source["function"] not in by_file.setdefault(path, []):
                    by_file[path].append(source["function"])
        files = "; ".join(f"`{path}`: {', '.join(fns)}" for path, fns in by_file.items())
        yield f"- **{fw['name']}**, {fw['repo']} at `{fw['commit'][:7]}` ({fw['client']}): {files}"
